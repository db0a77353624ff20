"""One list of table methods: ``seed_rs._native.TABLE_METHODS`` comes from the
list in ``src/replay/table_api.rs`` that ``ReplayBuffer``, ``ReplayTable`` and
the client's table methods are generated from. These tests walk it.

What breaks these: a method one table class has and another lacks, a
signature that differs between them (a parameter's name, kind or default),
a client method whose first parameter is not the table's name, a
``seed_rs.ray.ReplayHandle`` that does not forward a method of the list or
forwards it with another signature, a type stub (``_native.pyi``) that
disagrees with the classes, and a handle whose streams or ``close`` do not
reach the table.
"""

from __future__ import annotations

import ast
import inspect
import pathlib

import numpy as np
import pytest

import seed_rs
from seed_rs import _native

STUB = pathlib.Path(__file__).resolve().parents[1] / "python" / "seed_rs" / "_native.pyi"
#: What every table has at least (the list may grow).
REQUIRED = {
    "name", "insert", "sample", "sample_stream", "update_priorities", "set_policy_version", "info",
    "checkpoint", "submit_steps", "complete_trajectory", "fetch_group", "follow", "close",
}  # fmt: skip
#: Table methods the client does not take with the table's name first: a
#: property, `info` (the client's `info(table=None)` covers every table)
#: and the handle's own `close`.
TABLE_ONLY = {"name", "info", "close"}


def params(obj):
    """``(name, kind, default)`` of each parameter after ``self``."""
    sig = inspect.signature(obj)
    return [(p.name, p.kind, p.default) for p in list(sig.parameters.values())[1:]]


def is_property(cls, name) -> bool:
    """A read-only attribute on the class: pyo3's getter or a ``property``."""
    attr = inspect.getattr_static(cls, name)
    return inspect.isdatadescriptor(attr) and not callable(attr)


def test_the_list_names_every_table_method_and_what_the_client_takes():
    methods = _native.TABLE_METHODS
    assert isinstance(methods, tuple) and len(set(methods)) == len(methods)
    assert REQUIRED <= set(methods)
    client = _native.CLIENT_TABLE_METHODS
    assert set(client) <= set(methods)
    assert set(methods) - set(client) == TABLE_ONLY
    assert seed_rs.TABLE_METHODS == methods


@pytest.mark.parametrize("cls", [seed_rs.ReplayBuffer, seed_rs.ReplayTable])
def test_both_table_classes_have_every_method_with_one_signature(cls):
    for name in _native.TABLE_METHODS:
        assert hasattr(cls, name), f"{cls.__name__} lacks `{name}`"
        if name == "name":
            assert is_property(cls, name), f"{cls.__name__}.name is not a property"
            continue
        # pyo3 methods carry `__text_signature__`, which inspect reads.
        assert params(getattr(cls, name)) == params(getattr(seed_rs.ReplayTable, name)), name
        assert getattr(cls, name).__doc__, f"{cls.__name__}.{name} has no docstring"


def test_the_client_has_each_table_method_with_the_table_first():
    client = seed_rs.ReplayClient
    for name in _native.CLIENT_TABLE_METHODS:
        assert hasattr(client, name), f"ReplayClient lacks `{name}`"
        first, *rest = params(getattr(client, name))
        assert first == ("table", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty), name
        assert rest == params(getattr(seed_rs.ReplayTable, name)), name
    # `info`: the table's name first too, optional (None: every table).
    first, *rest = params(client.info)
    assert first == ("table", inspect.Parameter.POSITIONAL_OR_KEYWORD, None)
    assert rest == params(seed_rs.ReplayTable.info)


def test_the_ray_handle_has_every_table_method_with_the_tables_signature():
    sr = pytest.importorskip("seed_rs.ray")
    handle = sr.ReplayHandle
    for name in _native.TABLE_METHODS:
        assert hasattr(handle, name), f"ReplayHandle lacks `{name}`"
        # Its docstring says what it has.
        assert f"``{name}``" in handle.__doc__ or f"``{name}()``" in handle.__doc__, name
        if name == "name":
            assert is_property(handle, name)
            continue
        assert params(getattr(handle, name)) == params(getattr(seed_rs.ReplayTable, name)), name
    assert not hasattr(handle, "table_name")


def _stub_params(fn: ast.FunctionDef):
    """``(name, kind, default)`` of each parameter after ``self``, as
    :func:`params` gives them for the runtime method."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults))
    defaults += [ast.literal_eval(d) for d in a.defaults]
    out = [(p.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, d) for p, d in zip(positional, defaults)]
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty if d is None else ast.literal_eval(d)))
    return out[1:]


def _stub_classes():
    tree = ast.parse(STUB.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _stub_method(classes, cls_name: str, method: str):
    """``method``'s definition in class ``cls_name`` of the stub or in its
    bases there."""
    cls = classes[cls_name]
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == method:
            return node
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            found = _stub_method(classes, base.id, method)
            if found is not None:
                return found
    return None


def test_the_type_stub_agrees_with_the_classes():
    classes = _stub_classes()
    for cls in (seed_rs.ReplayBuffer, seed_rs.ReplayTable):
        for name in _native.TABLE_METHODS:
            fn = _stub_method(classes, cls.__name__, name)
            assert fn is not None, f"_native.pyi: {cls.__name__} lacks `{name}`"
            if name == "name":
                assert any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)
                continue
            assert _stub_params(fn) == params(getattr(cls, name)), f"_native.pyi: {cls.__name__}.{name}"
    for name in (*_native.CLIENT_TABLE_METHODS, "info"):
        fn = _stub_method(classes, "ReplayClient", name)
        assert fn is not None, f"_native.pyi: ReplayClient lacks `{name}`"
        assert _stub_params(fn) == params(getattr(seed_rs.ReplayClient, name)), f"_native.pyi: ReplayClient.{name}"
    declared = {
        t.id
        for node in ast.parse(STUB.read_text()).body
        if isinstance(node, ast.AnnAssign)
        for t in [node.target]
        if isinstance(t, ast.Name)
    }
    assert {"TABLE_METHODS", "CLIENT_TABLE_METHODS", "DEFAULT_LEARNER_ADDR", "DEFAULT_NUM_ENVS"} <= declared


# --- ReplayHandle without Ray: a fake server actor ---------------------------


class _Ready:
    """What the fake server's ``address.remote()`` returns; ``ray.get``
    (patched) unwraps it."""

    def __init__(self, value):
        self.value = value


class _FakeServer:
    """Stands in for a ``ReplayService`` Ray actor: ``address.remote()``."""

    def __init__(self, addr: str):
        self.addr = addr
        self.asked = 0
        server = self

        class _Address:
            @staticmethod
            def remote():
                server.asked += 1
                return _Ready(server.addr)

        self.address = _Address()


@pytest.fixture
def fake_ray(monkeypatch):
    ray = pytest.importorskip("ray")
    real_get = ray.get
    monkeypatch.setattr(ray, "get", lambda ref, *a, **k: ref.value if isinstance(ref, _Ready) else real_get(ref, *a, **k))
    return ray


FIELDS = [{"name": "x", "dtype": "i64", "shape": []}]


def _table(name="t", capacity=64):
    return {"name": name, "capacity": capacity, "sampler": {"kind": "fifo"}, "fields": FIELDS}


def test_the_ray_handle_forwards_the_streams_and_close(fake_ray, start_replay_server):
    import seed_rs.ray as sr

    server = start_replay_server([_table()])
    handle = sr.ReplayHandle(_FakeServer(server.addr), "t")
    assert handle.name == "t"
    keys = handle.insert({"x": np.arange(6, dtype=np.int64)})
    assert keys.tolist() == list(range(6))
    followed = handle.follow(2)
    seen = []
    while len(seen) < 4:
        event = next(followed)
        assert "gap" not in event
        seen.extend(event["fields"]["x"].tolist())
    assert seen == [2, 3, 4, 5]
    followed.close()
    stream = handle.sample_stream(3, max_batches=2)
    batches = [fields["x"].tolist() for fields, _, _ in stream]
    assert batches == [[0, 1, 2], [3, 4, 5]]  # fifo: each item once, in order
    handle.close()
    handle.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        handle.info()
    with pytest.raises(RuntimeError, match="closed"):
        handle.follow(0)


def test_the_ray_handle_asks_for_the_address_again_when_the_server_is_gone(fake_ray, start_replay_server):
    import seed_rs.ray as sr

    first = start_replay_server([_table()])
    fake = _FakeServer(first.addr)
    with sr.ReplayHandle(fake, "t") as handle:
        handle.insert({"x": np.arange(3, dtype=np.int64)})
        assert fake.asked == 1
        # The server dies; "Ray" restarts it elsewhere (an empty table).
        first.proc.kill()
        first.proc.wait(timeout=30)
        second = start_replay_server([_table()])
        fake.addr = second.addr
        assert handle.info()["stored"] == 0  # retried once, on the new address
        assert fake.asked == 2
