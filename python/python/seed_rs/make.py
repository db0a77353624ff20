"""`make_env`: a Gymnasium env by id, with the preprocessing the learner expects.

- ``ALE/*`` (Atari, needs ``ale-py``): the standard DQN/IMPALA preprocessing,
  ``gymnasium.make(id, frameskip=1, **kwargs)``, then
  ``AtariPreprocessing(frame_skip=4, screen_size=84, grayscale_obs=True)``
  and ``FrameStackObservation(4)``: uint8 observations ``[4, 84, 84]``.
- ``MinAtar/*`` (needs ``minatar``): the env's bool ``[10, 10, C]`` frames;
  :func:`channels_last_for` says to transpose them to ``[C, 10, 10]`` (u8).
- anything else: ``gymnasium.make(id, **kwargs)``.

Cost: once per env; the wrappers' own per-step cost is the preprocessing's.
"""

from __future__ import annotations

from typing import Optional

import gymnasium as gym

__all__ = ["make_env", "channels_last_for", "env_factory"]


def _register_ale() -> None:
    try:
        import ale_py
    except ImportError as e:
        raise ModuleNotFoundError(
            "ALE/* envs need ale-py and OpenCV: pip install ale-py opencv-python-headless "
            "(or seed-rs[atari])"
        ) from e
    gym.register_envs(ale_py)


def _register_minatar() -> None:
    if "MinAtar/Breakout-v1" in gym.registry:
        return
    try:
        import minatar.gym
    except ImportError as e:
        raise ModuleNotFoundError(
            "MinAtar/* envs need minatar: pip install minatar (or seed-rs[minatar])"
        ) from e
    minatar.gym.register_envs()


def make_env(env_id: str, **kwargs) -> gym.Env:
    """A new env for ``env_id`` (see the module docs for ``ALE/*`` and ``MinAtar/*``).

    Raises:
        ModuleNotFoundError: ``ALE/*`` without ale-py, ``MinAtar/*`` without minatar.
        gymnasium.error.Error: an unknown id, or ``ALE/*`` without OpenCV
            (Gymnasium's messages).
    """
    if env_id.startswith("ALE/"):
        _register_ale()
        env = gym.make(env_id, frameskip=1, **kwargs)
        env = gym.wrappers.AtariPreprocessing(
            env, frame_skip=4, screen_size=84, grayscale_obs=True
        )
        return gym.wrappers.FrameStackObservation(env, 4)
    if env_id.startswith("MinAtar/"):
        _register_minatar()
    return gym.make(env_id, **kwargs)


def channels_last_for(env_id: str) -> Optional[bool]:
    """``True`` for ids whose observations are ``[H, W, C]`` (MinAtar), else ``None``."""
    return True if env_id.startswith("MinAtar/") else None


def env_factory(env_id: str, **kwargs):
    """A zero-argument callable making :func:`make_env` ``(env_id, **kwargs)`` envs (for :class:`seed_rs.Actor`)."""

    def make() -> gym.Env:
        return make_env(env_id, **kwargs)

    make.__qualname__ = make.__name__ = f"make_env({env_id!r})"
    return make
