"""seed_rs.ray on a real multi-node Ray cluster (see conftest): placement by
resources, restarts by Ray (actor and learner processes SIGKILLed, nodes
removed), the learner's address found through Ray after a restart, resize,
the replay handle from Ray tasks, and refusals of bad input.

Waits poll an observable condition (live slots from the learner's
Prometheus endpoint, placements, exit) up to a generous deadline: a
cluster of five nodes shares this machine's two cores."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest
import ray

import seed_rs
import seed_rs.ray as sr

REPO = pathlib.Path(__file__).resolve().parents[3]

# The Ray tasks below travel by value: this test module is not importable
# in the workers.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: The learner with its actors on Ray only, serving CartPole.
LEARNER = ["--local-actors", "0", "--env", "cartpole", "--progress-secs", "0"]
ENVS = 8
DEADLINE = 180.0


def node_resources(node_id: str) -> dict:
    """The total resources of node ``node_id``."""
    return next(n["Resources"] for n in ray.nodes() if n["NodeID"] == node_id)


def node_id_of(node) -> str:
    """Ray's id of a ``Cluster`` node object."""
    return node.node_id


def live_slots(learner) -> float:
    return ray.get(learner.metrics.remote()).get("seed_live_env_slots", 0.0)


def wait_slots(learner, n: int, what: str) -> float:
    """Seconds until the learner has exactly ``n`` live env slots."""
    started = time.monotonic()
    sr.wait_for(lambda: live_slots(learner) == n, DEADLINE, what)
    return time.monotonic() - started


def test_bad_input_is_refused_quickly(cluster, tmp_path):
    started = time.monotonic()
    with pytest.raises(ValueError, match="no node of the Ray cluster has.*'gpu-xl'"):
        sr.start_learner(LEARNER, resources={"gpu-xl": 1})
    with pytest.raises(ValueError, match="--actor-resources"):
        sr.ActorFleet(None, "CartPole-v1", 1, resources={"CPU": 64})
    assert time.monotonic() - started < 30
    # The learner failing to start: the error names the flag.
    broken = sr.start_learner([*LEARNER, "--batch-size", "zero"], resources={"learner": 1})
    with pytest.raises(ray.exceptions.RayActorError, match="batch-size"):
        ray.get(broken.address.remote(), timeout=DEADLINE)
    # An unknown env id: the actor's creation fails naming it.
    learner = sr.start_learner(LEARNER, resources={"learner": 1})
    fleet = sr.ActorFleet(learner, "NoSuchEnv-v9", 1, ENVS, resources={"actor": 1}, max_restarts=0)
    with pytest.raises(ray.exceptions.RayActorError, match="NoSuchEnv"):
        fleet.check_started(DEADLINE)
    fleet.shutdown()
    ray.kill(learner, no_restart=True)


def test_cartpole_to_475_placed_by_resources_through_an_actor_sigkill(cluster, tmp_path):
    learner = sr.start_learner([*LEARNER, "--stop-when-solved", "--max-seconds", "300"],
                               resources={"learner": 1}, run_dir=str(tmp_path / "run"))
    fleet = sr.ActorFleet(learner, "CartPole-v1", 2, ENVS, resources={"actor": 1})
    try:
        where = ray.get(learner.placement.remote())
        assert node_resources(where["node_id"]).get("learner") == 1
        for p in fleet.placements():
            assert node_resources(p["node_id"]).get("actor", 0) > 0, p
        wait_slots(learner, 2 * ENVS, "both actors' slots live")
        # SIGKILL an actor's process: Ray restarts it and its slots come back.
        victim = fleet.placements()[0]
        os.kill(victim["pid"], signal.SIGKILL)
        sr.wait_for(lambda: fleet.placements()[0]["pid"] != victim["pid"], DEADLINE,
                    "the killed actor restarted")
        wait_slots(learner, 2 * ENVS, "the restarted actor's slots live")
        summary = ray.get(learner.wait.remote(DEADLINE * 2))
        assert summary is not None and summary["solved"], summary
    finally:
        fleet.shutdown()
        ray.kill(learner, no_restart=True)


def test_the_actor_count_follows_resize_and_a_learner_binary_by_path(cluster, tmp_path):
    # A learner binary given by path (on GPU nodes: a cuda build).
    binary = os.environ.get("SEED_LEARNER_BIN", str(REPO / "target" / "release" / "learner"))
    learner = sr.start_learner(LEARNER, resources={"learner": 1}, binary=binary)
    fleet = sr.ActorFleet(learner, "CartPole-v1", 2, 4, resources={"actor": 1})
    try:
        assert ray.get(learner.placement.remote())["command"][0] == binary
        for n in (2, 6, 1):
            fleet.resize(n)
            wait_slots(learner, 4 * n, f"{n} actors' slots live")
            assert len(fleet) == n
    finally:
        fleet.shutdown()
        # The learner program dies with its Ray actor (parent-death signal).
        pid = ray.get(learner.placement.remote())["pid"]
        ray.kill(learner, no_restart=True)
        sr.wait_for(lambda: _gone(pid), DEADLINE, "the learner program gone with its actor")


def _checkpointing_run(tmp_path):
    """A learner checkpointing every second into a run dir, and two actors
    whose slots are live: ``(run_dir, learner, fleet)``."""
    run = str(tmp_path / "run")
    learner = sr.start_learner([*LEARNER, "--checkpoint-secs", "1"], resources={"learner": 1},
                               run_dir=run)
    fleet = sr.ActorFleet(learner, "CartPole-v1", 2, ENVS, resources={"actor": 1})
    wait_slots(learner, 2 * ENVS, "slots live")
    return run, learner, fleet


def test_a_killed_learner_resumes_from_its_checkpoint_and_the_actors_find_it(cluster, tmp_path):
    run, learner, fleet = _checkpointing_run(tmp_path)
    try:
        sr.wait_for(lambda: sr.has_checkpoint(run)
                    and ray.get(learner.metrics.remote()).get("seed_policy_version", 0) > 20,
                    DEADLINE, "a checkpoint past version 20")
        before = ray.get(learner.placement.remote())
        os.kill(before["pid"], signal.SIGKILL)
        # Ray restarts the learner's actor; it resumes; the actors look its
        # (new) address up and come back.
        # The placement can answer before the new process has said which
        # version it resumed (seen under load): wait for both.
        after = sr.wait_for(lambda: (lambda p: p if p["pid"] != before["pid"]
                                     and p.get("resumed_policy_version") is not None else None)(
            ray.get(learner.placement.remote())), DEADLINE, "the learner restarted and resumed")
        assert after["resumed"] and after["resumed_policy_version"] > 0, after
        assert ray.get(learner.address.remote()) is not None
        wait_slots(learner, 2 * ENVS, "the actors back on the restarted learner")
        version = ray.get(learner.metrics.remote())["seed_policy_version"]
        assert version >= after["resumed_policy_version"]
    finally:
        fleet.shutdown()
        ray.kill(learner, no_restart=True)


def _row(i: int) -> np.ndarray:
    """Item ``i``: 15 float32 values from i, then their CRC in the last."""
    x = np.arange(i, i + 16, dtype=np.float32)
    x[15] = np.float32(zlib.crc32(x[:15].tobytes()) & 0xFFFF)
    return x


@ray.remote(num_cpus=0)
def _write(handle, first: int, n: int) -> list:
    keys = []
    for i in range(first, first + n, 10):
        rows = np.stack([_row(j) for j in range(i, i + 10)])
        keys.extend(int(k) for k in handle.insert({"x": rows}))
    return keys


@ray.remote(num_cpus=0)
def _sample(handle, rounds: int) -> int:
    checked = 0
    for _ in range(rounds):
        fields, keys, _ = handle.sample(32, timeout=60)
        for row in fields["x"]:
            first = int(row[0])
            assert np.array_equal(row, _row(first)), row  # not torn, not foreign
            checked += 1
    return checked


def test_the_replay_handle_from_ray_tasks_and_across_a_server_restart(cluster, tmp_path):
    storage = tmp_path / "replay"
    config = {"tables": [{"name": "exp", "capacity": 10_000, "sampler": {"kind": "uniform"},
                          "storage_dir": str(storage),
                          "fields": [{"name": "x", "dtype": "f32", "shape": [16]}]}]}
    server = sr.start_replay_server(config, resources={"learner": 1})
    handle = sr.ReplayHandle(server, "exp")
    try:
        writes = [_write.remote(handle, w * 1000, 500) for w in range(4)]
        samples = [_sample.remote(handle, 20) for _ in range(2)]
        keys = [k for ks in ray.get(writes, timeout=DEADLINE) for k in ks]
        assert len(keys) == len(set(keys)) == 2000  # none lost, none twice
        assert sum(ray.get(samples, timeout=DEADLINE)) == 2 * 20 * 32
        assert handle.info()["stored"] == 2000
        # SIGKILL the server: Ray restarts it from its storage dir; the
        # handle finds it again.
        pid = ray.get(server.placement.remote())["pid"]
        os.kill(pid, signal.SIGKILL)
        sr.wait_for(lambda: ray.get(server.placement.remote())["pid"] != pid, DEADLINE,
                    "the replay server restarted")
        assert handle.info()["stored"] == 2000
        assert ray.get(_sample.remote(handle, 5), timeout=DEADLINE) == 5 * 32
    finally:
        ray.kill(server, no_restart=True)


@ray.remote(num_cpus=0)
def _trajectory(handle, trajectory: int, group: int, length: int) -> None:
    x = np.full((length, 2), float(trajectory), dtype=np.float32)
    handle.submit_steps([trajectory] * length, [group] * length, {"x": x},
                        is_last=[0] * (length - 1) + [1])


@ray.remote(num_cpus=0)
def _fetch(handle) -> dict:
    g = handle.fetch_group(timeout=60)
    return {"group_id": g["group_id"], "trajectory_ids": sorted(g["trajectory_ids"].tolist()),
            "rows": int(g["fields"]["x"].shape[0])}


def test_the_grouped_calls_through_the_handle_from_ray_tasks(cluster):
    config = {"tables": [{"name": "pool", "capacity": 1000,
                          "sampler": {"kind": "grouped", "group_size": 2},
                          "fields": [{"name": "x", "dtype": "f32", "shape": [2]}]}]}
    server = sr.start_replay_server(config, resources={"learner": 1}, token="pool-secret")
    handle = sr.ReplayHandle(server, "pool", token="pool-secret")
    try:
        # Four trajectories in two groups, each written by its own task.
        ray.get([_trajectory.remote(handle, t, t // 10, 3) for t in (10, 11, 20, 21)],
                timeout=DEADLINE)
        groups = ray.get([_fetch.remote(handle) for _ in range(2)], timeout=DEADLINE)
        assert sorted((g["group_id"], g["trajectory_ids"], g["rows"]) for g in groups) == [
            (1, [10, 11], 6), (2, [20, 21], 6)]
        assert handle.fetch_group(timeout=0) is None  # whole groups only, each once
    finally:
        ray.kill(server, no_restart=True)


def test_a_pool_on_disk_across_a_server_restart_with_submits_in_flight(cluster, tmp_path):
    """A grouped table with ``storage_dir``: Ray restarts the SIGKILLed
    server from its journal, the answered groups are all there, and a
    submit stream that was open when the server went raises (no silent
    retry) before the handle submits again."""
    config = {"tables": [{"name": "pool", "capacity": 1000, "storage_dir": str(tmp_path / "pool"),
                          "sampler": {"kind": "grouped", "group_size": 2},
                          "fields": [{"name": "x", "dtype": "f32", "shape": [2]}]}]}
    server = sr.start_replay_server(config, resources={"learner": 1})
    handle = sr.ReplayHandle(server, "pool")
    step = lambda t, g: handle.submit_steps([t], [g], {"x": np.full((1, 2), t, np.float32)},
                                            is_last=[1], wait=False)
    try:
        for t in range(10):  # five groups, and a sixth half-written
            step(t, t // 2)
        step(10, 5)
        assert handle.flush_submits()["groups_completed"] == 5
        assert handle.fetch_group(timeout=0)["group_id"] == 0
        pid = ray.get(server.placement.remote())["pid"]
        os.kill(pid, signal.SIGKILL)
        sr.wait_for(lambda: ray.get(server.placement.remote())["pid"] != pid, DEADLINE,
                    "the replay server restarted")
        raised = False
        try:
            step(11, 5)
            handle.flush_submits()
        except seed_rs.ReplayError:
            raised = True  # the old stream's server is gone
        assert raised, "a submit on the dead stream went unnoticed"
        info = handle.info()["grouped"]
        assert info["groups_ready"] == 4 and info["groups_open"] == 1
        step(11, 5)
        handle.flush_submits()
        got = [handle.fetch_group(timeout=0)["group_id"] for _ in range(5)]
        assert got == [1, 2, 3, 4, 5] and handle.fetch_group(timeout=0) is None
    finally:
        ray.kill(server, no_restart=True)


def test_the_agentic_pool_example_from_ray_tasks(cluster):
    """examples/agentic_pool.py, small: gateway tasks submit multi-turn
    token rollouts with string ids, a trainer task takes every group whole."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("agentic_pool", REPO / "examples" / "agentic_pool.py")
    example = importlib.util.module_from_spec(spec)
    sys.modules["agentic_pool"] = example
    spec.loader.exec_module(example)
    ray.cloudpickle.register_pickle_by_value(example)
    r = example.run(gateways=3, prompts=4, group_size=2, resources={"learner": 1})
    assert r["groups"] == 4 and r["steps"] == r["submitted"] > 0
    assert r["tokens"] > 4 * 2 * 150  # every turn's prompt and response came back
    assert r["info"]["groups_ready"] == 0 and r["info"]["groups_dropped_queue_full"] == 0


def test_the_token_reaches_the_learner_and_the_actors(cluster):
    learner = sr.start_learner(LEARNER, resources={"learner": 1}, token="s3cret")
    good = sr.ActorFleet(learner, "CartPole-v1", 1, 4, resources={"actor": 1}, token="s3cret")
    try:
        wait_slots(learner, 4, "the actor with the token served")
        # Without it the learner refuses the stream: the actor's run fails.
        bad = sr.ActorFleet(learner, "CartPole-v1", 1, 4, resources={"actor": 1}, max_restarts=0)
        with pytest.raises(Exception, match="(?i)token|unauthenticated"):
            sr.wait_for(lambda: bad.check_running() or False, DEADLINE, "the refusal")
        bad.shutdown()
        assert live_slots(learner) == 4
    finally:
        good.shutdown()
        ray.kill(learner, no_restart=True)


def test_parts_on_a_removed_node_come_back_on_another(cluster, tmp_path):
    c, nodes = cluster
    run, learner, fleet = _checkpointing_run(tmp_path)
    try:
        sr.wait_for(lambda: sr.has_checkpoint(run), DEADLINE, "a checkpoint")
        # An actor node goes: its actors come back on the other one.
        gone = nodes["actors"][0]
        c.remove_node(gone)
        sr.wait_for(lambda: all(p["node_id"] != node_id_of(gone) for p in fleet.placements()),
                    DEADLINE, "the actors off the removed node")
        wait_slots(learner, 2 * ENVS, "the moved actors' slots live")
        # The learner's node goes: it comes back on the other learner node,
        # resumed, and the actors find it.
        before = ray.get(learner.placement.remote())
        learner_node = next(n for n in nodes["learners"] if node_id_of(n) == before["node_id"])
        c.remove_node(learner_node)
        after = sr.wait_for(lambda: (lambda p: p if p["node_id"] != before["node_id"] else None)(
            ray.get(learner.placement.remote())), DEADLINE, "the learner on another node")
        assert after["resumed"] and node_resources(after["node_id"]).get("learner") == 1
        wait_slots(learner, 2 * ENVS, "the actors back on the moved learner")
    finally:
        fleet.shutdown()
        ray.kill(learner, no_restart=True)


def _cli(cluster, *learner_flags: str) -> subprocess.Popen:
    c, _ = cluster
    return subprocess.Popen(
        [sys.executable, "-m", "seed_rs.ray", "train", "--address", c.address,
         "--env", "CartPole-v1", "--actors", "2", "--envs-per-actor", str(ENVS),
         "--learner-resources", '{"learner": 1}', "--actor-resources", '{"actor": 1}',
         "--progress-secs", "1", "--", *LEARNER, *learner_flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_cli_prints_progress_and_ctrl_c_stops_every_part_with_the_summary(cluster):
    # Training to 475 is the placement test's; here the launcher itself.
    cli = _cli(cluster)
    pids, lines = [], []
    for line in cli.stderr:
        lines.append(line)
        pids += [int(p) for p in re.findall(r"pid (\d+)", line)]
        if re.search(r"\d+ env steps \| \d+ episodes \| mean return", line):
            break  # a progress line: everything runs
    text = "".join(lines)
    assert "learner on node 127.0.0.1" in text and "actor 1 on node" in text, text
    assert len(pids) == 3, pids  # the learner program and two actors
    cli.send_signal(signal.SIGINT)
    out, err = cli.communicate(timeout=DEADLINE)
    assert cli.returncode == 130, err[-3000:]
    # The learner stopped cleanly and its summary came out last (Ray's own
    # lines may follow it on stdout).
    summary, _ = json.JSONDecoder().raw_decode(out[out.index("{"):])
    assert summary["env_steps"] > 0 and summary["learner_steps"] > 0, summary
    sr.wait_for(lambda: all(_gone(p) for p in pids), DEADLINE, "every part stopped")
