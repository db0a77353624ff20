"""``python -m seed_rs.eval RUN_DIR``: episodes of a trained policy on a Gymnasium env, and videos.

Example::

    python -m seed_rs.eval runs/breakout --env MinAtar/Breakout-v1 --episodes 20 --greedy
    python -m seed_rs.eval runs/cartpole --episodes 3 --greedy --video videos/

The env is made as the actor made it (:func:`seed_rs.make_env`: Atari's
preprocessing for ``ALE/*``, MinAtar's frames transposed), so the policy
sees what it was trained on; ``--env`` defaults to the env the run's actors
announced. Episode ``i`` is reset with seed ``S + i``. Prints one line per
episode and a summary: the mean return with its 95% confidence interval
(Student's t over the episodes), the standard deviation, min and max.
``--json`` prints the summary as one JSON object instead.

``--video DIR`` records every episode as an MP4 through Gymnasium's
``RecordVideo`` (the env is made with ``render_mode="rgb_array"``; needs
``moviepy``: ``pip install seed-rs[video]``; classic-control envs render
with ``pygame``), one file per episode, ``DIR/<env id>-episode-<i>.mp4``
(``/`` in the id becomes ``-``). Each file holds the episode's reset frame
and one frame per step.

Exit status: 0 after the episodes, 2 for a usage error, a missing or
unreadable checkpoint, or an env whose spaces differ from the policy's (the
message says which), 1 when the env raised, 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import shutil
import sys
from typing import List, Optional

import numpy as np

__all__ = ["evaluate", "main", "parser", "summarize", "watch"]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: Steps after which an episode is cut, for envs without a time limit.
DEFAULT_MAX_STEPS = 100_000

# Student's t, two-sided 95%, by degrees of freedom (1-30); 1.96 beyond.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def parser() -> argparse.ArgumentParser:
    """The command line's flags (each documents its default)."""
    p = argparse.ArgumentParser(
        prog="python -m seed_rs.eval",
        description="Plays a trained policy (a learner's --run-dir, or one checkpoint directory) "
        "on a Gymnasium env and prints its returns; optionally records videos.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the learner's --run-dir, or a checkpoint directory")
    p.add_argument(
        "--env",
        metavar="ID",
        help="Gymnasium env id [default: the env the run's actors announced]",
    )
    p.add_argument("--episodes", type=int, default=10, metavar="N", help="episodes to play [default: %(default)s]")
    p.add_argument(
        "--greedy",
        action="store_true",
        help="take the most likely action (argmax, a Gaussian's mean) instead of sampling "
        "as the actors do [default: sample]",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="episode i is reset with seed S + i; the sampler is seeded with S [default: %(default)s]")
    p.add_argument("--video", metavar="DIR", help="record every episode as an MP4 in DIR (needs moviepy)")
    p.add_argument(
        "--max-steps",
        type=int,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help="cut an episode after N steps (envs without a time limit) [default: %(default)s]",
    )
    p.add_argument(
        "--channels-last",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whether the env's frames are [H, W, C] (transposed to [C, H, W]) [default: yes for MinAtar/*]",
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    return p


def summarize(returns: List[float]) -> dict:
    """Mean, its 95% interval (Student's t), std (n-1), min and max of ``returns``."""
    n = len(returns)
    a = np.asarray(returns, dtype=np.float64)
    mean = float(a.mean()) if n else math.nan
    std = float(a.std(ddof=1)) if n > 1 else 0.0
    t = _T95[n - 2] if 2 <= n <= 31 else 1.96
    half = t * std / math.sqrt(n) if n > 1 else None
    return {
        "episodes": n,
        "mean": mean,
        # No interval from one episode.
        "ci95": [mean - half, mean + half] if half is not None else None,
        "std": std,
        "min": float(a.min()) if n else math.nan,
        "max": float(a.max()) if n else math.nan,
    }


def evaluate(policy, env, episodes: int, *, greedy: bool, seed: int, max_steps: int = DEFAULT_MAX_STEPS,
             on_episode=None) -> dict:
    """Plays ``episodes`` episodes of ``policy`` (a :class:`seed_rs.Policy`) on ``env``.

    Returns :func:`summarize`'s dict plus ``returns`` and ``lengths`` (per
    episode). ``on_episode(i, ret, length)`` is called after each.
    """
    policy.seed(seed)
    returns, lengths = [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        state = policy.initial_state()
        total, steps = 0.0, 0
        while steps < max_steps:
            if state is None:
                action = policy.act(obs, greedy=greedy)
            else:
                action, state = policy.act(obs, greedy=greedy, state=state)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            steps += 1
            if terminated or truncated:
                break
        returns.append(total)
        lengths.append(steps)
        if on_episode is not None:
            on_episode(i, total, steps)
    out = summarize(returns)
    out["returns"] = returns
    out["lengths"] = lengths
    return out


def _save_best(run_dir: pathlib.Path, checkpoint: pathlib.Path, record: dict) -> None:
    """Copies ``checkpoint`` with ``record`` as ``eval.json`` into ``RUN_DIR/best``, replacing it."""
    from .defaults import BEST_DIR

    best = run_dir / BEST_DIR
    tmp = run_dir / f".tmp-{BEST_DIR}-{os.getpid()}"
    old = run_dir / f".old-{BEST_DIR}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(checkpoint, tmp)
    (tmp / "eval.json").write_text(json.dumps(record, indent=2) + "\n")
    if best.exists():
        best.rename(old)
    tmp.rename(best)
    shutil.rmtree(old, ignore_errors=True)


def watch(run_dir, env_id: str, *, episodes: Optional[int] = None, poll_secs: float = 5.0,
          max_evaluations: Optional[int] = None, channels_last: Optional[bool] = None,
          tensorboard: bool = True, log=print) -> List[dict]:
    """Evaluates each new checkpoint of a training run, keeping the best in ``RUN_DIR/best/``.

    What ``python -m seed_rs.actor --eval RUN_DIR`` runs, the evaluation
    actor of a run whose env only actors have (the learner's own
    ``--eval-every`` plays its built-in envs): it polls ``RUN_DIR/LATEST``
    every ``poll_secs``, plays each new checkpoint for ``episodes`` greedy
    episodes on ``env_id`` (episode ``i`` reset with
    ``seed_rs.defaults.EVAL_SEED + i``, as ``--eval-every`` does), appends a
    record per evaluation to ``RUN_DIR/eval.jsonl``, writes TensorBoard's
    ``eval/return`` (with ``eval/return_min``, ``eval/return_max``, at the
    checkpoint's env steps) into ``RUN_DIR/tensorboard/eval/``, and copies
    a checkpoint whose mean beats the best so far (``best/eval.json``'s, if
    any) into ``RUN_DIR/best/`` whole, so it can be resumed from. It never
    connects to the learner: nothing it plays is trained on.

    Stops after ``max_evaluations`` (default: never; Ctrl-C). Returns the records.
    """
    import time

    from . import defaults
    from ._native import TensorBoardWriter
    from .policy import Policy

    run_dir = pathlib.Path(run_dir)
    episodes = defaults.EVAL_EPISODES if episodes is None else int(episodes)
    env = _make_env(env_id, None)
    best_file = run_dir / defaults.BEST_DIR / "eval.json"
    best = json.loads(best_file.read_text())["mean_return"] if best_file.exists() else -math.inf
    writer = TensorBoardWriter(str(run_dir / "tensorboard" / "eval")) if tensorboard else None
    records, seen = [], None
    try:
        while max_evaluations is None or len(records) < max_evaluations:
            latest = run_dir / "LATEST"
            name = latest.read_text().strip() if latest.exists() else None
            if name is None or name == seen:
                time.sleep(poll_secs)
                continue
            checkpoint = run_dir / "checkpoints" / name
            try:
                policy = Policy.load(checkpoint, env=env, channels_last=channels_last)
            except FileNotFoundError:
                # Pruned between LATEST and here: the next one is newer.
                time.sleep(poll_secs)
                continue
            seen = name
            result = evaluate(policy, env, episodes, greedy=True, seed=defaults.EVAL_SEED)
            spec = policy.spec
            record = {
                "mean_return": result["mean"], "returns": result["returns"], "episodes": episodes,
                "learner_steps": spec.learner_steps, "policy_version": spec.policy_version,
                "env_steps": spec.env_steps, "checkpoint": name, "best": result["mean"] > best,
            }
            if record["best"]:
                best = result["mean"]
                _save_best(run_dir, checkpoint, {k: v for k, v in record.items() if k != "best"})
            with open(run_dir / "eval.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")
            if writer is not None:
                for tag, value in (("eval/return", result["mean"]), ("eval/return_min", result["min"]),
                                   ("eval/return_max", result["max"])):
                    writer.scalar(tag, spec.env_steps, value)
                writer.flush()
            log(f"{name}: mean return {result['mean']:.2f} over {episodes} greedy episodes"
                f" (min {result['min']:.2f}, max {result['max']:.2f}){', best so far' if record['best'] else ''}")
            records.append(record)
    finally:
        env.close()
    return records


def _make_env(env_id: str, video: Optional[str]):
    from .make import make_env

    if video is None:
        return make_env(env_id)
    try:
        import moviepy  # noqa: F401  (RecordVideo needs it)
    except ImportError:
        raise ModuleNotFoundError(
            "--video needs moviepy (Gymnasium's RecordVideo writes MP4s with it): "
            "pip install moviepy (or seed-rs[video])"
        ) from None
    import gymnasium as gym

    env = make_env(env_id, render_mode="rgb_array")
    # Files are DIR/<env id>-episode-<i>.mp4 ("ALE/Pong-v5" -> "ALE-Pong-v5").
    return gym.wrappers.RecordVideo(
        env, video_folder=video, episode_trigger=lambda _: True, name_prefix=env_id.replace("/", "-"),
        disable_logger=True,
    )


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    if args.episodes < 1:
        print("seed_rs.eval: --episodes must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    from .policy import Policy

    try:
        policy = Policy.load(args.run_dir, channels_last=args.channels_last)
    except (FileNotFoundError, ValueError) as e:
        print(f"seed_rs.eval: {e}", file=sys.stderr)
        return EXIT_USAGE
    env_id = args.env or policy.spec.env_name
    try:
        env = _make_env(env_id, args.video)
    except ModuleNotFoundError as e:
        print(f"seed_rs.eval: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # gymnasium's errors for an unknown id
        hint = "" if args.env else " (pass --env ID)"
        print(f"seed_rs.eval: cannot make env {env_id!r}{hint}: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        policy.bind_env(env, channels_last=args.channels_last)
    except ValueError as e:
        print(f"seed_rs.eval: {env_id}: {e}", file=sys.stderr)
        return EXIT_USAGE
    mode = "greedy" if args.greedy else "sampled"
    if not args.json:
        print(f"{env_id}: {args.episodes} episodes, {mode} actions, policy version "
              f"{policy.spec.policy_version} ({policy.spec.checkpoint})", flush=True)

    def line(i, ret, length):
        if not args.json:
            print(f"  episode {i}: return {ret:.2f} in {length} steps", flush=True)

    try:
        result = evaluate(policy, env, args.episodes, greedy=args.greedy, seed=args.seed,
                          max_steps=args.max_steps, on_episode=line)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as e:
        print(f"seed_rs.eval: the env failed: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        env.close()
    result.update(env=env_id, greedy=args.greedy, seed=args.seed,
                  policy_version=policy.spec.policy_version, checkpoint=policy.spec.checkpoint,
                  video=os.path.abspath(args.video) if args.video else None)
    if args.json:
        print(json.dumps(result))
    else:
        ci = result["ci95"]
        ci = f"95% CI {ci[0]:.2f} to {ci[1]:.2f}" if ci else "one episode: no interval"
        print(f"return: mean {result['mean']:.2f} ({ci}), std {result['std']:.2f}, "
              f"min {result['min']:.2f}, max {result['max']:.2f}; mean length "
              f"{np.mean(result['lengths']):.1f} steps")
        if args.video:
            print(f"videos: {os.path.abspath(args.video)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
