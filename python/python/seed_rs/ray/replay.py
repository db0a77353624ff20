"""A replay server placed and restarted by Ray (:class:`ReplayService`), and
a handle on one of its tables that any Ray task or actor can use
(:class:`ReplayHandle`), with every method of :class:`seed_rs.ReplayTable`
(the list ``seed_rs._native.TABLE_METHODS``: inserts, samples and sample
streams, priorities, ``follow``, the grouped trajectory calls of the
DataPool shape...).

The server is this wheel's ``replay-server`` run by a Ray actor with the
config given (a dict, as the server's ``--config`` file takes it), on the
node's address and a free port. Restarted by Ray (its process or node
died), it comes back from its tables' ``storage_dir`` (memory-mapped
tables: every acknowledged insert) or, with ``restore=True``, from its
checkpoint dir. A handle pickles as (the server's Ray actor, the table
name): in each process it connects on first use and, when a call finds
the server gone, asks the server's actor for its address again and retries
once (Ray answers that call once the actor is back). A stream
(``sample_stream``, ``follow``) is retried only while it opens; one that
breaks later raises, and the caller opens another. Submits sent with
``wait=False`` and ``flush_submits()`` are not retried: the submits in
flight when the server went are unknown to the new one, so the error is
raised for the caller to resubmit (a grouped table with ``storage_dir``
kept every submit it answered).
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
from typing import Any, Callable, Dict, Optional

from .. import _native
from ..defaults import START_TIMEOUT_S
from .process import ChildProgram, seed_rs_command

_LISTENING = r"replay server listening addr=(\S+)"


class ReplayService:
    """A Ray actor class: ``ray.remote(ReplayService).options(...).remote(config)``
    (see :func:`seed_rs.ray.start_replay_server`)."""

    def __init__(self, config: Dict[str, Any], restore: bool = False, binary: Optional[str] = None,
                 extra_flags=(), token: Optional[str] = None,
                 start_timeout: float = START_TIMEOUT_S):
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


#: Status codes of a call that found the server gone: the handle asks for
#: its address again and retries once.
_SERVER_GONE = ("UNAVAILABLE", "CANCELLED", "UNKNOWN")


class ReplayHandle:
    """Table ``table`` of the replay server behind ``server`` (its Ray actor
    handle), usable from any Ray task or actor; see the module docs.
    ``client_kwargs``: :class:`seed_rs.ReplayClient` arguments (``token``,
    ``tls_ca``...), pickled with the handle.

    ``name`` (the table's name) and ``close()`` (ends this handle: its
    connection is closed and later calls raise ``RuntimeError``; a copy
    unpickled elsewhere is a handle of its own) are the handle's own; a
    context manager closes it on exit.
    """

    def __init__(self, server, table: str, **client_kwargs):
        self._server = server
        self._name = table
        self._client_kwargs = client_kwargs
        self._table = None
        self._closed = False

    def __reduce__(self):
        return (_rebuild_handle, (self._server, self._name, self._client_kwargs))

    @property
    def name(self) -> str:
        """The table's name."""
        return self._name

    def _address(self) -> str:
        import ray

        return ray.get(self._server.address.remote())

    def _connect(self):
        import seed_rs

        self._table = seed_rs.ReplayClient(self._address(), **self._client_kwargs).table(self._name)
        return self._table

    def _call(self, method: str, *args, **kwargs):
        import seed_rs

        if self._closed:
            raise RuntimeError(f"this handle of table `{self._name}` is closed")
        table = self._table or self._connect()
        try:
            return getattr(table, method)(*args, **kwargs)
        except seed_rs.ReplayError as e:
            if getattr(e, "code", None) not in _SERVER_GONE:
                raise
            no_wait = kwargs.get("wait", args[6] if len(args) > 6 else True) is False
            if method == "flush_submits" or (method == "submit_steps" and no_wait):
                raise  # submits in flight would be lost silently (module docs)
        # The server went away: its address again (after Ray restarted it).
        self._table = None
        return getattr(self._connect(), method)(*args, **kwargs)

    def close(self) -> None:
        """Ends this handle (its connection; the server goes on). Idempotent."""
        self._closed = True
        table, self._table = self._table, None
        if table is not None:
            table.close()

    def __enter__(self) -> "ReplayHandle":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return f"ReplayHandle(table={self._name!r})"


def _forwarder(method: str) -> Callable[..., Any]:
    """``ReplayHandle.<method>``: the table's method through ``_call``, with
    ``seed_rs.ReplayTable``'s signature and docstring."""
    target = getattr(_native.ReplayTable, method)

    def forward(self, *args, **kwargs):
        return self._call(method, *args, **kwargs)

    forward.__name__ = method
    forward.__qualname__ = f"ReplayHandle.{method}"
    forward.__doc__ = target.__doc__
    forward.__signature__ = inspect.signature(target)
    return forward


def _forward_table_methods() -> tuple:
    """Gives :class:`ReplayHandle` a forwarder for every table method it
    does not define itself (``name``, ``close``), so a method added to the
    list in Rust (``src/replay/table_api.rs``) reaches Ray tasks with
    nothing written here; returns their names and completes the class's
    docstring with them."""
    forwarded = tuple(m for m in _native.TABLE_METHODS if m not in vars(ReplayHandle))
    for method in forwarded:
        setattr(ReplayHandle, method, _forwarder(method))
    ReplayHandle.__doc__ = (ReplayHandle.__doc__ or "").rstrip() + (
        "\n\n    Forwarded to the table, with :class:`seed_rs.ReplayTable`'s signatures\n"
        "    and docstrings, each retried once when it finds the server gone: "
        + ", ".join(f"``{m}``" for m in forwarded)
        + ".\n"
    )
    return forwarded


_FORWARDED = _forward_table_methods()


def _rebuild_handle(server, table: str, client_kwargs: dict) -> ReplayHandle:
    return ReplayHandle(server, table, **client_kwargs)
