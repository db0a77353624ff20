#!/usr/bin/env python3
"""PyTorch on the CPU running the learner's four networks: the reference
side of ``benches/cpu_math.py``.

The same cases as ``cpu_math_bench`` (the Rust side), written as a PyTorch
user would write them (CleanRL's style: ``nn.Module``s, ``torch.optim.Adam``,
``clip_grad_norm_``):

- ``forward``: what an inference thread does per batch. A host buffer of
  observations (u8 frames or f32 vectors, a numpy array) becomes a tensor
  (``torch.from_numpy``, no copy), u8 is scaled by 1/255, the network runs
  under ``torch.inference_mode()``, and one action per row is sampled from
  the logits (``torch.multinomial`` of the softmax) and returned as numpy.
  The LSTM model takes and returns its ``[B, H]`` state too.
- ``train``: one training step on a batch of ``B`` unrolls of ``T``
  transitions (``T + 1`` observations each) already in memory: the
  network over all ``(T + 1)·B`` observations (the LSTM stepped through
  time, its state zeroed where an episode starts), the IMPALA loss with
  V-trace targets (no gradient through them), backward, the global
  gradient norm clipped to 40, Adam. Rows are the ``T·B`` transitions.

Models (the learner's, layer for layer; ``seed_learner::model``):

- ``mlp``: CartPole, 4 -> 64 -> 64 (tanh), heads 2 + 1; train B 16 x T 16;
- ``lstm``: masked CartPole (2 floats), the MLP then an LSTM core of 64;
  train B 16 x T 32 (the ``cartpole-masked-lstm`` preset);
- ``minatar``: ``[4, 10, 10]`` u8, conv 3x3/1 (16), linear 256, heads 6 + 1;
  train B 16 x T 20 (the ``minatar`` preset);
- ``atari``: ``[4, 84, 84]`` u8, conv 8x8/4 (16), conv 4x4/2 (32), linear
  256, heads 6 + 1; train B 32 x T 20 (the ``atari`` preset).

Inputs: Atari frames are uniform random bytes; MinAtar frames are 0 or 255,
8% of cells on (as a MinAtar Breakout frame: bricks, paddle, ball and
trail); vectors are standard normal.

Each case warms up, then runs until ``--budget-ms`` (at least 5 times) and
reports the median iteration. ``--threads`` sets ``torch.set_num_threads``
(and one inter-op thread). One JSON object per line on stdout.

Usage: ``python benches/python/torch_cpu_bench.py --threads 2 [--cases
forward,train] [--models mlp,atari] [--batches 1,64]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch
from torch import nn

# What each model is (shared with the Rust side by name; see cpu_math.py).
MODELS = {
    "mlp": {"obs": (4,), "u8": False, "actions": 2, "lstm": None, "train": (16, 16)},
    "lstm": {"obs": (2,), "u8": False, "actions": 2, "lstm": 64, "train": (16, 32)},
    "minatar": {"obs": (4, 10, 10), "u8": True, "actions": 6, "lstm": None, "train": (16, 20),
                "cells_on": 0.08},
    "atari": {"obs": (4, 84, 84), "u8": True, "actions": 6, "lstm": None, "train": (32, 20)},
}
FORWARD_BATCHES = [1, 16, 64, 256, 1024]

GAMMA = 0.99
BASELINE_COST = 0.5
ENTROPY_COST = 0.01
MAX_GRAD_NORM = 40.0


def conv_out(size: int, kernel: int, stride: int) -> int:
    return (size - kernel) // stride + 1


class Net(nn.Module):
    """The learner's actor-critic for one of MODELS."""

    def __init__(self, spec: dict):
        super().__init__()
        obs = spec["obs"]
        self.u8 = spec["u8"]
        if len(obs) == 3:
            c, h, w = obs
            if h >= 36:
                h1, w1 = conv_out(h, 8, 4), conv_out(w, 8, 4)
                h2, w2 = conv_out(h1, 4, 2), conv_out(w1, 4, 2)
                self.torso = nn.Sequential(
                    nn.Conv2d(c, 16, 8, 4), nn.ReLU(),
                    nn.Conv2d(16, 32, 4, 2), nn.ReLU(),
                    nn.Flatten(), nn.Linear(32 * h2 * w2, 256), nn.ReLU(),
                )
            else:
                h1, w1 = conv_out(h, 3, 1), conv_out(w, 3, 1)
                self.torso = nn.Sequential(
                    nn.Conv2d(c, 16, 3, 1), nn.ReLU(),
                    nn.Flatten(), nn.Linear(16 * h1 * w1, 256), nn.ReLU(),
                )
            features = 256
        else:
            self.torso = nn.Sequential(
                nn.Linear(obs[0], 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
            )
            features = 64
        self.core = nn.LSTMCell(features, spec["lstm"]) if spec["lstm"] else None
        if self.core is not None:
            features = spec["lstm"]
        self.policy = nn.Linear(features, spec["actions"])
        self.value = nn.Linear(features, 1)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float()
        if self.u8:
            x = x * (1.0 / 255.0)
        return self.torso(x)

    def step(self, obs, state):
        """One inference step: logits [B, A], values [B], next state."""
        x = self.features(obs)
        if self.core is not None:
            h, c = self.core(x, state)
            state, x = (h, c), h
        return self.policy(x), self.value(x).squeeze(-1), state

    def unroll(self, obs, episode_start):
        """obs [T+1, B, ...]: logits [T+1, B, A], values [T+1, B]."""
        t1, b = obs.shape[:2]
        x = self.features(obs.reshape(t1 * b, *obs.shape[2:]))
        if self.core is not None:
            x = x.reshape(t1, b, -1)
            h = torch.zeros(b, self.core.hidden_size)
            c = torch.zeros(b, self.core.hidden_size)
            outs = []
            for t in range(t1):
                keep = (1.0 - episode_start[t]).unsqueeze(1)
                h, c = self.core(x[t], (h * keep, c * keep))
                outs.append(h)
            x = torch.stack(outs).reshape(t1 * b, -1)
        logits = self.policy(x).reshape(t1, b, -1)
        return logits, self.value(x).reshape(t1, b)


def vtrace_loss(logits, values, batch):
    """IMPALA's loss with V-trace targets (Espeholt et al. 2018, eq. 1),
    as the learner's ``impala_loss`` (transition t: obs t -> t+1, its
    reward and termination at t+1)."""
    t = logits.shape[0] - 1
    log_pi_all = torch.log_softmax(logits[:t], -1)
    actions = batch["actions"][:t].unsqueeze(-1)
    log_pi = log_pi_all.gather(-1, actions).squeeze(-1)
    with torch.no_grad():
        log_mu = torch.log_softmax(batch["behaviour"][:t], -1).gather(-1, actions).squeeze(-1)
        rewards = batch["rewards"][1:]
        discounts = GAMMA * (1.0 - batch["terminated"][1:])
        v = values.detach()
        rhos = torch.exp(log_pi.detach() - log_mu)
        clipped = rhos.clamp(max=1.0)
        cs = rhos.clamp(max=1.0)
        deltas = clipped * (rewards + discounts * v[1:] - v[:t])
        acc = torch.zeros_like(v[0])
        vs_minus_v = torch.empty_like(deltas)
        for k in range(t - 1, -1, -1):
            acc = deltas[k] + discounts[k] * cs[k] * acc
            vs_minus_v[k] = acc
        vs = vs_minus_v + v[:t]
        vs_next = torch.cat([vs[1:], v[t:]], 0)
        pg_adv = clipped * (rewards + discounts * vs_next - v[:t])
    pg_loss = -(pg_adv * log_pi).mean()
    value_loss = 0.5 * ((vs - values[:t]) ** 2).mean()
    entropy = -(log_pi_all.exp() * log_pi_all).sum(-1).mean()
    return pg_loss + BASELINE_COST * value_loss - ENTROPY_COST * entropy


def observations(spec: dict, rows: int, rng: np.random.Generator) -> np.ndarray:
    shape = (rows, *spec["obs"])
    if "cells_on" in spec:
        return np.where(rng.random(shape) < spec["cells_on"], 255, 0).astype(np.uint8)
    if spec["u8"]:
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    return rng.standard_normal(shape, dtype=np.float32)


def time_it(fn, budget_s: float) -> tuple[float, int]:
    """Median seconds of fn() after a warm-up, and the iterations timed."""
    for _ in range(3):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget_s and len(times) < 100_000):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2], len(times)


def forward_case(name: str, batch: int, budget_s: float) -> dict:
    spec = MODELS[name]
    torch.manual_seed(0)
    net = Net(spec).eval()
    rng = np.random.default_rng(0)
    host = observations(spec, batch, rng)
    hidden = spec["lstm"]
    h = np.zeros((batch, hidden or 0), np.float32)
    c = np.zeros_like(h)

    def iteration():
        with torch.inference_mode():
            obs = torch.from_numpy(host)
            state = (torch.from_numpy(h), torch.from_numpy(c)) if hidden else None
            logits, _values, state = net.step(obs, state)
            actions = torch.multinomial(torch.softmax(logits, -1), 1).squeeze(-1).numpy()
            if hidden:
                state[0].numpy(), state[1].numpy()
            return actions

    median, iterations = time_it(iteration, budget_s)
    return {"kind": "forward", "model": name, "rows": batch, "median_us": median * 1e6,
            "iterations": iterations, "rows_per_second": batch / median}


def train_case(name: str, budget_s: float) -> dict:
    spec = MODELS[name]
    b, t = spec["train"]
    torch.manual_seed(0)
    net = Net(spec)
    optimizer = torch.optim.Adam(net.parameters(), lr=6e-4, eps=1e-8)
    rng = np.random.default_rng(0)
    obs = torch.from_numpy(observations(spec, (t + 1) * b, rng).reshape(t + 1, b, *spec["obs"]))
    batch = {
        "actions": torch.from_numpy(rng.integers(0, spec["actions"], (t + 1, b))),
        "behaviour": torch.from_numpy(rng.standard_normal((t + 1, b, spec["actions"]), np.float32)),
        "rewards": torch.from_numpy(rng.standard_normal((t + 1, b), np.float32)),
        "terminated": torch.from_numpy((rng.random((t + 1, b)) < 0.02).astype(np.float32)),
        "episode_start": torch.from_numpy((rng.random((t + 1, b)) < 0.02).astype(np.float32)),
    }

    def iteration():
        logits, values = net.unroll(obs, batch["episode_start"])
        loss = vtrace_loss(logits, values, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), MAX_GRAD_NORM)
        optimizer.step()
        return loss.item()

    median, iterations = time_it(iteration, budget_s)
    return {"kind": "train", "model": name, "rows": t * b, "batch": b, "unroll": t,
            "median_us": median * 1e6, "iterations": iterations,
            "rows_per_second": t * b / median}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, required=True,
                        help="torch.set_num_threads (the Rust side's RAYON_NUM_THREADS)")
    parser.add_argument("--cases", default="forward,train", help="forward, train or both")
    parser.add_argument("--models", default=",".join(MODELS), help="from: " + ", ".join(MODELS))
    parser.add_argument("--batches", default=",".join(map(str, FORWARD_BATCHES)),
                        help="forward batch sizes")
    parser.add_argument("--budget-ms", type=float, default=1000.0,
                        help="time per case after the warm-up (at least 5 iterations)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            parser.error(f"--models: unknown model {m!r} (expected one of {', '.join(MODELS)})")
    cases = set(args.cases.split(","))
    budget = args.budget_ms / 1000.0
    meta = {"side": "torch", "threads": args.threads, "torch": torch.__version__}
    for m in models:
        if "forward" in cases:
            for batch in (int(x) for x in args.batches.split(",") if x):
                print(json.dumps({**meta, **forward_case(m, batch, budget)}), flush=True)
        if "train" in cases:
            print(json.dumps({**meta, **train_case(m, budget)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
