#!/usr/bin/env python3
"""The PyTorch module of every torso against seed_rs.Policy, on the same inputs.

For each architecture the learner builds (the CartPole MLP, an LSTM core, a
Gaussian head, R2D2's dueling head, the MinAtar and Atari conv torsos) this
trains a short run with the learner binary, loads it as ``seed_rs.Policy``
and as ``seed_rs.torch.load_policy``, feeds both the same random batch (and
recurrent state) and reports the largest absolute and relative differences
of the heads and the state; then ``torch.export`` exports the module. Exit
status 1 when any difference is above 1e-5 (relative, or absolute below 1)
or an export fails.

PyTorch is not a dependency of seed-rs, and too large for CI's budget, so
CI checks the same weight mapping against a numpy forward
(``python/tests/test_policy.py``); this script is run by hand where torch is
installed, and its output is committed::

    python scripts/check-torch-policy.py --learner target/release/learner \\
        --out benches/results/policy/torch_equivalence.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

import numpy as np
import torch

import seed_rs
import seed_rs.torch
from seed_rs.spaces import BoxActions

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benches" / "python"))
from policy_bench import cpu_model  # noqa: E402  (the machine line both record)

#: (torso, learner flags). Each run stops after --max-env-steps.
CASES = [
    ("mlp (CartPole)", ["--env", "cartpole"]),
    ("mlp + lstm core", ["--env", "cartpole", "--lstm", "--lstm-size", "32"]),
    ("mlp, gaussian head (Pendulum)", ["--env", "pendulum"]),
    ("mlp + lstm, r2d2 dueling head", ["--env", "cartpole", "--algo", "r2d2"]),
    ("conv 10x10 (MinAtar)", ["--env", "synthetic", "--obs-shape", "4,10,10", "--obs-dtype", "u8",
                              "--num-actions", "6"]),
    ("conv 10x10 + lstm", ["--env", "synthetic", "--obs-shape", "4,10,10", "--obs-dtype", "u8",
                           "--num-actions", "6", "--lstm"]),
    ("conv 84x84 (Atari)", ["--env", "synthetic", "--obs-shape", "4,84,84", "--obs-dtype", "u8",
                            "--num-actions", "6", "--local-actors", "1", "--envs-per-actor", "4"]),
]

TOLERANCE = 1e-5


def train(learner: str, run: pathlib.Path, flags) -> None:
    subprocess.run(
        [learner, "--listen", "127.0.0.1:0", "--progress-secs", "0", "--run-dir", str(run),
         "--max-env-steps", "3000", *flags],
        check=True, capture_output=True, timeout=600, env={"RAYON_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )


def diff(a, b) -> tuple[float, float]:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = np.abs(a - b)
    return float(d.max()), float((d / np.maximum(np.abs(b), 1.0)).max())


def check(name: str, run: pathlib.Path, rows: int = 8) -> dict:
    policy = seed_rs.Policy.load(run)
    module = seed_rs.torch.load_policy(policy)
    spec = policy.spec
    rng = np.random.default_rng(0)
    shape = (rows, *spec.obs_shape)
    obs = (rng.integers(0, 256, size=shape, dtype=np.uint8) if spec.obs_dtype == "u8"
           else rng.normal(size=shape).astype(np.float32))
    state = None
    if spec.recurrent:
        state = tuple(rng.normal(size=(rows, spec.lstm_size)).astype(np.float32) for _ in range(2))
    params, values, next_state = policy.forward(obs, state=state)
    x = torch.from_numpy(obs)
    with torch.no_grad():
        if spec.recurrent:
            h, c = (torch.from_numpy(s) for s in state)
            t_params, t_values, t_h, t_c = module(x, h, c)
        else:
            t_params, t_values = module(x)
    diffs = {"params": diff(t_params.numpy(), params), "values": diff(t_values.numpy(), values)}
    if spec.recurrent:
        diffs["h"] = diff(t_h.numpy(), next_state[0])
        diffs["c"] = diff(t_c.numpy(), next_state[1])
    ours = policy.act(obs, greedy=True, state=state)
    ours = ours[0] if spec.recurrent else ours
    theirs = module.greedy(t_params).numpy()
    if isinstance(spec.action, BoxActions):
        # seed_rs.Policy clips to the env's bounds, as actors do; the module gives the mean.
        theirs = np.clip(theirs, spec.action.low, spec.action.high)
        greedy_equal = bool(np.allclose(theirs, ours, rtol=TOLERANCE, atol=TOLERANCE))
    else:
        greedy_equal = bool(np.array_equal(theirs, ours))
    args = (x, torch.from_numpy(state[0]), torch.from_numpy(state[1])) if spec.recurrent else (x,)
    try:
        torch.export.export(module, args)
        exported = "ok"
    except Exception as e:  # report, do not stop
        exported = f"{type(e).__name__}: {e}"[:300]
    worst = max(rel for _abs, rel in diffs.values())
    return {
        "torso": name,
        "obs": f"{list(spec.obs_shape)} {spec.obs_dtype}",
        "head": spec.head,
        "lstm": spec.lstm_size,
        "parameters": int(sum(p.numel() for p in module.parameters())),
        "max_abs_diff": {k: a for k, (a, _r) in diffs.items()},
        "max_rel_diff": {k: r for k, (_a, r) in diffs.items()},
        "greedy_actions_equal": greedy_equal,
        "torch_export": exported,
        "ok": worst <= TOLERANCE and greedy_equal and exported == "ok",
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--learner", default=os.environ.get("SEED_LEARNER_BIN", str(REPO / "target/release/learner")))
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, flags) in enumerate(CASES):
            run = pathlib.Path(tmp) / f"run{i}"
            train(args.learner, run, flags)
            rows.append(check(name, run))
            r = rows[-1]
            print(f"{r['torso']:34s} {r['obs']:14s} {r['head']:12s} params {r['parameters']:>9,d}  "
                  f"max |diff| {max(r['max_abs_diff'].values()):.2e}  max rel {max(r['max_rel_diff'].values()):.2e}  "
                  f"greedy equal {r['greedy_actions_equal']}  export {r['torch_export']}", flush=True)
    record = {
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}",
        "torch": torch.__version__,
        "numpy": np.__version__,
        "tolerance": TOLERANCE,
        "rows": rows,
    }
    if args.out:
        out = pathlib.Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=2) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
