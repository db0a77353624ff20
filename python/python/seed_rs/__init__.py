"""seed_rs: Gymnasium envs as actors of a seed-rs learner, and replay tables in process or on a server.

The learner (the ``learner`` binary of seed-rs) holds the policy and infers
actions centrally; an actor steps envs and streams their observations to
it. :class:`Actor` runs the Rust actor client over Python envs::

    import gymnasium as gym
    import seed_rs

    # learner= the learner's address; without it, the default one
    # (seed_rs.defaults.LEARNER_ADDR)
    actor = seed_rs.Actor(lambda: gym.make("CartPole-v1"), num_envs=32)
    report = actor.run(max_steps=100_000)
    print(report["env_steps"], report["episodes"], report["round_trip"]["p50_us"])

From a shell: ``python -m seed_rs.actor --env CartPole-v1 --envs 32``.

:class:`ReplayBuffer` is a replay table in this process, built from the
same table object a replay server's config takes; ``ReplayClient(addr).table(name)``
is a table on a replay server (``replay-server``) with the same methods, so
moving a table out of the process is changing one constructor::

    import numpy as np
    import seed_rs

    table = {"name": "experience", "capacity": 100_000, "sampler": {"kind": "uniform"},
             "fields": [{"name": "obs", "dtype": "f32", "shape": [3, 4]}]}
    replay = seed_rs.ReplayBuffer(table)
    # replay = seed_rs.ReplayClient("127.0.0.1:50061").table("experience")
    keys = replay.insert({"obs": np.zeros((32, 3, 4), np.float32)})
    fields, keys, weights = replay.sample(128)

Contents: :class:`Actor`; :mod:`seed_rs.defaults` (the defaults the actor,
its command line and :mod:`seed_rs.ray` share); :mod:`seed_rs.spaces`
(which spaces map to what, :class:`UnsupportedSpaceError`); :func:`make_env`
(Gymnasium ids with the Atari and MinAtar preprocessing); :class:`ActorError`;
:func:`enable_logging` (the Rust actor's log lines on stderr);
:class:`ReplayBuffer` (a table in process), :class:`ReplayClient` and
:class:`ReplayTable` (a replay server and one of its tables; both table
classes have the methods of :data:`TABLE_METHODS`),
:class:`ReplayError` (the gRPC status of a refused call) and
:class:`ReplayArgumentError` (a refusal of bad input: also a ``ValueError``);
:func:`pad` and :func:`unpad` (a grouped table's variable-length field as
``[steps, max_len]`` and a mask, and back); :class:`Policy` (a trained
policy from a run directory, in process: ``Policy.load(run_dir).act(obs)``),
with :mod:`seed_rs.eval` (``python -m seed_rs.eval RUN_DIR --env ID``:
returns and videos on any Gymnasium env) and :mod:`seed_rs.torch` (the
same network as a ``torch.nn.Module``).
"""

from typing import TYPE_CHECKING

from .make import env_factory, make_env
from .policy import Policy, PolicySpec
from .ragged import pad, unpad
from .spaces import EnvSpec, UnsupportedSpaceError, env_spec

if TYPE_CHECKING:  # for type checkers; at run time they load on first use
    from ._native import (
        ActorError,
        FollowStream,
        LocalFollowStream,
        LocalSampleStream,
        ReplayArgumentError,
        ReplayBuffer,
        ReplayClient,
        ReplayError,
        ReplayTable,
        SampleStream,
        TABLE_METHODS,
        enable_logging,
    )
    from .gym_actor import DEFAULT_LEARNER, Actor

# The compiled extension loads on first use, so the pure-Python modules
# (seed_rs.spaces, seed_rs.make) import without it.
_NATIVE = {
    "Actor": "gym_actor",
    "DEFAULT_LEARNER": "gym_actor",
    "ActorError": "_native",
    "enable_logging": "_native",
    "FollowStream": "_native",
    "LocalFollowStream": "_native",
    "LocalSampleStream": "_native",
    "ReplayArgumentError": "_native",
    "ReplayBuffer": "_native",
    "ReplayClient": "_native",
    "ReplayError": "_native",
    "ReplayTable": "_native",
    "SampleStream": "_native",
    "TABLE_METHODS": "_native",
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
    "FollowStream",
    "LocalFollowStream",
    "LocalSampleStream",
    "Policy",
    "PolicySpec",
    "ReplayArgumentError",
    "ReplayBuffer",
    "ReplayClient",
    "ReplayError",
    "ReplayTable",
    "SampleStream",
    "TABLE_METHODS",
    "UnsupportedSpaceError",
    "enable_logging",
    "env_factory",
    "env_spec",
    "make_env",
    "pad",
    "unpad",
]
