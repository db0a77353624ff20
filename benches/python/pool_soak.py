#!/usr/bin/env python3
"""A token pool with a slow trainer, for as long as you like: does the server's memory stay flat?

A ``replay-server`` holds one grouped table of LLM-shaped steps (string
ids, ``prompt_ids`` and ``response_ids`` of any length, a reward; groups
of 8; ``max_queue_size`` ready groups at most). ``--gateways`` processes
submit trajectories (1-8 turns of prompts of 100-2,000 tokens and
responses of 50-1,000) as fast as the server takes them, each with fresh
ids; a trainer fetches one ready group every ``--fetch-ms`` milliseconds,
slower than they arrive, so the queue sits at its bound and the oldest
ready groups are dropped (counted). Every ``--sample-secs`` the server's
RSS, the table's counters and the rates so far are recorded.

The question (issue: "a 30-minute run with a slow trainer holds a flat
RSS"): is the memory of consumed and dropped steps given back? The slope
of the server's RSS after the first ``--warmup-secs`` is reported in MB
per 10 minutes.

    python benches/python/pool_soak.py --seconds 1800 --out benches/results/pool/soak.json \\
        [--plot benches/results/pool/soak_rss.png]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
TABLE = "pool"


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def gateway(addr: str, index: int, group_size: int, stop_at: float, counts) -> None:
    """Submits groups of fresh trajectories until ``stop_at``."""
    import seed_rs

    table = seed_rs.ReplayClient(addr).table(TABLE)
    rng = np.random.default_rng(index)
    # Token arrays built once per shape and reused: the pool is measured, not the generator.
    tokens = np.arange(2000, dtype=np.int32)
    g = 0
    while time.time() < stop_at:
        prompt = f"gw{index}-prompt{g}"
        for r in range(group_size):
            turns = [(int(rng.integers(100, 2001)), int(rng.integers(50, 1001)))
                     for _ in range(int(rng.integers(1, 9)))]
            n = len(turns)
            po = np.concatenate([[0], np.cumsum([p for p, _ in turns])])
            ro = np.concatenate([[0], np.cumsum([x for _, x in turns])])
            table.submit_steps(
                trajectory_ids=[f"{prompt}-traj{r}"] * n, group_ids=[prompt] * n,
                fields={"prompt_ids": (np.concatenate([tokens[:p] for p, _ in turns]), po),
                        "response_ids": (np.concatenate([tokens[:x] for _, x in turns]), ro),
                        "reward": rng.random(n, dtype=np.float32)},
                is_last=[0] * (n - 1) + [1])
            with counts.get_lock():
                counts[0] += n
                counts[1] += int(po[-1] + ro[-1])
        g += 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=os.environ.get("SEED_REPLAY_SERVER_BIN",
                                                      str(REPO / "target/release/replay-server")))
    p.add_argument("--seconds", type=float, default=1800)
    p.add_argument("--gateways", type=int, default=2)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-queue-size", type=int, default=64)
    p.add_argument("--fetch-ms", type=float, default=20.0, help="the trainer's pause between fetches")
    p.add_argument("--sample-secs", type=float, default=30.0)
    p.add_argument("--warmup-secs", type=float, default=300.0)
    p.add_argument("--out")
    p.add_argument("--plot")
    args = p.parse_args()

    import seed_rs

    config = {"tables": [{
        "name": TABLE, "capacity": 2_000_000,
        "fields": [{"name": "prompt_ids", "dtype": "i32", "shape": [-1], "max_len": 2000},
                   {"name": "response_ids", "dtype": "i32", "shape": [-1], "max_len": 1000},
                   {"name": "reward", "dtype": "f32", "shape": []}],
        "sampler": {"kind": "grouped", "group_size": args.group_size, "ids": "str",
                    "max_queue_size": args.max_queue_size}}]}
    tmp = tempfile.mkdtemp()
    cfg = pathlib.Path(tmp) / "pool.json"
    cfg.write_text(json.dumps(config))
    server = subprocess.Popen([args.server, "--config", str(cfg), "--listen", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, NO_COLOR="1", RUST_LOG="info"))
    addr = None
    for line in server.stdout:
        m = re.search(r"replay server listening addr=(\S+)", line)
        if m:
            addr = m.group(1)
            break
    assert addr, "the replay server did not start"
    threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()

    t0 = time.time()
    stop_at = t0 + args.seconds
    counts = mp.Array("q", 2)  # steps, tokens submitted
    procs = [mp.Process(target=gateway, args=(addr, i, args.group_size, stop_at, counts), daemon=True)
             for i in range(args.gateways)]
    for proc in procs:
        proc.start()
    table = seed_rs.ReplayClient(addr).table(TABLE)
    fetched_steps = fetched_groups = 0
    samples = []
    next_sample = t0
    while time.time() < stop_at:
        g = table.fetch_group(timeout=0)
        if g is not None:
            fetched_groups += 1
            fetched_steps += int(np.asarray(g["lengths"]).sum())
        now = time.time()
        if now >= next_sample:
            next_sample += args.sample_secs
            grouped = table.info().get("grouped", {})
            with counts.get_lock():
                submitted, tokens = counts[0], counts[1]
            samples.append({
                "seconds": round(now - t0, 1), "rss_mb": rss_bytes(server.pid) / 2**20,
                "submitted_steps": submitted, "submitted_tokens": tokens,
                "fetched_groups": fetched_groups, "fetched_steps": fetched_steps,
                "table": {k: v for k, v in grouped.items() if isinstance(v, (int, float))},
            })
            s = samples[-1]
            print(f"{s['seconds']:7.0f} s  rss {s['rss_mb']:7.1f} MB  submitted {submitted:>10,d} steps "
                  f"({tokens / 1e6:8.1f}M tokens)  fetched {fetched_groups:>7,d} groups  table {s['table']}",
                  flush=True)
        time.sleep(args.fetch_ms / 1000)
    for proc in procs:
        proc.join(timeout=30)
    server.terminate()
    server.wait(timeout=30)

    after = [s for s in samples if s["seconds"] >= args.warmup_secs]
    slope = None
    if len(after) >= 2:
        x = np.array([s["seconds"] for s in after])
        y = np.array([s["rss_mb"] for s in after])
        slope = float(np.polyfit(x, y, 1)[0] * 600)  # MB per 10 minutes
    elapsed = samples[-1]["seconds"] if samples else 0
    result = {
        "seconds": args.seconds, "gateways": args.gateways, "group_size": args.group_size,
        "max_queue_size": args.max_queue_size, "fetch_ms": args.fetch_ms,
        "rss_slope_mb_per_10_min_after_warmup": slope, "warmup_secs": args.warmup_secs,
        "rss_mb_first": samples[0]["rss_mb"] if samples else None,
        "rss_mb_max": max(s["rss_mb"] for s in samples) if samples else None,
        "rss_mb_last": samples[-1]["rss_mb"] if samples else None,
        "submitted_steps_per_s": samples[-1]["submitted_steps"] / max(elapsed, 1) if samples else None,
        "fetched_steps_per_s": samples[-1]["fetched_steps"] / max(elapsed, 1) if samples else None,
        "samples": samples,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot([s["seconds"] / 60 for s in samples], [s["rss_mb"] for s in samples], marker=".")
        ax.set_xlabel("minutes")
        ax.set_ylabel("replay-server RSS (MB)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"token pool, {args.gateways} gateways, a trainer fetching every {args.fetch_ms:g} ms")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
