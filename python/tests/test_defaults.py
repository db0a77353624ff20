"""Each default once: ``seed_rs.defaults`` holds the values the actor, its
command line and ``seed_rs.ray`` share, reading those whose home is Rust
from the compiled module.

What breaks these: a flag or a parameter whose default is written out
again instead of read from ``seed_rs.defaults`` (and so can drift from
it), a help text that states another value than the flag's default, and
a Python value that differs from the Rust default it stands for.
"""

from __future__ import annotations

import inspect

import pytest

from seed_rs import _native, defaults


def default_of(fn, name):
    return inspect.signature(fn).parameters[name].default


def option(parser, flag):
    return next(a for a in parser._actions if flag in a.option_strings)


def test_the_rust_homes_are_read_not_restated():
    assert defaults.LEARNER_ADDR == _native.DEFAULT_LEARNER_ADDR
    assert defaults.NUM_ENVS == _native.DEFAULT_NUM_ENVS
    host, port = defaults.LEARNER_ADDR.rsplit(":", 1)
    assert host and int(port) > 0
    assert isinstance(defaults.NUM_ENVS, int) and defaults.NUM_ENVS > 0


def test_the_actor_and_its_command_line_read_the_defaults(monkeypatch):
    monkeypatch.delenv("SEED_LEARNER", raising=False)
    from seed_rs import actor, gym_actor

    p = actor.parser()
    envs, learner = option(p, "--envs"), option(p, "--learner")
    assert envs.default == defaults.NUM_ENVS
    assert learner.default == defaults.LEARNER_ADDR
    help_text = " ".join(p.format_help().split())
    assert f"[default: {defaults.NUM_ENVS}]" in help_text
    assert f"else {defaults.LEARNER_ADDR}]" in help_text
    assert default_of(gym_actor.Actor, "learner") == defaults.LEARNER_ADDR
    assert gym_actor.DEFAULT_LEARNER == defaults.LEARNER_ADDR
    assert gym_actor.DEFAULT_NUM_ENVS == defaults.NUM_ENVS
    monkeypatch.setenv("SEED_LEARNER", "10.0.0.9:4000")
    assert option(actor.parser(), "--learner").default == "10.0.0.9:4000"


def test_seed_rs_ray_reads_the_defaults():
    pytest.importorskip("ray")
    from seed_rs.ray import __main__ as ray_main
    from seed_rs.ray.actors import ActorFleet
    from seed_rs.ray.learner import LearnerService
    from seed_rs.ray.process import ChildProgram
    from seed_rs.ray.replay import ReplayService

    train = ray_main.parser()._subparsers._group_actions[0].choices["train"]
    per_actor = option(train, "--envs-per-actor")
    assert per_actor.default == defaults.ENVS_PER_ACTOR
    assert f"[default: {defaults.ENVS_PER_ACTOR}]" in " ".join(train.format_help().split())
    assert default_of(ActorFleet, "envs_per_actor") == defaults.ENVS_PER_ACTOR
    for fn, name in [
        (ActorFleet.placements, "timeout"),
        (ActorFleet.check_started, "timeout"),
        (LearnerService, "start_timeout"),
        (ReplayService, "start_timeout"),
        (ChildProgram.wait_listening, "timeout"),
    ]:
        assert default_of(fn, name) == defaults.START_TIMEOUT_S, fn.__qualname__
