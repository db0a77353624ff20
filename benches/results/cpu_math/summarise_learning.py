#!/usr/bin/env python3
"""Summarises an ab_learning.sh run: one table of the CartPole seeds and
one of the MinAtar runs, before against after, and a JSON of the figures.

MinAtar, per run (from its metrics.jsonl and summary.json): env steps/s,
learner steps/s, the trainer's wait fraction, and the 100-episode mean
return at 5, 10 and 20 minutes (the last progress record at or before
each time; the whole run's last record if it is shorter).

Usage: python3 benches/results/cpu_math/summarise_learning.py OUT_DIR [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

MINUTES = [5, 10, 20]


def cartpole(out: pathlib.Path) -> dict:
    runs = {}
    for side in ("before", "after"):
        for path in sorted(out.glob(f"cartpole_{side}_*.json")):
            s = json.loads(path.read_text())
            runs.setdefault(side, []).append({
                "seed": int(path.stem.rsplit("_", 1)[1]),
                "seconds_to_475": s.get("seconds_to_solve"),
                "env_steps_to_475": s.get("env_steps_to_solve"),
                "env_steps_per_second": s.get("env_steps_per_second"),
                "learner_steps_per_second": s.get("learner_steps_per_second"),
            })
    return runs


def at(records: list[dict], seconds: float) -> float | None:
    before = [r for r in records if r.get("time/seconds", 0) <= seconds + 2.5]
    last = before[-1] if before else None
    return None if last is None else last.get("env/mean_return_last_100")


def minatar(out: pathlib.Path) -> dict:
    runs = {}
    for side in ("before", "after"):
        for d in sorted(out.glob(f"minatar_{side}_*")):
            if not (d / "summary.json").exists():
                continue  # still running, or it failed (its learner.log says)
            summary = json.loads((d / "summary.json").read_text())
            metrics = d / "run" / "metrics.jsonl"
            if not metrics.exists():
                metrics = d / "metrics.jsonl"  # as kept in benches/results
            records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
            records = [r for r in records if "time/seconds" in r]
            entry = {
                "seed": int(d.name.rsplit("_", 1)[1]),
                "env_steps_per_second": summary.get("env_steps_per_second"),
                "learner_steps_per_second": summary.get("learner_steps_per_second"),
                "trainer_wait_fraction": summary.get("trainer_wait_fraction"),
                "wall_seconds": summary.get("wall_seconds"),
                "final_mean_return": summary.get("final_mean_return"),
            }
            for m in MINUTES:
                entry[f"mean_at_{m}_min"] = at(records, 60 * m)
            runs.setdefault(side, []).append(entry)
    return runs


def fmt(v, spec=".1f") -> str:
    return "-" if v is None else format(v, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args()
    report = {"cartpole": cartpole(args.out), "minatar": minatar(args.out)}
    print("| CartPole seed | side | seconds to 475 | env steps to 475 | env steps/s | learner steps/s |")
    print("|---|---|---|---|---|---|")
    for side, runs in report["cartpole"].items():
        for r in runs:
            print(f"| {r['seed']} | {side} | {fmt(r['seconds_to_475'], '.2f')} | "
                  f"{fmt(r['env_steps_to_475'], ',.0f')} | {fmt(r['env_steps_per_second'], ',.0f')} | "
                  f"{fmt(r['learner_steps_per_second'], ',.0f')} |")
    for side, runs in report["cartpole"].items():
        solved = [r["seconds_to_475"] for r in runs if r["seconds_to_475"] is not None]
        med = statistics.median(solved) if solved else None
        print(f"| median | {side} | {fmt(med, '.2f')} ({len(solved)}/{len(runs)} solved) | | | |")
    print()
    head = " | ".join(f"mean at {m} min" for m in MINUTES)
    print(f"| MinAtar seed | side | env steps/s | learner steps/s | trainer wait | {head} |")
    print("|---|---|---|---|---|" + "---|" * len(MINUTES))
    for side, runs in report["minatar"].items():
        for r in runs:
            means = " | ".join(fmt(r[f"mean_at_{m}_min"], ".2f") for m in MINUTES)
            print(f"| {r['seed']} | {side} | {fmt(r['env_steps_per_second'], ',.0f')} | "
                  f"{fmt(r['learner_steps_per_second'], '.1f')} | "
                  f"{fmt(r['trainer_wait_fraction'], '.3f')} | {means} |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
