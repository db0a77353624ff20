"""The defaults the Python side shares, each written once.

Where a value already has a home in Rust, it is read from there through
the compiled module: :data:`LEARNER_ADDR` is the learner's own default
listen address (``seed_shared::DEFAULT_LEARNER_ADDR``) and
:data:`NUM_ENVS` the default of the Rust actor's ``--envs``
(``seed_actor::DEFAULT_NUM_ENVS``). The others
are Python's own. ``seed_rs.actor`` (``python -m seed_rs.actor``),
:class:`seed_rs.Actor` and ``seed_rs.ray`` read their defaults here, and
their help texts print these values.
"""

from __future__ import annotations

from . import _native

__all__ = ["BEST_DIR", "ENVS_PER_ACTOR", "EVAL_EPISODES", "EVAL_SEED", "LEARNER_ADDR", "NUM_ENVS",
           "START_TIMEOUT_S"]

#: The learner's default address (``HOST:PORT``), where an actor connects
#: when none is given.
LEARNER_ADDR: str = _native.DEFAULT_LEARNER_ADDR
#: Envs an actor steps when no count is given (the Rust actor's ``--envs``).
NUM_ENVS: int = _native.DEFAULT_NUM_ENVS
#: Envs per Gymnasium actor of a ``seed_rs.ray`` fleet.
ENVS_PER_ACTOR: int = 8
#: Seconds a ``seed_rs.ray`` part may take to start: a program to log its
#: listening address, the fleet's actors to be placed.
START_TIMEOUT_S: float = 120.0
#: Episode ``i`` of every evaluation is reset with ``EVAL_SEED + i``: the
#: learner's ``--eval-every`` and ``python -m seed_rs.actor --eval`` alike.
EVAL_SEED: int = _native.EVAL_SEED
#: Where both keep the best policy in a run directory.
BEST_DIR: str = _native.BEST_DIR
#: Episodes per evaluation (the learner's ``--eval-episodes`` default too).
EVAL_EPISODES: int = _native.DEFAULT_EVAL_EPISODES
