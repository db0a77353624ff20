"""`Policy`: a trained policy, loaded from a learner's run directory, in this process.

::

    import gymnasium as gym
    import seed_rs

    policy = seed_rs.Policy.load("runs/cartpole")      # the newest checkpoint
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy.act(obs, greedy=True))
        done = terminated or truncated

The network is the learner's own model code (the wheel's Rust, on the CPU):
no learner, no network connection, no PyTorch. ``act`` and ``value`` take
one observation or a batch, as the env gives them:

- the observation's shape and dtype as the learner took them
  (``policy.spec.obs_shape``, ``float32`` or ``uint8``), or as the env gives
  them when they differ: bools (MinAtar) become 0/255 like the actor sends
  them, other numbers are cast, and ``[H, W, C]`` frames are transposed to
  ``[C, H, W]`` when the run's env was channels-last (MinAtar, or
  ``channels_last=True`` here);
- a batch is the same with a leading dimension.

Anything else is a ``ValueError`` naming the shape or dtype expected.

A recurrent (LSTM) policy's state is explicit: ``act(obs, state=state)``
returns ``(actions, state)``; ``state=None`` is an episode's start (zeros),
and the caller zeroes a row when its episode ends.

Greedy actions are the most likely ones (argmax of the logits or of an R2D2
run's Q-values, a Gaussian's mean); sampled ones are drawn as the actors'
inference draws them (an R2D2 policy acts ε-greedily with ε 0.01);
:meth:`Policy.seed` makes them repeatable.

Cost: one forward per call (the CartPole MLP answers one observation in
tens of microseconds, most of it the call itself).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import numpy as np

from .make import channels_last_for
from .spaces import BoxActions, DiscreteActions, observation_layout

__all__ = ["Policy", "PolicySpec"]

State = Tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class PolicySpec:
    """What a policy was trained on and what it is.

    Attributes:
        env_name: the env's name as its actors announced it (a Gymnasium
            id for the Python actor; ``CartPole-v1`` for the learner's own).
        env_kind: ``remote`` (run by actors) or the learner's built-in env
            (``cartpole``, ``pendulum``, ...).
        obs_shape, obs_dtype: observations as the learner took them
            (``"f32"`` or ``"u8"``, images ``[C, H, W]``).
        action: :class:`~seed_rs.spaces.DiscreteActions` or
            :class:`~seed_rs.spaces.BoxActions`.
        lstm_size: the recurrent core's size, ``None`` when feed-forward.
        head: ``"distribution"`` (an actor-critic) or ``"q_values"`` (R2D2).
        hidden_sizes, conv_features, obs_is_u8: the architecture;
            ``conv_layers``: the conv torso's ``(kernel, stride)`` per layer
            (empty for the MLP); ``log_std_range``: where a Gaussian's
            log-std is clamped (see :mod:`seed_rs.network`).
        policy_version, learner_steps, env_steps: the checkpoint's counters.
        checkpoint: the checkpoint's directory.
        flags: the run's training flags, as ``config.json`` records them.
    """

    env_name: str
    env_kind: str
    obs_shape: Tuple[int, ...]
    obs_dtype: str
    action: Union[DiscreteActions, BoxActions]
    lstm_size: Optional[int]
    head: str
    hidden_sizes: Tuple[int, ...]
    conv_features: int
    obs_is_u8: bool
    conv_layers: Tuple[Tuple[int, int], ...]
    log_std_range: Tuple[float, float]
    policy_version: int
    learner_steps: int
    env_steps: int
    checkpoint: str
    flags: dict

    @classmethod
    def _from_native(cls, d: dict) -> "PolicySpec":
        if "num_actions" in d:
            action = DiscreteActions(n=int(d["num_actions"]))
        else:
            action = BoxActions(
                shape=tuple(d["action_shape"]),
                low=tuple(d["action_low"]),
                high=tuple(d["action_high"]),
                dtype=np.dtype(np.float32),
            )
        return cls(
            env_name=d["env_name"],
            env_kind=d["env_kind"],
            obs_shape=tuple(d["obs_shape"]),
            obs_dtype=d["obs_dtype"],
            action=action,
            lstm_size=d["lstm_size"],
            head=d["head"],
            hidden_sizes=tuple(d["hidden_sizes"]),
            conv_features=int(d["conv_features"]),
            obs_is_u8=bool(d["obs_is_u8"]),
            conv_layers=tuple((int(k), int(s)) for k, s in d["conv_layers"]),
            log_std_range=(float(d["log_std_range"][0]), float(d["log_std_range"][1])),
            policy_version=int(d["policy_version"]),
            learner_steps=int(d["learner_steps"]),
            env_steps=int(d["env_steps"]),
            checkpoint=str(d["checkpoint"]),
            flags=json.loads(d["flags_json"]) or {},
        )

    @property
    def recurrent(self) -> bool:
        """Whether the policy has an LSTM core (and so a state to carry)."""
        return self.lstm_size is not None


_WIRE = {"f32": np.dtype(np.float32), "u8": np.dtype(np.uint8)}


class Policy:
    """A trained policy in this process (see the module docs). Build it with :meth:`load`."""

    def __init__(self, native, channels_last: Optional[bool] = None):
        self._native = native
        self.spec = PolicySpec._from_native(native.info())
        self._wire = _WIRE[self.spec.obs_dtype]
        self._action_dtype = None
        self._set_channels_last(channels_last_for(self.spec.env_name) if channels_last is None else channels_last)

    def _set_channels_last(self, channels_last) -> None:
        shape = self.spec.obs_shape
        # The env's frame shape when it is [H, W, C] and the learner's [C, H, W].
        self._env_shape = (shape[1], shape[2], shape[0]) if channels_last and len(shape) == 3 else None

    @classmethod
    def load(
        cls, path: Union[str, os.PathLike], *, env=None, channels_last: Optional[bool] = None
    ) -> "Policy":
        """The policy at ``path``: a run directory (its newest checkpoint) or a checkpoint directory.

        Args:
            path: the learner's ``--run-dir``, or one of its
                ``checkpoints/step-*`` (or ``best/``) directories.
            env: optionally the Gymnasium env it will act in: its spaces are
                checked against the policy's now (a ``ValueError`` naming the
                difference), and continuous actions come back in its dtype.
            channels_last: whether observations come as ``[H, W, C]`` frames
                [default: as the run's env was, MinAtar's are].

        Raises:
            FileNotFoundError: no checkpoint at ``path``.
            ValueError: a corrupt checkpoint, one from another version, or
                an ``env`` whose spaces differ (the message names the file
                or the space).
        """
        from ._native import NativePolicy

        policy = cls(NativePolicy(os.fspath(path)), channels_last=channels_last)
        if env is not None:
            policy.bind_env(env, channels_last=channels_last)
        return policy

    def bind_env(self, env, *, channels_last: Optional[bool] = None) -> None:
        """Takes ``env``'s observations from now on: checks its spaces against the policy's
        (:meth:`check_env`), reads ``[H, W, C]`` frames when the env's id is channels-last
        (or ``channels_last``), and returns continuous actions in its action space's dtype."""
        if channels_last is None:
            name = getattr(getattr(env, "spec", None), "id", None) or self.spec.env_name
            channels_last = channels_last_for(name)
        self._set_channels_last(channels_last)
        self.check_env(env, channels_last=channels_last)
        space_dtype = getattr(env.action_space, "dtype", None)
        if isinstance(self.spec.action, BoxActions) and space_dtype is not None:
            self._action_dtype = np.dtype(space_dtype)

    def check_env(self, env, *, channels_last: Optional[bool] = None) -> None:
        """Raises ``ValueError`` unless ``env``'s spaces are the ones the policy was trained on."""
        from .spaces import action_spec

        if channels_last is None:
            channels_last = self._env_shape is not None
        layout = observation_layout(env.observation_space, channels_last or False)
        if tuple(layout.shape) != self.spec.obs_shape or layout.dtype != self.spec.obs_dtype:
            raise ValueError(
                f"the env's observations are {list(layout.shape)} {layout.dtype} as the learner "
                f"takes them, the policy's {list(self.spec.obs_shape)} {self.spec.obs_dtype} "
                f"(trained on {self.spec.env_name})"
            )
        actions = action_spec(env.action_space)
        ours = self.spec.action
        same = (
            isinstance(actions, DiscreteActions) and isinstance(ours, DiscreteActions) and actions.n == ours.n
        ) or (
            isinstance(actions, BoxActions)
            and isinstance(ours, BoxActions)
            and tuple(actions.shape) == tuple(ours.shape)
        )
        if not same:
            raise ValueError(
                f"the env's actions are {actions}, the policy's {ours} (trained on {self.spec.env_name})"
            )

    def seed(self, seed: int) -> None:
        """Restarts the sampler of ``act(..., greedy=False)`` from ``seed``."""
        self._native.seed(int(seed))

    def initial_state(self, batch: Optional[int] = None) -> Optional[State]:
        """A recurrent policy's state at an episode's start (zeros): ``(h, c)``, ``[H]`` or ``[batch, H]``."""
        if not self.spec.recurrent:
            return None
        shape = (self.spec.lstm_size,) if batch is None else (int(batch), self.spec.lstm_size)
        return np.zeros(shape, np.float32), np.zeros(shape, np.float32)

    # -- observations -------------------------------------------------------------------

    def _batch(self, obs) -> Tuple[np.ndarray, bool]:
        """``obs`` as a C-order ``[B, ...obs_shape]`` array of the wire dtype, and whether it was one observation."""
        a = np.asarray(obs)
        shape = self.spec.obs_shape
        k = len(shape)
        if a.ndim == 0 and shape == (1,):
            a = a.reshape(1)
        transpose = False
        if a.shape == shape:
            single = True
        elif a.ndim == k + 1 and a.shape[1:] == shape:
            single = False
        elif self._env_shape is not None and a.shape == self._env_shape:
            single, transpose = True, True
        elif self._env_shape is not None and a.ndim == k + 1 and a.shape[1:] == self._env_shape:
            single, transpose = False, True
        else:
            also = f" or {list(self._env_shape)} (channels-last)" if self._env_shape else ""
            raise ValueError(
                f"observations of shape {list(a.shape)}: the policy takes {list(shape)}{also}, "
                f"or a batch of them with a leading dimension (trained on {self.spec.env_name})"
            )
        if single:
            a = a[np.newaxis]
        if transpose:
            a = a.transpose(0, 3, 1, 2)
        a = self._cast(a)
        return np.ascontiguousarray(a), single

    def _cast(self, a: np.ndarray) -> np.ndarray:
        if a.dtype == self._wire:
            return a
        if self._wire == np.uint8:
            if a.dtype == np.bool_:
                # As the actor sends them: the learner's 1/255 brings True back to 1.
                return a.astype(np.uint8) * np.uint8(255)
            raise ValueError(
                f"observations of dtype {a.dtype}: the policy takes uint8 frames (or bools, sent as "
                f"0/255) (trained on {self.spec.env_name})"
            )
        if a.dtype.kind not in "fiub":
            raise ValueError(
                f"observations of dtype {a.dtype}: the policy takes float32 (or numbers it casts) "
                f"(trained on {self.spec.env_name})"
            )
        return a.astype(np.float32)

    def _state_args(self, state, rows: int, single: bool):
        if state is None:
            return None, None
        if not self.spec.recurrent:
            raise ValueError("state: the policy is feed-forward and has no recurrent state")
        try:
            h, c = state
        except (TypeError, ValueError):
            raise ValueError("state: expected the (h, c) pair act returned") from None
        want = (rows, self.spec.lstm_size)
        out = []
        for name, x in (("h", h), ("c", c)):
            x = np.asarray(x, dtype=np.float32)
            if single and x.ndim == 1:
                x = x[np.newaxis]
            if x.shape != want:
                raise ValueError(
                    f"state {name} of shape {list(np.shape(x))}: expected {list(want[1:]) if single else list(want)}"
                )
            out.append(np.ascontiguousarray(x))
        return out[0], out[1]

    @staticmethod
    def _state_out(state, single: bool):
        if state is None:
            return None
        h, c = state
        return (h[0], c[0]) if single else (h, c)

    # -- answers ------------------------------------------------------------------------

    def act(self, obs, *, greedy: bool = False, state: Optional[State] = None):
        """Actions for one observation or a batch.

        Returns:
            For one observation, an ``int`` (discrete) or an array of the
            action space's shape; for a batch, an ``int64`` ``[B]`` or a
            ``[B, ...]`` array. A recurrent policy returns
            ``(actions, state)``, the state after this step.
        """
        x, single = self._batch(obs)
        h, c = self._state_args(state, x.shape[0], single)
        actions, _values, next_state = self._native.act(x, bool(greedy), h, c)
        if isinstance(self.spec.action, BoxActions):
            actions = actions.reshape((actions.shape[0],) + tuple(self.spec.action.shape))
            if self._action_dtype is not None:
                actions = actions.astype(self._action_dtype, copy=False)
            out = actions[0] if single else actions
        else:
            out = int(actions[0]) if single else actions
        if self.spec.recurrent:
            return out, self._state_out(next_state, single)
        return out

    def value(self, obs, *, state: Optional[State] = None):
        """The value head's estimate: a ``float`` for one observation, ``float32`` ``[B]`` for a batch."""
        x, single = self._batch(obs)
        h, c = self._state_args(state, x.shape[0], single)
        _params, values, _state = self._native.forward(x, h, c)
        return float(values[0]) if single else values

    def forward(self, obs, *, state: Optional[State] = None):
        """The raw heads: ``(params [B, P], values [B], state)``; ``params`` are the logits,
        a Gaussian's means then log-stds, or an R2D2 run's advantages; ``state`` is ``None``
        for a feed-forward policy. Always batched."""
        x, single = self._batch(obs)
        h, c = self._state_args(state, x.shape[0], single)
        return self._native.forward(x, h, c)

    def weights(self) -> dict:
        """The checkpoint's weights by name, ``float32`` arrays in PyTorch's layouts."""
        return self._native.weights()

    def __repr__(self) -> str:
        s = self.spec
        core = f", lstm {s.lstm_size}" if s.recurrent else ""
        return (
            f"Policy({s.env_name}: observations {list(s.obs_shape)} {s.obs_dtype}, actions {s.action}, "
            f"{s.head}{core}, policy version {s.policy_version}, {s.checkpoint})"
        )
