"""``seed-rs``: the whole seed-rs system from one wheel, no Rust toolchain needed.

Subcommands (each takes exactly the flags of the program it names)::

    seed-rs learner [FLAGS]        # the learner (same flags as the `learner` binary;
                                   # --local-actors runs built-in envs as this program again)
    seed-rs replay-server [FLAGS]  # the replay server (the `replay-server` binary)
    seed-rs rust-actor [FLAGS]     # the Rust actor: built-in envs only (the `actor` binary)
    seed-rs gym-actor [FLAGS]      # the Gymnasium actor: any Gymnasium env
                                   # (the same as `seed-rs-actor` and `python -m seed_rs.actor`)

``seed-rs learner --help`` prints the learner's own help. The programs run
inside this process (the compiled module carries them), with the exit code
of the program: 0 for a clean stop, 1 for an error, 2 for a usage error.
"""

from __future__ import annotations

import sys
from typing import List, Optional

#: Subcommand -> the compiled program it runs.
RUST_PROGRAMS = {"learner": "learner", "replay-server": "replay-server", "rust-actor": "actor"}
USAGE = __doc__.split("\n\n")[1]


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: seed-rs {learner,replay-server,rust-actor,gym-actor} [FLAGS]\n\n" + USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "gym-actor":
        from .actor import main as gym_actor_main

        return gym_actor_main(rest)
    program = RUST_PROGRAMS.get(command)
    if program is None:
        print(f"seed-rs: no subcommand `{command}` (learner, replay-server, rust-actor, gym-actor)",
              file=sys.stderr)
        return 2
    from ._native import run_program

    # The learner's local actors run this same command: the interpreter
    # with this module, then `learner actor ...` (its hidden subcommand).
    self_command = (sys.executable, ["-m", "seed_rs.cli", "learner"])
    try:
        return run_program(program, rest, self_command if program == "learner" else None)
    except KeyboardInterrupt:
        # The program saw the same Ctrl-C and stopped cleanly.
        return 130


if __name__ == "__main__":
    sys.exit(main())
