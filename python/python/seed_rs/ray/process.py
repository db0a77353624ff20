"""A seed-rs program (the learner, the replay server) run as a child of a Ray
actor: started with the parent-death signal, its log read continuously, its
listening address taken from the log, its exit watched.

Why a child process and not the program in the Ray worker itself: Ray's
worker owns signals and threads of its own, and a program that exits must
not take the worker down with it unless that is meant. When the child
exits on its own with an error, :class:`ChildProgram` ends the Ray actor's
process (``os._exit``) so that Ray restarts the actor by its restart policy;
when the Ray actor's process dies first, the kernel sends the child SIGTERM
(``PR_SET_PDEATHSIG``) and SIGKILL after a grace period is not needed: the
programs stop on SIGTERM (the learner writes its checkpoint).
"""

from __future__ import annotations

import collections
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Deque, List, Optional, Sequence

from ..defaults import START_TIMEOUT_S

#: ``prctl`` option: signal this process when its parent thread dies.
_PR_SET_PDEATHSIG = 1
#: Log lines kept for error messages and :meth:`ChildProgram.log_tail`.
LOG_LINES = 400


def seed_rs_command(program: str) -> List[str]:
    """The command that runs a program of this wheel (``learner``,
    ``replay-server``): this interpreter with ``seed_rs.cli``."""
    sub = {"learner": "learner", "replay-server": "replay-server"}[program]
    return [sys.executable, "-m", "seed_rs.cli", sub]


# Looked up here, in the parent: between fork and exec the child should run
# as little as it can (the parent has other threads).
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class ProgramError(RuntimeError):
    """A program exited (or never listened); the message names it and
    carries the end of its log."""


class ChildProgram:
    """``command`` run as a child; ``listening`` is a regex whose group 1 is
    the address it logs once it serves.

    The child is started from a thread that lives as long as the child:
    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked exits, so a
    short-lived thread would stop the program with it.
    """

    def __init__(self, name: str, command: Sequence[str], listening: str,
                 env: Optional[dict] = None, exit_on_failure: bool = True):
        self.name = name
        self.command = list(command)
        self._listening = re.compile(listening)
        self._env = env
        self._exit_on_failure = exit_on_failure
        self._lines: Deque[str] = collections.deque(maxlen=LOG_LINES)
        self._address: Optional[str] = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._stopping = False
        self.returncode: Optional[int] = None
        self._proc: Optional[subprocess.Popen] = None
        self._start_error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._keep, name=f"{name}-keeper", daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        try:
            self._proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, errors="replace", env=self._env,
                preexec_fn=_die_with_parent,
            )
        except BaseException as e:  # noqa: BLE001 - reported by wait_listening
            self._start_error = e
            self._ready.set()
            self._done.set()
            return
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            line = line.rstrip("\n")
            self._lines.append(line)
            if self._address is None:
                m = self._listening.search(line)
                if m:
                    self._address = m.group(1)
                    self._ready.set()
        self.returncode = self._proc.wait()
        self._ready.set()
        self._done.set()
        if self.returncode != 0 and not self._stopping and self._address is not None \
                and self._exit_on_failure:
            # Died on its own after it served: end this Ray actor's process
            # so that Ray restarts the actor (its restart policy).
            sys.stderr.write(f"seed_rs.ray: {self.name} exited with {self.returncode}; "
                             "ending the actor for Ray to restart\n" + self.log_tail(20) + "\n")
            sys.stderr.flush()
            os._exit(1)

    def wait_listening(self, timeout: float = START_TIMEOUT_S) -> str:
        """The address the program listens on; :class:`ProgramError` if it
        exits first or takes longer than ``timeout``."""
        if not self._ready.wait(timeout):
            self.stop()
            raise ProgramError(f"{self.name} did not listen within {timeout:.0f} s "
                               f"({' '.join(self.command)}); its log:\n{self.log_tail()}")
        if self._start_error is not None:
            raise ProgramError(f"{self.name} could not start ({' '.join(self.command)}): "
                               f"{self._start_error}")
        if self._address is None:
            raise ProgramError(f"{self.name} exited with {self.returncode} before listening "
                               f"({' '.join(self.command)}); its log:\n{self.log_tail()}")
        return self._address

    @property
    def pid(self) -> Optional[int]:
        return None if self._proc is None else self._proc.pid

    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """The exit code once the program has exited (``None`` on timeout)."""
        self._done.wait(timeout)
        return self.returncode

    def stop(self, grace: float = 30.0) -> Optional[int]:
        """SIGTERM (the programs stop cleanly on it), SIGKILL after ``grace``."""
        self._stopping = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            if not self._done.wait(grace):
                proc.kill()
                self._done.wait(10)
        return self.returncode

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(list(self._lines)[-n:])


def wait_for(predicate, timeout: float, what: str, every: float = 0.2):
    """Polls ``predicate`` until it returns something truthy; ``TimeoutError``
    naming ``what`` after ``timeout``. For launchers and tests that watch a
    cluster from outside (no callback exists for "slots are live")."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)
