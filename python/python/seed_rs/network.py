"""The learner's network as a plain description, and its forward pass in numpy.

:func:`network_def` reads a :class:`~seed_rs.PolicySpec` into a
:class:`NetworkDef`: the layers in order, each named like the checkpoint's
weights, so a weight maps to a layer by its name alone.
:func:`numpy_forward` runs that description with numpy;
:func:`seed_rs.torch.load_policy` builds the same description as a
``torch.nn.Module`` whose ``state_dict`` keys are the checkpoint's names.
The three (the learner's Rust, this, PyTorch) agree within float rounding;
the tests check this one against the Rust policy and a script
(``scripts/check-torch-policy.py``) checks PyTorch's.

The network (``learner/src/model/``):

- u8 observations are scaled by 1/255;
- vectors (rank 1-2, flattened): ``torso.{i}`` linear layers, tanh after each;
- frames ``[C, H, W]``: ``torso.conv1`` (and ``torso.conv2`` for frames of
  at least 36x36), each a convolution without padding followed by ReLU,
  then flattened (C, H, W order) into ``torso.fc``, linear and ReLU;
- optionally ``core``: one LSTM cell (PyTorch's ``nn.LSTM`` layout and
  gate order ``i, f, g, o``: ``core.weight_ih_l0`` ``[4H, in]``,
  ``core.weight_hh_l0``, ``core.bias_ih_l0``, ``core.bias_hh_l0``);
- heads: ``policy`` (logits, a Gaussian's means, or R2D2's advantages) and
  ``value`` (one unit), both linear; a Gaussian policy appends its
  state-independent ``log_std`` clamped to ``log_std_range`` to the means.

Cost: numpy's; the conv layers as one ``einsum`` over sliding windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

__all__ = ["Layer", "NetworkDef", "network_def", "numpy_forward"]


@dataclass(frozen=True)
class Layer:
    """One torso layer: ``kind`` is ``"linear"`` or ``"conv"``; ``name`` its weights' prefix;
    ``activation`` ``"tanh"`` or ``"relu"``; ``stride`` for convolutions."""

    kind: str
    name: str
    activation: str
    stride: int = 1


@dataclass(frozen=True)
class NetworkDef:
    """A policy's network: what :mod:`seed_rs.network`'s docs describe, as data.

    Attributes:
        obs_shape: one observation's shape as the network takes it.
        input_scale: multiplies the observations first (1/255 for u8 ones), or ``None``.
        torso: the torso's layers in order (a flatten before the first linear one).
        lstm: the LSTM core's size, or ``None``.
        log_std_range: a Gaussian policy's clamp of ``log_std``; ``None`` for a categorical head.
    """

    obs_shape: Tuple[int, ...]
    input_scale: Optional[float]
    torso: Tuple[Layer, ...]
    lstm: Optional[int]
    log_std_range: Optional[Tuple[float, float]]


def network_def(spec) -> NetworkDef:
    """The network of a :class:`~seed_rs.PolicySpec` (``policy.spec``)."""
    from .spaces import BoxActions

    if len(spec.obs_shape) == 3:
        layers = [Layer("conv", f"torso.conv{i + 1}", "relu", stride) for i, (_k, stride) in
                  enumerate(spec.conv_layers)]
        layers.append(Layer("linear", "torso.fc", "relu"))
    else:
        layers = [Layer("linear", f"torso.{i}", "tanh") for i in range(len(spec.hidden_sizes))]
    gaussian = isinstance(spec.action, BoxActions)
    return NetworkDef(
        obs_shape=tuple(spec.obs_shape),
        input_scale=1.0 / 255.0 if spec.obs_is_u8 else None,
        torso=tuple(layers),
        lstm=spec.lstm_size,
        log_std_range=tuple(spec.log_std_range) if gaussian else None,
    )


def _act(x: np.ndarray, activation: str) -> np.ndarray:
    return np.tanh(x) if activation == "tanh" else np.maximum(x, 0)


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    k = w.shape[2]
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("bchwij,ocij->bohw", windows, w, optimize=True) + b[None, :, None, None]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def numpy_forward(
    net: NetworkDef,
    weights: Dict[str, np.ndarray],
    obs: np.ndarray,
    state: Optional[Tuple[np.ndarray, np.ndarray]] = None,
):
    """The network on a batch ``obs`` (``[B, ...obs_shape]``), in float64.

    Returns ``(params [B, P], values [B], (h, c) or None)``; ``state`` is a
    recurrent network's ``(h, c)`` ``[B, H]`` each (``None``: zeros).
    """
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    x = np.asarray(obs, dtype=np.float64)
    if net.input_scale is not None:
        x = x * net.input_scale
    if not any(layer.kind == "conv" for layer in net.torso):
        x = x.reshape(x.shape[0], -1)
    for layer in net.torso:
        if layer.kind == "conv":
            x = _act(_conv(x, w[f"{layer.name}.weight"], w[f"{layer.name}.bias"], layer.stride), layer.activation)
        else:
            x = x.reshape(x.shape[0], -1)
            x = _act(x @ w[f"{layer.name}.weight"].T + w[f"{layer.name}.bias"], layer.activation)
    next_state = None
    if net.lstm is not None:
        n, hsize = x.shape[0], net.lstm
        h, c = (np.zeros((n, hsize)), np.zeros((n, hsize))) if state is None else (
            np.asarray(state[0], np.float64), np.asarray(state[1], np.float64))
        gates = (x @ w["core.weight_ih_l0"].T + w["core.bias_ih_l0"]
                 + h @ w["core.weight_hh_l0"].T + w["core.bias_hh_l0"])
        i, f, g, o = np.split(gates, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        x, next_state = h, (h, c)
    params = x @ w["policy.weight"].T + w["policy.bias"]
    if net.log_std_range is not None:
        lo, hi = net.log_std_range
        log_std = np.clip(w["log_std"], lo, hi)
        params = np.concatenate([params, np.broadcast_to(log_std, params.shape)], axis=1)
    values = (x @ w["value.weight"].T + w["value.bias"])[:, 0]
    return params, values, next_state
