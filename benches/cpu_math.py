#!/usr/bin/env python3
"""The learner's math on the CPU against PyTorch's, case for case, in one
sitting: forward and training rows/s of the learner's four networks.

Runs ``cpu_math_bench`` (ours) and ``benches/python/torch_cpu_bench.py``
(PyTorch) in turn, model by model, at each thread count, round after
round, optionally with a second build of ours (``--before``, for a
before/after column): each side's run of a model's cases (its five
forward batches and its training step) is followed at once by the
others', so a pair meets the same machine state (these VMs drift by
tens of percent within minutes). Each run is a fresh process with its
thread count set before anything starts (``RAYON_NUM_THREADS`` /
``torch.set_num_threads``). A case's rows/s is the median over the rounds
of each run's median iteration; its ratio is the median over the rounds
of the ratio within the round.

Writes a JSON file (every run's records, the medians, the ratios, the
machine) and prints a Markdown table: rows/s of ours and PyTorch, and
ours / PyTorch (above 1: ours is faster).

Usage (from the repository root, after ``cargo build --release -p
seed-benches --bin cpu_math_bench`` and with PyTorch installed for
``--python``)::

    python3 benches/cpu_math.py --python /path/to/venv/bin/python \\
        --out benches/results/cpu_math/torch_cpu.json [--before OLD_BIN]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import pathlib
import platform
import statistics
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
MODELS = ["mlp", "lstm", "minatar", "atari"]


def machine() -> str:
    """The CPU model and core count, from /proc/cpuinfo."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    names = [line.split(":", 1)[1].strip() for line in text.splitlines()
             if line.startswith("model name")]
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    simd = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "no AVX2"
    return f"{names[0] if names else platform.machine()}, {len(names)} cores, {simd}"


def run(command: list[str], side: str) -> list[dict]:
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{side}: {' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    for r in records:
        r["side"] = side
    return records


def key(r: dict) -> tuple:
    return (r["threads"], r["kind"], MODELS.index(r["model"]), r["rows"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ours", default=str(REPO / "target/release/cpu_math_bench"),
                        help="the cpu_math_bench binary")
    parser.add_argument("--before", help="a second cpu_math_bench (an older build), timed in turn")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python that has PyTorch (and numpy)")
    parser.add_argument("--no-torch", action="store_true",
                        help="time ours (and --before) only, e.g. for an A/B of two builds")
    parser.add_argument("--threads", default="2,1", help="thread counts, comma separated")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side per thread count")
    parser.add_argument("--budget-ms", type=int, default=1000, help="time per case in each run")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--cases", default="forward,train")
    parser.add_argument("--batches", default="1,16,64,256,1024")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="the JSON file to write")
    args = parser.parse_args()

    common = ["--cases", args.cases, "--batches", args.batches, "--budget-ms", str(args.budget_ms)]
    sides = {"ours": [args.ours], "torch": [args.python, "benches/python/torch_cpu_bench.py"]}
    if args.no_torch:
        del sides["torch"]
    if args.before:
        sides["before"] = [args.before]
    records = []
    models = [m for m in args.models.split(",") if m]
    for round_ in range(args.rounds):
        for threads in (int(t) for t in args.threads.split(",")):
            for i, model in enumerate(models):
                # Rotate the order: no side always runs first.
                order = list(sides)
                shift = (round_ + i) % len(order)
                order = order[shift:] + order[:shift]
                for side in order:
                    print(f"round {round_ + 1}/{args.rounds}, {threads} thread(s), {model}: {side}",
                          file=sys.stderr, flush=True)
                    command = sides[side] + ["--threads", str(threads), "--models", model] + common
                    for r in run(command, side):
                        r["round"] = round_
                        records.append(r)

    grouped = collections.defaultdict(list)
    by_round = {}
    for r in records:
        grouped[(r["side"],) + key(r)].append(r["rows_per_second"])
        by_round[(r["side"], r["round"]) + key(r)] = r["rows_per_second"]
    medians = {k: statistics.median(v) for k, v in grouped.items()}

    def ratio(a: str, b: str, case: tuple) -> float | None:
        pairs = [by_round[(a, n) + case] / by_round[(b, n) + case] for n in range(args.rounds)
                 if (a, n) + case in by_round and (b, n) + case in by_round]
        return statistics.median(pairs) if pairs else None

    cases = sorted({k[1:] for k in medians})
    table = []
    for c in cases:
        row = {"threads": c[0], "kind": c[1], "model": MODELS[c[2]], "rows": c[3]}
        for side in sides:
            row[side] = medians.get((side,) + c)
        if "torch" in sides:
            row["ours_over_torch"] = ratio("ours", "torch", c)
        if "before" in sides:
            row["ours_over_before"] = ratio("ours", "before", c)
            if "torch" in sides:
                row["before_over_torch"] = ratio("before", "torch", c)
        table.append(row)

    torch_version = next((r.get("torch") for r in records if r.get("torch")), None)
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "torch": torch_version,
        "rounds": args.rounds,
        "budget_ms": args.budget_ms,
        "command": " ".join(sys.argv),
        "table": table,
        "records": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")

    before = "before" in sides
    head = "| threads | case | rows | ours rows/s | PyTorch rows/s | ours / PyTorch |"
    rule = "|---|---|---|---|---|---|"
    if before:
        head += " before rows/s | before / PyTorch | ours / before |"
        rule += "---|---|---|"
    print(f"{machine()}; PyTorch {torch_version}; medians of {args.rounds} rounds "
          "(ratios: medians of the rounds' ratios)\n")
    print(head)
    print(rule)
    for row in table:
        fmt = lambda v: f"{v:,.0f}" if v else "-"  # noqa: E731
        show = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
        case = f"{row['model']} {row['kind']}"
        line = (f"| {row['threads']} | {case} | {row['rows']} | {fmt(row.get('ours'))} | "
                f"{fmt(row.get('torch'))} | {show(row.get('ours_over_torch'))} |")
        if before:
            line += (f" {fmt(row.get('before'))} | {show(row.get('before_over_torch'))} | "
                     f"{show(row.get('ours_over_before'))} |")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
