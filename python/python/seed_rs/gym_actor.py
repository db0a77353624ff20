"""`Actor`: Gymnasium envs stepped by the Rust actor client for a seed-rs learner.

The learner holds the policy; the actor only steps envs and streams their
observations, rewards and episode ends, and applies the actions that come
back (central inference, as in SEED RL). Everything but the envs' own
``reset``/``step`` runs in Rust: the gRPC stream, the two pipelined halves
of the envs (one half is stepped while the learner infers the other's
actions), reconnecting with backoff when the learner goes away, episode
statistics and the truncation contract.

Episode contract: the actor resets an env when its episode ends
(terminated: at once, and the next observation sent is the new episode's
first; truncated: the final observation is sent first, then the env is
reset), so the envs must *not* reset themselves. Plain ``gymnasium.make``
envs are fine; an ``Autoreset`` wrapper is refused.

Seeding: each env's first ``reset`` gets ``seed=`` (32 bits, drawn from the
actor's ``seed``); later resets continue the env's own RNG, as Gymnasium
intends.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Optional, Sequence, Union

import gymnasium as gym

from . import _native, defaults
from .spaces import BoxActions, EnvSpec, env_spec

__all__ = ["Actor", "EnvAdapter", "DEFAULT_LEARNER", "DEFAULT_NUM_ENVS"]

#: The learner's default listen address (:data:`seed_rs.defaults.LEARNER_ADDR`).
DEFAULT_LEARNER = defaults.LEARNER_ADDR
#: Envs made from an env factory when ``num_envs`` is not given
#: (:data:`seed_rs.defaults.NUM_ENVS`, as ``actor --envs``).
DEFAULT_NUM_ENVS = defaults.NUM_ENVS

EnvSource = Union[Callable[[], gym.Env], gym.Env, Sequence[gym.Env], "gym.vector.SyncVectorEnv"]


class EnvAdapter:
    """What the extension calls for one env; its attributes are read once.

    Attributes:
        reset, step: the env's bound methods.
        fast_dtype: when observations need no conversion, their numpy dtype:
            an ndarray of exactly this dtype is sent as ``obs.tobytes()``.
            ``None``: every observation goes through ``to_bytes``.
        to_bytes: ``obs -> bytes`` in the wire dtype and layout.
        make_action: continuous spaces: little-endian f32 bytes -> the env's
            action array; ``None`` for ``Discrete``.
    """

    __slots__ = ("reset", "step", "fast_dtype", "to_bytes", "make_action")

    def __init__(self, env: gym.Env, spec: EnvSpec):
        layout = spec.observation
        self.reset = env.reset
        self.step = env.step
        self.fast_dtype = None if layout.needs_conversion else layout.wire_dtype
        self.to_bytes = layout.to_bytes
        self.make_action = spec.action.make_action if isinstance(spec.action, BoxActions) else None


class Actor:
    """Gymnasium envs as one actor of a seed-rs learner.

    Args:
        env: the envs, as one of
            - a callable returning a new ``gymnasium.Env`` (called
              ``num_envs`` times; these envs are closed by :meth:`close`);
            - a list of envs, or a single env;
            - a ``gymnasium.vector.SyncVectorEnv``: its ``.envs`` are stepped
              one by one (the actor pipelines its two halves itself). An
              ``AsyncVectorEnv`` is refused: pass its env factory instead.
            All envs must have the same spaces and must not reset themselves.
        num_envs: number of envs K [default: :data:`seed_rs.defaults.NUM_ENVS`
            for a callable, else the number given].
        learner: the learner's address: ``host:port``, ``http://host:port``,
            ``https://host:port`` (needs ``tls_ca``) or ``unix:/path``
            [default: the learner's default address,
            :data:`seed_rs.defaults.LEARNER_ADDR`].
        token: shared secret the learner checks [default: none].
        actor_id: sent in the hello, names this actor in the learner's logs
            [default: ``hostname-pid``].
        seed: seeds the envs' first resets [default: random].
        env_name: the env name announced to the learner [default:
            ``env.spec.id``, else the env's class name].
        channels_last: ``True``: rank-3 observations are ``[H, W, C]`` and are
            transposed to ``[C, H, W]``; see :func:`seed_rs.spaces.observation_layout`.
        tls_ca: connect with TLS, trusting the CA certificates in this PEM file.
        tls_domain: the name the learner's certificate must carry [default:
            the host of ``learner``].
        tls_cert, tls_key: a client certificate and key for mutual TLS.
        max_reconnects: consecutive failed connects before :meth:`run` raises
            :class:`seed_rs.ActorError` [default: retry forever].

    Raises:
        ValueError: an unsupported space (:class:`seed_rs.UnsupportedSpaceError`),
            envs whose spaces differ, an auto-resetting env, an
            ``AsyncVectorEnv``, or a bad setting (address, TLS files).
    """

    def __init__(
        self,
        env: EnvSource,
        num_envs: Optional[int] = None,
        learner: str = DEFAULT_LEARNER,
        *,
        token: Optional[str] = None,
        actor_id: Optional[str] = None,
        seed: Optional[int] = None,
        env_name: Optional[str] = None,
        channels_last: Optional[bool] = None,
        tls_ca: Optional[Union[str, os.PathLike]] = None,
        tls_domain: Optional[str] = None,
        tls_cert: Optional[Union[str, os.PathLike]] = None,
        tls_key: Optional[Union[str, os.PathLike]] = None,
        max_reconnects: Optional[int] = None,
    ):
        self._owned: List[gym.Env] = []
        envs = self._resolve_envs(env, num_envs)
        try:
            self.spec: EnvSpec = env_spec(envs[0], env_name=env_name, channels_last=channels_last)
            _check_envs(envs)
            native_spec = self.spec.to_native()
            _native.check_spec(native_spec)
            self._native = _native.NativeActor(
                [EnvAdapter(e, self.spec) for e in envs],
                native_spec,
                learner=learner,
                token=token,
                actor_id=actor_id,
                seed=None if seed is None else int(seed) & 0xFFFF_FFFF_FFFF_FFFF,
                tls_ca=tls_ca,
                tls_domain=tls_domain,
                tls_cert=tls_cert,
                tls_key=tls_key,
                max_reconnects=max_reconnects,
            )
        except BaseException:
            self.close()
            raise
        self.envs: List[gym.Env] = envs
        self.learner = learner

    def _resolve_envs(self, env: Any, num_envs: Optional[int]) -> List[gym.Env]:
        if num_envs is not None and (not isinstance(num_envs, int) or num_envs < 1):
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if isinstance(env, gym.vector.AsyncVectorEnv):
            raise ValueError(
                "an AsyncVectorEnv steps its envs in subprocesses, which the actor cannot "
                "step one by one; pass the env factory instead, e.g. "
                "seed_rs.Actor(lambda: gymnasium.make(ID), num_envs=K) (the actor "
                "pipelines the envs itself)"
            )
        if isinstance(env, gym.vector.SyncVectorEnv):
            envs = list(env.envs)
        elif isinstance(env, gym.vector.VectorEnv):
            raise ValueError(
                f"{type(env).__name__}: only SyncVectorEnv is supported among vector envs; "
                "pass the env factory instead"
            )
        elif isinstance(env, gym.Env):
            envs = [env]
        elif isinstance(env, (list, tuple)):
            envs = list(env)
        elif callable(env):
            n = DEFAULT_NUM_ENVS if num_envs is None else num_envs
            for _ in range(n):
                self._owned.append(env())
            return list(self._owned)
        else:
            raise TypeError(
                f"env must be a callable returning a gymnasium.Env, a list of envs, an env "
                f"or a SyncVectorEnv; got {type(env).__name__}"
            )
        if not envs:
            raise ValueError("no envs given")
        if num_envs is not None and num_envs != len(envs):
            raise ValueError(f"num_envs={num_envs} but {len(envs)} envs were given")
        return envs

    @property
    def num_envs(self) -> int:
        """Number of envs K."""
        return len(self.envs)

    @property
    def actor_id(self) -> str:
        """The actor id sent in the hello."""
        return self._native.actor_id

    @property
    def seed(self) -> int:
        """The seed of the envs' first resets."""
        return self._native.seed

    def run(self, max_steps: Optional[int] = None, max_seconds: Optional[float] = None) -> dict:
        """Steps the envs for the learner until a limit, Ctrl-C or an error.

        Connects (retrying with backoff while the learner is unreachable),
        then streams until ``max_steps`` env steps (over all envs) or
        ``max_seconds`` have passed. A learner that goes away is reconnected
        to; every new connection starts fresh episodes. The GIL is released
        while the actor waits on the network.

        Args:
            max_steps: stop after this many env steps [default: unlimited].
            max_seconds: stop after this many seconds [default: unlimited].

        Returns:
            the actor's report: ``env_steps``, ``step_batches``,
            ``action_batches``, ``episodes``, ``sessions`` (connections
            established), ``last_policy_version``, ``active_seconds`` (from the
            first connection), ``round_trip`` (``count``, ``mean_us``,
            ``p50_us``, ``p90_us``, ``p99_us``, ``p999_us``, ``max_us``: step
            batch sent to its actions received) and ``env_steps_per_second``.

        Raises:
            KeyboardInterrupt: on Ctrl-C, after closing the stream politely.
            Exception: whatever an env's ``reset``/``step`` raised, unchanged.
            seed_rs.ActorError: the learner refused the stream, broke the
                protocol, or stayed unreachable past ``max_reconnects``.
        """
        report = self._native.run(max_steps=max_steps, max_seconds=max_seconds)
        seconds = report.get("active_seconds") or 0.0
        report["env_steps_per_second"] = report["env_steps"] / seconds if seconds > 0 else 0.0
        return report

    def close(self) -> None:
        """Closes the envs this actor made (those from an env factory)."""
        owned, self._owned = self._owned, []
        for e in owned:
            e.close()

    def __enter__(self) -> "Actor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Actor({self.spec.describe()}, num_envs={self.num_envs}, learner={self.learner!r})"


def _check_envs(envs: List[gym.Env]) -> None:
    """Same spaces everywhere, no vector envs, no auto-reset."""
    first = envs[0]
    for i, e in enumerate(envs):
        if isinstance(e, gym.vector.VectorEnv):
            raise ValueError(f"env {i} is a vector env; pass its sub-envs or its env factory")
        for attr in ("reset", "step", "observation_space", "action_space"):
            if not hasattr(e, attr):
                raise TypeError(f"env {i} ({type(e).__name__}) has no `{attr}`: not a gymnasium.Env")
        if e.observation_space != first.observation_space or e.action_space != first.action_space:
            raise ValueError(
                f"env {i} has spaces {e.observation_space} / {e.action_space}, env 0 has "
                f"{first.observation_space} / {first.action_space}: all envs of an actor "
                "must look the same"
            )
        w = e
        while isinstance(w, gym.Wrapper):
            if isinstance(w, gym.wrappers.Autoreset):
                raise ValueError(
                    f"env {i} is wrapped in Autoreset; the actor resets envs itself (and "
                    "sends a truncated episode's final observation first): make it without "
                    "autoreset"
                )
            w = w.env
