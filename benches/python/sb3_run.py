#!/usr/bin/env python3
"""One Stable-Baselines3 run with rl-zoo3's tuned hyperparameters, for a
fixed wall time, logged as the learner logs its runs (so
``benches/learning_runs.py`` reads both into one table).

The hyperparameters are rl-zoo3's own file for the algorithm
(``rl_zoo3/hyperparams/ALGO.yml``, the env's entry), applied as rl-zoo3's
``train.py`` applies them: ``n_envs`` Monitor-wrapped envs in a
DummyVecEnv (rl-zoo3's default), the rest as keyword arguments of the
algorithm; ``n_timesteps`` is ignored (the budget is ``--seconds``) unless
``--zoo-timesteps`` is given: then it is the run's total as well, so
schedules over the run (DQN's ε, ``lin_`` rates) span rl-zoo3's budget,
and the run ends at whichever of it and ``--seconds`` comes first.
Linear schedules (``lin_3e-4``) and ``policy_kwargs`` strings are read as
rl-zoo3 reads them. PyTorch on the CPU with ``--threads`` threads.

Writes to ``--out``: ``metrics.jsonl`` (every ``--progress-secs``: wall
seconds, env steps, episodes, the mean return of the last 100 episodes;
the learner's key names) and ``summary.json`` (the run's totals, the
first time the 100-episode mean reached ``--target``).

Usage::

    python benches/python/sb3_run.py --algo ppo --env LunarLander-v3 --seed 1 --seconds 900 --out DIR
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import time


def zoo_hyperparams(algo: str, env_id: str) -> dict:
    import rl_zoo3
    import yaml

    path = pathlib.Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml"
    table = yaml.load(path.read_text(), Loader=yaml.UnsafeLoader)
    if env_id not in table:
        raise SystemExit(f"--env {env_id}: rl-zoo3 has no {algo} entry for it ({path})")
    return dict(table[env_id])


def schedule(value):
    """rl-zoo3's `lin_X` strings: a rate falling linearly from X to 0."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress: progress * start
    return value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", default="ppo")
    p.add_argument("--env", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--target", type=float, default=200.0)
    p.add_argument("--progress-secs", type=float, default=2.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--zoo-timesteps", action="store_true",
                   help="train for rl-zoo3's n_timesteps (its schedules span them), within --seconds")
    p.add_argument("--out", type=pathlib.Path, required=True)
    args = p.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    import stable_baselines3 as sb3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    hp = zoo_hyperparams(args.algo, args.env)
    n_envs = hp.pop("n_envs", 1)
    zoo_timesteps = int(float(hp.pop("n_timesteps", 0)))
    if args.zoo_timesteps and zoo_timesteps <= 0:
        raise SystemExit(f"--zoo-timesteps: rl-zoo3's {args.algo} entry for {args.env} has no n_timesteps")
    policy = hp.pop("policy")
    for key in ("normalize", "frame_stack", "env_wrapper", "callback"):
        if key in hp:
            raise SystemExit(f"rl-zoo3's {args.env} entry uses {key}, which this script does not apply")
    if isinstance(hp.get("policy_kwargs"), str):
        hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"nn": torch.nn, "dict": dict})  # rl-zoo3 does the same
    for key in ("learning_rate", "clip_range"):
        if key in hp:
            hp[key] = schedule(hp[key])

    args.out.mkdir(parents=True, exist_ok=True)
    metrics = open(args.out / "metrics.jsonl", "w")
    returns: collections.deque = collections.deque(maxlen=100)
    state = {"episodes": 0, "solved": None, "t0": 0.0, "next": 0.0}

    class Clock(BaseCallback):
        def _on_training_start(self) -> None:
            state["t0"] = time.perf_counter()
            state["next"] = state["t0"] + args.progress_secs

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                ep = info.get("episode")
                if ep is not None:
                    returns.append(float(ep["r"]))
                    state["episodes"] += 1
            now = time.perf_counter()
            mean = sum(returns) / len(returns) if returns else 0.0
            if state["solved"] is None and len(returns) == 100 and mean >= args.target:
                state["solved"] = (now - state["t0"], self.num_timesteps)
            if now >= state["next"]:
                state["next"] += args.progress_secs
                metrics.write(json.dumps({
                    "time/seconds": now - state["t0"], "env/steps": self.num_timesteps,
                    "env/episodes": state["episodes"], "env/mean_return_last_100": mean}) + "\n")
                metrics.flush()
            return now - state["t0"] < args.seconds

    env = make_vec_env(args.env, n_envs=n_envs, seed=args.seed)
    model = getattr(sb3, args.algo.upper())(policy, env, seed=args.seed, device="cpu", verbose=0, **hp)
    clock = Clock()
    total = zoo_timesteps if args.zoo_timesteps else None
    model.learn(total_timesteps=total or 10**12, callback=clock)
    wall = time.perf_counter() - state["t0"]
    mean = sum(returns) / len(returns) if returns else 0.0
    metrics.write(json.dumps({"time/seconds": wall, "env/steps": model.num_timesteps,
                              "env/episodes": state["episodes"], "env/mean_return_last_100": mean}) + "\n")
    metrics.close()
    solved = state["solved"]
    summary = {
        "algo": args.algo, "env": args.env, "seed": args.seed, "hyperparams": {k: str(v) for k, v in hp.items()},
        "n_envs": n_envs, "policy": policy, "total_timesteps": total, "torch_threads": args.threads, "torch": torch.__version__,
        "stable_baselines3": sb3.__version__,
        "wall_seconds": wall, "env_steps": model.num_timesteps, "env_steps_per_second": model.num_timesteps / wall,
        "episodes": state["episodes"], "final_mean_return": mean, "target_return": args.target,
        "seconds_to_solve": solved[0] if solved else None, "env_steps_to_solve": solved[1] if solved else None,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    main()
