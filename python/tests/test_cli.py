"""``python -m seed_rs.actor``: flags, a run against a learner, unsupported envs."""

from __future__ import annotations

import json
import subprocess
import sys

from seed_rs.actor import parser

TIMEOUT_S = 180


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "seed_rs.actor", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def test_help_documents_every_flag_and_its_default():
    for action in parser()._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{action.option_strings} has no help"
        assert "[default:" in action.help or "[required]" in action.help, action.option_strings
    out = run_cli("--help")
    assert out.returncode == 0
    for flag in [
        "--env", "--envs", "--learner", "--token", "--env-kwargs", "--max-steps",
        "--max-seconds", "--seed", "--channels-last", "--actor-id",
    ]:  # fmt: skip
        assert flag in out.stdout


def test_cartpole_run_prints_a_summary_line(learner, tmp_path):
    summary = tmp_path / "actor.json"
    out = run_cli(
        "--env", "CartPole-v1", "--envs", "4", "--learner", learner.addr,
        "--max-steps", "1000", "--max-seconds", "120", "--seed", "3",
        "--env-kwargs", '{"max_episode_steps": 50}', "--summary-json", str(summary),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seed_rs actor: "), out.stdout
    report = json.loads(summary.read_text())
    assert report["env_steps"] >= 1000 and report["sessions"] == 1


def test_an_unsupported_env_exits_2_with_the_message_and_no_traceback():
    # Blackjack's observations are a Tuple of Discretes.
    out = run_cli("--env", "Blackjack-v1", "--envs", "1", "--learner", "127.0.0.1:1")
    assert out.returncode == 2
    assert "observation space Tuple" in out.stderr and "supported" in out.stderr
    assert "Traceback" not in out.stderr


def test_bad_env_kwargs_are_a_usage_error():
    out = run_cli("--env", "CartPole-v1", "--env-kwargs", "[1]")
    assert out.returncode == 2 and "JSON object" in out.stderr
