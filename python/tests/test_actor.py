"""seed_rs.Actor against a real learner: actions, errors, reconnects, Ctrl-C.

Every run is bounded by ``max_steps`` (and ``max_seconds`` as a backstop);
nothing waits on a timer.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import seed_rs

#: Backstop on every run; the runs end by max_steps long before.
MAX_SECONDS = 120.0


class RecordingEnv(gym.Wrapper):
    """Records every action and how many steps and resets it saw."""

    def __init__(self, env, actions=None, on_step=None):
        super().__init__(env)
        self.actions = [] if actions is None else actions
        self.resets = 0
        self.on_step = on_step

    def reset(self, **kwargs):
        self.resets += 1
        return self.env.reset(**kwargs)

    def step(self, action):
        self.actions.append(action)
        if self.on_step is not None:
            self.on_step(len(self.actions))
        return self.env.step(action)


def cartpole(**kwargs):
    return lambda: RecordingEnv(gym.make("CartPole-v1"), **kwargs)


def test_cartpole_gets_one_valid_action_batch_per_step_batch(learner):
    k, max_steps = 8, 4000
    actor = seed_rs.Actor(cartpole(), num_envs=k, learner=learner.addr, seed=7)
    assert actor.spec.env_name == "CartPole-v1"
    report = actor.run(max_steps=max_steps, max_seconds=MAX_SECONDS)

    assert report["sessions"] == 1
    assert report["env_steps"] >= max_steps
    # Two halves of k/2 envs: each action batch steps one half, and the
    # other half's batch is still outstanding when the actor stops.
    assert report["env_steps"] == report["action_batches"] * (k // 2)
    assert report["step_batches"] == report["action_batches"] + 1
    assert report["round_trip"]["count"] == report["action_batches"]
    assert report["episodes"] > 0
    assert report["env_steps_per_second"] > 0

    actions = [a for e in actor.envs for a in e.actions]
    space = actor.envs[0].action_space
    assert all(isinstance(a, int) and space.contains(a) for a in actions)
    # Every env row is a step except the reset that follows a truncation.
    assert report["env_steps"] - report["episodes"] <= len(actions) <= report["env_steps"]
    assert {len(e.actions) > 0 for e in actor.envs} == {True}
    # The first reset of each env is seeded, and the pool restarts each on connect.
    assert all(e.resets >= 2 for e in actor.envs)


def test_a_second_run_continues_with_the_same_envs(learner):
    with seed_rs.Actor(cartpole(), num_envs=2, learner=learner.addr) as actor:
        first = actor.run(max_steps=200, max_seconds=MAX_SECONDS)
        second = actor.run(max_steps=200, max_seconds=MAX_SECONDS)
    assert first["env_steps"] >= 200 and second["env_steps"] >= 200
    assert second["sessions"] == 1


def test_env_lists_and_sync_vector_envs_are_stepped_one_by_one(learner):
    vec = gym.vector.SyncVectorEnv([cartpole() for _ in range(4)])
    report = seed_rs.Actor(vec, learner=learner.addr).run(max_steps=400, max_seconds=MAX_SECONDS)
    assert report["env_steps"] >= 400
    assert all(len(e.actions) > 0 for e in vec.envs)

    envs = [cartpole()() for _ in range(3)]
    actor = seed_rs.Actor(envs, learner=learner.addr)
    assert actor.num_envs == 3
    assert actor.run(max_steps=300, max_seconds=MAX_SECONDS)["env_steps"] >= 300


def test_async_vector_envs_and_autoreset_envs_are_refused():
    vec = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    try:
        with pytest.raises(ValueError, match="pass the env factory"):
            seed_rs.Actor(vec)
    finally:
        vec.close()
    with pytest.raises(ValueError, match="Autoreset"):
        seed_rs.Actor(lambda: gym.wrappers.Autoreset(gym.make("CartPole-v1")), num_envs=2)
    with pytest.raises(ValueError, match="num_envs=3 but 2 envs"):
        seed_rs.Actor([gym.make("CartPole-v1"), gym.make("CartPole-v1")], num_envs=3)


class SpacesEnv(gym.Env):
    """An env with the given spaces that never needs to step."""

    def __init__(self, observation_space, action_space):
        self.observation_space = observation_space
        self.action_space = action_space
        self.steps = 0

    def reset(self, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        self.steps += 1
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize(
    "obs, act, match",
    [
        (spaces.Dict({"x": spaces.Box(0, 1, (2,))}), spaces.Discrete(2), "observation space Dict"),
        (spaces.Box(0, 1, (2,)), spaces.MultiDiscrete([2, 2]), "action space MultiDiscrete"),
        (spaces.Box(0, 1, (2,)), spaces.Discrete(3, start=-1), "starts at -1"),
        (spaces.Box(0, 1, (84, 84, 3), dtype=np.uint8), spaces.Discrete(2), "channels_last"),
        # Passes the mapping, refused by the learner's own rules.
        (spaces.Box(0, 1, (2,)), spaces.Discrete(1 << 17), "num_actions"),
    ],
)
def test_unsupported_spaces_fail_with_a_value_error_before_connecting(obs, act, match):
    # Nothing listens at this address: the error must come before any connect.
    with pytest.raises(ValueError, match=match):
        seed_rs.Actor(lambda: SpacesEnv(obs, act), num_envs=2, learner="127.0.0.1:1", max_reconnects=1)


class Boom(RuntimeError):
    """The env's own exception type."""


class FailingEnv(gym.Wrapper):
    def __init__(self, env, fail_at, exc):
        super().__init__(env)
        self.fail_at, self.exc, self.steps = fail_at, exc, 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise self.exc
        return self.env.step(action)


def test_an_env_exception_reaches_the_caller_unchanged(learner):
    error = Boom("env broke at step 50")
    actor = seed_rs.Actor(
        lambda: FailingEnv(gym.make("CartPole-v1"), 50, error), num_envs=4, learner=learner.addr
    )
    with pytest.raises(Boom) as e:
        actor.run(max_steps=100_000, max_seconds=MAX_SECONDS)
    assert e.value is error
    assert any(entry.name == "step" for entry in e.traceback), "the env's frame is in the traceback"


def test_an_env_that_fails_to_reset_fails_before_connecting():
    class BadReset(SpacesEnv):
        def reset(self, seed=None, options=None):
            raise Boom("no reset")

    actor = seed_rs.Actor(
        lambda: BadReset(spaces.Box(0, 1, (2,)), spaces.Discrete(2)),
        num_envs=2,
        learner="127.0.0.1:1",
        max_reconnects=1,
    )
    with pytest.raises(Boom, match="no reset"):
        actor.run(max_seconds=MAX_SECONDS)


def test_malformed_observations_are_a_value_error_naming_the_env():
    class WrongShape(SpacesEnv):
        def reset(self, seed=None, options=None):
            return np.zeros(3, dtype=np.float32), {}

    actor = seed_rs.Actor(
        lambda: WrongShape(spaces.Box(0, 1, (2,)), spaces.Discrete(2)),
        num_envs=1,
        learner="127.0.0.1:1",
        max_reconnects=1,
    )
    with pytest.raises(ValueError, match=r"env 0: an observation of 12 bytes.*\[2\] f32 \(8 bytes\)"):
        actor.run(max_seconds=MAX_SECONDS)


def test_the_actor_reconnects_after_a_learner_restart(start_learner):
    first = start_learner()
    port = first.port
    state = {"restarted": None}

    def restart_once(step):
        # Inside an env step: the actor is between batches. Kill the learner
        # outright and start a new one on the same port; the actor finds its
        # stream broken and reconnects.
        if step == 500 and state["restarted"] is None:
            first.kill()
            state["restarted"] = start_learner(listen=f"127.0.0.1:{port}")

    envs = [RecordingEnv(gym.make("CartPole-v1"), on_step=restart_once if i == 0 else None) for i in range(4)]
    report = seed_rs.Actor(envs, learner=first.addr).run(max_steps=6000, max_seconds=MAX_SECONDS)

    assert state["restarted"] is not None
    assert report["sessions"] >= 2, report
    assert report["env_steps"] >= 6000
    # Each new connection restarts every env (fresh episodes).
    assert all(e.resets >= 3 for e in envs)


class InterruptingEnv(gym.Wrapper):
    def __init__(self, env, at):
        super().__init__(env)
        self.at, self.steps = at, 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.at:
            raise KeyboardInterrupt
        return self.env.step(action)


def test_keyboard_interrupt_in_an_env_ends_the_run_and_the_process_goes_on(learner):
    actor = seed_rs.Actor(lambda: InterruptingEnv(gym.make("CartPole-v1"), 100), num_envs=2, learner=learner.addr)
    with pytest.raises(KeyboardInterrupt):
        actor.run(max_steps=100_000, max_seconds=MAX_SECONDS)
    # The interpreter, the extension and the learner are all still fine.
    report = seed_rs.Actor(cartpole(), num_envs=2, learner=learner.addr).run(max_steps=200, max_seconds=MAX_SECONDS)
    assert report["env_steps"] >= 200


@pytest.fixture
def python_sigint_handler():
    """Python's own SIGINT handler (raise ``KeyboardInterrupt``) for one test.

    Python installs it at startup only when SIGINT is not ignored. A test run
    started in the background by a non-interactive shell (``cmd &`` in a
    script) inherits SIGINT ignored: the signal would never reach the actor,
    as a Ctrl-C never reaches such a process.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_ctrl_c_while_waiting_on_the_network_stops_the_run_cleanly(python_sigint_handler):
    # No learner: after the envs' first resets the actor only waits (connect,
    # back off, retry) with the GIL released. A SIGINT then is seen by the
    # actor's signal check, which stops the run; the KeyboardInterrupt
    # carries the report.
    main = threading.main_thread()
    assert threading.current_thread() is main
    reset_done = threading.Event()

    class Reset(SpacesEnv):
        def reset(self, seed=None, options=None):
            reset_done.set()
            return super().reset(seed=seed)

    actor = seed_rs.Actor(
        lambda: Reset(spaces.Box(0, 1, (2,)), spaces.Discrete(2)), num_envs=1, learner="127.0.0.1:1"
    )
    run_frame = {}

    def interrupt():
        assert reset_done.wait(MAX_SECONDS)
        # Wait until the main thread's Python frame is Actor.run itself:
        # it is inside the extension, not in an env.
        deadline = time.monotonic() + MAX_SECONDS
        while time.monotonic() < deadline:
            frame = sys._current_frames().get(main.ident)
            if frame is not None and frame.f_code.co_name == "run" and "gym_actor" in frame.f_code.co_filename:
                run_frame["seen"] = True
                break
            time.sleep(0.001)
        signal.pthread_kill(main.ident, signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            actor.run(max_seconds=MAX_SECONDS)
    finally:
        t.join()
    assert run_frame.get("seen")
    report = e.value.report
    assert report["sessions"] == 0 and report["env_steps"] == 0


def test_an_unreachable_learner_raises_actor_error_after_max_reconnects():
    actor = seed_rs.Actor(cartpole(), num_envs=1, learner="127.0.0.1:1", max_reconnects=2)
    with pytest.raises(seed_rs.ActorError, match="unreachable after 2"):
        actor.run(max_seconds=MAX_SECONDS)


def test_a_spec_the_learner_does_not_serve_is_refused(learner):
    # The learner serves CartPole; an env with 3 actions is refused at hello.
    actor = seed_rs.Actor(
        lambda: SpacesEnv(spaces.Box(-1, 1, (4,), dtype=np.float32), spaces.Discrete(3)),
        num_envs=2,
        learner=learner.addr,
        env_name="CartPole-v1",
    )
    with pytest.raises(seed_rs.ActorError, match="num_actions"):
        actor.run(max_seconds=MAX_SECONDS)


def test_bad_settings_are_value_errors():
    with pytest.raises(ValueError, match="learner"):
        seed_rs.Actor(cartpole(), num_envs=1, learner="unix:")
    with pytest.raises(ValueError, match="tls_ca"):
        seed_rs.Actor(cartpole(), num_envs=1, tls_domain="x")
    with pytest.raises(ValueError, match="tls-ca"):
        seed_rs.Actor(cartpole(), num_envs=1, tls_ca=os.devnull + ".missing")


def test_run_is_not_reentrant(learner):
    # A second run over the same envs while one is stepping them (here from
    # inside an env's step; another thread would be the same) is refused.
    holder = {}

    def run_again(step):
        if step == 10:
            with pytest.raises(RuntimeError, match="already running"):
                holder["actor"].run(max_steps=10)
            holder["refused"] = True

    envs = [RecordingEnv(gym.make("CartPole-v1"), on_step=run_again if i == 0 else None) for i in range(2)]
    holder["actor"] = seed_rs.Actor(envs, learner=learner.addr)
    report = holder["actor"].run(max_steps=200, max_seconds=MAX_SECONDS)
    assert holder.get("refused") and report["env_steps"] >= 200
    # And runs again once the first run is over.
    assert holder["actor"].run(max_steps=20, max_seconds=MAX_SECONDS)["env_steps"] >= 20


def test_enable_logging_is_the_binaries_set_up_once_per_process():
    import subprocess

    # In a child: the subscriber is process-wide, and this process keeps none.
    code = "import seed_rs; print(seed_rs.enable_logging('info'), seed_rs.enable_logging(json=True))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"]  # the second keeps the first
    with pytest.raises(ValueError, match="seed=notalevel"):
        seed_rs.enable_logging("seed=notalevel")
