"""One table API, two constructors: ``seed_rs.ReplayBuffer(table)`` in process
and ``seed_rs.ReplayClient(addr).table(name)`` on a real ``replay-server``
(see conftest.py). Every test marked ``both`` runs its one body through each.

What breaks these: a sampler or writer policy that behaves differently in
process, torn or lost rows under concurrent writers and samplers, a sample
that holds the GIL while it waits, a memory-mapped table that loses an
acknowledged item when its process is killed, checkpoints that do not come
back, priorities applied to overwritten keys, a grouped table that hands
out part of a group or groups out of completion order, an input copy where
none is needed, sampled arrays that alias the buffer, bad input that is not
a ValueError or that leaves the table unusable, and a buffer that hangs
after fork instead of refusing.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import tracemalloc
import zlib

import numpy as np
import pytest

import seed_rs

FIELDS = [
    {"name": "obs", "dtype": "f32", "shape": [3, 4]},
    {"name": "id", "dtype": "i64", "shape": []},
]


def table(name="t", sampler=None, capacity=64, fields=None, **extra):
    return {
        "name": name,
        "capacity": capacity,
        "fields": fields or FIELDS,
        "sampler": sampler or {"kind": "uniform"},
        **extra,
    }


def items(ids):
    """Items whose obs encode their id, so any row can be checked alone."""
    ids = np.asarray(ids, dtype=np.int64)
    obs = (ids[:, None, None] * 1000 + np.arange(12, dtype=np.float32).reshape(1, 3, 4)).astype(np.float32)
    return {"obs": obs, "id": ids}


def assert_whole(fields):
    """Every sampled row is the item its id says (no torn or foreign row)."""
    expected = items(fields["id"])["obs"]
    np.testing.assert_array_equal(fields["obs"], expected)


@pytest.fixture(params=["in_process", "remote"])
def make_table(request, start_replay_server):
    """``make_table(table_obj, checkpoint_dir=None)``: the same table through
    ``ReplayBuffer`` or through a server's table handle."""
    opened = []

    def make(obj, checkpoint_dir=None):
        if request.param == "in_process":
            t = seed_rs.ReplayBuffer(obj, checkpoint_dir=checkpoint_dir)
        else:
            server = start_replay_server([obj], checkpoint_dir=checkpoint_dir)
            t = seed_rs.ReplayClient(server.addr).table(obj["name"])
        opened.append(t)
        return t

    make.kind = request.param
    yield make
    for t in opened:
        t.close()
    # Drop the handles (and with them their connections) before the
    # servers stop: a server waits for open connections.
    opened.clear()


# --- samplers and writer policies --------------------------------------------


def test_fifo_hands_out_each_item_once_in_order(make_table):
    t = make_table(table(sampler={"kind": "fifo"}))
    keys = t.insert(items(range(6)))
    fields, sampled, weights = t.sample(4)
    assert list(sampled) == list(keys[:4]) and list(fields["id"]) == [0, 1, 2, 3]
    assert list(weights) == [1.0] * 4
    fields, sampled, _ = t.sample(2)
    assert list(fields["id"]) == [4, 5]
    with pytest.raises(seed_rs.ReplayError) as e:
        t.sample(1, timeout=0.05)
    assert e.value.code == "DEADLINE_EXCEEDED"


def test_max_times_sampled_retires_an_item_after_its_count(make_table):
    t = make_table(table(sampler={"kind": "max_times_sampled", "max_times": 2}))
    t.insert(items(range(3)))
    seen = []
    for _ in range(6):
        fields, _, _ = t.sample(1)
        seen.extend(fields["id"].tolist())
    assert sorted(seen) == [0, 0, 1, 1, 2, 2]
    with pytest.raises(seed_rs.ReplayError):
        t.sample(1, timeout=0.05)


def test_uniform_samples_whole_stored_items_with_replacement(make_table):
    t = make_table(table(capacity=100))
    t.insert(items(range(10)))
    fields, _, _ = t.sample(64)
    assert set(fields["id"].tolist()) <= set(range(10))
    assert len(fields["id"]) == 64
    assert_whole(fields)


def test_uniform_without_replacement_is_a_permutation_per_pass(make_table):
    t = make_table(table(sampler={"kind": "uniform_without_replacement"}, capacity=16))
    t.insert(items(range(8)))
    fields, _, _ = t.sample(8)
    assert sorted(fields["id"].tolist()) == list(range(8))


def test_recent_samples_only_the_window(make_table):
    t = make_table(table(sampler={"kind": "recent", "window": 3}, capacity=32))
    t.insert(items(range(10)))
    fields, _, _ = t.sample(50)
    assert set(fields["id"].tolist()) <= {7, 8, 9}


def test_prioritized_follows_priorities_and_updates_by_key(make_table):
    t = make_table(table(sampler={"kind": "prioritized", "alpha": 1.0, "beta": 1.0}, capacity=4, seed=3))
    keys = t.insert(items(range(4)), priorities=[0.0, 0.0, 5.0, 0.0])
    fields, sampled, weights = t.sample(32)
    assert set(sampled.tolist()) == {int(keys[2])} and weights.dtype == np.float32
    # Two more items overwrite keys 0 and 1: updates to those are stale.
    more = t.insert(items([4, 5]), priorities=[0.0, 0.0])
    report = t.update_priorities(np.array([keys[0], keys[3]], dtype=np.uint64), [9.0, 7.0])
    assert report == {"applied": 1, "stale": 1, "invalid": 0}
    fields, sampled, _ = t.sample(64)
    assert set(fields["id"].tolist()) <= {2, 3} and 3 in fields["id"].tolist()
    assert int(more[0]) not in sampled.tolist()
    assert t.info()["stale_priority_updates"] == 1


def test_overwrite_oldest_keeps_the_newest(make_table):
    t = make_table(table(sampler={"kind": "fifo"}, capacity=4, writer_policy={"kind": "overwrite_oldest"}))
    t.insert(items(range(3)))
    t.insert(items(range(3, 6)))
    fields, _, _ = t.sample(4)
    assert list(fields["id"]) == [2, 3, 4, 5]


def test_drop_oldest_drops_the_oldest_unconsumed(make_table):
    t = make_table(table(sampler={"kind": "fifo"}, capacity=4, writer_policy={"kind": "drop_oldest"}))
    t.insert(items(range(3)))
    t.insert(items(range(3, 6)))
    fields, _, _ = t.sample(4)
    assert list(fields["id"]) == [2, 3, 4, 5]
    assert t.info()["evicted_unconsumed"] == 2


def test_block_waits_for_room_then_times_out(make_table):
    t = make_table(table(sampler={"kind": "fifo"}, capacity=2, writer_policy={"kind": "block", "timeout_ms": 50}))
    t.insert(items([0, 1]))
    with pytest.raises(seed_rs.ReplayError) as e:
        t.insert(items([2]))
    assert e.value.code == "DEADLINE_EXCEEDED"
    t.sample(1)
    t.insert(items([2]))
    fields, _, _ = t.sample(2)
    assert list(fields["id"]) == [1, 2]


def test_a_rate_limited_sample_waits_for_the_minimum(make_table):
    t = make_table(table(rate_limiter={"min_size_to_sample": 3}))
    t.insert(items([0, 1]))
    with pytest.raises(seed_rs.ReplayError) as e:
        t.sample(1, timeout=0.05)
    assert e.value.code == "DEADLINE_EXCEEDED"
    t.insert(items([2]))
    assert len(t.sample(2)[1]) == 2


def test_sample_stream_yields_batches_and_ends(make_table):
    t = make_table(table())
    t.insert(items(range(8)))
    batches = list(t.sample_stream(4, max_batches=3))
    assert [len(b[1]) for b in batches] == [4, 4, 4]
    for fields, _, _ in batches:
        assert_whole(fields)
    endless = t.sample_stream(2)
    assert len(next(endless)[1]) == 2
    endless.close()
    assert next(endless, None) is None


# --- concurrency --------------------------------------------------------------


def checksummed(writer, n):
    ids = np.arange(n, dtype=np.int64) + writer * 1_000_000
    data = {"payload": np.repeat(ids[:, None], 16, axis=1).astype(np.int64), "id": ids}
    data["crc"] = np.array([zlib.crc32(row.tobytes()) for row in data["payload"]], dtype=np.int64)
    return data


CHECKSUMMED = [
    {"name": "payload", "dtype": "i64", "shape": [16]},
    {"name": "id", "dtype": "i64", "shape": []},
    {"name": "crc", "dtype": "i64", "shape": []},
]


def test_four_writers_and_two_samplers_never_see_a_torn_lost_or_foreign_row(make_table):
    t = make_table(table(fields=CHECKSUMMED, capacity=100_000))
    per_writer, batch = 400, 8
    errors, sampled_rows = [], []
    written = {}

    def write(w):
        try:
            data = checksummed(w, per_writer)
            for start in range(0, per_writer, batch):
                part = {k: np.ascontiguousarray(v[start:start + batch]) for k, v in data.items()}
                keys = t.insert(part)
                for k, i in zip(keys.tolist(), part["id"].tolist()):
                    written[k] = i
        except BaseException as e:  # reported below
            errors.append(e)

    def sample():
        try:
            for _ in range(100):
                fields, keys, _ = t.sample(16)
                for row in range(len(keys)):
                    payload = fields["payload"][row]
                    assert zlib.crc32(payload.tobytes()) == fields["crc"][row], "torn row"
                    assert (payload == fields["id"][row]).all(), "foreign row"
                sampled_rows.append((keys.tolist(), fields["id"].tolist()))
        except BaseException as e:  # reported below
            errors.append(e)

    t.insert({k: v[:1] for k, v in checksummed(9, 1).items()})
    written[0] = 9_000_000
    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=sample) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    total = 4 * per_writer + 1
    # Nothing lost: keys 0..total, each acknowledged once, all stored.
    assert sorted(written) == list(range(total))
    info = t.info()
    assert info["inserted"] == total and info["stored"] == total
    # Every sampled key is one that was written, with the id written under it.
    assert sum(len(keys) for keys, _ in sampled_rows) == 2 * 100 * 16
    for keys, ids in sampled_rows:
        for k, i in zip(keys, ids):
            assert written[k] == i


def test_a_blocked_sample_releases_the_gil(make_table):
    t = make_table(table(sampler={"kind": "fifo"}))
    entered, result = threading.Event(), []

    def sampler():
        entered.set()
        result.append(t.sample(1, timeout=30.0))

    th = threading.Thread(target=sampler)
    th.start()
    assert entered.wait(30)
    # Python runs on this thread while the other one waits inside sample.
    progressed = sum(i for i in range(200_000))
    assert progressed > 0 and th.is_alive() and result == []
    t.insert(items([7]))
    th.join(30)
    assert not th.is_alive()
    assert result[0][0]["id"].tolist() == [7]


# --- arrays in and out --------------------------------------------------------


class DLPackOnly:
    """A producer with only the DLPack protocol (as a torch tensor has)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_input_is_read_without_a_copy(make_table):
    big = [{"name": "x", "dtype": "f32", "shape": [256, 256]}]
    t = make_table(table(fields=big, capacity=8, sampler={"kind": "fifo"}))
    x = np.random.default_rng(0).standard_normal((4, 256, 256)).astype(np.float32)  # 1 MiB
    t.insert({"x": DLPackOnly(x)})  # warm-up: imports and caches
    tracemalloc.start()
    try:
        t.insert({"x": DLPackOnly(x)})
        t.insert({"x": x})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # numpy reports its allocations to tracemalloc: a copy of x (1 MiB)
    # on the way in would show here.
    assert peak < x.nbytes // 4, peak
    fields, _, _ = t.sample(4)
    np.testing.assert_array_equal(fields["x"], x)


def test_buffer_protocol_input_is_accepted(make_table):
    raw = [{"name": "b", "dtype": "u8", "shape": [4]}]
    t = make_table(table(fields=raw, sampler={"kind": "fifo"}))
    t.insert({"b": memoryview(bytearray(b"abcdefgh")).cast("B", (2, 4))})
    fields, _, _ = t.sample(2)
    assert fields["b"].tobytes() == b"abcdefgh"


def test_sampled_arrays_are_contiguous_writable_and_their_own(make_table):
    t = make_table(table(sampler={"kind": "uniform"}, capacity=4))
    t.insert(items([1]))
    fields, keys, weights = t.sample(2)
    for a in (fields["obs"], fields["id"], keys, weights):
        assert a.flags.c_contiguous and a.flags.writeable and a.flags.owndata
    fields["obs"][:] = -1.0
    again, _, _ = t.sample(2)
    assert_whole(again)


def test_bad_input_is_a_value_error_and_the_table_goes_on(make_table):
    t = make_table(table(sampler={"kind": "prioritized"}, capacity=8))
    good = items([1, 2])
    cases = [
        ({**good, "obs": good["obs"].astype(np.float64)}, None, r"field `obs`: dtype float64"),
        ({**good, "obs": good["obs"].reshape(2, 4, 3)}, None, r"field `obs`: shape \(2, 4, 3\)"),
        ({**good, "nope": good["id"]}, None, r"field `nope`: table `t` has no such field"),
        (good, [1.0, float("nan")], r"`priorities`: element 1 is NaN"),
        (good, [1.0, -1.0], r"`priorities`: element 1 is -1"),
    ]
    for fields, priorities, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            t.insert(fields, priorities=priorities)
    with pytest.raises(TypeError, match=r"field `id`: expected an array"):
        t.insert({**good, "id": [1, 2]})
    keys = t.insert(good, priorities=[1.0, 1.0])
    with pytest.raises(ValueError, match=r"`priorities`: element 0 is NaN"):
        t.update_priorities(keys, [float("nan"), 1.0])
    with pytest.raises(ValueError):
        t.sample(0)
    assert t.info()["inserted"] == 2
    fields, _, _ = t.sample(4)
    assert_whole(fields)


# --- storage ------------------------------------------------------------------


def test_checkpoint_and_restore(make_table, tmp_path):
    obj = table(sampler={"kind": "prioritized"}, capacity=16)
    t = make_table(obj, checkpoint_dir=tmp_path)
    t.insert(items(range(5)), priorities=[1, 2, 3, 4, 5])
    written = t.checkpoint()
    assert written["items"] == 5 and os.path.exists(written["path"])
    # The file restores in process, whichever side wrote it.
    restored = seed_rs.ReplayBuffer.restore(obj, checkpoint_dir=tmp_path)
    info = restored.info()
    assert (info["stored"], info["inserted"]) == (5, 5)
    fields, _, _ = restored.sample(32)
    assert set(fields["id"].tolist()) <= set(range(5))
    assert_whole(fields)
    restored.close()


def test_restore_without_a_checkpoint_names_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"no checkpoint of table `t`"):
        seed_rs.ReplayBuffer.restore(table(), checkpoint_dir=tmp_path)


WRITER = r"""
import sys, json, zlib
import numpy as np
import seed_rs
t = seed_rs.ReplayBuffer(json.loads(sys.argv[1]))
i = 0
while True:
    payload = np.full((1, 16), i, dtype=np.int64)
    crc = np.array([zlib.crc32(payload.tobytes())], dtype=np.int64)
    key = t.insert({"payload": payload, "id": np.array([i], dtype=np.int64), "crc": crc})
    print(int(key[0]), i, flush=True)
    i += 1
"""


def test_a_mapped_table_keeps_every_acknowledged_item_after_sigkill(tmp_path):
    obj = table(fields=CHECKSUMMED, capacity=100_000, sampler={"kind": "fifo"}, storage_dir=str(tmp_path / "t"))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(obj)], stdout=subprocess.PIPE, text=True)
    acknowledged = {}
    for line in proc.stdout:
        key, i = map(int, line.split())
        acknowledged[key] = i
        if len(acknowledged) == 2000:
            break
    proc.send_signal(signal.SIGKILL)  # mid-insert: the writer never stops by itself
    proc.wait(30)
    t = seed_rs.ReplayBuffer(obj)
    stored = t.info()["available"]
    assert stored >= len(acknowledged)
    fields, keys, _ = t.sample(stored)
    back = dict(zip(keys.tolist(), range(len(keys))))
    for key, i in acknowledged.items():
        row = back[key]
        assert fields["id"][row] == i
        assert (fields["payload"][row] == i).all()
        assert zlib.crc32(fields["payload"][row].tobytes()) == fields["crc"][row]
    t.close()


# --- grouped tables -----------------------------------------------------------


GROUPED_FIELDS = [{"name": "x", "dtype": "f32", "shape": [2]}]


def steps(n, value):
    return {"x": np.full((n, 2), value, dtype=np.float32)}


def test_grouped_tables_hand_out_whole_groups_in_completion_order(make_table):
    t = make_table(table("pool", fields=GROUPED_FIELDS, capacity=1000, sampler={"kind": "grouped", "group_size": 2}))
    # Group 1: trajectories 10 and 11; group 2: trajectories 20 and 21.
    t.submit_steps([10, 10], [1, 1], steps(2, 1.0), policy_versions=[3, 3])
    t.submit_steps([20, 20, 20], [2, 2, 2], steps(3, 2.0), is_last=[0, 0, 1])
    assert t.fetch_group(timeout=0) is None
    t.submit_steps([21], [2], steps(1, 2.5), is_last=[1])  # group 2 complete first
    t.submit_steps([11], [1], steps(1, 1.5), is_last=[1])
    assert t.complete_trajectory(10) is True  # completes group 1
    first = t.fetch_group(timeout=0)
    assert first["group_id"] == 2
    assert first["trajectory_ids"].tolist() == [20, 21] and first["lengths"].tolist() == [3, 1]
    assert first["fields"]["x"].shape == (4, 2)
    assert first["fields"]["x"][:, 0].tolist() == [2.0, 2.0, 2.0, 2.5]
    second = t.fetch_group(timeout=0)
    assert second["group_id"] == 1 and second["lengths"].tolist() == [2, 1]
    assert second["policy_versions"].tolist() == [3, 3, 0]
    assert t.fetch_group(timeout=0) is None
    info = t.info()
    assert info["sampler"] == "grouped" and info["sampled"] == 7
    with pytest.raises(ValueError):
        t.submit_steps([1], [1], {"x": np.zeros((1, 3), np.float32)})


def test_fetch_group_waits_without_the_gil(make_table):
    t = make_table(table("pool", fields=GROUPED_FIELDS, capacity=100, sampler={"kind": "grouped", "group_size": 1}))
    entered, result = threading.Event(), []

    def fetch():
        entered.set()
        result.append(t.fetch_group(timeout=30.0))

    th = threading.Thread(target=fetch)
    th.start()
    assert entered.wait(30)
    assert sum(range(100_000)) > 0 and th.is_alive()
    t.submit_steps([5, 5], [9, 9], steps(2, 4.0), is_last=[0, 1])
    th.join(30)
    assert result[0]["group_id"] == 9


TOKEN_FIELDS = [
    {"name": "prompt_ids", "dtype": "i32", "shape": [-1], "max_len": 64},
    {"name": "response_ids", "dtype": "i32", "shape": [-1]},
    {"name": "reward", "dtype": "f32", "shape": []},
]


def token_pool(**sampler):
    return table("pool", fields=TOKEN_FIELDS, capacity=1000,
                 sampler={"kind": "grouped", "group_size": 2, "ids": "str", **sampler})


def test_token_steps_of_any_length_round_trip_without_padding(make_table):
    t = make_table(token_pool())
    prompts = [np.arange(n, dtype=np.int32) + 100 * n for n in (3, 17, 1)]
    responses = [[7, 8], [], list(range(40))]
    # A list of arrays (and of plain lists) per step...
    t.submit_steps(["a", "a"], ["p1", "p1"], {"prompt_ids": prompts[:2], "response_ids": responses[:2],
                                             "reward": np.array([1.0, 2.0], np.float32)},
                   policy_versions=[4, 5], metadata=[{"turn": 0}, None])
    # ...or one step, or (values, offsets).
    t.submit_step("b", "p1", {"prompt_ids": prompts[2], "response_ids": responses[2],
                              "reward": np.float32(3.0)}, policy_version=6, metadata=b"raw")
    values = np.concatenate([np.array(r, np.int32) for r in responses[:1]])
    t.submit_steps(["a"], ["p1"], {"prompt_ids": (np.array([9, 9], np.int32), [0, 2]),
                                   "response_ids": (values, np.array([0, len(values)])),
                                   "reward": np.array([4.0], np.float32)},
                   is_last=[1], policy_versions=[7])
    assert t.fetch_batch(timeout=0) is None  # "b" goes on
    assert t.complete_trajectory("b") is True
    t.set_policy_version(8)
    g = t.fetch_group(timeout=0)
    assert g["group_id"] == "p1" and g["trajectory_ids"] == ["a", "b"]
    assert g["lengths"].tolist() == [3, 1]
    pv, po = g["fields"]["prompt_ids"]
    assert pv.dtype == np.int32 and po.tolist() == [0, 3, 20, 22, 23]
    want = [prompts[0], prompts[1], np.array([9, 9]), prompts[2]]
    for i, w in enumerate(want):
        np.testing.assert_array_equal(pv[po[i]:po[i + 1]], w)
    rv, ro = g["fields"]["response_ids"]
    assert ro.tolist() == [0, 2, 2, 4, 44] and rv[-40:].tolist() == responses[2]
    assert pv.size == sum(len(w) for w in want)  # no padding
    assert g["fields"]["reward"].tolist() == [1.0, 2.0, 4.0, 3.0]
    assert g["policy_version"] == 8 and g["lags"].tolist() == [4, 3, 1, 2]
    assert g["metadata"] == [b'{"turn": 0}', b"", b"", b"raw"]
    padded, mask = seed_rs.pad(rv, ro, pad_value=-1)
    assert padded.shape == (4, 40) and mask.sum() == 44 and padded[1].tolist() == [-1] * 40
    back, offsets = seed_rs.unpad(padded, mask)
    np.testing.assert_array_equal(back, rv)
    assert offsets.tolist() == ro.tolist()
    info = t.info()
    assert info["fields"][0]["shape"] == [-1] and info["fields"][0]["max_len"] == 64
    assert info["grouped"]["ids"] == "str"


def test_submits_without_waiting_are_answered_by_flush_and_a_refusal_is_raised(make_table):
    t = make_table(token_pool(max_queue_size=100))
    step = {"prompt_ids": [1, 2], "response_ids": [3], "reward": np.float32(1.0)}
    # Twenty one-trajectory halves of ten groups, none waited for.
    for i in range(20):
        assert t.submit_step  # the waiting form is still there
        assert t.submit_steps([f"t{i}"], [f"g{i // 2}"], {k: [v] if k != "reward" else np.array([v]) for k, v in step.items()},
                              is_last=[1], wait=False) is None
    assert t.flush_submits() == {"groups_completed": 10, "groups_dropped_over_capacity": 0,
                                 "groups_dropped_queue_full": 0}
    assert t.flush_submits()["groups_completed"] == 0  # nothing left in flight
    assert [t.fetch_group(timeout=0)["group_id"] for _ in range(10)] == [f"g{i}" for i in range(10)]
    # A refused submit (its trajectory is complete) among unanswered ones:
    # raised by the flush (or, in process, at once) naming the field.
    one = lambda tr, g, last=1: t.submit_steps(
        [tr], [g], {"prompt_ids": [[1]], "response_ids": [[2]], "reward": np.array([0.0], np.float32)},
        is_last=[last], wait=False)
    one("a", "x", last=0)
    one("a", "x")
    with pytest.raises(seed_rs.ReplayError, match="trajectory_uids") as e:
        one("a", "x")  # refused: "a" is complete
        one("b", "x")  # sent after the refusal: not stored (remote)
        t.flush_submits()
    assert e.value.code == "FAILED_PRECONDITION"
    # The table goes on; "b" was not stored, so it starts afresh.
    assert t.submit_steps(["b"], ["x"], {"prompt_ids": [[5]], "response_ids": [[6]],
                                         "reward": np.array([0.0], np.float32)}, is_last=[1])["groups_completed"] == 1
    g = t.fetch_group(timeout=0)
    assert g["trajectory_ids"] == ["a", "b"] and g["lengths"].tolist() == [2, 1]


def test_the_counts_answered_before_a_refusal_reach_the_next_flush(make_table):
    t = make_table(token_pool())
    one = lambda tr, g: t.submit_steps(
        [tr], [g], {"prompt_ids": [[1]], "response_ids": [[2]], "reward": np.array([0.0], np.float32)},
        is_last=[1], wait=False)
    one("a", "y")
    one("b", "y")  # completes group y
    one("c", "z")
    with pytest.raises(seed_rs.ReplayError, match="trajectory_uids"):
        one("c", "z")  # refused: "c" is complete
        # Remote, a later submit or the flush raises it, whether the
        # stream's end is met by a send or by an answer.
        for i in range(64):
            one(f"c{i}", "z")
        t.flush_submits()
    assert t.flush_submits()["groups_completed"] == 1


def test_a_token_pool_on_disk_is_whole_after_close_and_reopen(tmp_path):
    obj = token_pool()
    obj["storage_dir"] = str(tmp_path / "pool")
    step = lambda n, r: {"prompt_ids": np.arange(n, dtype=np.int32), "response_ids": [r] * r,
                         "reward": np.float32(r)}
    with seed_rs.ReplayBuffer(obj) as t:
        t.submit_step("a", "p1", step(5, 1), policy_version=3, is_last=True, metadata=b"m")
        t.submit_step("b", "p1", step(7, 2), policy_version=4)
        t.submit_step("c", "p2", step(2, 0), policy_version=4, is_last=True)
        t.submit_step("d", "p2", step(3, 3), policy_version=5, is_last=True)
        assert t.fetch_group(timeout=0)["group_id"] == "p2"
        t.set_policy_version(6)
    # Reopened: p2 stays fetched, p1 is open with its two steps, and "b"
    # goes on where it was.
    with seed_rs.ReplayBuffer(obj) as t:
        info = t.info()["grouped"]
        assert (info["groups_open"], info["groups_ready"], info["policy_version"]) == (1, 0, 6)
        t.submit_step("b", "p1", step(1, 4), policy_version=6, is_last=True)
        g = t.fetch_group(timeout=0)
        assert g["group_id"] == "p1" and g["trajectory_ids"] == ["a", "b"]
        assert g["lengths"].tolist() == [1, 2]
        pv, po = g["fields"]["prompt_ids"]
        assert po.tolist() == [0, 5, 12, 13] and pv[5:12].tolist() == list(range(7))
        assert g["lags"].tolist() == [3, 2, 0] and g["metadata"] == [b"m", b"", b""]
        assert t.fetch_group(timeout=0) is None


def test_token_pool_bad_input_is_a_value_error_naming_it(make_table):
    t = make_table(token_pool(max_queue_size=1))
    step = {"prompt_ids": [np.arange(3, dtype=np.int32)], "response_ids": [[1]],
            "reward": np.zeros(1, np.float32)}
    cases = [
        (dict(step, prompt_ids=[np.arange(3, dtype=np.int64)]), "prompt_ids"),  # no implicit casts
        (dict(step, prompt_ids=[np.zeros(65, np.int32)]), "prompt_ids"),  # past max_len
        (dict(step, prompt_ids=(np.zeros(3, np.int32), [0, 4])), "prompt_ids"),  # offsets past the values
        (dict(step, prompt_ids=(np.zeros(3, np.int32), [1, 3])), "prompt_ids"),  # not from 0
        (dict(step, prompt_ids=[np.zeros((3, 2), np.int32)]), "prompt_ids"),  # a 2-D step
        (dict(step, prompt_ids=[[1], [2]]), "prompt_ids"),  # two steps for one row
    ]
    for fields, name in cases:
        with pytest.raises(ValueError, match=name):
            t.submit_steps(["a"], ["g"], fields)
    with pytest.raises(ValueError, match="trajectory_ids"):
        t.submit_steps([1], ["g"], step)  # an int id in a table of str ids
    with pytest.raises(ValueError, match="metadata"):
        t.submit_steps(["a"], ["g"], step, metadata=[b"x" * 65537])
    with pytest.raises(ValueError, match="trajectory_id"):
        t.complete_trajectory(3)
    # The table goes on; a group past max_queue_size drops the oldest.
    for g in ("g1", "g2"):
        for traj in ("x", "y"):
            r = t.submit_steps([traj + g], [g], step, is_last=[1])
    assert r["groups_dropped_queue_full"] == 1
    assert t.fetch_group(timeout=0)["group_id"] == "g2"
    assert t.info()["grouped"]["groups_dropped_queue_full"] == 1


RING_TOKENS = [
    {"name": "id", "dtype": "i64", "shape": []},
    {"name": "tokens", "dtype": "i32", "shape": [-1], "max_len": 64},
]


def ring_tokens(ids):
    """Item ``i`` holds ``i % 23`` tokens of value ``i`` (some none)."""
    return [np.full(i % 23, i, np.int32) for i in ids]


def assert_tokens_whole(fields):
    """Each sampled row's tokens are its item's, unpadded."""
    ids = fields["id"].tolist()
    values, offsets = fields["tokens"]
    assert values.dtype == np.int32 and offsets.dtype == np.int64
    assert offsets.tolist()[0] == 0 and len(offsets) == len(ids) + 1
    assert values.size == offsets[-1]  # no padding
    for row, (i, want) in enumerate(zip(ids, ring_tokens(ids))):
        np.testing.assert_array_equal(values[offsets[row]:offsets[row + 1]], want)


def test_a_ring_table_holds_token_lists_of_any_length(make_table):
    t = make_table(table("ring", fields=RING_TOKENS, capacity=32))
    ids = np.arange(20, dtype=np.int64)
    # A list of one array per row...
    t.insert({"id": ids[:10], "tokens": ring_tokens(ids[:10])})
    # ...or (values, offsets).
    rows = ring_tokens(ids[10:])
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    t.insert({"id": ids[10:], "tokens": (np.concatenate(rows), offsets)})
    fields, keys, _ = t.sample(64)
    assert_tokens_whole(fields)
    assert sorted(set(fields["id"].tolist())) <= list(range(20))
    # The values are a view of the received bytes, read-only; where they
    # could not be (misaligned in the message) a copy of their own.
    values = fields["tokens"][0]
    if values.flags.writeable:
        assert values.flags.owndata
    else:
        assert type(values.base).__name__ == "SharedBytes"
    padded, mask = seed_rs.pad(*fields["tokens"])
    assert padded.shape == (64, max(len(r) for r in ring_tokens(fields["id"]))) and mask.sum() == values.size
    info = t.info()
    assert info["fields"][1]["shape"] == [-1] and info["fields"][1]["max_len"] == 64
    stream = t.follow(0)
    event = next(stream)
    assert event["keys"].tolist()[:3] == [0, 1, 2]
    assert_tokens_whole(event["fields"])
    stream.close()


def test_ring_token_offsets_that_cannot_be_right_are_refused_by_field_and_row(make_table):
    t = make_table(table("ring", fields=RING_TOKENS, capacity=32))
    two = np.array([1, 2], np.int64)
    cases = [
        ((np.zeros(3, np.int32), [0, 2, 1]), r"tokens.*(row 1|offsets\[2\]).*backwards"),
        ((np.zeros(70, np.int32), [0, 2, 70]), r"tokens.*(row 1|offsets\[2\]).*max_len"),
        ((np.zeros(3, np.int32), [0, 1, 4]), r"tokens"),  # past the values
        ((np.zeros(3, np.int32), [1, 2, 3]), r"tokens"),  # not from 0
        ([np.zeros(65, np.int32), np.zeros(1, np.int32)], r"tokens.*(row 0|offsets\[1\]).*max_len"),
        ([np.zeros(2, np.int64), np.zeros(1, np.int32)], r"tokens.*int64"),  # no implicit casts
    ]
    for tokens, match in cases:
        with pytest.raises(ValueError, match=match):
            t.insert({"id": two, "tokens": tokens})
    assert t.info()["inserted"] == 0
    t.insert({"id": two, "tokens": ring_tokens(two)})  # the table goes on
    assert_tokens_whole(t.sample(4)[0])


TOKEN_WRITER = r"""
import sys, json
import numpy as np
import seed_rs
t = seed_rs.ReplayBuffer(json.loads(sys.argv[1]))
i = 0
while True:
    key = t.insert({"id": np.array([i], np.int64), "tokens": [np.full(i % 23, i, np.int32)]})
    print(int(key[0]), i, flush=True)
    i += 1
"""


def test_a_mapped_token_table_keeps_every_acknowledged_item_after_sigkill(tmp_path):
    obj = table("ring", fields=RING_TOKENS, capacity=100_000, sampler={"kind": "fifo"},
                storage_dir=str(tmp_path / "ring"))
    proc = subprocess.Popen([sys.executable, "-c", TOKEN_WRITER, json.dumps(obj)],
                            stdout=subprocess.PIPE, text=True)
    acknowledged = {}
    for line in proc.stdout:
        key, i = map(int, line.split())
        acknowledged[key] = i
        if len(acknowledged) == 2000:
            break
    proc.send_signal(signal.SIGKILL)  # mid-insert
    proc.wait(30)
    t = seed_rs.ReplayBuffer(obj)
    stored = t.info()["available"]
    assert stored >= len(acknowledged)
    fields, keys, _ = t.sample(stored)
    assert_tokens_whole(fields)
    back = dict(zip(keys.tolist(), fields["id"].tolist()))
    assert all(back[key] == i for key, i in acknowledged.items())
    t.close()


def test_a_token_table_checkpoint_restores_the_tokens(make_table, tmp_path):
    obj = table("ring", fields=RING_TOKENS, capacity=16)
    t = make_table(obj, checkpoint_dir=tmp_path)
    t.insert({"id": np.arange(16, dtype=np.int64), "tokens": ring_tokens(range(16))})
    t.insert({"id": np.arange(16, 30, dtype=np.int64), "tokens": ring_tokens(range(16, 30))})
    assert t.checkpoint()["items"] == 16
    restored = seed_rs.ReplayBuffer.restore(obj, checkpoint_dir=tmp_path)
    fields, _, _ = restored.sample(64)
    assert_tokens_whole(fields)
    assert set(fields["id"].tolist()) <= set(range(14, 30))
    restored.close()


def test_integer_ids_refuse_strings_by_name(make_table):
    t = make_table(table("pool", fields=GROUPED_FIELDS, capacity=100, sampler={"kind": "grouped", "group_size": 1}))
    with pytest.raises(ValueError, match="u64 ids"):
        t.submit_steps(["a"], ["g"], steps(1, 1.0))
    t.submit_step(3, 4, {"x": np.ones(2, np.float32)}, is_last=True)
    g = t.fetch_batch(timeout=0)
    assert g["group_id"] == 4 and g["trajectory_ids"].tolist() == [3] and g["metadata"] is None


def test_pad_refuses_what_it_cannot_pad():
    with pytest.raises(ValueError, match="max_len"):
        seed_rs.pad(np.arange(5), [0, 5], max_len=4)
    with pytest.raises(ValueError, match="backwards"):
        seed_rs.pad(np.arange(5), [0, 3, 2, 5])
    with pytest.raises(ValueError, match="offsets end"):
        seed_rs.pad(np.arange(5), [0, 4])


def test_follow_yields_every_insert_in_key_order(start_replay_server):
    server = start_replay_server([table(capacity=100)])
    t = seed_rs.ReplayClient(server.addr).table("t")
    t.insert(items(range(5)))
    stream = t.follow(0)
    seen = []
    while len(seen) < 5:
        event = next(stream)
        assert "gap" not in event
        seen.extend(event["keys"].tolist())
        assert_whole(event["fields"])
    assert seen == list(range(5))
    t.insert(items([5]))
    event = next(stream)
    assert event["keys"].tolist() == [5] and event["fields"]["id"].tolist() == [5]
    stream.close()


def test_follow_from_a_cursor_sees_exactly_the_items_inserted_since(make_table):
    t = make_table(table(capacity=100))
    t.insert(items(range(5)))
    stream = t.follow(3)
    t.insert(items([5, 6, 7]))
    seen, last = [], None
    while len(seen) < 5:
        event = next(stream)
        assert "gap" not in event and event["replaced"] == (0, 0)
        first = 3 + len(seen)
        assert event["keys"].tolist() == list(range(first, event["next_key"]))
        assert event["policy_versions"].tolist() == [0] * len(event["keys"])
        assert_whole(event["fields"])
        seen.extend(event["fields"]["id"].tolist())
        last = event
    assert seen == [3, 4, 5, 6, 7]  # from the cursor on, in order, each once
    assert last["next_key"] == 8 and last["head_key"] == 8
    # Nothing new: the next step waits, without the GIL, for the next insert.
    entered, got = threading.Event(), []

    def follower():
        entered.set()
        got.append(next(stream))

    th = threading.Thread(target=follower)
    th.start()
    assert entered.wait(30)
    progressed = sum(i for i in range(200_000))
    assert progressed > 0 and th.is_alive() and got == []
    t.insert(items([8]))
    th.join(30)
    assert got[0]["keys"].tolist() == [8] and got[0]["fields"]["id"].tolist() == [8]
    stream.close()
    assert next(stream, None) is None


def test_follow_names_the_items_overwritten_before_they_were_read(make_table):
    t = make_table(table(capacity=4))
    for ids in (range(4), range(4, 8), range(8, 10)):
        t.insert(items(ids))  # keys 0..9: 6..9 are still stored
    stream = t.follow(2)
    assert next(stream) == {"gap": (2, 6)}
    event = next(stream)
    assert event["keys"].tolist() == [6, 7, 8, 9] and event["fields"]["id"].tolist() == [6, 7, 8, 9]
    assert event["replaced"] == (2, 6)  # item k took the slot of k - 4
    stream.close()
    with pytest.raises(ValueError, match="cursor"):
        t.follow(11)  # ahead of the table's next key, 10


def test_closing_a_buffer_ends_its_followers():
    t = seed_rs.ReplayBuffer(table())
    stream = t.follow(0)
    entered, errors = threading.Event(), []

    def follower():
        entered.set()
        try:
            next(stream)
        except seed_rs.ReplayError as e:
            errors.append(e)

    th = threading.Thread(target=follower)
    th.start()
    assert entered.wait(30)
    t.close()
    th.join(30)
    assert not th.is_alive()
    assert errors and errors[0].code == "UNAVAILABLE"


# --- constructors, processes ---------------------------------------------------


def test_the_table_argument_takes_every_config_form(tmp_path):
    obj = table(capacity=8)
    whole = {"checkpoint_dir": str(tmp_path), "tables": [obj, table("other")]}
    path = tmp_path / "tables.json"
    path.write_text(json.dumps(whole))
    for arg, kwargs in [(obj, {}), (json.dumps(obj), {}), (whole, {"name": "t"}), (str(path), {"name": "t"}), (path, {"name": "t"})]:
        with seed_rs.ReplayBuffer(arg, **kwargs) as t:
            assert t.name == "t" and t.info()["capacity"] == 8
    with pytest.raises(ValueError, match="2 tables: say which with `name=`"):
        seed_rs.ReplayBuffer(whole)
    with pytest.raises(ValueError, match="unknown field `capacty`"):
        seed_rs.ReplayBuffer({**obj, "capacty": 3})
    with seed_rs.ReplayBuffer(whole, name="t") as t:
        t.insert(items([1]))
        assert t.checkpoint()["path"].startswith(str(tmp_path))


def test_the_learners_printed_table_config_builds_a_buffer():
    from conftest import LEARNER_BIN

    printed = subprocess.run(
        [str(LEARNER_BIN), "--env", "cartpole", "--print-replay-table-config"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout
    with seed_rs.ReplayBuffer(printed) as t:
        info = t.info()
        assert info["name"] == "unrolls" and info["capacity"] > 0
        assert "obs" in [f["name"] for f in info["fields"]]


def test_a_closed_buffer_refuses_and_wakes_waiters():
    t = seed_rs.ReplayBuffer(table(sampler={"kind": "fifo"}))
    t.close()
    with pytest.raises(seed_rs.ReplayError) as e:
        t.sample(1, timeout=1.0)
    assert e.value.code == "UNAVAILABLE"


def test_pickling_and_fork_give_a_clear_error(start_replay_server):
    server = start_replay_server([table()])
    for t in (seed_rs.ReplayBuffer(table()), seed_rs.ReplayClient(server.addr).table("t")):
        with pytest.raises(TypeError, match="replay server"):
            pickle.dumps(t)
        t.info()
        pid = os.fork()
        if pid == 0:  # the child: the call must raise, not hang
            try:
                t.info()
                os._exit(1)
            except RuntimeError as e:
                os._exit(0 if "fork" in str(e) and "replay server" in str(e) else 2)
            except BaseException:
                os._exit(3)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        t.info()  # the parent goes on


def test_a_mapped_table_in_columns_keeps_its_order_and_a_bad_order_is_a_value_error(tmp_path):
    obj = table("c", fields=[{"name": "x", "dtype": "f32", "shape": [2]}], capacity=16)
    obj.update(storage_order="columns", storage_dir=str(tmp_path / "c"))
    with seed_rs.ReplayBuffer(obj) as t:
        t.insert({"x": np.arange(6, dtype=np.float32).reshape(3, 2)})
    assert json.loads((tmp_path / "c" / "layout.json").read_text())["order"] == "Columns"
    with seed_rs.ReplayBuffer(obj) as t:
        assert t.info()["stored"] == 3
    with pytest.raises(ValueError, match="storage_order"):
        seed_rs.ReplayBuffer(dict(obj, storage_order="rows", storage_dir=str(tmp_path / "r")))
