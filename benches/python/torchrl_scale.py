"""TorchRL's memory-mapped replay buffer at growing sizes: the other side
of ``replay_bench --scale``, with the same workload and the same fields.

For each size: ``LazyMemmapStorage(N)`` of ``uint8[item_bytes]`` items
(its files under ``--dir``), filled by ``extend`` in batches of 1,000
(timed throughout, the first and last tenth apart), a tenth more
overwriting the oldest, ``sample()`` of 128 with the ``RandomSampler``;
then a ``PrioritizedSampler(N, alpha=0.6, beta=0.4)`` over the same
storage, every item given the same spread priority as ours, and
``sample()`` + ``update_priority()`` of 128. A size TorchRL cannot hold
(an error, or a fill past ``--max-fill-seconds``) is recorded as where it
stopped, and larger sizes are not tried; one killed for memory ends the
script, the rows before it already written.

Usage (a venv with torch and torchrl 0.14.1)::

    python benches/python/torchrl_scale.py --sizes 1000000,10000000,100000000 \\
        --dir /path/on/disk --out torchrl_scale.json [--ours scale_a.json ...]

``--merge T.json ... --ours O.json ...`` measures nothing and writes the
merged file of earlier runs. With ``--ours``, the ``replay_bench --scale``
outputs are merged in: the
written file has every row (``system`` ``seed_rs`` or ``torchrl``) and,
per (items, item bytes, sampler) both ran, TorchRL's time over ours.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import pathlib
import platform
import shutil
import sys
import time
from typing import Dict, List, Optional

import numpy as np

FILL_ROWS = 1000
SPREAD_KEYS = 1 << 16


def proc_status() -> Dict[str, float]:
    out = {}
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "RssFile", "RssAnon"):
            out[name] = float(rest.split()[0]) / 1024.0
    return out


def median_us(fn, runs: int, iters: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - t) * 1e6 / iters)
    return float(np.median(times))


def one_size(n: int, item_bytes: int, scratch: pathlib.Path, runs: int, iters: int,
             prio_iters: int, max_fill_s: float, emit) -> None:
    """Measures one size, handing each row to ``emit`` as soon as it is
    known (a size whose prioritized sampler is then killed for memory
    keeps its uniform row)."""
    import torch
    from torchrl.data import LazyMemmapStorage, ReplayBuffer
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler, RandomSampler

    shutil.rmtree(scratch, ignore_errors=True)
    storage = LazyMemmapStorage(n, scratch_dir=str(scratch))
    rb = ReplayBuffer(storage=storage, sampler=RandomSampler(), batch_size=128)
    batch = torch.from_numpy(
        (np.arange(FILL_ROWS * item_bytes) % 251).astype(np.uint8).reshape(FILL_ROWS, item_bytes))
    tenth = max(n // 10, 1)
    start = time.perf_counter()
    done, first_tenth, last_from, next_report = 0, None, None, tenth
    while done < n:
        r = min(FILL_ROWS, n - done)
        rb.extend(batch[:r])
        done += r
        if done >= next_report or done == n:
            s = time.perf_counter() - start
            first_tenth = first_tenth or done / s
            print(f"torchrl: filled {done} of {n} in {s:.1f} s", file=sys.stderr, flush=True)
            next_report += tenth
            if s > max_fill_s and done < n:
                raise TimeoutError(f"the fill passed {max_fill_s:.0f} s at {done} of {n} items")
        if last_from is None and done >= n - tenth:
            last_from = (done, time.perf_counter() - start)
    total = time.perf_counter() - start
    last_n, last_t = last_from or (0, 0.0)
    more = max(n // 10, FILL_ROWS)
    t = time.perf_counter()
    for i in range(0, more, FILL_ROWS):
        rb.extend(batch[:min(FILL_ROWS, more - i)])
    overwrite = more / (time.perf_counter() - t)
    mem = proc_status()
    uniform = median_us(lambda: rb.sample(), runs, iters)
    print(f"torchrl: {n} x {item_bytes}: sample(128) {uniform:.1f} us, RSS {mem.get('VmRSS', 0):.0f} MiB",
          file=sys.stderr, flush=True)
    row = dict(system="torchrl", items=n, item_bytes=item_bytes, storage="LazyMemmapStorage",
               insert_items_per_s=n / total, insert_first_tenth_per_s=first_tenth,
               insert_last_tenth_per_s=(n - last_n) / max(total - last_t, 1e-9),
               insert_overwrite_per_s=overwrite, rss_mb=mem.get("VmRSS"),
               rss_file_mb=mem.get("RssFile"), rss_anon_mb=mem.get("RssAnon"))
    emit(dict(row, sampler="uniform", sample128_us=uniform))

    sampler = PrioritizedSampler(max_capacity=n, alpha=0.6, beta=0.4)
    prb = ReplayBuffer(storage=storage, sampler=sampler, batch_size=128)
    t = time.perf_counter()
    for lo in range(0, n, SPREAD_KEYS):
        idx = torch.arange(lo, min(lo + SPREAD_KEYS, n))
        prb.update_priority(idx, ((idx * 7919) % 1000).float() / 100.0 + 0.01)
    print(f"torchrl: priorities spread in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    new = torch.from_numpy((np.arange(128) % 97).astype(np.float32) * 0.1 + 0.01)

    def sample_update():
        _, info = prb.sample(return_info=True)
        prb.update_priority(info["index"], new)

    prio = median_us(sample_update, runs, prio_iters)
    mem = proc_status()
    print(f"torchrl: prioritized sample + update {prio:.1f} us", file=sys.stderr, flush=True)
    emit(dict(row, sampler="prioritized", sample128_us=prio, rss_mb=mem.get("VmRSS"),
              rss_file_mb=mem.get("RssFile"), rss_anon_mb=mem.get("RssAnon")))
    del prb, rb, storage
    shutil.rmtree(scratch, ignore_errors=True)


def merge(ours_files: List[str], theirs: List[dict]) -> dict:
    ours = []
    for f in ours_files:
        doc = json.loads(pathlib.Path(f).read_text())
        for r in doc["rows"]:
            ours.append(dict(r, system="seed_rs"))
    ratios = []
    for t in theirs:
        if "sample128_us" not in t:
            continue
        for o in ours:
            if (o["items"], o["item_bytes"], o["sampler"]) == (t["items"], t["item_bytes"], t["sampler"]):
                ratios.append(dict(items=t["items"], item_bytes=t["item_bytes"], sampler=t["sampler"],
                                   storage_order=o.get("storage_order"),
                                   torchrl_over_seed_rs_sample=t["sample128_us"] / o["sample128_us"],
                                   seed_rs_over_torchrl_insert=o["insert_items_per_s"] / t["insert_items_per_s"]))
    return dict(rows=ours + theirs, ratios=ratios)


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000000,10000000,100000000")
    p.add_argument("--item-bytes", default="16")
    p.add_argument("--dir", help="where LazyMemmapStorage writes (removed after each size)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--iters", type=int, default=2000, help="sample() calls per run")
    p.add_argument("--prio-iters", type=int, default=500, help="sample + update per run")
    p.add_argument("--max-fill-seconds", type=float, default=900.0)
    p.add_argument("--ours", nargs="*", default=[], help="replay_bench --scale outputs to merge in")
    p.add_argument("--merge", nargs="*", default=None,
                   help="measure nothing: merge these earlier outputs' torchrl rows with --ours")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.merge is None and a.dir is None:
        p.error("--dir is required unless --merge")
    if a.merge is not None:
        theirs = [r for f in a.merge for r in json.loads(pathlib.Path(f).read_text())["rows"]
                  if r.get("system") == "torchrl"]
        doc = merge(a.ours, theirs)
        doc["sources"] = dict(seed_rs=a.ours, torchrl=a.merge)
        pathlib.Path(a.out).write_text(json.dumps(doc, indent=1))
        print(json.dumps(doc["ratios"], indent=1))
        return
    import torch
    import torchrl

    torch.set_num_threads(1)
    rows: List[dict] = []

    def emit(row: dict) -> None:
        # Written after every row: the OOM killer ends a process without
        # an exception, and what was measured before stays on disk.
        rows.append(row)
        doc = merge(a.ours, rows)
        doc["versions"] = dict(torch=torch.__version__, torchrl=torchrl.__version__,
                               python=platform.python_version())
        doc["statistic"] = "median over runs of microseconds per call; one torch thread"
        pathlib.Path(a.out).write_text(json.dumps(doc, indent=1))

    for item_bytes in [int(x) for x in a.item_bytes.split(",")]:
        for n in sorted(int(x) for x in a.sizes.split(",")):
            try:
                one_size(n, item_bytes, pathlib.Path(a.dir) / f"torchrl_{n}x{item_bytes}",
                         a.runs, a.iters, a.prio_iters, a.max_fill_seconds, emit)
            except (MemoryError, RuntimeError, OSError, TimeoutError) as e:
                print(f"torchrl: stopped at {n} x {item_bytes}: {e}", file=sys.stderr, flush=True)
                emit(dict(system="torchrl", items=n, item_bytes=item_bytes, stopped=str(e)))
                shutil.rmtree(pathlib.Path(a.dir) / f"torchrl_{n}x{item_bytes}", ignore_errors=True)
                break
    print(json.dumps(merge(a.ours, rows)["ratios"], indent=1))


if __name__ == "__main__":
    main()
