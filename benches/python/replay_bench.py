#!/usr/bin/env python3
"""The TorchRL replay RFC's benchmark from Python: TorchRL, rlox and seed_rs
in one run, each through its own public API.

Rows (each a per-call time; lower is better):

- ``floor``: the cost floor of a Python call into an extension that returns
  one new 6 KB array: ``numpy.empty(1536, float32)`` (numpy's extension) and
  ``seed_rs._native.call_floor(1536)`` (ours, made the way ``sample`` makes
  its arrays). Nothing below it is reachable from Python.
- ``sample_128``: ``sample(128)`` of 100k stored items of 3x4 float32.
- ``sample_dict_128``: ``sample(128)`` of 100k transitions with six fields
  (obs 3x4 f32, action i64, reward f32, next_obs 3x4 f32, done bool,
  truncated bool), returned as a dict of arrays (TorchRL: a TensorDict).
- ``prioritized_1m``: on 1M stored items, ``sample(128)`` followed by
  ``update_priorities`` of those 128 keys (one iteration of a PER learner).
- ``insert_1``, ``insert_100``, ``insert_1000``: adding a batch of that many
  3x4 float32 items (TorchRL ``extend``, rlox ``push_batch`` of its six
  columns, ours ``insert``), per call.
- ``memmap_sample_128``: ``sample(128)`` of 100k 3x4 float32 items in a
  memory-mapped store (TorchRL ``LazyMemmapStorage``, rlox
  ``MmapReplayBuffer`` with 1% hot, ours ``storage_dir``).

Method: every system builds each workload once; then ``--rounds`` rounds
run, each timing every (row, system) pair in a rotating order (so the
systems meet the same machine states), each timing the median per-call time
over ``--calls`` calls after ``--warmup`` calls. Reported: the median over
rounds, the ratios TorchRL/ours and rlox/ours, and the machine. A system or
row that cannot be built is "n/a" with the reason.

Usage (a venv with seed_rs, torch, torchrl 0.14.1 and rlox 1.2.0)::

    python benches/python/replay_bench.py [--rounds 5] [--calls 2000] [--out PATH]
"""

from __future__ import annotations

import os

# One thread for torch and BLAS: their idle workers would take CPU from
# whichever system runs next on this 2-core machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import datetime
import gc
import json
import pathlib
import platform
import statistics
import tempfile
import time
import traceback
from typing import Callable, Dict, Optional

import numpy as np

OBS = (3, 4)
N_SMALL = 100_000
N_LARGE = 1_000_000
BATCH = 128


def per_call(fn: Callable[[], object], calls: int, warmup: int) -> float:
    """Median seconds per call of ``fn`` over ``calls`` timed calls."""
    for _ in range(warmup):
        fn()
    times = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times) / 1e9


def transitions(n: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    return {
        "obs": rng.standard_normal((n, *OBS), dtype=np.float32),
        "action": rng.integers(0, 4, n, dtype=np.int64),
        "reward": rng.standard_normal(n, dtype=np.float32),
        "next_obs": rng.standard_normal((n, *OBS), dtype=np.float32),
        "done": rng.random(n) < 0.01,
        "truncated": rng.random(n) < 0.001,
    }


# --- seed_rs --------------------------------------------------------------------


def seed_rs_rows(rng, tmp: pathlib.Path) -> Dict[str, Callable[[], object]]:
    import seed_rs
    from seed_rs import _native

    def table(name, fields, capacity, sampler=None, **extra):
        return {"name": name, "capacity": capacity, "fields": fields,
                "sampler": sampler or {"kind": "uniform"}, **extra}

    x = [{"name": "x", "dtype": "f32", "shape": list(OBS)}]
    rows: Dict[str, Callable[[], object]] = {}
    rows["floor"] = lambda: _native.call_floor(1536)

    small = seed_rs.ReplayBuffer(table("small", x, N_SMALL))
    data = rng.standard_normal((N_SMALL, *OBS), dtype=np.float32)
    for start in range(0, N_SMALL, 10_000):
        small.insert({"x": data[start:start + 10_000]})
    rows["sample_128"] = lambda: small.sample(BATCH)

    six = [
        {"name": "obs", "dtype": "f32", "shape": list(OBS)},
        {"name": "action", "dtype": "i64", "shape": []},
        {"name": "reward", "dtype": "f32", "shape": []},
        {"name": "next_obs", "dtype": "f32", "shape": list(OBS)},
        {"name": "done", "dtype": "bool", "shape": []},
        {"name": "truncated", "dtype": "bool", "shape": []},
    ]
    dict_table = seed_rs.ReplayBuffer(table("dict", six, N_SMALL))
    t = transitions(N_SMALL, rng)
    for start in range(0, N_SMALL, 10_000):
        dict_table.insert({k: v[start:start + 10_000] for k, v in t.items()})
    rows["sample_dict_128"] = lambda: dict_table.sample(BATCH)

    prio = seed_rs.ReplayBuffer(table("prio", x, N_LARGE, {"kind": "prioritized", "alpha": 0.6, "beta": 0.4}))
    big = rng.standard_normal((100_000, *OBS), dtype=np.float32)
    for _ in range(N_LARGE // 100_000):
        prio.insert({"x": big}, priorities=rng.random(100_000, dtype=np.float32) + 0.01)
    new_priorities = rng.random(BATCH, dtype=np.float32) + 0.01

    def prioritized():
        _, keys, _ = prio.sample(BATCH)
        prio.update_priorities(keys, new_priorities)

    rows["prioritized_1m"] = prioritized

    sink = seed_rs.ReplayBuffer(table("sink", x, N_SMALL))
    for n in (1, 100, 1000):
        batch = {"x": rng.standard_normal((n, *OBS), dtype=np.float32)}
        rows[f"insert_{n}"] = (lambda b: lambda: sink.insert(b))(batch)

    mapped = seed_rs.ReplayBuffer(table("mapped", x, N_SMALL, storage_dir=str(tmp / "seed_rs_mapped")))
    for start in range(0, N_SMALL, 10_000):
        mapped.insert({"x": data[start:start + 10_000]})
    rows["memmap_sample_128"] = lambda: mapped.sample(BATCH)
    return rows


# --- TorchRL --------------------------------------------------------------------


def torchrl_rows(rng, tmp: pathlib.Path) -> Dict[str, Callable[[], object]]:
    import torch
    from tensordict import TensorDict
    from torchrl.data import (LazyMemmapStorage, LazyTensorStorage, PrioritizedReplayBuffer,
                              ReplayBuffer)

    torch.set_num_threads(1)
    rows: Dict[str, Callable[[], object]] = {}
    rows["floor"] = lambda: np.empty(1536, np.float32)
    data = torch.from_numpy(rng.standard_normal((N_SMALL, *OBS), dtype=np.float32))

    small = ReplayBuffer(storage=LazyTensorStorage(N_SMALL), batch_size=BATCH)
    small.extend(data)
    rows["sample_128"] = lambda: small.sample()

    t = transitions(N_SMALL, rng)
    td = TensorDict({k: torch.from_numpy(v) for k, v in t.items()}, batch_size=[N_SMALL])
    dict_rb = ReplayBuffer(storage=LazyTensorStorage(N_SMALL), batch_size=BATCH)
    dict_rb.extend(td)
    rows["sample_dict_128"] = lambda: dict_rb.sample()

    prio = PrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(N_LARGE), batch_size=BATCH)
    big = torch.from_numpy(rng.standard_normal((100_000, *OBS), dtype=np.float32))
    for _ in range(N_LARGE // 100_000):
        prio.extend(big)
    new_priorities = torch.from_numpy(rng.random(BATCH, dtype=np.float32) + 0.01)

    def prioritized():
        _, info = prio.sample(return_info=True)
        prio.update_priority(info["index"], new_priorities)

    rows["prioritized_1m"] = prioritized

    sink = ReplayBuffer(storage=LazyTensorStorage(N_SMALL))
    sink.extend(data[:1000])
    for n in (1, 100, 1000):
        batch = torch.from_numpy(rng.standard_normal((n, *OBS), dtype=np.float32))
        rows[f"insert_{n}"] = (lambda b: lambda: sink.extend(b))(batch)

    mapped = ReplayBuffer(storage=LazyMemmapStorage(N_SMALL, scratch_dir=str(tmp / "torchrl_mapped")), batch_size=BATCH)
    mapped.extend(data)
    rows["memmap_sample_128"] = lambda: mapped.sample()
    return rows


# --- rlox -----------------------------------------------------------------------


def rlox_rows(rng, tmp: pathlib.Path) -> Dict[str, Callable[[], object]]:
    import itertools

    import rlox

    obs_dim = OBS[0] * OBS[1]
    rows: Dict[str, Callable[[], object]] = {}
    rows["floor"] = lambda: np.empty(1536, np.float32)
    # Its sample takes a seed per call; a fixed one would sample the same
    # rows every call (warm caches), so each call gets the next seed.
    seeds = itertools.count(1)

    def columns(n, flags=np.uint8):
        """push_batch's flat arrays: obs, next_obs, actions, rewards,
        terminated, truncated (act_dim 1; the flags are uint8, float32 for
        MmapReplayBuffer)."""
        obs = rng.standard_normal(n * obs_dim, dtype=np.float32)
        return (obs, obs, rng.standard_normal(n, dtype=np.float32),
                rng.standard_normal(n, dtype=np.float32), np.zeros(n, flags), np.zeros(n, flags))

    small = rlox.ReplayBuffer(N_SMALL, obs_dim, 1)
    chunk = columns(10_000)
    for _ in range(N_SMALL // 10_000):
        small.push_batch(*chunk)
    rows["sample_128"] = lambda: small.sample(BATCH, next(seeds))
    # Its sample already returns a dict of six arrays (obs, next_obs,
    # actions, rewards, terminated, truncated): the dict case is the same
    # call.
    rows["sample_dict_128"] = lambda: small.sample(BATCH, next(seeds))

    # No batch push here: one push per item, with its priority.
    prio = rlox.PrioritizedReplayBuffer(N_LARGE, obs_dim, 1, alpha=0.6, beta=0.4)
    obs = rng.standard_normal((1000, obs_dim), dtype=np.float32)
    action = np.zeros(1, np.float32)
    priorities = rng.random(N_LARGE) + 0.01
    for i in range(N_LARGE):
        prio.push(obs[i % 1000], action, 0.0, False, False, priority=float(priorities[i]))
    new_priorities = rng.random(BATCH) + 0.01

    def prioritized():
        batch = prio.sample(BATCH, next(seeds))
        prio.update_priorities(batch["indices"], new_priorities)

    rows["prioritized_1m"] = prioritized

    sink = rlox.ReplayBuffer(N_SMALL, obs_dim, 1)
    sink.push_batch(*columns(1000))
    for n in (1, 100, 1000):
        rows[f"insert_{n}"] = (lambda c: lambda: sink.push_batch(*c))(columns(n))

    # Memory-mapped: 1% of the items in memory, the rest in its cold file.
    mapped = rlox.MmapReplayBuffer(1000, N_SMALL, obs_dim, 1, str(tmp / "rlox_mapped"))
    mapped_chunk = columns(10_000, np.float32)
    for _ in range(N_SMALL // 10_000):
        mapped.push_batch(*mapped_chunk)
    rows["memmap_sample_128"] = lambda: mapped.sample(BATCH, next(seeds))
    return rows


SYSTEMS = {"seed_rs": seed_rs_rows, "torchrl": torchrl_rows, "rlox": rlox_rows}
ROWS = ["floor", "sample_128", "sample_dict_128", "prioritized_1m", "insert_1", "insert_100",
        "insert_1000", "memmap_sample_128"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--systems", default="seed_rs,torchrl,rlox")
    parser.add_argument("--out", type=pathlib.Path, default=None, help="JSON output path")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="replay_bench_"))
    built: Dict[str, Dict[str, Callable[[], object]]] = {}
    missing: Dict[str, str] = {}
    versions: Dict[str, Optional[str]] = {}
    for name in args.systems.split(","):
        t0 = time.perf_counter()
        try:
            built[name] = SYSTEMS[name](rng, tmp)
            print(f"built {name} in {time.perf_counter() - t0:.1f} s", flush=True)
        except Exception as e:  # reported as n/a
            missing[name] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        module = {"seed_rs": "seed_rs", "torchrl": "torchrl", "rlox": "rlox"}[name]
        try:
            import importlib.metadata as md

            versions[name] = md.version({"seed_rs": "seed-rs"}.get(module, module))
        except Exception:
            versions[name] = None

    pairs = [(row, system) for row in ROWS for system in built if row in built[system]]
    samples: Dict[str, Dict[str, list]] = {row: {} for row in ROWS}
    for r in range(args.rounds):
        shift = r % max(1, len(built))
        for row in ROWS:
            systems = [s for s in built if row in built[s]]
            systems = systems[shift:] + systems[:shift]
            for system in systems:
                gc.collect()
                seconds = per_call(built[system][row], args.calls, args.warmup)
                samples[row].setdefault(system, []).append(seconds)
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    del pairs

    table = {}
    for row in ROWS:
        medians = {s: statistics.median(v) for s, v in samples[row].items()}
        ours = medians.get("seed_rs")
        entry = {"us": {s: round(m * 1e6, 3) for s, m in medians.items()}}
        for other in ("torchrl", "rlox"):
            if ours and other in medians:
                entry[f"{other}_over_seed_rs"] = round(medians[other] / ours, 2)
        table[row] = entry
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpus": os.cpu_count(), "python": platform.python_version()},
        "versions": versions,
        "missing": missing,
        "method": {"rounds": args.rounds, "calls": args.calls, "warmup": args.warmup,
                   "statistic": "median over rounds of the median per-call time"},
        "rows": table,
        "samples_us": {row: {s: [round(x * 1e6, 3) for x in v] for s, v in samples[row].items()} for row in ROWS},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    print("\n| row | seed_rs (us) | TorchRL (us) | rlox (us) | TorchRL / seed_rs | rlox / seed_rs |")
    print("|---|---|---|---|---|---|")
    for row in ROWS:
        e = table[row]
        us = e["us"]
        cell = lambda s: f"{us[s]:.2f}" if s in us else "n/a"
        ratio = lambda k: f"{e[k]:.1f}x" if k in e else "n/a"
        print(f"| {row} | {cell('seed_rs')} | {cell('torchrl')} | {cell('rlox')} | "
              f"{ratio('torchrl_over_seed_rs')} | {ratio('rlox_over_seed_rs')} |")


if __name__ == "__main__":
    main()
