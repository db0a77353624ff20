"""``python -m seed_rs.ray train``: a learner and Gymnasium actors on a Ray cluster.

::

    python -m seed_rs.ray train --address auto --env CartPole-v1 --actors 8 \\
        --envs-per-actor 16 --learner-resources '{"learner": 1}' \\
        --actor-resources '{"actor": 1}' -- --preset cartpole --stop-when-solved

Everything after ``--`` goes to the learner unchanged. Prints where each
part was placed, the learner's progress every ``--progress-secs`` (env
steps/s, episodes, mean return, live env slots, policy version), and ends
with the learner's summary (JSON). Ctrl-C stops every part. Exit code: 0
when the learner finished cleanly, 1 on an error, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import List, Optional

from ..defaults import ENVS_PER_ACTOR


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m seed_rs.ray", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="run a learner and Gymnasium actors on a Ray cluster")
    t.add_argument("--address", default=None,
                   help="Ray cluster address (`auto`, `ray://host:10001`) [default: a local Ray]")
    t.add_argument("--env", required=True, help="Gymnasium env id the actors run")
    t.add_argument("--actors", type=int, default=2, help="Gymnasium actors [default: %(default)s]")
    t.add_argument("--envs-per-actor", type=int, default=ENVS_PER_ACTOR,
                   help=f"envs per actor [default: {ENVS_PER_ACTOR}]")
    t.add_argument("--learner-resources", default=None,
                   help='JSON resources of the learner, e.g. \'{"GPU": 1}\' [default: 1 CPU]')
    t.add_argument("--actor-resources", default=None,
                   help='JSON resources of each actor, e.g. \'{"actor": 1}\' [default: 1 CPU]')
    t.add_argument("--learner-bin", default=None,
                   help="learner binary by path (a cuda build) [default: this wheel's learner]")
    t.add_argument("--run-dir", default=None,
                   help="learner run directory on storage every node sees; a restarted learner "
                        "resumes from it [default: none]")
    t.add_argument("--token", default=os.environ.get("SEED_TOKEN"),
                   help="the secret the learner checks; given to the learner and every actor "
                        "[default: $SEED_TOKEN, else none]")
    t.add_argument("--tls-ca", default=None,
                   help="actors connect with TLS trusting this CA (a path on every actor node); "
                        "give the learner --tls-cert/--tls-key after `--` [default: plaintext]")
    t.add_argument("--progress-secs", type=float, default=5.0,
                   help="seconds between progress lines; 0: none [default: %(default)s]")
    t.add_argument("learner_flags", nargs=argparse.REMAINDER,
                   help="after `--`: flags for the learner, unchanged")
    return p


def _progress(m: dict, started: float) -> str:
    return (f"{time.monotonic() - started:6.0f} s | {m.get('seed_env_steps_total', 0):.0f} env steps | "
            f"{m.get('seed_episodes_total', 0):.0f} episodes | mean return "
            f"{m.get('seed_mean_return_last_100', 0):.1f} | slots {m.get('seed_live_env_slots', 0):.0f} | "
            f"policy v{m.get('seed_policy_version', 0):.0f}")


def train(args: argparse.Namespace) -> int:
    import ray

    from . import ActorFleet, start_learner
    from . import resources as res

    learner_flags = list(args.learner_flags)
    if learner_flags[:1] == ["--"]:
        learner_flags = learner_flags[1:]
    # The actors are Ray's: none started by the learner unless asked for.
    if not any(f.startswith("--local-actors") for f in learner_flags):
        learner_flags = ["--local-actors", "0", *learner_flags]
    ray.init(address=args.address, log_to_driver=False)
    learner = fleet = None
    interrupted = False

    def stop(*_):
        nonlocal interrupted
        interrupted = True

    previous = signal.signal(signal.SIGINT, stop)
    summary = None
    code = 1
    try:
        learner = start_learner(learner_flags, resources=res.parse(args.learner_resources, "--learner-resources"),
                                run_dir=args.run_dir, binary=args.learner_bin, token=args.token)
        placement = ray.get(learner.placement.remote())
        print(f"learner on node {placement['node_ip']} ({placement['node_id'][:12]}, pid "
              f"{placement['pid']}), serving {ray.get(learner.address.remote())}"
              + (" (resumed from its checkpoint)" if placement["resumed"] else ""), file=sys.stderr)
        fleet = ActorFleet(learner, args.env, args.actors, args.envs_per_actor,
                           resources=res.parse(args.actor_resources, "--actor-resources"),
                           token=args.token,
                           actor_kwargs={"tls_ca": args.tls_ca} if args.tls_ca else None)
        for p in fleet.placements():
            print(f"actor {p['index']} on node {p['node_id'][:12]} (pid {p['pid']})", file=sys.stderr)
        started = time.monotonic()
        next_progress = started + args.progress_secs
        while not interrupted:
            summary = ray.get(learner.wait.remote(timeout=0.5))
            if summary is not None:
                code = 0
                break
            fleet.check_running()
            if args.progress_secs > 0 and time.monotonic() >= next_progress:
                next_progress += args.progress_secs
                print(_progress(ray.get(learner.metrics.remote()), started), file=sys.stderr)
        if interrupted:
            print("stopping (Ctrl-C): actors, then the learner", file=sys.stderr)
            fleet.shutdown()
            summary = ray.get(learner.stop.remote())
            code = 130
    except (ValueError, ray.exceptions.RayError, RuntimeError) as e:
        print(f"seed_rs.ray train: {e}", file=sys.stderr)
        code = 1
    finally:
        signal.signal(signal.SIGINT, previous)
        if fleet is not None:
            fleet.shutdown()
        if learner is not None:
            ray.kill(learner, no_restart=True)
    # Last, after every part stopped: the learner's summary on stdout.
    if summary is not None:
        print(json.dumps(summary, indent=2), flush=True)
    return code


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "train":
            return train(args)
    except ValueError as e:
        print(f"seed_rs.ray: {e}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
