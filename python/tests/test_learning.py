"""The documented way to train any Gymnasium env: a learner started with
``--local-actors 0`` and no ``--env`` takes its env spec from the Python
actor's hello and builds its model for it. CartPole learns, Pendulum gets
bounded continuous actions, image frames go through the conv torso.

Every run is bounded by ``max_steps`` (``max_seconds`` is a backstop);
nothing waits on a timer.
"""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import seed_rs

#: Backstop on every run; the runs end by their step budget long before.
MAX_SECONDS = 300.0


class Solved(Exception):
    """Raised from an env once the tracked mean return reaches the target."""


class ReturnTracker:
    """Episode returns over all envs of a run; raises `Solved` at the target."""

    def __init__(self, target: float, window: int = 100, min_episodes: int = 50):
        self.returns: deque = deque(maxlen=window)
        self.target = target
        self.min_episodes = min_episodes
        self.episodes = 0

    def mean(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("-inf")

    def finished(self, episode_return: float) -> None:
        self.returns.append(episode_return)
        self.episodes += 1
        if self.episodes >= self.min_episodes and self.mean() >= self.target:
            raise Solved(f"mean return {self.mean():.1f} over the last {len(self.returns)} episodes")


class TrackingEnv(gym.Wrapper):
    """Sums rewards per episode into a shared `ReturnTracker`."""

    def __init__(self, env, tracker: ReturnTracker):
        super().__init__(env)
        self.tracker = tracker
        self.episode_return = 0.0

    def reset(self, **kwargs):
        self.episode_return = 0.0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += float(reward)
        if terminated or truncated:
            self.tracker.finished(self.episode_return)
        return obs, reward, terminated, truncated, info


def test_gymnasium_cartpole_trains_through_the_python_actor(start_learner):
    # No --env: the actor's hello fixes the spec (CartPole-v1, 4 x f32, 2 actions).
    learner = start_learner(env_flags=[], train=True, extra=["--seed", "1"])
    tracker = ReturnTracker(target=150.0)
    actor = seed_rs.Actor(
        lambda: TrackingEnv(gym.make("CartPole-v1"), tracker), num_envs=32, learner=learner.addr, seed=1
    )
    budget = 1_500_000
    try:
        report = actor.run(max_steps=budget, max_seconds=MAX_SECONDS)
    except Solved:
        pass
    else:
        raise AssertionError(
            f"mean return {tracker.mean():.1f} after {report['env_steps']} env steps "
            f"({tracker.episodes} episodes); random play scores about 22"
        )
    assert learner.proc.poll() is None, learner.output()
    assert "env spec adopted" in learner.output()


class RecordingBoxEnv(gym.Wrapper):
    """Records every (continuous) action it is given."""

    def __init__(self, env, actions: list):
        super().__init__(env)
        self.actions = actions

    def step(self, action):
        self.actions.append(np.array(action, copy=True))
        return self.env.step(action)


def test_pendulum_gets_actions_inside_its_bounds_and_the_learner_trains(start_learner):
    learner = start_learner(env_flags=[], train=True, extra=["--reward-scale", "0.1"])
    actions: list = []
    actor = seed_rs.Actor(
        lambda: RecordingBoxEnv(gym.make("Pendulum-v1"), actions), num_envs=8, learner=learner.addr, seed=2
    )
    assert actor.spec.env_name == "Pendulum-v1"
    report = actor.run(max_steps=20_000, max_seconds=MAX_SECONDS)
    assert report["env_steps"] >= 20_000
    assert report["sessions"] == 1
    # Every row steps its env but the one after a truncation (200-step
    # episodes), whose action is ignored while the env resets.
    assert len(actions) >= 20_000 * (1 - 1 / 200) - 16
    stacked = np.stack(actions)
    assert stacked.shape[1:] == (1,)
    assert stacked.dtype == np.float32
    assert np.all(stacked >= -2.0) and np.all(stacked <= 2.0)
    # Some samples fell outside and were clipped onto a bound.
    assert np.any(np.abs(stacked) == 2.0)
    # The policy's samples are spread, not a constant.
    assert stacked.std() > 0.05
    # Trained (the policy version moved) and still running.
    assert report["last_policy_version"] > 0
    assert learner.proc.poll() is None, learner.output()
    assert "action=Box([1], -2..2)" in learner.output()


class FramesEnv(gym.Env):
    """Atari-shaped u8 frames [4, 84, 84], 4 actions, 50-step episodes."""

    observation_space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    action_space = spaces.Discrete(4)

    def __init__(self):
        self.t = 0
        self.rng = np.random.default_rng(0)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.rng.integers(0, 256, (4, 84, 84), dtype=np.uint8), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.t += 1
        frame = self.rng.integers(0, 256, (4, 84, 84), dtype=np.uint8)
        return frame, float(action == 1), False, self.t >= 50, {}


def test_image_frames_are_served_through_the_conv_torso(start_learner):
    learner = start_learner(env_flags=[])
    actor = seed_rs.Actor(FramesEnv, num_envs=4, learner=learner.addr, env_name="Frames")
    report = actor.run(max_steps=400, max_seconds=MAX_SECONDS)
    assert report["env_steps"] >= 400
    assert report["episodes"] >= 4
    log = learner.output()
    assert "obs_shape=[4, 84, 84] obs_dtype=u8 action=Discrete(4)" in log, log
