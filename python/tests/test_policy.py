"""A trained policy in the user's hands: ``seed_rs.Policy`` loads a learner's
run directory in process and answers as the network does; ``python -m
seed_rs.eval`` plays it on a Gymnasium env and writes videos.

The checkpoints come from short learner runs (``target/release/learner``
or ``$SEED_LEARNER_BIN``), each bounded by env steps: CartPole trained
until solved with the learner's own actors; MinAtar- and Atari-shaped
frames, an LSTM core, a Gaussian head and R2D2's dueling head from a few
thousand steps of the synthetic and Pendulum envs (what is checked there
is the network, not its training). Every architecture's answers are
compared with :func:`seed_rs.network.numpy_forward`, an independent
implementation read from the same weights by name.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import seed_rs
from seed_rs.network import network_def, numpy_forward
from seed_rs.spaces import BoxActions, DiscreteActions

from conftest import LEARNER_BIN


def train(run_dir: pathlib.Path, *flags: str, timeout: float = 240) -> None:
    if not LEARNER_BIN.exists():
        pytest.fail(f"no learner binary at {LEARNER_BIN} (cargo build --release -p seed-learner-cli)")
    done = subprocess.run(
        [str(LEARNER_BIN), "--listen", "127.0.0.1:0", "--progress-secs", "0", "--run-dir", str(run_dir), *flags],
        capture_output=True, text=True, timeout=timeout,
        env={"RAYON_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (run_dir / "LATEST").exists(), done.stderr[-3000:]


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> pathlib.Path:
    """CartPole trained by the learner and its local actors (defaults) until solved."""
    run = tmp_path_factory.mktemp("cartpole") / "run"
    train(run, "--seed", "1", "--target-return", "475", "--stop-when-solved", "--max-env-steps", "2000000")
    return run


#: The architectures: learner flags (the synthetic env's frames, an LSTM
#: core, Pendulum's Gaussian head, R2D2's dueling head) and a few thousand steps.
ARCHITECTURES = {
    "minatar-conv": ["--env", "synthetic", "--obs-shape", "4,10,10", "--obs-dtype", "u8", "--num-actions", "6"],
    "atari-conv": ["--env", "synthetic", "--obs-shape", "4,84,84", "--obs-dtype", "u8", "--num-actions", "6",
                   "--local-actors", "1", "--envs-per-actor", "4"],
    "mlp-lstm": ["--env", "cartpole", "--lstm", "--lstm-size", "16"],
    "gaussian": ["--env", "pendulum"],
    "r2d2-dueling": ["--env", "cartpole", "--algo", "r2d2"],
}


@pytest.fixture(scope="module")
def architecture_runs(tmp_path_factory):
    """``runs(name)``: the run directory of ``ARCHITECTURES[name]``, trained on first use."""
    done = {}

    def runs(name: str) -> pathlib.Path:
        if name not in done:
            run = tmp_path_factory.mktemp(name) / "run"
            train(run, *ARCHITECTURES[name], "--max-env-steps", "3000")
            done[name] = run
        return done[name]

    return runs


def observations(spec, rows: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (rows, *spec.obs_shape)
    if spec.obs_dtype == "u8":
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    return rng.normal(size=shape).astype(np.float32)


def test_a_trained_cartpole_policy_answers_as_its_network_and_plays_gymnasium(cartpole_run):
    policy = seed_rs.Policy.load(cartpole_run)
    spec = policy.spec
    assert (spec.env_name, spec.obs_shape, spec.obs_dtype) == ("CartPole-v1", (4,), "f32")
    assert spec.action == DiscreteActions(2) and not spec.recurrent and spec.policy_version > 0
    # A recorded batch: observations of Gymnasium's CartPole under random actions.
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    batch = []
    for _ in range(300):
        batch.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    batch = np.stack(batch)
    params, values, state = policy.forward(batch)
    want_params, want_values, _ = numpy_forward(network_def(spec), policy.weights(), batch)
    np.testing.assert_allclose(params, want_params, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values, want_values, rtol=1e-5, atol=1e-5)
    assert state is None
    greedy = policy.act(batch, greedy=True)
    assert greedy.dtype == np.int64 and greedy.shape == (300,)
    np.testing.assert_array_equal(greedy, np.argmax(want_params, axis=1))
    # One observation: a plain int and float, the same answers.
    assert policy.act(batch[7], greedy=True) == greedy[7]
    assert policy.value(batch[7]) == pytest.approx(float(values[7]), rel=1e-6)
    # Sampling follows the seed.
    policy.seed(5)
    first = policy.act(batch)
    policy.seed(5)
    np.testing.assert_array_equal(policy.act(batch), first)
    # The learner's own CartPole and Gymnasium's are the same task: the
    # trained policy, sampled as the actors sampled it to a mean of 475,
    # balances the pole (a random one averages about 22). Its greedy play at
    # the moment of solving is not a fixed bar: 125-224 were seen.
    out = subprocess.run(
        [sys.executable, "-m", "seed_rs.eval", str(cartpole_run), "--episodes", "5", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["env"] == "CartPole-v1" and result["episodes"] == 5 and len(result["returns"]) == 5
    assert result["mean"] >= 300, result
    assert result["min"] <= result["mean"] <= result["max"]
    lo, hi = result["ci95"]
    assert lo <= result["mean"] <= hi


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_every_architecture_answers_as_the_numpy_network(architecture_runs, name):
    run = architecture_runs(name)
    policy = seed_rs.Policy.load(run)
    spec = policy.spec
    net = network_def(spec)
    x = observations(spec, 5)
    state = policy.initial_state(5)
    if state is not None:
        rng = np.random.default_rng(1)
        state = tuple(rng.normal(size=s.shape).astype(np.float32) for s in state)
    params, values, next_state = policy.forward(x, state=state)
    want_params, want_values, want_state = numpy_forward(net, policy.weights(), x, state)
    np.testing.assert_allclose(params, want_params, rtol=1e-5, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(values, want_values, rtol=1e-5, atol=1e-5, err_msg=name)
    if spec.recurrent:
        np.testing.assert_allclose(next_state[0], want_state[0], rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(next_state[1], want_state[1], rtol=1e-5, atol=1e-5, err_msg=name)
        actions, carried = policy.act(x, greedy=True, state=state)
        assert carried[0].shape == (5, spec.lstm_size)
    else:
        assert next_state is None
        actions = policy.act(x, greedy=True)
    if isinstance(spec.action, BoxActions):
        assert actions.shape == (5, 1) and actions.dtype == np.float32
        np.testing.assert_allclose(actions, np.clip(want_params[:, :1], -2, 2), rtol=1e-5, atol=1e-5)
        sampled = policy.act(x)
        assert np.all(sampled >= -2) and np.all(sampled <= 2)
    else:
        np.testing.assert_array_equal(actions, np.argmax(want_params, axis=1))
    assert spec.head == ("q_values" if name == "r2d2-dueling" else "distribution")
    if name == "atari-conv":
        assert [layer.name for layer in net.torso] == ["torso.conv1", "torso.conv2", "torso.fc"]
        assert spec.conv_layers == ((8, 4), (4, 2))
    if name == "minatar-conv":
        assert spec.conv_layers == ((3, 1),)


def test_minatar_frames_are_taken_as_the_env_gives_them(architecture_runs):
    policy = seed_rs.Policy.load(architecture_runs("minatar-conv"), channels_last=True)
    rng = np.random.default_rng(2)
    frames = rng.random((3, 10, 10, 4)) < 0.3  # MinAtar's bool [H, W, C]
    wire = np.ascontiguousarray(frames.transpose(0, 3, 1, 2)).astype(np.uint8) * 255
    np.testing.assert_array_equal(policy.act(frames, greedy=True), policy.act(wire, greedy=True))
    assert policy.act(frames[0], greedy=True) == policy.act(wire, greedy=True)[0]


def test_bad_inputs_and_bad_checkpoints_are_named(cartpole_run, tmp_path):
    policy = seed_rs.Policy.load(cartpole_run)
    with pytest.raises(ValueError, match=r"shape \[3\].*takes \[4\]"):
        policy.act(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"shape \[2, 5\]"):
        policy.act(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="dtype complex"):
        policy.act(np.zeros(4, np.complex64))
    with pytest.raises(ValueError, match="feed-forward"):
        policy.act(np.zeros(4, np.float32), state=(np.zeros(4), np.zeros(4)))
    with pytest.raises(FileNotFoundError, match="no LATEST file"):
        seed_rs.Policy.load(tmp_path / "nothing-here")
    with pytest.raises(ValueError, match="observations are \\[2\\] f32.*\\[4\\] f32"):
        seed_rs.Policy.load(cartpole_run, env=gym.make("MountainCar-v0"))
    with pytest.raises(ValueError, match="actions"):
        seed_rs.Policy.load(cartpole_run, env=_three_action_cartpole())
    # A corrupt checkpoint: its file is named, nothing crashes.
    broken = tmp_path / "broken"
    shutil.copytree(cartpole_run, broken)
    step = broken / "checkpoints" / (broken / "LATEST").read_text().strip()
    (step / "weights.safetensors").write_bytes(b"\x00" * 12)
    with pytest.raises(ValueError, match="weights.safetensors"):
        seed_rs.Policy.load(broken)
    (step / "config.json").write_text('{"model": {"obs_shape": "four"}}')
    with pytest.raises(ValueError, match="config.json"):
        seed_rs.Policy.load(broken)
    out = subprocess.run([sys.executable, "-m", "seed_rs.eval", str(tmp_path / "nothing-here")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no LATEST file" in out.stderr


def _three_action_cartpole():
    env = gym.make("CartPole-v1")
    env.action_space = gym.spaces.Discrete(3)
    return env


def test_eval_writes_a_video_of_each_episode(cartpole_run, tmp_path):
    # moviepy writes the files; its ffmpeg (imageio-ffmpeg) decodes them
    # frame by frame here.
    pytest.importorskip("moviepy")
    import imageio_ffmpeg

    videos = tmp_path / "videos"
    out = subprocess.run(
        [sys.executable, "-m", "seed_rs.eval", str(cartpole_run), "--episodes", "2", "--greedy",
         "--max-steps", "40", "--video", str(videos), "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    files = sorted(videos.glob("*.mp4"))
    assert [f.name for f in files] == ["CartPole-v1-episode-0.mp4", "CartPole-v1-episode-1.mp4"]
    assert result["lengths"] == [40, 40]
    for path, steps in zip(files, result["lengths"]):
        frames = imageio_ffmpeg.read_frames(str(path))
        meta = next(frames)
        width, height = meta["size"]
        decoded = [f for f in frames]
        # The reset frame, then one per step, each a whole RGB picture.
        assert len(decoded) == steps + 1, (path, len(decoded), steps)
        assert all(len(f) == width * height * 3 for f in decoded)


def test_eval_every_keeps_the_best_policy_and_it_replays_its_recorded_return(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from seed_rs import defaults

    run = tmp_path / "run"
    train(run, "--seed", "2", "--eval-every", "200", "--eval-episodes", "4", "--max-env-steps", "40000")
    record = json.loads((run / defaults.BEST_DIR / "eval.json").read_text())
    assert record["episodes"] == 4 and len(record["returns"]) == 4
    assert record["mean_return"] == pytest.approx(np.mean(record["returns"]))
    best = seed_rs.Policy.load(run / defaults.BEST_DIR)
    assert (best.spec.learner_steps, best.spec.policy_version) == (record["learner_steps"], record["policy_version"])
    # The same greedy episodes again (EVAL_SEED + i), with the kept weights:
    # the recorded return exactly.
    out = subprocess.run(
        [str(LEARNER_BIN), "eval", "--checkpoint", str(run / defaults.BEST_DIR), "--episodes", "4",
         "--seed", str(defaults.EVAL_SEED)],
        capture_output=True, text=True, timeout=60, env={"RAYON_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert f"mean return {record['mean_return']:.1f}," in out.stdout, (out.stdout, record)
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    means = [e.value for e in acc.Scalars("eval/return")]
    assert len(means) >= 2 and max(means) == pytest.approx(record["mean_return"])
    assert "eval/return_min" in acc.Tags()["scalars"]


def test_eval_every_needs_a_run_dir():
    done = subprocess.run([str(LEARNER_BIN), "--eval-every", "100", "--max-env-steps", "1000",
                           "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60, env={"RAYON_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "--eval-every needs --run-dir" in done.stderr, done.stderr[-2000:]


def test_the_evaluation_actor_plays_new_checkpoints_and_keeps_the_best(cartpole_run, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from seed_rs import defaults

    run = tmp_path / "run"
    shutil.copytree(cartpole_run, run)
    out = subprocess.run(
        [sys.executable, "-m", "seed_rs.actor", "--env", "CartPole-v1", "--eval", str(run),
         "--eval-episodes", "3", "--eval-max", "1", "--eval-poll-secs", "0.1"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = (run / "eval.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    latest = (run / "LATEST").read_text().strip()
    assert record["checkpoint"] == latest and record["best"] and record["episodes"] == 3
    best = run / defaults.BEST_DIR
    # The whole checkpoint, so a run can resume from its best policy.
    assert (best / "optimizer.safetensors").exists()
    assert (best / "weights.safetensors").read_bytes() == (run / "checkpoints" / latest / "weights.safetensors").read_bytes()
    assert json.loads((best / "eval.json").read_text())["mean_return"] == record["mean_return"]
    acc = EventAccumulator(str(run / "tensorboard" / "eval"), size_guidance={"scalars": 0})
    acc.Reload()
    [point] = acc.Scalars("eval/return")
    assert point.value == pytest.approx(record["mean_return"]) and point.step == record["env_steps"]
