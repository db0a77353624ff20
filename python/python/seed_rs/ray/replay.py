"""A replay server placed and restarted by Ray (:class:`ReplayService`), and
a handle on one of its tables that any Ray task or actor can use
(:class:`ReplayHandle`), with the Python replay API of
:class:`seed_rs.ReplayTable`: ``insert``, ``sample``, ``update_priorities``,
``info``, the grouped trajectory calls (``submit_steps``,
``complete_trajectory``, ``fetch_group``: the DataPool shape).

The server is this wheel's ``replay-server`` run by a Ray actor with the
config given (a dict, as the server's ``--config`` file takes it), on the
node's address and a free port. Restarted by Ray (its process or node
died), it comes back from its tables' ``storage_dir`` (memory-mapped
tables: every acknowledged insert) or, with ``restore=True``, from its
checkpoint dir. A handle pickles as (the server's Ray actor, the table
name): in each process it connects on first use and, when a call finds
the server gone, asks the server's actor for its address again and retries
once (Ray answers that call once the actor is back).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, Optional

from .process import ChildProgram, seed_rs_command

_LISTENING = r"replay server listening addr=(\S+)"


class ReplayService:
    """A Ray actor class: ``ray.remote(ReplayService).options(...).remote(config)``
    (see :func:`seed_rs.ray.start_replay_server`)."""

    def __init__(self, config: Dict[str, Any], restore: bool = False, binary: Optional[str] = None,
                 extra_flags=(), token: Optional[str] = None, start_timeout: float = 120.0):
        import ray

        self.node_ip = ray.util.get_node_ip_address()
        self.node_id = ray.get_runtime_context().get_node_id()
        path = os.path.join(tempfile.mkdtemp(prefix="seed-rs-replay-"), "replay.json")
        with open(path, "w") as f:
            json.dump(config, f)
        command = [binary] if binary else seed_rs_command("replay-server")
        args = ["--config", path, "--listen", f"{self.node_ip}:0", *extra_flags]
        if restore:
            args.append("--restore")
        env = dict(os.environ)
        if token is not None:
            env["SEED_TOKEN"] = token  # not argv: visible in ps
        self._program = ChildProgram("replay-server", [*command, *args], _LISTENING, env=env)
        self._address = self._program.wait_listening(start_timeout)

    def address(self) -> str:
        return self._address

    def placement(self) -> Dict[str, Any]:
        return {"node_id": self.node_id, "node_ip": self.node_ip, "pid": self._program.pid}

    def log_tail(self, n: int = 60) -> str:
        return self._program.log_tail(n)

    def stop(self) -> Optional[int]:
        return self._program.stop()


class ReplayHandle:
    """Table ``table`` of the replay server behind ``server`` (its Ray actor
    handle), usable from any Ray task or actor; see the module docs.
    ``client_kwargs``: :class:`seed_rs.ReplayClient` arguments (``token``,
    ``tls_ca``...), pickled with the handle."""

    def __init__(self, server, table: str, **client_kwargs):
        self._server = server
        self._table_name = table
        self._client_kwargs = client_kwargs
        self._table = None

    def __reduce__(self):
        return (_rebuild_handle, (self._server, self._table_name, self._client_kwargs))

    @property
    def table_name(self) -> str:
        return self._table_name

    def _connect(self):
        import ray
        import seed_rs

        address = ray.get(self._server.address.remote())
        self._table = seed_rs.ReplayClient(address, **self._client_kwargs).table(self._table_name)
        return self._table

    def _call(self, method: str, *args, **kwargs):
        import seed_rs

        table = self._table or self._connect()
        try:
            return getattr(table, method)(*args, **kwargs)
        except seed_rs.ReplayError as e:
            if getattr(e, "code", None) not in ("UNAVAILABLE", "CANCELLED", "UNKNOWN"):
                raise
        # The server went away: its address again (after Ray restarted it).
        self._table = None
        return getattr(self._connect(), method)(*args, **kwargs)

    def insert(self, fields, priorities=None, policy_versions=None):
        return self._call("insert", fields, priorities=priorities, policy_versions=policy_versions)

    def sample(self, batch_size: int, timeout=None):
        return self._call("sample", batch_size, timeout=timeout)

    def update_priorities(self, keys, priorities):
        return self._call("update_priorities", keys, priorities)

    def set_policy_version(self, version: int):
        return self._call("set_policy_version", version)

    def info(self):
        return self._call("info")

    def checkpoint(self):
        return self._call("checkpoint")

    def submit_steps(self, *args, **kwargs):
        return self._call("submit_steps", *args, **kwargs)

    def complete_trajectory(self, *args, **kwargs):
        return self._call("complete_trajectory", *args, **kwargs)

    def fetch_group(self, *args, **kwargs):
        return self._call("fetch_group", *args, **kwargs)

    def __repr__(self) -> str:
        return f"ReplayHandle(table={self._table_name!r})"


def _rebuild_handle(server, table: str, client_kwargs: dict) -> ReplayHandle:
    return ReplayHandle(server, table, **client_kwargs)
