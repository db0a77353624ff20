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
import sys
from typing import List, Optional

import numpy as np

__all__ = ["evaluate", "main", "parser", "summarize"]

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


def _make_env(env_id: str, video: Optional[str], channels_last):
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
        env = _make_env(env_id, args.video, args.channels_last)
    except ModuleNotFoundError as e:
        print(f"seed_rs.eval: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # gymnasium's errors for an unknown id
        hint = "" if args.env else " (pass --env ID)"
        print(f"seed_rs.eval: cannot make env {env_id!r}{hint}: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from .make import channels_last_for

        channels_last = args.channels_last if args.channels_last is not None else channels_last_for(env_id)
        policy = Policy.load(args.run_dir, env=env, channels_last=channels_last)
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
