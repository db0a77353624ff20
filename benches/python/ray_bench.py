"""seed_rs.ray's overhead and recovery, measured on a local Ray (one node).

Run inside a loopback-only network namespace, as the Ray tests are::

    unshare --net sh -c 'ip link set lo up && RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \\
        python benches/python/ray_bench.py --out benches/results/cluster/ray_bench.json'

- ``overhead``: env steps/s of N Gymnasium actors (CartPole-v1, K envs
  each) placed by Ray (:class:`seed_rs.ray.ActorFleet`) against the same
  actors started by hand (``python -m seed_rs.actor`` processes), feeding
  the same serving-only learner, alternating, ``--rounds`` times each;
  the rate is the learner's own env step counter over ``--seconds``
  after a warm-up.
- ``recovery``: seconds from an actor process's SIGKILL until the
  learner has all env slots live again; from the learner process's
  SIGKILL (training, checkpoints every second) until it has resumed, every
  slot is live again and its learner steps move.

Figures, not tests: ``tests/ray`` asserts that recovery happens at all.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import ray

import seed_rs.ray as sr


def metric(learner, name: str) -> float:
    return ray.get(learner.metrics.remote()).get(name, 0.0)


def rate(learner, seconds: float) -> float:
    a, t0 = metric(learner, "seed_env_steps_total"), time.monotonic()
    time.sleep(seconds)
    return (metric(learner, "seed_env_steps_total") - a) / (time.monotonic() - t0)


def overhead(args) -> dict:
    learner = sr.start_learner(["--no-train", "--local-actors", "0", "--env", "cartpole",
                                "--progress-secs", "0"], resources={"learner": 1})
    address = ray.get(learner.address.remote())
    slots = args.actors * args.envs
    by_ray, by_hand = [], []
    for r in range(args.rounds):
        for mode in ("ray", "hand") if r % 2 == 0 else ("hand", "ray"):
            if mode == "ray":
                fleet = sr.ActorFleet(learner, "CartPole-v1", args.actors, args.envs,
                                      resources={"actor": 1})
                stop = fleet.shutdown
            else:
                procs = [subprocess.Popen([sys.executable, "-m", "seed_rs.actor", "--env", "CartPole-v1",
                                           "--envs", str(args.envs), "--learner", address],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                         for _ in range(args.actors)]

                def stop(procs=procs):
                    for p in procs:
                        p.terminate()
                    for p in procs:
                        try:
                            p.wait(10)
                        except subprocess.TimeoutExpired:
                            p.kill()
                            p.wait()
            sr.wait_for(lambda: metric(learner, "seed_live_env_slots") == slots, 120, "slots live")
            time.sleep(args.warmup)
            (by_ray if mode == "ray" else by_hand).append(rate(learner, args.seconds))
            stop()
            sr.wait_for(lambda: metric(learner, "seed_live_env_slots") == 0, 120, "slots freed")
            print(f"round {r + 1} {mode}: {(by_ray if mode == 'ray' else by_hand)[-1]:.0f} env steps/s",
                  file=sys.stderr)
    ray.kill(learner, no_restart=True)
    return {"actors": args.actors, "envs_per_actor": args.envs, "seconds": args.seconds,
            "ray_env_steps_per_second": by_ray, "hand_env_steps_per_second": by_hand,
            "ratio_of_medians": statistics.median(by_ray) / statistics.median(by_hand)}


def recovery(args) -> dict:
    run = tempfile.mkdtemp(prefix="seed-rs-ray-bench-")
    learner = sr.start_learner(["--local-actors", "0", "--env", "cartpole", "--progress-secs", "0",
                                "--checkpoint-secs", "1"], resources={"learner": 1}, run_dir=run)
    fleet = sr.ActorFleet(learner, "CartPole-v1", args.actors, args.envs, resources={"actor": 1})
    slots = args.actors * args.envs
    sr.wait_for(lambda: metric(learner, "seed_live_env_slots") == slots, 120, "slots live")
    actor_s, learner_s = [], []
    for _ in range(args.rounds):
        victim = fleet.placements()[0]
        t0 = time.monotonic()
        os.kill(victim["pid"], signal.SIGKILL)
        sr.wait_for(lambda: metric(learner, "seed_live_env_slots") < slots, 30, "slots dropped", every=0.02)
        sr.wait_for(lambda: metric(learner, "seed_live_env_slots") == slots, 120, "slots back", every=0.05)
        actor_s.append(time.monotonic() - t0)
    for _ in range(args.rounds):
        sr.wait_for(lambda: sr.has_checkpoint(run), 60, "a checkpoint")
        before = ray.get(learner.placement.remote())
        t0 = time.monotonic()
        os.kill(before["pid"], signal.SIGKILL)

        def training_again():
            p = ray.get(learner.placement.remote())
            if p["pid"] == before["pid"]:
                return False
            m = ray.get(learner.metrics.remote())
            return m.get("seed_live_env_slots") == slots and m.get("seed_learner_steps_total", 0) > 0

        sr.wait_for(training_again, 180, "training again", every=0.05)
        steps = metric(learner, "seed_learner_steps_total")
        sr.wait_for(lambda: metric(learner, "seed_learner_steps_total") > steps, 60, "steps moving", every=0.05)
        learner_s.append(time.monotonic() - t0)
    fleet.shutdown()
    ray.kill(learner, no_restart=True)
    return {"actor_sigkill_to_slots_live_s": actor_s, "learner_sigkill_to_training_s": learner_s}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--envs", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    ray.init(num_cpus=8, resources={"learner": 1, "actor": 8}, include_dashboard=False,
             log_to_driver=False)
    result = {"overhead": overhead(args), "recovery": recovery(args)}
    ray.shutdown()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
