"""Agentic / LLM RL's trajectory pool on Ray: gateway tasks submit
LLM-shaped rollouts (multi-turn, token ids of any length, string ids) to a
grouped table on a replay server that Ray places, while a trainer task
fetches whole groups (one prompt's rollouts) and computes GRPO-style
group-normalised advantages.

    python examples/agentic_pool.py                  # 16 gateways, 64 prompts x 8 rollouts
    python examples/agentic_pool.py --gateways 2 --prompts 4 --group-size 2   # small

Each rollout has 1-8 turns; a turn is a prompt of 100-2,000 tokens and a
response of 50-1,000, stored without padding (`shape: [-1]`). The trainer
pads a group's responses with `seed_rs.pad` as a model would take them,
and weighs each step by its lag behind the table's policy version (the
table keeps stale groups: `policy_lag` action `keep`). On a cluster, run
it where `ray.init()` finds the head; here it starts a local Ray.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import ray

import seed_rs
import seed_rs.ray as sr

TABLE = {
    "name": "rollouts",
    "capacity": 4_000_000,
    "fields": [
        {"name": "prompt_ids", "dtype": "i32", "shape": [-1], "max_len": 4096},
        {"name": "response_ids", "dtype": "i32", "shape": [-1], "max_len": 2048},
        {"name": "reward", "dtype": "f32", "shape": []},
    ],
    "sampler": {"kind": "grouped", "group_size": 8, "ids": "str", "max_queue_size": 1024},
    "policy_lag": {"max_lag": 2, "action": "keep"},
}


@ray.remote(num_cpus=0)
def gateway(pool: sr.ReplayHandle, rollouts, seed: int, policy_version: int) -> int:
    """Submits `rollouts` (`(prompt, rollout)` pairs), a trajectory at a time."""
    rng = np.random.default_rng(seed)
    steps = 0
    for prompt, rollout in rollouts:
        turns = int(rng.integers(1, 9))
        prompts = [rng.integers(0, 50_000, int(rng.integers(100, 2001)), dtype=np.int32) for _ in range(turns)]
        responses = [rng.integers(0, 50_000, int(rng.integers(50, 1001)), dtype=np.int32) for _ in range(turns)]
        rewards = rng.normal(size=turns).astype(np.float32)
        pool.submit_steps(
            [f"{prompt}/{rollout}"] * turns, [prompt] * turns,
            {"prompt_ids": prompts, "response_ids": responses, "reward": rewards},
            policy_versions=[policy_version] * turns,
            is_last=[0] * (turns - 1) + [1],
            metadata=[{"turn": t, "tool": "search" if t % 2 else None} for t in range(turns)],
        )
        steps += turns
    return steps


@ray.remote(num_cpus=0)
def trainer(pool: sr.ReplayHandle, groups: int, group_size: int) -> dict:
    """Fetches `groups` whole groups; per group, each rollout's advantage."""
    seen, steps, tokens, stale = 0, 0, 0, 0
    for _ in range(groups):
        g = pool.fetch_batch(timeout=120)
        if g is None:
            break
        assert len(g["trajectory_ids"]) == group_size
        lengths = g["lengths"].astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        returns = np.add.reduceat(g["fields"]["reward"], starts)
        advantages = (returns - returns.mean()) / (returns.std() + 1e-6)
        step_advantage = np.repeat(advantages, lengths)
        weights = np.where(g["lags"] > 2, 0.5, 1.0)  # down-weight off-policy steps
        responses, mask = seed_rs.pad(*g["fields"]["response_ids"])
        _loss_weights = (step_advantage * weights)[:, None] * mask  # what a policy-gradient loss uses
        seen += 1
        steps += int(lengths.sum())
        tokens += int(mask.sum() + g["fields"]["prompt_ids"][0].size)
        stale += int((g["lags"] > 2).sum())
    return {"groups": seen, "steps": steps, "tokens": tokens, "stale_steps": stale}


def run(gateways: int, prompts: int, group_size: int, resources=None) -> dict:
    """The example on the Ray that `ray.init()` connected to: the server
    placed (on a node with `resources`), the gateways and the trainer run,
    the server stopped. Returns the trainer's figures, `submitted` steps,
    `seconds` and the table's grouped `info`."""
    config = {"tables": [dict(TABLE, sampler=dict(TABLE["sampler"], group_size=group_size))]}
    server = sr.start_replay_server(config, resources=resources)
    pool = sr.ReplayHandle(server, "rollouts")
    try:
        work = [(f"prompt-{g}", r) for g in range(prompts) for r in range(group_size)]
        start = time.monotonic()
        fetched = trainer.remote(pool, prompts, group_size)
        submitted = ray.get([gateway.remote(pool, work[k::gateways], k, 0) for k in range(gateways)])
        result = ray.get(fetched)
        result.update(submitted=sum(submitted), seconds=time.monotonic() - start,
                      info=pool.info()["grouped"])
        return result
    finally:
        pool.close()
        ray.get(server.stop.remote())
        ray.kill(server, no_restart=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gateways", type=int, default=16)
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--group-size", type=int, default=8)
    args = p.parse_args()
    ray.init(ignore_reinit_error=True, include_dashboard=False)
    r = run(args.gateways, args.prompts, args.group_size)
    print(f"{r['submitted']} steps from {args.gateways} gateways; the trainer took "
          f"{r['groups']} groups ({r['steps']} steps, {r['tokens'] / 1e6:.1f}M tokens) "
          f"in {r['seconds']:.1f} s; stale steps {r['stale_steps']}; "
          f"queued now {r['info']['groups_ready']}, dropped {r['info']['groups_dropped_queue_full']}")
    ray.shutdown()


if __name__ == "__main__":
    main()
