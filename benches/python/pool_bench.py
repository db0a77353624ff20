"""A token trajectory pool on Ray: ours (a grouped table on a replay server
placed by ``seed_rs.ray``) against the trajectory-pool seed's DataPool (a
Python Ray actor, ``benches/python/datapool.py``) and a no-op pool (the
gateways' own ceiling), driven by the same gateways and trainer on the
same Ray cluster, alternating.

Run inside a loopback-only network namespace, as the Ray tests are::

    unshare --net sh -c 'ip link set lo up && RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \\
        python benches/python/pool_bench.py --gateways 1,4,16 \\
        --out benches/results/pool/pool_bench.json'

The work: ``--groups`` prompts, each a group of ``--group-size``
rollouts, each rollout 1-8 turns of a prompt of 100-2,000 tokens and a
response of 50-1,000 (int32), a reward per turn. Rollout ``r`` of group
``g`` belongs to gateway ``(g * group_size + r) % gateways``. Each gateway
builds its steps before the clock starts (so the pool is measured, not
the generator), then submits them a trajectory per call, up to 8 calls in
flight (the DataPool: fire-and-forget Ray calls, as the seed has it;
ours: ``submit_steps(..., wait=False)`` on the handle's stream, then
``flush_submits()``); the trainer
polls for ready groups (``fetch_batch`` / ``fetch_group(timeout=0)``)
and computes group-normalised advantages.

Per (pool, gateways), three phases. Held: every step submitted into a
fresh pool with no trainer (steps/s in; the pool process's RSS growth per
million tokens held, against the raw 4 MB of int32 tokens). Drain: the
trainer alone takes every (ready) group (steps/s, and the latency of a
fetch of a ready group, p50/p99). Concurrent: the gateways submit again
while the trainer fetches (steps/s in, steps/s fetched over the same
clock until the last group, how long the trainer finished after the
gateways, fetch p50/p99).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np
import ray

import seed_rs.ray as sr

from datapool import DataPool, NoopPool  # noqa: E402  (benches/python on sys.path)

TABLE = "pool"


def pool_config(capacity_steps: int) -> dict:
    return {"tables": [{
        "name": TABLE, "capacity": capacity_steps,
        "fields": [{"name": "prompt_ids", "dtype": "i32", "shape": [-1]},
                   {"name": "response_ids", "dtype": "i32", "shape": [-1]},
                   {"name": "reward", "dtype": "f32", "shape": []}],
        "sampler": {"kind": "grouped", "group_size": 0, "ids": "str"}}]}


def trajectories(groups: int, group_size: int, seed: int):
    """``(group, rollout, turns)`` with turns ``[(prompt_len, response_len)]``."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(groups):
        for r in range(group_size):
            turns = [(int(rng.integers(100, 2001)), int(rng.integers(50, 1001)))
                     for _ in range(int(rng.integers(1, 9)))]
            out.append((g, r, turns))
    return out


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@ray.remote(num_cpus=0)
class Gateway:
    def build(self, mine, mode: str):
        """Every step of this gateway's trajectories, in the pool's form."""
        self.mode, self.calls, self.steps, self.tokens = mode, [], 0, 0
        for g, r, turns in mine:
            uid, prompt = f"traj-{g}-{r}", f"prompt-{g}"
            prompts = [np.full(p, g, np.int32) for p, _ in turns]
            responses = [np.full(n, r, np.int32) for _, n in turns]
            self.steps += len(turns)
            self.tokens += sum(p + n for p, n in turns)
            n = len(turns)
            if mode == "seed_rs":
                po = np.concatenate([[0], np.cumsum([p for p, _ in turns])])
                ro = np.concatenate([[0], np.cumsum([x for _, x in turns])])
                self.calls.append(dict(
                    trajectory_ids=[uid] * n, group_ids=[prompt] * n,
                    fields={"prompt_ids": (np.concatenate(prompts), po),
                            "response_ids": (np.concatenate(responses), ro),
                            "reward": np.arange(n, dtype=np.float32)},
                    is_last=[0] * (n - 1) + [1]))
            else:  # the seed's Step: token lists as Python lists
                self.calls.append([dict(prompt_ids=prompts[i].tolist(), response_ids=responses[i].tolist(),
                                        reward=float(i), trajectory_uid=uid, prompt_uid=prompt,
                                        step_index=i, policy_version=0, is_last=i == n - 1,
                                        metadata={}) for i in range(n)])
        return self.steps, self.tokens

    def run(self, pool):
        start = time.time()
        if self.mode == "seed_rs":
            # Up to 8 submits in flight on the handle's stream, as the
            # DataPool's gateways keep 8 calls in flight.
            for call in self.calls:
                pool.submit_steps(**call, wait=False)
            pool.flush_submits()
        else:
            in_flight = []
            for call in self.calls:
                in_flight.append(pool.submit_steps.remote(call))
                if len(in_flight) >= 8:
                    _, in_flight = ray.wait(in_flight, num_returns=1)
            ray.get(in_flight)
        return start, time.time()


@ray.remote(num_cpus=0)
class Trainer:
    def ready(self, pool, mode: str) -> None:
        """Connects before any clock starts (a handle connects on first use)."""
        if mode == "seed_rs":
            pool.info()
        else:
            ray.get(pool.pid.remote())

    def run(self, pool, mode: str, groups: int, deadline_s: float):
        latencies, steps, tokens, got = [], 0, 0, 0
        first = time.time()
        end = first + deadline_s
        last = first
        while got < groups and time.time() < end:
            t0 = time.perf_counter()
            if mode == "seed_rs":
                g = pool.fetch_group(timeout=0)
            else:
                g = ray.get(pool.fetch_batch.remote())
            dt = time.perf_counter() - t0
            if g is None:
                time.sleep(0.0005)
                continue
            latencies.append(dt)
            last = time.time()
            got += 1
            if mode == "seed_rs":
                lengths = g["lengths"].astype(np.int64)
                rewards = np.add.reduceat(g["fields"]["reward"], np.concatenate([[0], np.cumsum(lengths)[:-1]]))
                steps += int(lengths.sum())
                tokens += int(g["fields"]["prompt_ids"][0].size + g["fields"]["response_ids"][0].size)
            else:
                by = {}
                for s in g:
                    by[s["trajectory_uid"]] = by.get(s["trajectory_uid"], 0.0) + s["reward"]
                    tokens += len(s["prompt_ids"]) + len(s["response_ids"])
                steps += len(g)
                rewards = np.array(list(by.values()))
            _advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
        return dict(groups=got, steps=steps, tokens=tokens, first=first, last=last,
                    latencies_ms=[x * 1000 for x in latencies])


def pct(xs, q):
    return float(np.percentile(xs, q)) if xs else None


def one_run(mode: str, gateways: int, args, work) -> dict:
    if mode == "seed_rs":
        total_steps = sum(len(t) for _, _, t in work)
        config = pool_config(2 * total_steps)
        config["tables"][0]["sampler"]["group_size"] = args.group_size
        server = sr.start_replay_server(config)
        pool = sr.ReplayHandle(server, TABLE)
        pid = ray.get(server.placement.remote())["pid"]
    elif mode == "datapool":
        server = ray.remote(DataPool).options(num_cpus=0).remote(args.group_size)
        pool, pid = server, ray.get(server.pid.remote())
    else:
        server = ray.remote(NoopPool).options(num_cpus=0).remote()
        pool, pid = server, ray.get(server.pid.remote())
    gws = [Gateway.remote() for _ in range(gateways)]
    shares = [[t for i, t in enumerate(work) if i % gateways == k] for k in range(gateways)]
    built = ray.get([gw.build.remote(share, "seed_rs" if mode == "seed_rs" else "py")
                     for gw, share in zip(gws, shares)])
    steps = sum(b[0] for b in built)
    tokens = sum(b[1] for b in built)
    row = dict(pool=mode, gateways=gateways, steps=steps, tokens=tokens)
    if mode != "noop":
        trainer = Trainer.remote()
        ray.get(trainer.ready.remote(pool, mode))
        # Held: everything submitted into a fresh pool, nothing fetched;
        # then drained by the trainer alone (every group ready).
        rss0 = rss_bytes(pid)
        spans = ray.get([gw.run.remote(pool) for gw in gws])
        grown = rss_bytes(pid) - rss0
        span = max(e for _, e in spans) - min(s for s, _ in spans)
        drained = ray.get(trainer.run.remote(pool, mode, args.groups, args.deadline))
        dspan = max(drained["last"] - drained["first"], 1e-9)
        row.update(held_submitted_steps_per_s=steps / span,
                   rss_held_mb_per_m_tokens=grown / 1e6 / (tokens / 1e6),
                   raw_mb_per_m_tokens=4.0,
                   drain_steps_per_s=drained["steps"] / dspan,
                   drain_tokens_per_s=drained["tokens"] / dspan,
                   drain_fetch_p50_ms=pct(drained["latencies_ms"], 50),
                   drain_fetch_p99_ms=pct(drained["latencies_ms"], 99))
    # Concurrent: the gateways submit while the trainer fetches.
    t0 = time.time()
    fetched = None if mode == "noop" else trainer.run.remote(pool, mode, args.groups, args.deadline)
    spans = ray.get([gw.run.remote(pool) for gw in gws])
    start = min(min(s for s, _ in spans), t0)
    end = max(e for _, e in spans)
    row.update(submitted_steps_per_s=steps / (end - start), submitted_tokens_per_s=tokens / (end - start))
    if fetched is not None:
        f = ray.get(fetched)
        lat = f["latencies_ms"]
        fspan = max(f["last"] - start, 1e-9)
        row.update(groups_fetched=f["groups"], groups_left=args.groups - f["groups"],
                   fetched_steps_per_s=f["steps"] / fspan, fetched_tokens_per_s=f["tokens"] / fspan,
                   trainer_behind_s=max(f["last"] - end, 0.0),
                   fetch_p50_ms=pct(lat, 50), fetch_p99_ms=pct(lat, 99))
    for gw in gws:
        ray.kill(gw)
    if mode != "noop":
        ray.kill(trainer)
    if mode == "seed_rs":
        pool.close()
        ray.get(server.stop.remote())
    ray.kill(server)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gateways", default="1,4,16")
    p.add_argument("--groups", type=int, default=64)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--rounds", type=int, default=1, help="alternations per gateway count")
    p.add_argument("--deadline", type=float, default=120.0, help="the trainer's limit, seconds")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--pools", default="noop,datapool,seed_rs",
                   help="which pools to run, in this order (every other round reversed)")
    p.add_argument("--out")
    args = p.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    # The workers import `datapool` from here, as the driver does.
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False,
             runtime_env={"env_vars": {"PYTHONPATH": here}})
    work = trajectories(args.groups, args.group_size, args.seed)
    rows = []
    modes = args.pools.split(",")
    for gateways in [int(x) for x in args.gateways.split(",")]:
        for r in range(args.rounds):
            for mode in (modes if r % 2 == 0 else modes[::-1]):
                row = one_run(mode, gateways, args, work)
                print(json.dumps(row), flush=True)
                rows.append(row)
    result = dict(machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                  groups=args.groups, group_size=args.group_size, rows=rows)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    ray.shutdown()


if __name__ == "__main__":
    main()
