"""Gymnasium spaces to the learner's env spec.

The learner serves one observation tensor per env, ``f32`` or ``u8``, and
actions that are ``Discrete(n)`` or an f32 ``Box``. This module maps a
Gymnasium env's spaces onto that (:func:`env_spec`) and says how each
observation is put on the wire (:class:`ObservationLayout`), or raises
:class:`UnsupportedSpaceError` (a ``ValueError``) naming the space and what
is supported. It is pure Python (numpy and gymnasium only), so it can be
tested without the compiled extension.

Observations (``Box`` only):

========================  ===========  ===========================
space dtype               wire dtype   conversion per step
========================  ===========  ===========================
float32                   f32          none
other floats              f32          cast
uint8                     u8           none
bool                      u8           0 or 255
other integers            f32          cast
========================  ===========  ===========================

The learner reads u8 observations as pixel intensities and scales them by
1/255, so a ``True`` goes on the wire as 255: the model sees 0 and 1 (as
0 and 1 it would see 0 and 1/255, a first layer 255 times too weak).

A scalar ``Box`` becomes shape ``[1]``. Rank-3 observations are images and
must be channels-first ``[C, H, W]``; ``channels_last=True`` transposes
``[H, W, C]`` to ``[C, H, W]`` (one numpy pass per step). A rank-3 shape
that looks channels-last (last dimension at most 4, first above 4) is
refused unless ``channels_last`` is given either way.

Actions: ``Discrete(n)`` with ``start == 0``, or a floating ``Box`` (sent
as f32 with per-element bounds; the env receives an array of its space's
dtype and shape, already clipped to the bounds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

import gymnasium as gym
import numpy as np

__all__ = [
    "BoxActions",
    "DiscreteActions",
    "EnvSpec",
    "ObservationLayout",
    "UnsupportedSpaceError",
    "action_spec",
    "env_name_of",
    "env_spec",
    "observation_layout",
]

SUPPORTED_OBSERVATIONS = (
    "Box of floats (sent as f32), uint8 (u8), bool (u8, 0 or 255) or "
    "integers (f32); rank-3 images channels-first [C, H, W] "
    "(channels_last=True transposes [H, W, C])"
)
SUPPORTED_ACTIONS = "Discrete(n) with start 0, or a floating-point Box"

#: numpy dtype of each wire dtype (little-endian, as the wire is).
WIRE_DTYPES = {"f32": np.dtype("<f4"), "u8": np.dtype("u1")}


class UnsupportedSpaceError(ValueError):
    """A space the learner cannot serve; the message names it and what is supported."""


@dataclass(frozen=True)
class ObservationLayout:
    """How one env's observations go on the wire.

    Attributes:
        shape: the wire shape, ``[C, H, W]`` for images.
        dtype: ``"f32"`` or ``"u8"``.
        source_dtype: the observation space's dtype.
        transpose: axes applied to each observation (``(2, 0, 1)`` for
            ``channels_last``), or ``None``.
    """

    shape: Tuple[int, ...]
    dtype: str
    source_dtype: np.dtype
    transpose: Optional[Tuple[int, ...]] = None

    @property
    def wire_dtype(self) -> np.dtype:
        """The numpy dtype of the wire's elements."""
        return WIRE_DTYPES[self.dtype]

    @property
    def needs_conversion(self) -> bool:
        """Whether observations are cast or transposed before sending."""
        return self.transpose is not None or self.source_dtype != self.wire_dtype

    @property
    def nbytes(self) -> int:
        """Bytes of one observation on the wire."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.wire_dtype.itemsize

    def to_bytes(self, obs) -> bytes:
        """One observation as wire bytes: cast, transposed, C order."""
        a = np.asarray(obs)
        if self.transpose is not None:
            a = a.transpose(self.transpose)
        if self.source_dtype == np.bool_:
            # Full intensity: the learner's 1/255 brings it back to 1.
            return (a.astype(self.wire_dtype) * np.uint8(255)).tobytes()
        return a.astype(self.wire_dtype, copy=False).tobytes()

    def to_array(self, obs) -> np.ndarray:
        """One observation as the learner sees it (wire dtype and shape)."""
        return np.frombuffer(self.to_bytes(obs), dtype=self.wire_dtype).reshape(self.shape)


@dataclass(frozen=True)
class DiscreteActions:
    """``Discrete(n)``: actions ``0..n``."""

    n: int


@dataclass(frozen=True)
class BoxActions:
    """A continuous action space: ``prod(shape)`` f32s within ``[low, high]``.

    Attributes:
        shape: the space's shape.
        low, high: per-element bounds, flattened row-major (may be infinite).
        dtype: the space's dtype; the env receives arrays of it.
    """

    shape: Tuple[int, ...]
    low: Tuple[float, ...]
    high: Tuple[float, ...]
    dtype: np.dtype

    def make_action(self, buf: bytes) -> np.ndarray:
        """The env's action from the actor's little-endian f32 bytes (a fresh, writable array)."""
        return np.frombuffer(buf, dtype="<f4").reshape(self.shape).astype(self.dtype)


ActionSpec = Union[DiscreteActions, BoxActions]


@dataclass(frozen=True)
class EnvSpec:
    """What every env of one actor looks like, as announced to the learner."""

    env_name: str
    observation: ObservationLayout
    action: ActionSpec

    def to_native(self) -> dict:
        """The spec as the extension takes it."""
        d = {
            "env_name": self.env_name,
            "obs_shape": list(self.observation.shape),
            "obs_dtype": self.observation.dtype,
        }
        if isinstance(self.action, DiscreteActions):
            d["num_actions"] = self.action.n
        else:
            d["action_shape"] = list(self.action.shape)
            d["action_low"] = list(self.action.low)
            d["action_high"] = list(self.action.high)
        return d

    def describe(self) -> str:
        """One line: name, observation and action space."""
        obs = f"{list(self.observation.shape)} {self.observation.dtype}"
        if isinstance(self.action, DiscreteActions):
            act = f"Discrete({self.action.n})"
        else:
            act = f"Box({list(self.action.shape)})"
        return f"{self.env_name}: observations {obs}, actions {act}"


def _space_name(space) -> str:
    return f"{type(space).__name__} ({space!r})"


def observation_layout(space: gym.Space, channels_last: Optional[bool] = None) -> ObservationLayout:
    """The wire layout of an observation space.

    Args:
        space: the env's ``observation_space``.
        channels_last: ``True``: observations are ``[H, W, C]`` images,
            transposed to ``[C, H, W]``. ``False``: rank-3 observations are
            already ``[C, H, W]``. ``None`` (default): like ``False``, but a
            rank-3 shape that looks channels-last is refused.

    Raises:
        UnsupportedSpaceError: for anything but a ``Box`` of a supported dtype,
            or a rank-3 shape that looks channels-last with ``channels_last=None``.
    """
    if not isinstance(space, gym.spaces.Box):
        raise UnsupportedSpaceError(
            f"observation space {_space_name(space)} is not supported; "
            f"supported: {SUPPORTED_OBSERVATIONS}. Flatten or wrap the env "
            "(e.g. gymnasium.wrappers.FlattenObservation) to get a Box."
        )
    source = np.dtype(space.dtype)
    if source == np.float32:
        wire = "f32"
    elif source.kind == "f":
        wire = "f32"
    elif source == np.uint8 or source == np.bool_:
        wire = "u8"
    elif source.kind in "iu":
        wire = "f32"
    else:
        raise UnsupportedSpaceError(
            f"observation space {_space_name(space)} has dtype {source}; "
            f"supported: {SUPPORTED_OBSERVATIONS}"
        )
    shape = tuple(int(d) for d in space.shape) or (1,)
    transpose = None
    if channels_last:
        if len(shape) != 3:
            raise UnsupportedSpaceError(
                f"channels_last=True needs rank-3 [H, W, C] observations; "
                f"observation space {_space_name(space)} has shape {list(shape)}"
            )
        transpose = (2, 0, 1)
        shape = (shape[2], shape[0], shape[1])
    elif channels_last is None and len(shape) == 3 and shape[2] <= 4 < shape[0]:
        raise UnsupportedSpaceError(
            f"observation space {_space_name(space)} looks like channels-last "
            f"[H, W, C] images, but the learner takes [C, H, W]: pass "
            f"channels_last=True to transpose them (or channels_last=False if "
            f"{list(shape)} already is [C, H, W])"
        )
    return ObservationLayout(shape=shape, dtype=wire, source_dtype=source, transpose=transpose)


def action_spec(space: gym.Space) -> ActionSpec:
    """The learner's view of an action space.

    Raises:
        UnsupportedSpaceError: for anything but ``Discrete`` with ``start == 0``
            or a floating ``Box`` with bounds that are not NaN.
    """
    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            raise UnsupportedSpaceError(
                f"action space {_space_name(space)} starts at {int(space.start)}; "
                f"supported: {SUPPORTED_ACTIONS} (wrap the env to shift its actions)"
            )
        return DiscreteActions(n=int(space.n))
    if isinstance(space, gym.spaces.Box):
        dtype = np.dtype(space.dtype)
        if dtype.kind != "f":
            raise UnsupportedSpaceError(
                f"action space {_space_name(space)} has dtype {dtype}; supported: {SUPPORTED_ACTIONS}"
            )
        low = np.asarray(space.low, dtype=np.float32).ravel()
        high = np.asarray(space.high, dtype=np.float32).ravel()
        if np.isnan(low).any() or np.isnan(high).any():
            raise UnsupportedSpaceError(f"action space {_space_name(space)} has NaN bounds")
        shape = tuple(int(d) for d in space.shape) or (1,)
        return BoxActions(
            shape=shape,
            low=tuple(float(x) for x in low),
            high=tuple(float(x) for x in high),
            dtype=dtype,
        )
    raise UnsupportedSpaceError(
        f"action space {_space_name(space)} is not supported; supported: {SUPPORTED_ACTIONS}"
    )


def env_name_of(env: gym.Env) -> str:
    """The Gymnasium id (``env.spec.id``) if the env was made by id, else its class name."""
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    return type(getattr(env, "unwrapped", env)).__name__


def env_spec(
    env: gym.Env, env_name: Optional[str] = None, channels_last: Optional[bool] = None
) -> EnvSpec:
    """The spec of a Gymnasium env (see :func:`observation_layout`, :func:`action_spec`).

    Args:
        env: a Gymnasium env (not a vector env).
        env_name: the name announced to the learner [default: :func:`env_name_of`].
        channels_last: see :func:`observation_layout`.
    """
    return EnvSpec(
        env_name=env_name if env_name is not None else env_name_of(env),
        observation=observation_layout(env.observation_space, channels_last),
        action=action_spec(env.action_space),
    )
