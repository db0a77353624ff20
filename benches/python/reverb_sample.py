#!/usr/bin/env python3
"""``sample(128)`` latency of Reverb, the way its users sample.

What it answers: how long Reverb takes to hand a batch of 128 items to
Python, for the comparison in ``replay_service_bench`` (which starts this
script with ``--reverb-python PATH``, the Python of a venv with
``dm-reverb==0.14.0`` and ``tensorflow-cpu==2.15.1``; see CONTRIBUTING.md).

The table is the bench's: one table of 100k items (uniform sampler, FIFO
remover, ``MinSize(1)``), each item one 3x4 ``float32`` field, filled
before measuring. The Reverb server runs in a child process (this script
with ``--serve``), as a shared replay service does: a client in the
server's own process would read the table directly, without gRPC, and
the service it is compared with is measured over TCP loopback. Two paths:

- ``tfdata``: ``reverb.TrajectoryDataset.from_table_signature`` batched
  128 (``max_in_flight_samples_per_worker`` 256, twice the batch, as Acme's
  ``make_reverb_dataset`` sets it), iterated with ``next``: the time of one
  ``next`` is one batch of 128 handed to Python as tensors;
- ``client``: ``reverb.Client.sample(table, 128)`` consumed into a list
  and stacked into one ``[128, 3, 4]`` array (a new sample stream per
  call, per-item Python objects: much slower, measured with fewer calls).

Protocol (so the bench can alternate it with its own measurements): after
the fill the script prints one JSON line ``{"ready": true, ...}``; then, for
every line ``measure`` on stdin, it measures both paths and prints one JSON
line of p50/p99 microseconds; it exits at end of input. ``--once`` measures
once and exits without reading stdin.

    /work/reverb-venv/bin/python benches/python/reverb_sample.py --once
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import subprocess
import sys
import time

import numpy as np
import reverb
import tensorflow as tf

ITEMS = 100_000
BATCH = 128
TABLE = "sample"


def _version(dist):
    from importlib.metadata import version

    return version(dist)


def percentiles(samples_ns):
    a = np.sort(np.asarray(samples_ns, dtype=np.float64)) / 1e3
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def fill(client):
    obs = np.arange(ITEMS * 12, dtype=np.float32).reshape(ITEMS, 3, 4)
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for i in range(ITEMS):
            writer.append({"obs": obs[i]})
            writer.create_item(TABLE, priority=1.0, trajectory={"obs": writer.history["obs"][-1]})
            if i % 1000 == 999:
                writer.flush()
        writer.end_episode(timeout_ms=60_000)


def measure_tfdata(iterator, batches):
    for _ in range(20):  # warm-up: the pipeline fills its in-flight samples
        next(iterator)
    times = []
    start = time.perf_counter_ns()
    for _ in range(batches):
        t = time.perf_counter_ns()
        sample = next(iterator)
        times.append(time.perf_counter_ns() - t)
    per_batch_us = (time.perf_counter_ns() - start) / 1e3 / batches
    assert sample.data["obs"].shape == (BATCH, 3, 4), sample.data["obs"].shape
    return (*percentiles(times), per_batch_us)


def measure_client(client, calls):
    times = []
    for _ in range(calls):
        t = time.perf_counter_ns()
        samples = list(client.sample(TABLE, num_samples=BATCH, emit_timesteps=False, unpack_as_table_signature=True))
        obs = np.stack([s.data["obs"] for s in samples])
        times.append(time.perf_counter_ns() - t)
    assert obs.shape == (BATCH, 3, 4), obs.shape
    return percentiles(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=2000, help="tf.data batches per measurement")
    parser.add_argument("--client-calls", type=int, default=100, help="client.sample calls per measurement")
    parser.add_argument("--once", action="store_true", help="measure once, without reading stdin")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return

    start = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    served = json.loads(server.stdout.readline())
    address = f"localhost:{served['port']}"
    client = reverb.Client(address)
    size = client.server_info()[TABLE].current_size
    assert size == ITEMS, size
    dataset = reverb.TrajectoryDataset.from_table_signature(
        server_address=address,
        table=TABLE,
        max_in_flight_samples_per_worker=2 * BATCH,
    ).batch(BATCH, drop_remainder=True)
    iterator = iter(dataset)
    header = {
        "ready": True,
        "reverb": _version("dm-reverb"),
        "tensorflow": tf.__version__,
        "items": ITEMS,
        "setup_seconds": round(time.perf_counter() - start, 1),
        "max_in_flight_samples_per_worker": 2 * BATCH,
        "transport": "gRPC over TCP loopback, server in a child process",
    }
    print(json.dumps(header), flush=True)

    def measure():
        p50, p99, per_batch = measure_tfdata(iterator, args.batches)
        c50, c99 = measure_client(client, args.client_calls)
        return {
            "sample128_p50_us": p50,
            "sample128_p99_us": p99,
            "us_per_batch": per_batch,
            "client_sample128_p50_us": c50,
            "client_sample128_p99_us": c99,
            "batches": args.batches,
            "client_calls": args.client_calls,
        }

    if args.once:
        print(json.dumps(measure()), flush=True)
    else:
        for line in sys.stdin:
            if line.strip() == "measure":
                print(json.dumps(measure()), flush=True)
    server.stdin.close()
    server.wait(timeout=60)


def serve():
    """The child: a Reverb server with the table filled; prints its port,
    serves until stdin closes."""
    server = reverb.Server(
        tables=[
            reverb.Table(
                name=TABLE,
                sampler=reverb.selectors.Uniform(),
                remover=reverb.selectors.Fifo(),
                max_size=ITEMS,
                rate_limiter=reverb.rate_limiters.MinSize(1),
                signature={"obs": tf.TensorSpec([3, 4], tf.float32)},
            )
        ],
        port=None,
    )
    fill(reverb.Client(f"localhost:{server.port}"))
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
