"""seed_rs.make: env ids with their preprocessing, and clear errors for missing packages."""

import sys

import gymnasium as gym
import pytest

from seed_rs.actor import main
from seed_rs.make import channels_last_for, env_factory, make_env


def test_plain_ids_are_gymnasium_make_with_kwargs():
    env = make_env("CartPole-v1", max_episode_steps=7)
    assert env.spec.id == "CartPole-v1" and env.spec.max_episode_steps == 7
    made = env_factory("CartPole-v1")()
    assert isinstance(made, gym.Env) and made.spec.id == "CartPole-v1"


def test_only_minatar_is_channels_last():
    assert channels_last_for("MinAtar/Breakout-v1") is True
    assert channels_last_for("ALE/Pong-v5") is None
    assert channels_last_for("CartPole-v1") is None


def test_atari_without_ale_py_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py now fails
    with pytest.raises(ModuleNotFoundError, match="pip install ale-py"):
        make_env("ALE/Pong-v5")


def test_minatar_without_the_package_says_what_to_install(monkeypatch):
    if "MinAtar/Breakout-v1" in gym.registry:
        pytest.skip("MinAtar is installed and registered")
    monkeypatch.setitem(sys.modules, "minatar", None)
    monkeypatch.setitem(sys.modules, "minatar.gym", None)
    with pytest.raises(ModuleNotFoundError, match="pip install minatar"):
        make_env("MinAtar/Breakout-v1")


def test_the_cli_turns_a_missing_package_into_exit_status_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ale_py", None)
    assert main(["--env", "ALE/Pong-v5", "--envs", "1", "--learner", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "pip install ale-py" in err and "Traceback" not in err
