"""seed_rs: Gymnasium envs as actors of a seed-rs learner, and the replay service's client.

The learner (the ``learner`` binary of seed-rs) holds the policy and infers
actions centrally; an actor steps envs and streams their observations to
it. :class:`Actor` runs the Rust actor client over Python envs::

    import gymnasium as gym
    import seed_rs

    actor = seed_rs.Actor(lambda: gym.make("CartPole-v1"), num_envs=32,
                          learner="127.0.0.1:50051")
    report = actor.run(max_steps=100_000)
    print(report["env_steps"], report["episodes"], report["round_trip"]["p50_us"])

From a shell: ``python -m seed_rs.actor --env CartPole-v1 --envs 32``.

:class:`ReplayClient` is the client of a seed-rs replay server
(``replay-server``), numpy arrays in and out::

    import numpy as np
    import seed_rs

    replay = seed_rs.ReplayClient("127.0.0.1:50061")
    keys = replay.insert("experience", {"obs": np.zeros((32, 3, 4), np.float32)})
    fields, keys, weights = replay.sample("experience", 128)

Contents: :class:`Actor`; :mod:`seed_rs.spaces` (which spaces map to what,
:class:`UnsupportedSpaceError`); :func:`make_env` (Gymnasium ids with the
Atari and MinAtar preprocessing); :class:`ActorError`;
:func:`enable_logging` (the Rust actor's log lines on stderr);
:class:`ReplayClient` and :class:`ReplayError` (the replay service's client
and the gRPC status of a refused call).
"""

from typing import TYPE_CHECKING

from .make import env_factory, make_env
from .spaces import EnvSpec, UnsupportedSpaceError, env_spec

if TYPE_CHECKING:  # for type checkers; at run time they load on first use
    from ._native import ActorError, ReplayClient, ReplayError, SampleStream, enable_logging
    from .gym_actor import DEFAULT_LEARNER, Actor

# The compiled extension loads on first use, so the pure-Python modules
# (seed_rs.spaces, seed_rs.make) import without it.
_NATIVE = {
    "Actor": "gym_actor",
    "DEFAULT_LEARNER": "gym_actor",
    "ActorError": "_native",
    "enable_logging": "_native",
    "ReplayClient": "_native",
    "ReplayError": "_native",
    "SampleStream": "_native",
}


def __getattr__(name):
    module = _NATIVE.get(name)
    if module is None:
        raise AttributeError(f"module 'seed_rs' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_NATIVE))

__all__ = [
    "Actor",
    "ActorError",
    "DEFAULT_LEARNER",
    "EnvSpec",
    "ReplayClient",
    "ReplayError",
    "SampleStream",
    "UnsupportedSpaceError",
    "enable_logging",
    "env_factory",
    "env_spec",
    "make_env",
]
