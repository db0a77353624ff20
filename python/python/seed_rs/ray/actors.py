"""Gymnasium actors as Ray actors (:class:`ActorFleet`): each a Ray actor
running :class:`seed_rs.Actor` over ``K`` envs of one Gymnasium id, spread
over the nodes that have the actor resources, restarted by Ray when its
process or its node dies (``max_restarts``; the running task is retried on
the restarted actor, ``max_task_retries``).

An actor asks the learner's Ray actor for its address before every
connection, and gives up on an address after a few failed connects
(``max_reconnects``), so a learner that Ray restarted elsewhere, on another
port, is found. :meth:`ActorFleet.resize` changes the count while training
runs: new actors connect, removed ones are killed (their stream ends and
the learner frees their env slots).
"""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List, Optional, Sequence

from ..defaults import ENVS_PER_ACTOR, START_TIMEOUT_S

#: Failed connects to one address before asking the learner's actor again.
RECONNECTS_PER_ADDRESS = 3
#: How `seed_rs.ActorError` begins when the learner could not be reached
#: (`seed_actor::ActorError::Unreachable`); other errors are refusals.
UNREACHABLE = "learner unreachable"


class GymActorWorker:
    """A Ray actor class (see :class:`ActorFleet`)."""

    def __init__(self, index: int, env_id: str, num_envs: int, make_kwargs: Optional[dict] = None,
                 token: Optional[str] = None, seed: Optional[int] = None,
                 actor_kwargs: Optional[dict] = None):
        import ray

        self.index = index
        self.env_id = env_id
        self.num_envs = num_envs
        self.make_kwargs = dict(make_kwargs or {})
        self.token = token
        self.seed = seed
        self.actor_kwargs = dict(actor_kwargs or {})
        self.node_id = ray.get_runtime_context().get_node_id()
        self.sessions = 0
        # A cheap check that the env exists, in the actor's own process: an
        # unknown id fails the actor's creation, naming the id.
        import gymnasium as gym

        gym.spec(env_id)

    def placement(self) -> Dict[str, Any]:
        return {"index": self.index, "node_id": self.node_id, "pid": os.getpid(),
                "host": socket.gethostname()}

    def run(self, learner) -> dict:
        """Steps the envs for the learner behind ``learner`` (its Ray actor
        handle) until this actor is killed; returns only if the learner's
        actor is gone for good."""
        import ray
        import seed_rs
        from seed_rs.make import make_env

        while True:
            try:
                address = ray.get(learner.address.remote())
            except ray.exceptions.RayActorError:
                return {"sessions": self.sessions, "learner": "gone"}
            actor = seed_rs.Actor(
                lambda: make_env(self.env_id, **self.make_kwargs), num_envs=self.num_envs,
                learner=address, token=self.token, actor_id=f"ray-{self.index}",
                seed=self.seed, max_reconnects=RECONNECTS_PER_ADDRESS, **self.actor_kwargs,
            )
            try:
                report = actor.run()
                self.sessions += report.get("sessions", 0)
            except seed_rs.ActorError as e:
                if not str(e).startswith(UNREACHABLE):
                    # Refused (a wrong token, a spec the learner does not
                    # serve) or a broken protocol: asking again would not
                    # help; the run ends with the error.
                    raise
                # The address stopped answering: ask for it again.
                self.sessions += 1
            finally:
                actor.close()


class ActorFleet:
    """``n`` :class:`GymActorWorker` Ray actors feeding ``learner``.

    Args:
        learner: the learner's Ray actor handle (:class:`~seed_rs.ray.LearnerService`).
        env_id: a Gymnasium id (``seed_rs.make_env`` applies the Atari and
            MinAtar preprocessing).
        n: actors to start.
        envs_per_actor: envs per actor (``K``) [default:
            :data:`seed_rs.defaults.ENVS_PER_ACTOR`].
        resources: each actor's resources (``{"CPU": 1, "actor": 1}``).
        max_restarts: Ray's restart policy for each actor (-1: always).
        token: the learner's secret.
        actor_kwargs: more :class:`seed_rs.Actor` arguments, the same for
            every actor: TLS (``tls_ca``, ``tls_domain``, ``tls_cert``,
            ``tls_key``: paths every actor node can read), ``channels_last``...
    """

    def __init__(self, learner, env_id: str, n: int, envs_per_actor: int = ENVS_PER_ACTOR,
                 resources: Optional[Dict[str, float]] = None, max_restarts: int = -1,
                 make_kwargs: Optional[dict] = None, token: Optional[str] = None,
                 actor_kwargs: Optional[dict] = None):
        import ray

        from . import resources as res

        self.learner = learner
        self.env_id = env_id
        self.envs_per_actor = envs_per_actor
        self.resources = dict(resources or {})
        res.check_feasible(self.resources, "--actor-resources")
        # Two threads: `run` holds one for the actor's life, `placement`
        # answers on the other.
        self._options = dict(res.actor_options(self.resources), max_restarts=max_restarts,
                             max_task_retries=-1, scheduling_strategy="SPREAD",
                             max_concurrency=2)
        self._make_kwargs = make_kwargs
        self._token = token
        self._actor_kwargs = actor_kwargs
        self._cls = ray.remote(GymActorWorker)
        self._workers: List[Any] = []
        self._runs: List[Any] = []
        self._next_index = 0
        self.resize(n)

    def resize(self, n: int) -> None:
        """Starts or kills actors until there are ``n``."""
        import ray

        if n < 0:
            raise ValueError(f"actor count must be >= 0, got {n}")
        while len(self._workers) < n:
            index = self._next_index
            self._next_index += 1
            w = self._cls.options(**self._options).remote(
                index, self.env_id, self.envs_per_actor, self._make_kwargs, self._token, seed=index,
                actor_kwargs=self._actor_kwargs)
            self._workers.append(w)
            self._runs.append(w.run.remote(self.learner))
        while len(self._workers) > n:
            w = self._workers.pop()
            self._runs.pop()
            ray.kill(w, no_restart=True)

    def __len__(self) -> int:
        return len(self._workers)

    @property
    def workers(self) -> List[Any]:
        return list(self._workers)

    def placements(self, timeout: float = START_TIMEOUT_S) -> List[Dict[str, Any]]:
        """Where each actor runs (``index``, ``node_id``, ``pid``)."""
        import ray

        return ray.get([w.placement.remote() for w in self._workers], timeout=timeout)

    def check_running(self) -> None:
        """Raises the error of an actor whose `run` ended (an env that
        raised, say); Ray's restarts cover the process, not the env."""
        import ray

        done, _ = ray.wait(self._runs, num_returns=len(self._runs), timeout=0)
        for ref in done:
            ray.get(ref)

    def check_started(self, timeout: float = START_TIMEOUT_S) -> None:
        """Raises the first actor's creation error (an unknown env id, say);
        ``GetTimeoutError`` if they are not placed within ``timeout``."""
        self.placements(timeout)

    def shutdown(self) -> None:
        self.resize(0)
