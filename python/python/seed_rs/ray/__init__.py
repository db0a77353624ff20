"""seed_rs.ray: the learner, Gymnasium actors and a replay server on a Ray
cluster, placed by resources and restarted by Ray (``pip install
"seed-rs[ray]"``; Ray pinned there).

::

    import ray, seed_rs.ray as sr

    ray.init(address="auto")
    learner = sr.start_learner(["--preset", "cartpole", "--local-actors", "0"],
                               resources={"learner": 1}, run_dir="/shared/runs/a")
    fleet = sr.ActorFleet(learner, "CartPole-v1", n=8, envs_per_actor=16,
                          resources={"actor": 1})
    fleet.resize(16)                      # while training
    summary = ray.get(learner.wait.remote())

    replay = sr.start_replay_server({"tables": [...]}, resources={"replay": 1})
    table = sr.ReplayHandle(replay, "experience")   # usable in any Ray task

From a shell: ``python -m seed_rs.ray train --env CartPole-v1 --actors 8 -- --preset cartpole``.
What of Ray this relies on: actor placement by custom resources and
``SPREAD``, ``max_restarts`` / ``max_task_retries`` (restarts, retried
calls), ``ray.kill``, ``ray.nodes()`` for the feasibility check and
``ray.util.get_node_ip_address()``; nothing else (no scheduler of ours).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

try:
    import ray as _ray  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised by users without the extra
    raise ImportError('seed_rs.ray needs Ray: pip install "seed-rs[ray]"') from e

from .actors import ActorFleet, GymActorWorker
from .learner import LearnerService, has_checkpoint
from .process import ProgramError, wait_for
from .replay import ReplayHandle, ReplayService
from . import resources as _res

__all__ = [
    "ActorFleet", "GymActorWorker", "LearnerService", "ProgramError", "ReplayHandle",
    "ReplayService", "has_checkpoint", "start_learner", "start_replay_server", "wait_for",
]


def _place(cls, resources, what: str, max_restarts: int, max_concurrency: int,
           name: Optional[str]):
    """``cls`` as a Ray actor class placed on a node with ``resources``
    (checked first: ``ValueError`` naming a resource no node has), restarted
    by Ray, its calls retried on the restarted actor, with threads enough
    for a blocking call beside the others."""
    import ray

    res = _res.parse(resources, what)
    _res.check_feasible(res, what)
    opts = dict(_res.actor_options(res), max_restarts=max_restarts, max_task_retries=-1,
                max_concurrency=max_concurrency)
    if name:
        opts["name"] = name
    return ray.remote(cls).options(**opts)


def start_learner(flags: Sequence[str] = (), resources: Optional[Dict[str, float]] = None,
                  run_dir: Optional[str] = None, binary: Optional[str] = None,
                  max_restarts: int = -1, name: Optional[str] = None,
                  token: Optional[str] = None):
    """The learner as a Ray actor placed on a node with ``resources``;
    returns its handle. ``flags`` go to the learner as they are
    (``--preset``, ``--config``...); ``binary``: a learner binary by path
    (a ``cuda`` build) instead of this wheel's CPU learner; ``run_dir``:
    checkpoints on storage every node sees, resumed from after a restart;
    ``token``: the secret actors must present (given to the learner through
    its environment). Raises ``ValueError`` when no node has ``resources``."""
    # `wait` may block while `address`, `metrics` and `placement` answer.
    cls = _place(LearnerService, resources, "--learner-resources", max_restarts, 8, name)
    return cls.remote(list(flags), binary=binary, run_dir=run_dir, token=token)


def start_replay_server(config: dict, resources: Optional[Dict[str, float]] = None,
                        restore: bool = False, binary: Optional[str] = None,
                        max_restarts: int = -1, name: Optional[str] = None,
                        token: Optional[str] = None, flags: Sequence[str] = ()):
    """A replay server (its ``--config`` as a dict) as a Ray actor placed on
    a node with ``resources``, restarted by Ray; returns its handle (make
    table handles with :class:`ReplayHandle`, passing the same ``token``).
    ``flags``: more ``replay-server`` flags (TLS)."""
    cls = _place(ReplayService, resources, "--replay-resources", max_restarts, 4, name)
    return cls.remote(config, restore=restore, binary=binary, extra_flags=list(flags), token=token)
