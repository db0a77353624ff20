"""What one call of a token pool costs: CPU of the client and of the
``replay-server`` per submit (one LLM-shaped trajectory, waited for or
with ``wait=False``) and per fetched group, on one loopback connection
without Ray, the table in memory or on disk (``storage_dir``, the
journal). Where ``pool_bench.py`` says how fast gateways and a trainer go
on Ray, this says where each call's time goes.

    python benches/python/pool_calls.py --trajectories 4000 --rounds 3 \\
        --out benches/results/pool/pool_calls.json

Per round and mode (memory/disk x wait/no-wait, alternating): a fresh
server and table, ``--trajectories`` trajectories of 1-8 turns (prompt
100-2,000 int32 tokens, response 50-1,000; groups of 8) built before the
clock starts, submitted one per call; then every group fetched. Reported:
steps and calls per second, client and server CPU (user + system, from
``/proc``) per call and per fetched group, the journal's size.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np

import seed_rs

REPO = pathlib.Path(__file__).resolve().parents[2]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def trajectories(n: int, seed: int):
    rng = np.random.default_rng(seed)
    calls = []
    for t in range(n):
        turns = [(int(rng.integers(100, 2001)), int(rng.integers(50, 1001)))
                 for _ in range(int(rng.integers(1, 9)))]
        k = len(turns)
        po = np.concatenate([[0], np.cumsum([p for p, _ in turns])])
        ro = np.concatenate([[0], np.cumsum([r for _, r in turns])])
        calls.append(dict(trajectory_ids=[f"traj-{t}"] * k, group_ids=[f"prompt-{t // 8}"] * k,
                          fields={"prompt_ids": (np.full(po[-1], t, np.int32), po),
                                  "response_ids": (np.full(ro[-1], t, np.int32), ro),
                                  "reward": np.arange(k, dtype=np.float32)},
                          is_last=[0] * (k - 1) + [1]))
    return calls


def one_run(server_bin: str, calls, storage_dir, wait: bool, work: pathlib.Path) -> dict:
    table = {"name": "pool", "capacity": 100_000_000,
             "fields": [{"name": "prompt_ids", "dtype": "i32", "shape": [-1]},
                        {"name": "response_ids", "dtype": "i32", "shape": [-1]},
                        {"name": "reward", "dtype": "f32", "shape": []}],
             "sampler": {"kind": "grouped", "group_size": 8, "ids": "str"}}
    if storage_dir:
        shutil.rmtree(storage_dir, ignore_errors=True)
        table["storage_dir"] = str(storage_dir)
    config = work / "tables.json"
    config.write_text(json.dumps({"tables": [table]}))
    server = subprocess.Popen([server_bin, "--config", str(config), "--listen", "127.0.0.1:0"],
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "RUST_LOG": "info", "NO_COLOR": "1"})
    try:
        addr = None
        for line in server.stderr:
            if "replay server listening" in line:
                addr = next(w[5:] for w in line.split() if w.startswith("addr="))
                break
        if addr is None:
            raise RuntimeError("the replay server did not start")
        t = seed_rs.ReplayClient(addr).table("pool")
        t.info()
        steps = sum(len(c["is_last"]) for c in calls)
        c0, s0, w0 = time.process_time(), cpu_seconds(server.pid), time.perf_counter()
        for c in calls:
            t.submit_steps(**c, wait=wait)
        t.flush_submits()
        w1, c1, s1 = time.perf_counter(), time.process_time(), cpu_seconds(server.pid)
        groups = 0
        while t.fetch_group(timeout=0) is not None:
            groups += 1
        w2, c2, s2 = time.perf_counter(), time.process_time(), cpu_seconds(server.pid)
        n = len(calls)
        row = dict(storage="disk" if storage_dir else "memory", wait=wait, calls=n, steps=steps,
                   submit_steps_per_s=steps / (w1 - w0), submit_calls_per_s=n / (w1 - w0),
                   submit_client_cpu_us=1e6 * (c1 - c0) / n, submit_server_cpu_us=1e6 * (s1 - s0) / n,
                   groups=groups, fetch_groups_per_s=groups / (w2 - w1),
                   fetch_client_cpu_us=1e6 * (c2 - c1) / max(groups, 1),
                   fetch_server_cpu_us=1e6 * (s2 - s1) / max(groups, 1))
        if storage_dir:
            row["journal_mb"] = (storage_dir / "journal").stat().st_size / 1e6
        t.close()
        return row
    finally:
        server.kill()
        server.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trajectories", type=int, default=4000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--server", default=os.environ.get("SEED_REPLAY_SERVER_BIN",
                                                      str(REPO / "target/release/replay-server")))
    p.add_argument("--out")
    args = p.parse_args()
    calls = trajectories(args.trajectories, args.seed)
    modes = [(disk, wait) for disk in (False, True) for wait in (True, False)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for r in range(args.rounds):
            for disk, wait in (modes if r % 2 == 0 else modes[::-1]):
                row = one_run(args.server, calls, work / "pool" if disk else None, wait, work)
                print(json.dumps(row), flush=True)
                rows.append(row)
    keys = [k for k in rows[0] if k.endswith(("_per_s", "_us", "_mb"))]
    summary = {}
    for disk, wait in modes:
        mine = [r for r in rows if (r["storage"] == "disk") == disk and r["wait"] == wait]
        summary[f"{'disk' if disk else 'memory'}_{'wait' if wait else 'nowait'}"] = {
            k: statistics.median(r[k] for r in mine if k in r) for k in keys if k in mine[0]}
    result = dict(machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                  trajectories=args.trajectories, statistic="median over rounds",
                  summary=summary, rows=rows)
    print(json.dumps(summary, indent=1))
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
