"""``python -m seed_rs.actor``: run Gymnasium envs as an actor of a seed-rs learner.

Example::

    learner --local-actors 0 --env cartpole &
    python -m seed_rs.actor --env CartPole-v1 --envs 32     # the learner's default address

Exit status: 0 after a clean stop (limit reached), 1 when the actor
failed (the learner refused it or stayed unreachable, or an env raised),
2 for a usage error or an env the learner cannot serve (the message says
why), 130 after Ctrl-C. Prints a one-line summary on stdout at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from . import defaults
from .make import channels_last_for, env_factory

__all__ = ["main", "parser", "summary_line"]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def parser() -> argparse.ArgumentParser:
    """The command line's flags (each documents its default)."""
    p = argparse.ArgumentParser(
        prog="python -m seed_rs.actor",
        description=(
            "Steps Gymnasium envs for a seed-rs learner: streams their observations "
            "and applies the actions the learner infers. ALE/* ids get the standard "
            "Atari preprocessing (frame skip 4, 84x84 grayscale, 4 stacked frames: "
            "u8 [4, 84, 84]); MinAtar/* ids are transposed to u8 [C, 10, 10]."
        ),
    )
    p.add_argument(
        "--env",
        required=True,
        metavar="ID",
        help="Gymnasium env id, e.g. CartPole-v1, ALE/Pong-v5 (needs ale-py), "
        "MinAtar/Breakout-v1 (needs minatar) [required]",
    )
    p.add_argument(
        "--envs",
        type=int,
        default=defaults.NUM_ENVS,
        metavar="N",
        help="number of envs K this actor steps [default: %(default)s]",
    )
    p.add_argument(
        "--learner",
        default=os.environ.get("SEED_LEARNER", defaults.LEARNER_ADDR),
        metavar="HOST:PORT",
        help="learner address: host:port, http://host:port, https://host:port "
        f"(needs --tls-ca) or unix:/path [default: $SEED_LEARNER, else {defaults.LEARNER_ADDR}]",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("SEED_TOKEN"),
        help="shared secret the learner checks at hello [default: $SEED_TOKEN, else none]",
    )
    p.add_argument(
        "--env-kwargs",
        type=_json_object,
        default={},
        metavar="JSON",
        help='keyword arguments of gymnasium.make, as a JSON object, e.g. \'{"max_episode_steps": 200}\' '
        "[default: {}]",
    )
    p.add_argument(
        "--max-steps", type=int, metavar="N", help="stop cleanly after this many env steps [default: unlimited]"
    )
    p.add_argument(
        "--max-seconds", type=float, metavar="S", help="stop cleanly after this many seconds [default: unlimited]"
    )
    p.add_argument("--seed", type=int, metavar="S", help="seed of the envs' first resets [default: random]")
    p.add_argument(
        "--channels-last",
        action="store_true",
        help="observations are [H, W, C] images: transpose them to [C, H, W] "
        "[default: off; on for MinAtar/*]",
    )
    p.add_argument(
        "--actor-id", metavar="ID", help="actor id sent in the hello [default: hostname-pid]"
    )
    p.add_argument(
        "--env-name",
        metavar="NAME",
        help="env name announced to the learner [default: the env's Gymnasium id]",
    )
    p.add_argument(
        "--max-reconnects",
        type=int,
        metavar="N",
        help="consecutive failed connects before giving up [default: retry forever]",
    )
    p.add_argument(
        "--tls-ca",
        metavar="PATH",
        help="connect with TLS, trusting the CA certificates in this PEM file [default: plaintext]",
    )
    p.add_argument(
        "--tls-domain",
        metavar="NAME",
        help="name the learner's certificate must carry; needs --tls-ca [default: the host of --learner]",
    )
    p.add_argument(
        "--summary-json",
        metavar="PATH",
        help="write the actor's report as JSON to this file at the end [default: none]",
    )
    p.add_argument(
        "--eval",
        metavar="RUN_DIR",
        help="be the evaluation actor of the learner's run in RUN_DIR instead of streaming: "
        "play each new checkpoint greedily on --env (never trained on), keep the best in "
        "RUN_DIR/best/, log eval/return to RUN_DIR/tensorboard/eval/ and RUN_DIR/eval.jsonl "
        "[default: off]",
    )
    p.add_argument(
        "--eval-episodes",
        type=int,
        default=defaults.EVAL_EPISODES,
        metavar="N",
        help="episodes per evaluation with --eval [default: %(default)s]",
    )
    p.add_argument(
        "--eval-poll-secs",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between looks for a new checkpoint with --eval [default: %(default)s]",
    )
    p.add_argument(
        "--eval-max",
        type=int,
        metavar="N",
        help="stop after N evaluations with --eval [default: until Ctrl-C]",
    )
    p.add_argument(
        "--log",
        default=None,
        metavar="FILTER",
        help="the Rust actor's log filter (RUST_LOG syntax, e.g. warn, info, debug) "
        "[default: $RUST_LOG, else info]",
    )
    return p


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def summary_line(report: dict) -> str:
    """One line: steps, episodes, connections, rate, round trip."""
    rt = report.get("round_trip", {})
    return (
        f"seed_rs actor: {report['env_steps']} env steps, {report['episodes']} episodes, "
        f"{report['sessions']} connections, {report['active_seconds']:.1f} s "
        f"({report.get('env_steps_per_second', 0.0):.0f} steps/s), "
        f"round trip p50 {rt.get('p50_us', 0.0):.0f} us, p99 {rt.get('p99_us', 0.0):.0f} us"
    )


def _evaluation_actor(args, channels_last) -> int:
    """``--eval RUN_DIR``: :func:`seed_rs.eval.watch` until --eval-max or Ctrl-C."""
    import gymnasium as gym

    from .eval import watch

    if args.eval_episodes < 1:
        return _fail(f"--eval-episodes must be at least 1, got {args.eval_episodes}", EXIT_USAGE)
    print(f"seed_rs actor: evaluating the checkpoints of {args.eval} on {args.env} "
          f"({args.eval_episodes} greedy episodes each)", file=sys.stderr)
    try:
        watch(args.eval, args.env, episodes=args.eval_episodes, poll_secs=args.eval_poll_secs,
              max_evaluations=args.eval_max, channels_last=channels_last,
              log=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (ValueError, ModuleNotFoundError, gym.error.Error) as e:
        return _fail(str(e), EXIT_USAGE)
    return 0


def _fail(message: str, status: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return status


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the command line; returns the exit status."""
    args = parser().parse_args(argv)
    if args.envs < 1:
        return _fail(f"--envs must be at least 1, got {args.envs}", EXIT_USAGE)

    import gymnasium as gym

    import seed_rs

    seed_rs.enable_logging(args.log)
    channels_last = True if args.channels_last else channels_last_for(args.env)
    if args.eval is not None:
        return _evaluation_actor(args, channels_last)
    try:
        actor = seed_rs.Actor(
            env_factory(args.env, **args.env_kwargs),
            num_envs=args.envs,
            learner=args.learner,
            token=args.token,
            actor_id=args.actor_id,
            seed=args.seed,
            env_name=args.env_name,
            channels_last=channels_last,
            tls_ca=args.tls_ca,
            tls_domain=args.tls_domain,
            max_reconnects=args.max_reconnects,
        )
    except (ValueError, TypeError, ModuleNotFoundError, gym.error.Error) as e:
        return _fail(str(e), EXIT_USAGE)

    with actor:
        print(f"seed_rs actor: {actor.spec.describe()}, {actor.num_envs} envs -> {args.learner}", file=sys.stderr)
        try:
            report = actor.run(max_steps=args.max_steps, max_seconds=args.max_seconds)
            status = 0
        except KeyboardInterrupt as e:
            report = getattr(e, "report", None)
            status = EXIT_INTERRUPTED
        except seed_rs.ActorError as e:
            return _fail(str(e), EXIT_FAILED)
    if report is not None:
        print(summary_line(report))
        if args.summary_json:
            with open(args.summary_json, "w") as f:
                json.dump(report, f, indent=2)
                f.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
