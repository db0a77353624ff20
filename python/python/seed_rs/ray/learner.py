"""The learner as a Ray actor (:class:`LearnerService`): the seed-rs learner
program run by a Ray actor placed by resources, restarted by Ray.

- Started with the flags given (``--preset``, ``--config`` and any other:
  this module declares no learner default), plus ``--listen NODE_IP:0``
  (the node's address, a free port) and, unless given, ``--metrics-addr
  NODE_IP:0`` (how the launcher and tests read the learner's live slots).
- The program is this wheel's learner (``python -m seed_rs.cli learner``)
  or a binary given by path (a ``cuda`` build on GPU nodes).
- With ``run_dir`` (storage every node sees), it runs with ``--run-dir``,
  and with ``--resume`` when the directory already holds a checkpoint: a
  learner Ray restarts, on this node or another, goes on from the last
  checkpoint's policy version.
- If the program dies on its own after it served, the actor's process
  ends too, and Ray restarts the actor (``max_restarts``). If the actor's
  process dies, the kernel stops the program (parent-death signal).
- Actors find the learner by asking this actor for :meth:`address`
  whenever they connect; after a restart that is the new address.
- The token (``token=``) reaches the learner through its environment
  (``SEED_TOKEN``); TLS flags (``--tls-cert``...) go in ``flags``.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import tempfile
import urllib.request
from typing import Dict, List, Optional, Sequence

from ..defaults import START_TIMEOUT_S
from .process import ChildProgram, seed_rs_command

_LISTENING = r"learner listening addr=(\S+)"
_METRICS = re.compile(r"metrics endpoint listening addr=(\S+)")
_RESUMED = re.compile(r"resumed from checkpoint.*policy_version=(\d+)")


def has_checkpoint(run_dir: Optional[str]) -> bool:
    """Whether ``run_dir`` holds a checkpoint to resume from (its ``LATEST``)."""
    return run_dir is not None and (pathlib.Path(run_dir) / "LATEST").exists()


def _flag_given(flags: Sequence[str], name: str) -> bool:
    return any(f == name or f.startswith(name + "=") for f in flags)


class LearnerService:
    """A Ray actor class: ``ray.remote(LearnerService).options(...).remote(...)``
    (see :func:`seed_rs.ray.start_learner`, which sets the placement and the
    restart policy)."""

    def __init__(self, flags: Sequence[str] = (), binary: Optional[str] = None,
                 run_dir: Optional[str] = None, token: Optional[str] = None,
                 start_timeout: float = START_TIMEOUT_S):
        import ray

        self.node_ip = ray.util.get_node_ip_address()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.flags = list(flags)
        for reserved in ("--listen", "--run-dir", "--resume"):
            if _flag_given(self.flags, reserved):
                raise ValueError(f"{reserved} is set by seed_rs.ray (the node's address; run_dir=...)")
        self.resumed = has_checkpoint(run_dir)
        self._summary_path = os.path.join(tempfile.mkdtemp(prefix="seed-rs-learner-"), "summary.json")
        args = [*self.flags, "--listen", f"{self.node_ip}:0"]
        if not _flag_given(self.flags, "--metrics-addr"):
            args += ["--metrics-addr", f"{self.node_ip}:0"]
        if not _flag_given(self.flags, "--summary-json"):
            args += ["--summary-json", self._summary_path]
        else:
            i = next(i for i, f in enumerate(self.flags) if f.startswith("--summary-json"))
            self._summary_path = self.flags[i].split("=", 1)[1] if "=" in self.flags[i] else self.flags[i + 1]
        if run_dir is not None:
            args += ["--resume" if self.resumed else "--run-dir", run_dir]
        command = [binary] if binary else seed_rs_command("learner")
        env = dict(os.environ)
        env.setdefault("RAYON_NUM_THREADS", "1")
        if token is not None:
            # Through the environment, not argv (visible in ps).
            env["SEED_TOKEN"] = token
        self._program = ChildProgram("learner", [*command, *args], _LISTENING, env=env)
        self._address = self._program.wait_listening(start_timeout)
        self._metrics_addr: Optional[str] = None

    def address(self) -> str:
        """``IP:PORT`` the learner serves actors on."""
        return self._address

    def placement(self) -> Dict[str, object]:
        """Where this learner runs: ``node_id``, ``node_ip``, ``pid`` and
        ``command`` of the program, whether it resumed from a checkpoint and
        the checkpoint's policy version (``resumed_policy_version``)."""
        resumed_version = None
        for line in self._program.log_tail(LOG_SCAN).splitlines():
            m = _RESUMED.search(line)
            if m:
                resumed_version = int(m.group(1))
        return {"node_id": self.node_id, "node_ip": self.node_ip, "pid": self._program.pid,
                "command": self._program.command, "resumed": self.resumed,
                "resumed_policy_version": resumed_version}

    def metrics(self) -> Dict[str, float]:
        """One scrape of the learner's Prometheus endpoint, as ``{name: value}``
        (``seed_live_env_slots``, ``seed_policy_version``, ``seed_env_steps_total``...)."""
        if self._metrics_addr is None:
            for line in self._program.log_tail(LOG_SCAN).splitlines():
                m = _METRICS.search(line)
                if m:
                    self._metrics_addr = m.group(1)
            if self._metrics_addr is None:
                return {}
        with urllib.request.urlopen(f"http://{self._metrics_addr}/metrics", timeout=10) as r:
            text = r.read().decode()
        out: Dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("#") or " " not in line:
                continue
            name, value = line.rsplit(" ", 1)
            if "{" in name:
                continue
            try:
                out[name] = float(value)
            except ValueError:
                pass
        return out

    def running(self) -> bool:
        return self._program.running()

    def wait(self, timeout: Optional[float] = None) -> Optional[dict]:
        """Blocks until the learner exits (or ``timeout``); its summary (the
        ``--summary-json`` file) once it exited cleanly, ``None`` before.
        Raises ``RuntimeError`` with the end of its log if it failed."""
        code = self._program.wait(timeout)
        if code is None:
            return None
        if code != 0:
            raise RuntimeError(f"the learner exited with {code}; its log:\n{self._program.log_tail()}")
        with open(self._summary_path) as f:
            return json.load(f)

    def log_tail(self, n: int = 60) -> str:
        return self._program.log_tail(n)

    def stop(self) -> Optional[dict]:
        """Stops the learner (SIGTERM: it checkpoints and writes its summary)."""
        code = self._program.stop()
        if code == 0 and os.path.exists(self._summary_path):
            with open(self._summary_path) as f:
                return json.load(f)
        return None


#: Log lines scanned for the metrics endpoint's address.
LOG_SCAN = 400
