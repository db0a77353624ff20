"""seed_rs.ReplayClient against a real `replay-server` (see conftest.py).

Round trips keep every byte (NaN payloads, -0.0, integer extremes); a
prioritized table samples by the priorities given at insert and changed by
update_priorities; arrays the table cannot take are refused before sending
with a ValueError naming the field; the server's refusals carry their gRPC
status; a wrong token is refused.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import seed_rs

FIELDS = [
    {"name": "obs", "dtype": "f32", "shape": [3, 4]},
    {"name": "action", "dtype": "i64", "shape": []},
    {"name": "frame", "dtype": "u8", "shape": [2, 5]},
]


def table(name="t", sampler=None, capacity=64, **extra):
    return {
        "name": name,
        "capacity": capacity,
        "fields": FIELDS,
        "sampler": sampler or {"kind": "uniform"},
        **extra,
    }


def items(rows: int, seed: int = 0):
    """`rows` items whose bytes differ everywhere, with awkward values."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((rows, 3, 4)).astype(np.float32)
    obs.reshape(rows, 12)[:, 0] = np.float32(-0.0)
    # A NaN with a payload: an f32 -> f64 -> f32 detour would keep it,
    # but any arithmetic or canonicalisation would not.
    obs.reshape(rows, 12)[:, 1] = np.array([0x7FC00123], dtype=np.uint32).view(np.float32)[0]
    action = rng.integers(-(2**62), 2**62, size=rows, dtype=np.int64)
    action[0] = np.iinfo(np.int64).min
    frame = rng.integers(0, 256, size=(rows, 2, 5), dtype=np.uint8)
    frame[0, 0, 0] = 255
    return {"obs": obs, "action": action, "frame": frame}


def test_round_trip_keeps_every_byte(start_replay_server):
    server = start_replay_server([table(sampler={"kind": "fifo"})])
    client = seed_rs.ReplayClient(server.addr)
    batch = items(10, seed=1)
    keys = client.insert("t", batch)
    assert keys.dtype == np.uint64 and keys.shape == (10,)
    assert list(np.diff(keys)) == [1] * 9

    fields, sampled_keys, weights = client.sample("t", 10)
    assert sampled_keys.dtype == np.uint64 and list(sampled_keys) == list(keys)
    assert weights.dtype == np.float32 and list(weights) == [1.0] * 10
    assert set(fields) == {"obs", "action", "frame"}
    for name, dtype, shape in [("obs", np.float32, (10, 3, 4)), ("action", np.int64, (10,)),
                               ("frame", np.uint8, (10, 2, 5))]:
        assert fields[name].dtype == dtype, name
        assert fields[name].shape == shape, name
        assert fields[name].tobytes() == batch[name].tobytes(), name
    # The arrays are the caller's: writable, and independent of the client.
    fields["obs"][0, 0, 0] = 1.0


def test_uniform_samples_are_whole_inserted_items(start_replay_server):
    server = start_replay_server([table(capacity=1000)])
    client = seed_rs.ReplayClient(server.addr)
    inserted = {}
    for seed in range(3):
        batch = items(50, seed=seed)
        keys = client.insert("t", batch)
        for row, key in enumerate(keys):
            inserted[int(key)] = {name: batch[name][row].tobytes() for name in batch}
    fields, keys, _ = client.sample("t", 128)
    assert keys.shape == (128,)
    for row, key in enumerate(keys):
        for name in fields:
            assert fields[name][row].tobytes() == inserted[int(key)][name], (int(key), name)
    assert client.info("t")["sampled"] == 128


def test_a_sample_stream_yields_whole_items_and_ends(start_replay_server):
    server = start_replay_server([table(capacity=1000)])
    client = seed_rs.ReplayClient(server.addr)
    batch = items(100, seed=3)
    keys = client.insert("t", batch)
    row_of = {int(k): row for row, k in enumerate(keys)}
    stream = client.sample_stream("t", 32, max_batches=5, max_in_flight=4)
    batches = list(stream)
    assert len(batches) == 5
    for fields, sampled, weights in batches:
        assert sampled.shape == (32,) and weights.dtype == np.float32
        for row, key in enumerate(sampled):
            for name in fields:
                assert fields[name][row].tobytes() == batch[name][row_of[int(key)]].tobytes()
    assert next(stream, None) is None
    # A stream that is closed early ends; the client goes on.
    endless = client.sample_stream("t", 8)
    assert next(endless)[1].shape == (8,)
    endless.close()
    assert next(endless, None) is None
    # A refused stream raises on opening or on its first batch.
    with pytest.raises(seed_rs.ReplayError) as e:
        next(client.sample_stream("nope", 8))
    assert e.value.code == "NOT_FOUND"
    assert len(client.insert("t", items(1))) == 1


def test_priorities_at_insert_and_update_steer_sampling(start_replay_server):
    server = start_replay_server(
        [table("p", sampler={"kind": "prioritized", "alpha": 1.0, "beta": 1.0}, seed=7)]
    )
    client = seed_rs.ReplayClient(server.addr)
    keys = client.insert("p", items(4), priorities=np.array([1e-4, 1e-4, 100.0, 1e-4]))
    _, sampled, weights = client.sample("p", 256)
    assert np.count_nonzero(sampled == keys[2]) >= 250
    assert weights.dtype == np.float32

    report = client.update_priorities("p", keys, [100.0, 1e-4, 1e-4, 1e-4])
    assert report == {"applied": 4, "stale": 0, "invalid": 0}
    _, sampled, _ = client.sample("p", 256)
    assert np.count_nonzero(sampled == keys[0]) >= 250

    # A key that names no stored item is counted stale; a NaN priority is
    # refused before sending, naming `priorities`.
    report = client.update_priorities("p", np.array([10_000, keys[1]], dtype=np.uint64), [1.0, 2.0])
    assert report == {"applied": 1, "stale": 1, "invalid": 0}
    with pytest.raises(ValueError, match=r"`priorities`: element 1 is NaN"):
        client.update_priorities("p", keys[:2], [1.0, np.nan])


def test_arrays_the_table_cannot_take_name_the_field(start_replay_server):
    server = start_replay_server([table()])
    client = seed_rs.ReplayClient(server.addr)
    good = items(4)

    def bad(**changes):
        return {**good, **changes}

    cases = [
        (bad(obs=good["obs"].astype(np.float64)), ValueError, r"field `obs`: dtype float64.*float32"),
        (bad(action=good["action"].astype(np.int32)), ValueError, r"field `action`: dtype int32"),
        (bad(obs=good["obs"].astype(">f4")), ValueError, r"field `obs`.*not little-endian"),
        (bad(obs=good["obs"].reshape(4, 4, 3)), ValueError, r"field `obs`: shape \(4, 4, 3\), expected \(rows, 3, 4\)"),
        (bad(frame=good["frame"][:3]), ValueError, r"field `frame`: 3 rows, field `obs` has 4"),
        (bad(obs=np.asfortranarray(good["obs"])), ValueError, r"field `obs`: not C-contiguous"),
        (bad(frame=good["frame"][:, :, ::2].repeat(2, axis=2)[:, :, :5][:, ::-1]), ValueError, r"field `frame`: not C-contiguous"),
        (bad(obsv=good["obs"]), ValueError, r"field `obsv`: table `t` has no such field \(its fields: obs, action, frame\)"),
        ({k: v for k, v in good.items() if k != "action"}, ValueError, r"field `action` is missing"),
        (bad(action=list(good["action"])), TypeError, r"field `action`: expected an array \(numpy, or anything with `__dlpack__` or the buffer protocol\), got list"),
    ]
    for fields, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            client.insert("t", fields)
    with pytest.raises(ValueError, match=r"`priorities`: shape \(3,\), expected \(4,\)"):
        client.insert("t", good, priorities=[1.0, 1.0, 1.0])
    # Nothing was sent: the server saw no insert and refused nothing.
    info = client.info("t")
    assert info["inserted"] == 0 and info["rejected_requests"] == 0
    # The client goes on.
    assert len(client.insert("t", good)) == 4
    assert client.info("t")["inserted"] == 4


def test_server_refusals_carry_the_grpc_status(start_replay_server):
    server = start_replay_server([table()])
    client = seed_rs.ReplayClient(server.addr)
    with pytest.raises(seed_rs.ReplayError) as e:
        client.insert("nope", items(1))
    assert e.value.code == "NOT_FOUND"
    assert "nope" in e.value.message and "table" in e.value.message
    assert isinstance(e.value, RuntimeError)
    # Priorities for a uniform table: the server refuses, naming them.
    with pytest.raises(seed_rs.ReplayError) as e:
        client.insert("t", items(2), priorities=[1.0, 2.0])
    assert e.value.code is not None and "priorit" in e.value.message
    with pytest.raises(seed_rs.ReplayError) as e:
        client.sample("t", 0)
    assert e.value.code == "INVALID_ARGUMENT" and "batch_size" in e.value.message
    # An empty table and a timeout: the wait ends with DEADLINE_EXCEEDED.
    with pytest.raises(seed_rs.ReplayError) as e:
        client.sample("t", 1, timeout=0.05)
    assert e.value.code == "DEADLINE_EXCEEDED"
    assert client.info("t")["inserted"] == 0


def test_a_wrong_token_is_refused(start_replay_server):
    server = start_replay_server([table()], token="s3cret")
    for token in [None, "s3cres"]:
        client = seed_rs.ReplayClient(server.addr, token=token)
        with pytest.raises(seed_rs.ReplayError) as e:
            client.info()
        assert e.value.code == "UNAUTHENTICATED"
        with pytest.raises(seed_rs.ReplayError) as e:
            client.sample("t", 1)
        assert e.value.code == "UNAUTHENTICATED"
    client = seed_rs.ReplayClient(server.addr, token="s3cret")
    client.insert("t", items(2))
    assert client.info()["t"]["inserted"] == 2


def test_info_describes_the_tables_and_checkpoint_writes_one(start_replay_server, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    server = start_replay_server(
        [table(), table("q", sampler={"kind": "fifo"}, rate_limiter={"min_size_to_sample": 2})],
        checkpoint_dir=checkpoints,
    )
    client = seed_rs.ReplayClient(server.addr)
    client.insert("t", items(5))
    everything = client.info()
    assert set(everything) == {"t", "q"}
    t = everything["t"]
    assert t["fields"] == [
        {"name": "obs", "dtype": "float32", "shape": [3, 4]},
        {"name": "action", "dtype": "int64", "shape": []},
        {"name": "frame", "dtype": "uint8", "shape": [2, 5]},
    ]
    assert (t["sampler"], t["capacity"], t["stored"], t["inserted"]) == ("uniform", 64, 5, 5)
    assert t["rate_limiter"] is None and t["storage_dir"] is None
    assert everything["q"]["rate_limiter"]["min_size_to_sample"] == 2

    written = client.checkpoint("t")
    assert written["items"] == 5 and written["bytes"] > 0
    assert written["path"].startswith(str(checkpoints))
    with pytest.raises(seed_rs.ReplayError) as e:
        client.checkpoint("nope")
    assert e.value.code == "NOT_FOUND"


def test_one_client_serves_several_threads(start_replay_server):
    server = start_replay_server([table(capacity=10_000)])
    client = seed_rs.ReplayClient(server.addr)
    client.insert("t", items(8))
    errors = []
    sampled = []

    def insert():
        try:
            for i in range(40):
                client.insert("t", items(8, seed=i))
        except BaseException as e:  # reported below
            errors.append(e)

    def sample():
        try:
            for _ in range(40):
                fields, keys, _ = client.sample("t", 16)
                sampled.append(len(keys))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=f) for f in (insert, insert, sample, sample)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sampled == [16] * 80
    assert client.info("t")["inserted"] == 8 + 2 * 40 * 8


def test_bad_settings_are_value_errors(start_replay_server, tmp_path):
    server = start_replay_server([table()])
    with pytest.raises(ValueError, match="tls_cert and tls_key"):
        seed_rs.ReplayClient("https://" + server.addr, tls_cert=str(tmp_path / "c.pem"))
    with pytest.raises(ValueError, match="https://"):
        seed_rs.ReplayClient(server.addr, tls_ca=str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="tls_ca"):
        seed_rs.ReplayClient("https://" + server.addr, tls_ca=str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="address"):
        seed_rs.ReplayClient("http://[::1")
