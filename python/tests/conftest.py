"""Fixtures: a real `learner` process to connect the Python actor to.

The learner binary is ``$SEED_LEARNER_BIN``, else ``<repo>/target/release/learner``
(``cargo build --release -p seed-learner-cli``). Each learner listens on a
free port of 127.0.0.1 (``--listen 127.0.0.1:0``; the address is read from
its "learner listening" log line), serves remote actors only
(``--local-actors 0``) and is stopped at the end of the test.

What the learner serves is a parameter: ``learner_env_flags`` (default
``--env cartpole``) can be overridden per test, e.g. with
``@pytest.mark.parametrize("learner_env_flags", [["--env", "pendulum"]])``;
``start_learner(train=True, extra=[...])`` adds training flags.
"""

from __future__ import annotations

import gc
import os
import pathlib
import re
import subprocess
import threading
from typing import List, Optional, Sequence

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
LEARNER_BIN = pathlib.Path(os.environ.get("SEED_LEARNER_BIN", REPO / "target" / "release" / "learner"))
#: What the learner must serve for Gymnasium's CartPole-v1.
CARTPOLE_FLAGS = ["--env", "cartpole"]
#: How long a learner may take to start listening (a loaded CI machine).
START_TIMEOUT_S = 60.0

_LISTENING = re.compile(r"learner listening addr=(\S+)")


class ListeningProcess:
    """A server binary on a free port and its log (read continuously so it
    never blocks); ``addr`` comes from the log line ``listening`` matches."""

    name = "process"

    def __init__(self, binary: pathlib.Path, args: Sequence[str], env: dict, listening: "re.Pattern[str]"):
        self.args = list(args)
        self._pattern = listening
        self.proc = subprocess.Popen(
            [str(binary), *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.log: List[str] = []
        self.addr: Optional[str] = None
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listening.wait(START_TIMEOUT_S) or self.addr is None:
            self.stop()
            raise RuntimeError(f"{self.name} did not start listening: {' '.join(self.args)}\n{self.output()}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line)
            m = self._pattern.search(line)
            if m and self.addr is None:
                self.addr = m.group(1)
                self._listening.set()
        self._listening.set()  # exited: wake the waiter

    def output(self) -> str:
        return "".join(self.log)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._reader.join(timeout=30)


class Learner(ListeningProcess):
    """One `learner` process and its log."""

    name = "learner"

    def __init__(self, args: Sequence[str]):
        env = dict(os.environ, RAYON_NUM_THREADS="1", NO_COLOR="1", RUST_LOG="info")
        super().__init__(LEARNER_BIN, args, env, _LISTENING)

    @property
    def port(self) -> int:
        assert self.addr is not None
        return int(self.addr.rsplit(":", 1)[1])

    def kill(self) -> None:
        """SIGKILL: the learner vanishes without closing its streams."""
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)


@pytest.fixture
def learner_env_flags() -> List[str]:
    """The env flags the learner is started with (override per test)."""
    return list(CARTPOLE_FLAGS)


@pytest.fixture
def start_learner(learner_env_flags):
    """``start_learner(env_flags=None, train=False, extra=(), listen="127.0.0.1:0") -> Learner``.

    Serving only (``--no-train``) unless ``train``; every learner started is
    stopped after the test.
    """
    if not LEARNER_BIN.exists():
        pytest.fail(
            f"no learner binary at {LEARNER_BIN}: build it with "
            "`cargo build --release -p seed-learner-cli` or set SEED_LEARNER_BIN"
        )
    started: List[Learner] = []

    def start(
        env_flags: Optional[Sequence[str]] = None,
        train: bool = False,
        extra: Sequence[str] = (),
        listen: str = "127.0.0.1:0",
    ) -> Learner:
        flags = list(learner_env_flags if env_flags is None else env_flags)
        args = ["--local-actors", "0", "--listen", listen, "--progress-secs", "0", *flags]
        if not train:
            args.append("--no-train")
        learner = Learner([*args, *extra])
        started.append(learner)
        return learner

    yield start
    for learner in started:
        learner.stop()


@pytest.fixture
def learner(start_learner) -> Learner:
    """A serving-only learner for ``learner_env_flags`` (CartPole by default)."""
    return start_learner()


# --- The replay service -----------------------------------------------------
#
# The replay server binary is ``$SEED_REPLAY_SERVER_BIN``, else
# ``<repo>/target/release/replay-server`` (``cargo build --release -p
# seed-replay-service``). ``start_replay_server(tables, token=None)`` writes
# the tables' JSON config into the test's tmp_path and starts a server on a
# free port of 127.0.0.1 (the address is read from its "replay server
# listening" log line); every server started is stopped after the test.

REPLAY_SERVER_BIN = pathlib.Path(
    os.environ.get("SEED_REPLAY_SERVER_BIN", REPO / "target" / "release" / "replay-server")
)
_REPLAY_LISTENING = re.compile(r"replay server listening addr=(\S+)")


class ReplayServer(ListeningProcess):
    """One `replay-server` process and its log."""

    name = "replay-server"

    def __init__(self, config_path: pathlib.Path, extra: Sequence[str] = ()):
        env = dict(os.environ, NO_COLOR="1", RUST_LOG="info")
        env.pop("SEED_TOKEN", None)
        args = ["--config", str(config_path), "--listen", "127.0.0.1:0", *extra]
        super().__init__(REPLAY_SERVER_BIN, args, env, _REPLAY_LISTENING)


@pytest.fixture
def start_replay_server(tmp_path):
    """``start_replay_server(tables, token=None, checkpoint_dir=None) -> ReplayServer``.

    ``tables`` is the config file's list of table objects (see the
    seed-replay-service crate docs).
    """
    if not REPLAY_SERVER_BIN.exists():
        pytest.fail(
            f"no replay-server binary at {REPLAY_SERVER_BIN}: build it with "
            "`cargo build --release -p seed-replay-service` or set SEED_REPLAY_SERVER_BIN"
        )
    started: List[ReplayServer] = []

    def start(tables, token: Optional[str] = None, checkpoint_dir=None) -> ReplayServer:
        import json

        config = {"tables": list(tables)}
        if checkpoint_dir is not None:
            config["checkpoint_dir"] = str(checkpoint_dir)
        path = tmp_path / f"replay-{len(started)}.json"
        path.write_text(json.dumps(config))
        extra = [] if token is None else ["--token", token]
        server = ReplayServer(path, extra)
        started.append(server)
        return server

    yield start
    # Collect the test's garbage first: a client kept alive by a reference
    # cycle (an exception's traceback holds the test's frame) keeps its
    # connection open, and a stopping server waits for open connections
    # (5 s) before it exits.
    gc.collect()
    for server in started:
        server.stop()
