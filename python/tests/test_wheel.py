"""One wheel, the whole system: a wheel built by ``pip wheel``, installed
into a fresh venv on a PATH without cargo, trains CartPole with
``seed-rs learner`` (its local actors started from the wheel too), and the
other subcommands answer.

The wheel is ``$SEED_RS_WHEEL``, else the newest ``target/wheels/seed_rs-*.whl``
(CI builds it: ``pip wheel ./python -w target/wheels``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


def the_wheel() -> pathlib.Path:
    given = os.environ.get("SEED_RS_WHEEL")
    if given:
        return pathlib.Path(given)
    wheels = sorted((REPO / "target" / "wheels").glob("seed_rs-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        pytest.fail("no wheel: build it with `pip wheel --no-deps ./python -w target/wheels` "
                    "(or set SEED_RS_WHEEL)")
    return wheels[-1]


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> pathlib.Path:
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    # No pip of its own (faster): this interpreter's pip installs into it
    # (the system's where this venv has none, as .ci/run's fallback makes).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable] if importlib.util.find_spec("pip") else ["python3"]
    subprocess.run([*pip, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "-q", str(the_wheel())], check=True, timeout=600)
    return venv


def bare_env(venv: pathlib.Path) -> dict:
    """The venv's bin and the system's, nothing else: no cargo, no rustc."""
    path = f"{venv / 'bin'}:/usr/bin:/bin"
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    return {"PATH": path, "RAYON_NUM_THREADS": "1", "HOME": os.environ.get("HOME", "/tmp")}


def test_the_wheel_trains_cartpole_with_the_learner_subcommand(fresh_venv, tmp_path):
    summary = tmp_path / "summary.json"
    done = subprocess.run(
        ["seed-rs", "learner", "--listen", "127.0.0.1:0", "--max-env-steps", "60000",
         "--summary-json", str(summary)],
        env=bare_env(fresh_venv), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    s = json.loads(summary.read_text())
    # Trained: learner steps taken on the local actors' unrolls.
    assert s["env_steps"] >= 60000 and s["learner_steps"] > 100, s
    assert s["local_actor_failures"] == 0
    # The local actors were this wheel's program, started through Python.
    assert "local actor started" in done.stderr


@pytest.mark.parametrize("sub, text", [
    ("learner", "Central-inference learner"),
    ("replay-server", "--config"),
    ("rust-actor", "--learner"),
    ("gym-actor", "Gymnasium"),
])
def test_every_subcommand_runs_from_the_wheel(fresh_venv, sub, text):
    done = subprocess.run(["seed-rs", sub, "--help"], env=bare_env(fresh_venv),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert text in done.stdout


def test_an_unknown_subcommand_is_a_usage_error(fresh_venv):
    done = subprocess.run(["seed-rs", "learnr"], env=bare_env(fresh_venv),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no subcommand `learnr`" in done.stderr
