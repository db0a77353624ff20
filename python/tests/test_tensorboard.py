"""TensorBoard event files from the learner, read back with TensorBoard's
own reader (``EventAccumulator``): the tags of the progress record, steps
that increase, the final mean return equal to the summary's, a resumed run
whose steps continue in the same directory, and a directory that cannot be
written not stopping training.

Each test runs a short CartPole training with the learner's own local
actors (``target/release/learner`` or ``$SEED_LEARNER_BIN``).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import List, Sequence

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import LEARNER_BIN

#: Every scalar of the progress record, plus each episode's return and length.
EXPECTED_SCALARS = {
    "env/steps", "env/steps_per_second", "env/episodes", "env/mean_return_last_100",
    "env/episode_return", "env/episode_length",
    "inference/mean_batch", "inference/step_latency_p50_us", "inference/step_latency_p99_us",
    "train/learner_steps", "train/learner_steps_per_second", "train/total_loss", "train/pg_loss",
    "train/value_loss", "train/entropy", "train/grad_norm", "train/learning_rate",
    "train/mean_policy_lag", "train/max_policy_lag", "train/wait_fraction",
    "replay/stored", "replay/inserts", "replay/inserts_per_second", "replay/samples_per_second",
    "prefetch/queue_depth",
}


def train(args: Sequence[str], timeout: float = 120, progress_secs: float = 0.5) -> subprocess.CompletedProcess:
    if not LEARNER_BIN.exists():
        pytest.fail(f"no learner binary at {LEARNER_BIN} (cargo build --release -p seed-learner-cli)")
    done = subprocess.run(
        [str(LEARNER_BIN), "--listen", "127.0.0.1:0", "--progress-secs", str(progress_secs), *args],
        capture_output=True, text=True, timeout=timeout,
        env={"RAYON_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def read(directory: pathlib.Path) -> EventAccumulator:
    acc = EventAccumulator(str(directory), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def steps(acc: EventAccumulator, tag: str) -> List[int]:
    return [e.step for e in acc.Scalars(tag)]


def test_a_training_run_writes_what_tensorboard_reads(tmp_path):
    run = tmp_path / "run"
    summary_path = tmp_path / "summary.json"
    train(["--run-dir", str(run), "--max-env-steps", "60000", "--summary-json", str(summary_path)])
    summary = json.loads(summary_path.read_text())
    acc = read(run / "tensorboard")
    tags = acc.Tags()
    assert EXPECTED_SCALARS <= set(tags["scalars"]), EXPECTED_SCALARS - set(tags["scalars"])
    assert {"env/episode_returns", "train/policy_lag"} <= set(tags["histograms"])
    assert {"run/config", "run/summary"} <= set(tags["tensors"])

    env_steps = steps(acc, "env/steps")
    # One record per 0.5 s and one at the end: how many depends on how long
    # 60k env steps take, so only the end's is certain.
    assert len(env_steps) >= 1
    assert env_steps == sorted(env_steps) and len(set(env_steps)) == len(env_steps)
    # The step axis is env steps: each record's own env/steps value.
    assert all(e.step == int(e.value) for e in acc.Scalars("env/steps"))
    assert env_steps[-1] == summary["env_steps"]
    final = acc.Scalars("env/mean_return_last_100")[-1].value
    assert final == pytest.approx(summary["mean_return_last_100"], rel=1e-6)
    episodes = acc.Scalars("env/episode_return")
    assert len(episodes) == len(acc.Scalars("env/episode_length")) > 0
    # A histogram's max is its top bucket's upper bound: exact up to 16 and
    # within 1/16 above (log-linear buckets), so the run's largest lag lies
    # in the top bucket of the intervals that saw it.
    lags = [h.histogram_value for h in acc.Histograms("train/policy_lag")]
    top = max(h.max for h in lags)
    assert lags[-1].num > 0
    assert summary["max_policy_lag"] <= top <= summary["max_policy_lag"] * 17 / 16 + 1
    config = acc.Tensors("run/config")[0].tensor_proto.string_val[0].decode()
    assert "[train]" in config and "max_env_steps = 60000" in config
    text = acc.Tensors("run/summary")[0].tensor_proto.string_val[0].decode()
    assert f'"env_steps": {summary["env_steps"]}' in text


def test_a_resumed_run_continues_the_same_curve(tmp_path):
    run = tmp_path / "run"
    # Progress points every 0.02 s: the first run must leave points before
    # its last checkpoint (the resumed run drops those after it), and a
    # CartPole run of 30k env steps can end within half a second.
    train(["--run-dir", str(run), "--max-env-steps", "30000"], progress_secs=0.02)
    first = steps(read(run / "tensorboard"), "env/steps")
    train(["--resume", str(run), "--max-env-steps", "60000"], progress_secs=0.02)
    files = sorted((run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(files) == 2, files
    acc = read(run / "tensorboard")
    both = steps(acc, "env/steps")
    assert both == sorted(both) and len(set(both)) == len(both), (first, both)
    assert both[-1] >= 60000 > first[-1]
    # The first run's points up to its checkpoint are kept (TensorBoard
    # drops those past the resumed run's first step), then the resumed
    # run's follow.
    kept = [s for s in first if s in set(both)]
    assert kept and kept == first[: len(kept)], (first, both)
    assert len(both) > len(kept)


def test_a_directory_that_cannot_be_written_does_not_stop_training(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    summary_path = tmp_path / "summary.json"
    done = train(["--tensorboard", str(blocker / "tb"), "--max-env-steps", "20000",
                  "--summary-json", str(summary_path)])
    assert "no TensorBoard events this run" in done.stderr
    assert str(blocker) in done.stderr
    assert json.loads(summary_path.read_text())["env_steps"] >= 20000


def test_an_empty_directory_flag_turns_tensorboard_off(tmp_path):
    run = tmp_path / "run"
    train(["--run-dir", str(run), "--tensorboard", "", "--max-env-steps", "10000"])
    assert (run / "metrics.jsonl").exists()
    assert not (run / "tensorboard").exists()
