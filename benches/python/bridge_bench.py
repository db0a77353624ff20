#!/usr/bin/env python3
"""Env steps/s of the Python actor (seed_rs) beside raw Gymnasium stepping.

What it answers: how much of the raw stepping rate the Python bridge keeps.
For each K (envs per actor) and repetition it measures, in a rotating order
so all modes meet the same machine states:

- ``python_actor``: ``seed_rs.Actor`` over K ``gymnasium.make("CartPole-v1")``
  envs against a real learner (``--no-train``: serving only);
- ``plain_loop``: the same K envs stepped by a bare Python loop with random
  actions (reset when an episode ends), no learner involved;
- ``sync_vector``: ``gymnasium.vector.SyncVectorEnv`` of K envs stepped with
  random action arrays;
- ``rust_actor``: ``target/release/actor --env cartpole --envs K`` (the Rust
  CartPole) against the same learner, for reference.

Each measurement runs ``--steps`` env steps; rates are env steps per second
(the actors' from their reports: steps over the time since their first
connection). The JSON holds every measurement, the medians and the ratios
``python_actor / plain_loop`` and ``python_actor / sync_vector``.

Usage (from the repository root, with seed_rs installed and the release
binaries built)::

    python benches/python/bridge_bench.py [--ks 16,64,256] [--reps 5] [--steps 100000]
"""

from __future__ import annotations

import os

# One OpenBLAS thread: its idle workers spin after a BLAS call and would
# take CPU from whichever mode runs next (set before numpy is imported).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import datetime
import json
import pathlib
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import gymnasium as gym
import numpy as np

import seed_rs

REPO = pathlib.Path(__file__).resolve().parents[2]
MODES = ["python_actor", "plain_loop", "sync_vector", "rust_actor"]


class LearnerProcess:
    """A serving-only learner on a free port (address read from its log)."""

    def __init__(self, binary: pathlib.Path, extra_flags: list):
        env = dict(os.environ, RAYON_NUM_THREADS="1", NO_COLOR="1")
        self.flags = ["--local-actors", "0", "--listen", "127.0.0.1:0", "--no-train",
                      "--progress-secs", "0", "--env", "cartpole", *extra_flags]  # fmt: skip
        self.proc = subprocess.Popen(
            [str(binary), *self.flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
        self.addr = None
        ready = threading.Event()

        def read():
            for line in self.proc.stdout:
                m = re.search(r"learner listening addr=(\S+)", line)
                if m and self.addr is None:
                    self.addr = m.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or self.addr is None:
            self.stop()
            raise RuntimeError("learner did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


class Measurement:
    """Env steps/s (wall clock) and CPU microseconds per env step of one run."""

    def __init__(self, steps: int, seconds: float, cpu_seconds: float):
        self.rate = steps / seconds
        self.cpu_us = cpu_seconds / steps * 1e6


def plain_loop(envs, steps: int, rng) -> Measurement:
    k = len(envs)
    n = max(1, steps // k)
    actions = rng.integers(0, 2, size=(n, k)).tolist()
    for i, e in enumerate(envs):
        e.reset(seed=i)
    c, t = time.process_time(), time.perf_counter()
    for row in actions:
        for e, a in zip(envs, row):
            _, _, terminated, truncated, _ = e.step(a)
            if terminated or truncated:
                e.reset()
    return Measurement(n * k, time.perf_counter() - t, time.process_time() - c)


def sync_vector(vec, steps: int, rng) -> Measurement:
    k = vec.num_envs
    n = max(1, steps // k)
    actions = rng.integers(0, 2, size=(n, k))
    vec.reset(seed=0)
    c, t = time.process_time(), time.perf_counter()
    for a in actions:
        vec.step(a)
    return Measurement(n * k, time.perf_counter() - t, time.process_time() - c)


def python_actor(actor, steps: int) -> Measurement:
    # CPU: the whole run (connect, resets, every step) on this process.
    c = time.process_time()
    report = actor.run(max_steps=steps)
    return Measurement(report["env_steps"], report["active_seconds"], time.process_time() - c)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def rust_actor(binary: pathlib.Path, learner: str, k: int, steps: int) -> Measurement:
    c = _children_cpu()
    with tempfile.TemporaryDirectory() as d:
        summary = pathlib.Path(d) / "actor.json"
        subprocess.run(
            [str(binary), "--env", "cartpole", "--envs", str(k), "--learner", learner,
             "--max-env-steps", str(steps), "--summary-json", str(summary)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ, RUST_LOG="warn"),
        )  # fmt: skip
        report = json.loads(summary.read_text())
    # CPU: the whole process (start, connect, every step).
    return Measurement(report["env_steps"], report["active_seconds"], _children_cpu() - c)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ks", default="16,64,256", help="envs per actor, comma-separated [default: 16,64,256]")
    p.add_argument("--reps", type=int, default=5, help="repetitions of every (K, mode) [default: 5]")
    p.add_argument("--steps", type=int, default=100_000, help="env steps per measurement [default: 100000]")
    p.add_argument("--learner-bin", default=str(REPO / "target/release/learner"),
                   help="[default: target/release/learner]")  # fmt: skip
    p.add_argument("--actor-bin", default=str(REPO / "target/release/actor"), help="[default: target/release/actor]")
    p.add_argument("--json", default=str(REPO / "benches/results/python_bridge.json"),
                   help="[default: benches/results/python_bridge.json]")  # fmt: skip
    p.add_argument(
        "--learner-flags",
        default="",
        help="extra learner flags, space-separated, e.g. '--flush-us 20' [default: none]",
    )
    args = p.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    rng = np.random.default_rng(0)

    learner = LearnerProcess(pathlib.Path(args.learner_bin), args.learner_flags.split())
    samples = {k: {m: [] for m in MODES} for k in ks}
    cpu_us = {k: {m: [] for m in MODES} for k in ks}
    try:
        setups = {}
        for k in ks:
            envs = [gym.make("CartPole-v1") for _ in range(k)]
            setups[k] = {
                "envs": envs,
                "actor": seed_rs.Actor(envs, learner=learner.addr, seed=k),
                "vec": gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * k),
            }
        for rep in range(args.reps):
            for k in ks:
                s = setups[k]
                order = MODES[rep % len(MODES):] + MODES[: rep % len(MODES)]
                for mode in order:
                    if mode == "python_actor":
                        m = python_actor(s["actor"], args.steps)
                    elif mode == "plain_loop":
                        m = plain_loop(s["envs"], args.steps, rng)
                    elif mode == "sync_vector":
                        m = sync_vector(s["vec"], args.steps, rng)
                    else:
                        m = rust_actor(pathlib.Path(args.actor_bin), learner.addr, k, args.steps)
                    samples[k][mode].append(m.rate)
                    cpu_us[k][mode].append(m.cpu_us)
                    print(
                        f"rep {rep} K={k:4d} {mode:13s} {m.rate:10.0f} steps/s {m.cpu_us:7.2f} us CPU/step",
                        file=sys.stderr,
                    )
    finally:
        learner.stop()

    results = {}
    for k in ks:
        med = {m: statistics.median(samples[k][m]) for m in MODES}
        med_cpu = {m: statistics.median(cpu_us[k][m]) for m in MODES}
        # Ratio of medians, and the median of the per-repetition ratios
        # (each taken within one rotation, so they share a machine state).
        per_rep = [a / b for a, b in zip(samples[k]["python_actor"], samples[k]["plain_loop"])]
        results[str(k)] = {
            "median_steps_per_second": med,
            "samples": samples[k],
            "median_cpu_us_per_step": med_cpu,
            "cpu_us_per_step_samples": cpu_us[k],
            # CPU per step is what the bridge adds, whatever the round trip:
            # plain loop / Python actor is the share of its stepping rate the
            # actor would keep if stepping were the only bound.
            "plain_loop_cpu_over_python_actor_cpu": med_cpu["plain_loop"] / med_cpu["python_actor"],
            "python_actor_over_plain_loop": med["python_actor"] / med["plain_loop"],
            "python_actor_over_plain_loop_per_rep_median": statistics.median(per_rep),
            "python_actor_over_sync_vector": med["python_actor"] / med["sync_vector"],
            "rust_actor_over_python_actor": med["rust_actor"] / med["python_actor"],
        }

    out = {
        "what": "CartPole-v1 env steps/s: seed_rs.Actor vs bare Gymnasium stepping, Rust actor for reference",
        "command": "python benches/python/bridge_bench.py " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg(),
        },
        "versions": {
            "python": platform.python_version(),
            "gymnasium": gym.__version__,
            "numpy": np.__version__,
        },
        "steps_per_measurement": args.steps,
        "reps": args.reps,
        "learner_flags": " ".join(learner.flags),
        "results": results,
    }
    path = pathlib.Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")

    print(f"{'K':>5} {'python actor':>13} {'plain loop':>11} {'SyncVector':>11} {'Rust actor':>11} "
          f"{'py/plain':>9} {'py/vec':>7} {'CPU us/step py | plain':>23} {'plain/py CPU':>13}")  # fmt: skip
    for k in ks:
        r = results[str(k)]
        m = r["median_steps_per_second"]
        c = r["median_cpu_us_per_step"]
        print(
            f"{k:>5} {m['python_actor']:>13.0f} {m['plain_loop']:>11.0f} {m['sync_vector']:>11.0f} "
            f"{m['rust_actor']:>11.0f} {r['python_actor_over_plain_loop']:>9.2f} "
            f"{r['python_actor_over_sync_vector']:>7.2f} "
            f"{c['python_actor']:>11.2f} | {c['plain_loop']:<9.2f} "
            f"{r['plain_loop_cpu_over_python_actor_cpu']:>13.2f}"
        )
    print(f"(medians of {args.reps} repetitions; rates in env steps/s; JSON: {path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
