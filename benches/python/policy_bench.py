#!/usr/bin/env python3
"""seed_rs.Policy against the same network in PyTorch, side by side.

For three torsos (the CartPole MLP, the MinAtar conv torso, the Atari conv
torso), a short learner run gives the checkpoint; then, in alternating
rounds, ``seed_rs.Policy.forward`` and ``seed_rs.torch.load_policy``'s
module (``torch.no_grad``, ``torch.set_num_threads(1)``; the policy runs on
the calling thread) answer the same observations: one observation per call
(the latency a user's env loop pays) and batches of 256 (rows/s). Medians
over the rounds.

    python benches/python/policy_bench.py --learner target/release/learner \\
        --out benches/results/policy/policy_bench.json

Needs torch (not a dependency of seed-rs) where it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch

import seed_rs
import seed_rs.torch

CASES = [
    ("mlp (CartPole)", ["--env", "cartpole"]),
    ("conv 10x10 (MinAtar)", ["--env", "synthetic", "--obs-shape", "4,10,10", "--obs-dtype", "u8",
                              "--num-actions", "6"]),
    ("conv 84x84 (Atari)", ["--env", "synthetic", "--obs-shape", "4,84,84", "--obs-dtype", "u8",
                            "--num-actions", "6", "--local-actors", "1", "--envs-per-actor", "4"]),
]


def timed(fn, calls: int) -> float:
    """Seconds per call of ``fn`` over ``calls`` calls."""
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--learner", default="target/release/learner")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, flags) in enumerate(CASES):
            run = pathlib.Path(tmp) / f"run{i}"
            subprocess.run([args.learner, "--listen", "127.0.0.1:0", "--progress-secs", "0", "--run-dir", str(run),
                            "--max-env-steps", "2000", *flags], check=True, capture_output=True, timeout=600,
                           env={"RAYON_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
            policy = seed_rs.Policy.load(run)
            module = seed_rs.torch.load_policy(policy)
            spec = policy.spec
            rng = np.random.default_rng(0)
            shape = (256, *spec.obs_shape)
            batch = (rng.integers(0, 256, size=shape, dtype=np.uint8) if spec.obs_dtype == "u8"
                     else rng.normal(size=shape).astype(np.float32))
            one, one_t, batch_t = batch[0], torch.from_numpy(batch[:1]), torch.from_numpy(batch)
            big = spec.obs_shape[-1] > 20
            calls_one, calls_batch = (200, 4) if big else (2000, 40)
            ours_one, torch_one, ours_batch, torch_batch = [], [], [], []
            with torch.no_grad():
                module(one_t), module(batch_t), policy.forward(batch)  # warm up
                for _ in range(args.rounds):
                    ours_one.append(timed(lambda: policy.act(one, greedy=True), calls_one))
                    torch_one.append(timed(lambda: module.greedy(module(one_t)[0]), calls_one))
                    ours_batch.append(timed(lambda: policy.forward(batch), calls_batch))
                    torch_batch.append(timed(lambda: module(batch_t), calls_batch))
            med = statistics.median
            row = {
                "torso": name,
                "act_one_us": {"seed_rs": med(ours_one) * 1e6, "torch": med(torch_one) * 1e6},
                "batch256_rows_per_s": {"seed_rs": 256 / med(ours_batch), "torch": 256 / med(torch_batch)},
            }
            row["act_one_speedup"] = row["act_one_us"]["torch"] / row["act_one_us"]["seed_rs"]
            row["batch256_ratio"] = row["batch256_rows_per_s"]["seed_rs"] / row["batch256_rows_per_s"]["torch"]
            rows.append(row)
            print(f"{name:22s} act(one obs): ours {row['act_one_us']['seed_rs']:8.1f} us, torch "
                  f"{row['act_one_us']['torch']:8.1f} us ({row['act_one_speedup']:.2f}x); batch 256: ours "
                  f"{row['batch256_rows_per_s']['seed_rs']:10.0f} rows/s, torch "
                  f"{row['batch256_rows_per_s']['torch']:10.0f} ({row['batch256_ratio']:.2f}x)", flush=True)
    record = {"machine": f"{cpu_model()}, {os.cpu_count()} cores", "torch": torch.__version__,
              "threads": 1, "rounds": args.rounds, "rows": rows}
    if args.out:
        out = pathlib.Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
