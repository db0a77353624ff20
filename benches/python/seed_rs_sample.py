#!/usr/bin/env python3
"""``sample(128)`` latency of ``seed_rs.ReplayClient``: the replay service
measured from Python, as Reverb is (``reverb_sample.py``).

``replay_service_bench --seed-python PATH`` starts this script with the
Python of a venv where ``seed_rs`` is installed, pointed at the bench's own
server and its filled ``sample`` table (100k items of one 3x4 ``float32``
field, uniform). Each measurement is ``--calls`` calls of
``client.sample(table, 128)`` (a sample stream opened, one batch received
and turned into numpy arrays: fields, keys, weights; the stream closed),
then ``--calls`` batches of one pipelined ``client.sample_stream(table,
128, max_in_flight=8)``, each ``next`` timed (what ``next`` on Reverb's
batched tf.data iterator is to Reverb).

Protocol (the bench alternates it with its other measurements): after
connecting the script prints one JSON line ``{"ready": true, ...}``; for
every line ``measure`` on stdin it prints one JSON line of p50/p99
microseconds; it exits at end of input. ``--once`` measures once.

    python benches/python/seed_rs_sample.py --addr 127.0.0.1:50061 --table sample --once
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import seed_rs

BATCH = 128


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--addr", required=True, help="replay server address")
    parser.add_argument("--table", default="sample")
    parser.add_argument("--calls", type=int, default=2000, help="sample(128) calls per measurement")
    parser.add_argument("--once", action="store_true", help="measure once, without reading stdin")
    args = parser.parse_args()

    client = seed_rs.ReplayClient(args.addr)
    info = client.info(args.table)
    print(json.dumps({"ready": True, "stored": info["stored"], "fields": info["fields"]}), flush=True)

    def measure():
        for _ in range(20):
            client.sample(args.table, BATCH)
        times = []
        for _ in range(args.calls):
            t = time.perf_counter_ns()
            fields, keys, weights = client.sample(args.table, BATCH)
            times.append(time.perf_counter_ns() - t)
        assert keys.shape == (BATCH,) and weights.shape == (BATCH,)
        assert all(a.shape[0] == BATCH for a in fields.values())
        us = np.asarray(times, dtype=np.float64) / 1e3
        stream = client.sample_stream(args.table, BATCH, max_batches=args.calls + 20, max_in_flight=8)
        for _ in range(20):
            next(stream)
        gaps = []
        start = time.perf_counter_ns()
        for _ in range(args.calls):
            t = time.perf_counter_ns()
            fields, keys, weights = next(stream)
            gaps.append(time.perf_counter_ns() - t)
        total_us = (time.perf_counter_ns() - start) / 1e3
        assert keys.shape == (BATCH,) and next(stream, None) is None
        gaps = np.asarray(gaps, dtype=np.float64) / 1e3
        return {
            "sample128_p50_us": float(np.percentile(us, 50)),
            "sample128_p99_us": float(np.percentile(us, 99)),
            "stream_sample128_p50_us": float(np.percentile(gaps, 50)),
            "stream_sample128_p99_us": float(np.percentile(gaps, 99)),
            "stream_us_per_batch": total_us / args.calls,
            "calls": args.calls,
        }

    if args.once:
        print(json.dumps(measure()), flush=True)
        return
    for line in sys.stdin:
        if line.strip() == "measure":
            print(json.dumps(measure()), flush=True)


if __name__ == "__main__":
    main()
