"""``seed_rs.torch.load_policy``: a trained policy as a ``torch.nn.Module``.

::

    import torch
    import seed_rs.torch

    module = seed_rs.torch.load_policy("runs/breakout")   # eval mode, float32, CPU
    params, values = module(torch.zeros(1, 4, 10, 10, dtype=torch.uint8))
    exported = torch.export.export(module, (torch.zeros(1, 4, 10, 10, dtype=torch.uint8),))

The module is the network :mod:`seed_rs.network` describes, built from
``torch.nn`` layers whose ``state_dict`` keys are the checkpoint's weight
names (``load_state_dict(strict=True)`` checks the mapping); its outputs
equal :class:`seed_rs.Policy`'s within float rounding (checked by
``scripts/check-torch-policy.py``). It takes observations as the learner
took them (``policy.spec.obs_shape``, uint8 or float32, batched) and
returns the heads:

- feed-forward: ``forward(obs) -> (params [B, P], values [B])``;
- recurrent: ``forward(obs, h, c) -> (params, values, h, c)``, the state
  ``[B, H]`` each (zeros at an episode's start).

``params`` are the logits, a Gaussian's means then its log-stds, or an
R2D2 run's advantages; :meth:`SeedPolicyModule.greedy` takes the most
likely action from them. PyTorch is not a dependency of seed-rs: install it
yourself (``pip install torch``).
"""

from __future__ import annotations

import os
from typing import Union

try:
    import torch
    from torch import nn
except ImportError as e:  # pragma: no cover (depends on the environment)
    raise ModuleNotFoundError(
        "seed_rs.torch needs PyTorch, which seed-rs does not install: pip install torch"
    ) from e

from .network import NetworkDef, network_def
from .policy import Policy

__all__ = ["SeedPolicyModule", "load_policy"]


class _Torso(nn.Module):
    def __init__(self, net: NetworkDef, weights):
        super().__init__()
        self.layers = list(net.torso)
        self.conv = any(layer.kind == "conv" for layer in self.layers)
        for layer in self.layers:
            w = weights[f"{layer.name}.weight"]
            if layer.kind == "conv":
                module = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], stride=layer.stride)
            else:
                module = nn.Linear(w.shape[1], w.shape[0])
            # "torso.0" -> "0", "torso.conv1" -> "conv1": the checkpoint's names.
            self.add_module(layer.name.split(".", 1)[1], module)

    def forward(self, x):
        if not self.conv:
            x = torch.flatten(x, 1)
        for layer in self.layers:
            module = getattr(self, layer.name.split(".", 1)[1])
            if layer.kind == "linear":
                x = torch.flatten(x, 1)
            x = module(x)
            x = torch.tanh(x) if layer.activation == "tanh" else torch.relu(x)
        return x


class _LstmCell(nn.Module):
    """One LSTM cell with ``nn.LSTM``'s parameter names and gate order
    (``weight_ih_l0`` ``[4H, in]``, ``weight_hh_l0``, ``bias_ih_l0``,
    ``bias_hh_l0``; gates ``i, f, g, o``), as plain tensor ops, so
    ``torch.export`` sees no fused RNN kernel."""

    def __init__(self, in_dim: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.weight_ih_l0 = nn.Parameter(torch.zeros(4 * hidden, in_dim))
        self.weight_hh_l0 = nn.Parameter(torch.zeros(4 * hidden, hidden))
        self.bias_ih_l0 = nn.Parameter(torch.zeros(4 * hidden))
        self.bias_hh_l0 = nn.Parameter(torch.zeros(4 * hidden))

    def forward(self, x, h, c):
        gates = (x @ self.weight_ih_l0.T + self.bias_ih_l0 + h @ self.weight_hh_l0.T + self.bias_hh_l0)
        i, f, g, o = gates.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class SeedPolicyModule(nn.Module):
    """The network of a seed-rs checkpoint (see the module docs)."""

    def __init__(self, net: NetworkDef, weights):
        super().__init__()
        self.net = net
        self.torso = _Torso(net, weights)
        features = weights["policy.weight"].shape[1]
        if net.lstm is not None:
            in_dim = weights["core.weight_ih_l0"].shape[1]
            self.core = _LstmCell(in_dim, net.lstm)
        self.policy = nn.Linear(features, weights["policy.weight"].shape[0])
        self.value = nn.Linear(features, 1)
        if net.log_std_range is not None:
            self.log_std = nn.Parameter(torch.zeros(weights["log_std"].shape))
        self.input_scale = net.input_scale

    def _heads(self, x):
        params = self.policy(x)
        if self.net.log_std_range is not None:
            lo, hi = self.net.log_std_range
            log_std = torch.clamp(self.log_std, lo, hi).expand_as(params)
            params = torch.cat([params, log_std], dim=1)
        return params, self.value(x).squeeze(-1)

    def _input(self, obs):
        x = obs.to(torch.float32)
        if self.input_scale is not None:
            x = x * self.input_scale
        return x

    def forward(self, obs, h=None, c=None):
        x = self.torso(self._input(obs))
        if self.net.lstm is None:
            return self._heads(x)
        if h is None:
            h = torch.zeros(x.shape[0], self.net.lstm, dtype=x.dtype)
            c = torch.zeros_like(h)
        h, c = self.core(x, h, c)
        params, values = self._heads(h)
        return params, values, h, c

    def greedy(self, params):
        """The most likely action per row: the argmax (discrete), or a Gaussian's means."""
        if self.net.log_std_range is None:
            return torch.argmax(params, dim=1)
        return params[:, : params.shape[1] // 2]


def load_policy(path: Union[str, os.PathLike, Policy]) -> SeedPolicyModule:
    """The policy at ``path`` (a run directory, a checkpoint directory, or a loaded
    :class:`seed_rs.Policy`) as a :class:`SeedPolicyModule` in eval mode."""
    policy = path if isinstance(path, Policy) else Policy.load(path)
    weights = policy.weights()
    module = SeedPolicyModule(network_def(policy.spec), weights)
    module.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()}, strict=True)
    return module.eval()
