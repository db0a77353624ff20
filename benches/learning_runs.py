#!/usr/bin/env python3
"""Seeds of a learning run for a fixed time: how fast each reaches its
target, whether it stays there, and where it is at fixed times.

A learning benchmark, not a test: each run is a fresh learner (and, for a
Gymnasium env, a fresh ``python -m seed_rs.actor`` beside it, seeded the
same) for ``--seconds`` of wall time, one run at a time. Per run it writes
a JSON record (``RUN.json``: the fields below), keeps the run directory
(``metrics.jsonl``, ``learning_curve.png``: the 100-episode mean against
env steps and against wall seconds) and the logs, and at the end prints a
Markdown table and writes ``summary.json`` over every record in the
output folder.

A record's fields, read from the run's ``metrics.jsonl`` and
``summary.json``:

- ``game``, ``seed``, ``preset``, ``target``, ``wall_seconds``;
- ``seconds_to_target`` / ``env_steps_to_target``: when the 100-episode
  mean first reached the target (null if never);
- ``min_mean_after_target``: the lowest 100-episode mean from then on
  (sampled at every progress line, ``--progress-secs``);
- ``seconds_to_target_in_samples`` / ``min_mean_after_target_in_samples``:
  the same two on the progress samples alone, the curve's points (the
  learner checks its target every 50 ms and SB3's runner at every env
  step, so a first crossing can be a moment's mean that no sample shows);
- ``final_mean``, ``mean_at_300_s``, ``mean_at_600_s``, ``mean_at_900_s``,
  ``mean_at_1200_s`` (the last sample at or before that time; null past
  the run's end);
- ``env_steps_per_second``, ``learner_steps_per_second``,
  ``trainer_wait_fraction``;
- ``cpu_seconds``: CPU time (user + system) by thread, read from
  ``/proc`` every two seconds until the learner exits: each learner
  thread by name (``learner/trainer``, ``learner/inference-0``, ...) and
  the actor process as a whole (``actor``), so a run says how its cores
  were shared; ``cpu_share`` is the same over the wall seconds.

``sb3`` runs Stable-Baselines3 on a Gymnasium env with rl-zoo3's tuned
hyperparameters (``benches/python/sb3_run.py``) and writes the same
record, so the two sit in one table; ``--alternate`` interleaves ours and
SB3 seed by seed (which side goes first alternates too).

Usage (from the repository root, the learner built with ``cargo build
--release -p seed-learner-cli --bin learner``)::

    # CartPole with the defaults, 20 seeds of 60 s: does every seed stay solved?
    python3 benches/learning_runs.py ours --seeds 1-20 --seconds 60 --progress-secs 1 \\
        --label cartpole --stay-above 450 --out benches/results/learning/cartpole_defaults
    # MinAtar Breakout with the preset, through the Python actor.
    python3 benches/learning_runs.py ours --preset minatar --seeds 1,2 --seconds 1200 \\
        --env MinAtar/Breakout-v1 --target 28 --python VENV/bin/python --out DIR
    # LunarLander: ours against SB3 PPO (rl-zoo3), alternating.
    python3 benches/learning_runs.py ours --preset lunarlander --env LunarLander-v3 \\
        --seeds 1,2 --seconds 900 --python VENV/bin/python --alternate sb3:ppo --out DIR
    # Re-read the records of a folder (and draw its curves).
    python3 benches/learning_runs.py table DIR [--plot DIR/curves.png]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benches"))
from cpu_math import machine  # noqa: E402  (the CPU model, core count and SIMD, as every bench records it)

AT_SECONDS = [300, 600, 900, 1200]


def seeds(text: str) -> list[int]:
    """``1-20`` or ``1,2,5``."""
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_metrics(path: pathlib.Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            r = json.loads(line)
            if "time/seconds" in r:
                records.append(r)
    return records


def mean_at(records: list[dict], seconds: float, wall: float) -> float | None:
    """The 100-episode mean of the last sample at or before `seconds`
    (null when the run ended before it; a sample is due every progress
    interval, so allow one interval's slack at the very end)."""
    if wall + 1.0 < seconds:
        return None
    before = [r for r in records if r["time/seconds"] <= seconds + 1.0 and r.get("env/episodes", 0) > 0]
    return before[-1]["env/mean_return_last_100"] if before else None


def record_from(records: list[dict], summary: dict, target: float, base: dict) -> dict:
    """The run's record from its progress samples and summary."""
    wall = summary.get("wall_seconds") or (records[-1]["time/seconds"] if records else 0.0)
    full = [r for r in records if r.get("env/episodes", 0) >= 100]
    # The first progress sample at the target (the curve's first point there).
    hit = next((r for r in full if r["env/mean_return_last_100"] >= target), None)
    reached = summary.get("seconds_to_solve")
    steps_reached = summary.get("env_steps_to_solve")
    if reached is None and hit is not None:  # a record without the run's own check
        reached, steps_reached = hit["time/seconds"], hit["env/steps"]
    after = [r["env/mean_return_last_100"] for r in full if reached is not None and r["time/seconds"] >= reached]
    min_after = summary.get("min_mean_return_after_solve")
    if min_after is None and after:
        min_after = min(after)
    elif min_after is not None and after:
        min_after = min(min_after, min(after))
    # The same two figures on the progress samples alone (the curve's
    # points): the run's own check (every 50 ms for the learner, every env
    # step for SB3) can catch a moment's mean that no sample shows.
    in_samples = [r["env/mean_return_last_100"] for r in full if hit is not None and r["time/seconds"] >= hit["time/seconds"]]
    rec = dict(base)
    rec.update({
        "seconds_to_target_in_samples": hit["time/seconds"] if hit is not None else None,
        "min_mean_after_target_in_samples": min(in_samples) if in_samples else None,
        "target": target,
        "wall_seconds": wall,
        "seconds_to_target": reached,
        "env_steps_to_target": steps_reached,
        "min_mean_after_target": min_after,
        "final_mean": summary.get("final_mean_return", records[-1]["env/mean_return_last_100"] if records else None),
        "env_steps": summary.get("env_steps", records[-1]["env/steps"] if records else 0),
        "env_steps_per_second": summary.get("env_steps_per_second"),
        "learner_steps_per_second": summary.get("learner_steps_per_second"),
        "trainer_wait_fraction": summary.get("trainer_wait_fraction"),
    })
    for s in AT_SECONDS:
        rec[f"mean_at_{s}_s"] = mean_at(records, s, wall)
    return rec


def cpu_ticks(pid: int) -> dict[str, int]:
    """User + system clock ticks per thread name of process `pid` (threads
    of one name summed); empty where /proc cannot be read."""
    out: dict[str, int] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            ticks = stat_ticks(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue  # a thread that ended between the listing and the read
        if ticks is not None:
            out[name] = out.get(name, 0) + ticks
    return out


def stat_ticks(path: str) -> int | None:
    """utime + stime of a /proc `stat` file (fields 14 and 15, counted
    after the parenthesised name); None if it is malformed."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[-1].split()
    try:
        return int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


def process_ticks(pid: int) -> int | None:
    """User + system ticks of process `pid`, every thread of it."""
    try:
        return stat_ticks(f"/proc/{pid}/stat")
    except OSError:
        return None


def wait_sampling_cpu(learner: subprocess.Popen, actor: subprocess.Popen | None, timeout: float) -> tuple[int, dict]:
    """Waits for the learner, sampling its threads' and the actor's CPU
    time every 2 s; returns the exit code and the CPU seconds per thread
    name (each its largest sample)."""
    hz = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + timeout
    cpu: dict[str, float] = {}
    while True:
        # Each name keeps its largest sample: a thread's ticks only grow,
        # and the trainer and inference threads end before the process
        # does, so the last sample alone can lack them.
        for name, ticks in sorted(cpu_ticks(learner.pid).items()):
            key = f"learner/{name}"
            cpu[key] = max(cpu.get(key, 0.0), ticks / hz)
        if actor is not None and (ticks := process_ticks(actor.pid)) is not None:
            cpu["actor"] = ticks / hz
        try:
            return learner.wait(timeout=2.0), cpu
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                raise


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_ours(args: argparse.Namespace, seed: int, out: pathlib.Path) -> dict:
    name = f"{args.label}_s{seed}"
    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    listen = f"127.0.0.1:{port}"
    cmd = [str(args.learner), "--listen", listen, "--seed", str(seed), "--max-seconds", str(args.seconds),
           "--run-dir", str(run_dir / "run"), "--summary-json", str(run_dir / "summary.json"),
           "--progress-secs", str(args.progress_secs)]
    if args.preset:
        cmd += ["--preset", args.preset]
    if args.target is not None:
        cmd += ["--target-return", str(args.target)]
    if args.env:
        cmd += ["--local-actors", "0"]
    cmd += shlex.split(args.flags)
    env = dict(os.environ)
    print(f"[{datetime.datetime.now():%H:%M:%S}] ours {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    with open(run_dir / "learner.log", "w") as log:
        learner = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    actor = None
    if args.env:
        actor_cmd = [args.python, "-m", "seed_rs.actor", "--env", args.env, "--envs", str(args.envs),
                     "--seed", str(seed), "--learner", listen] + shlex.split(args.actor_flags)
        with open(run_dir / "actor.log", "w") as log:
            actor = subprocess.Popen(actor_cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    cpu: dict[str, float] = {}
    try:
        rc, cpu = wait_sampling_cpu(learner, actor, timeout=args.seconds + 300)
    finally:
        stop(learner)
        if actor is not None:
            stop(actor)
    if rc != 0:
        raise SystemExit(f"{name}: the learner exited with {rc}; see {run_dir / 'learner.log'}")
    summary = json.loads((run_dir / "summary.json").read_text())
    records = read_metrics(run_dir / "run" / "metrics.jsonl")
    target = summary.get("target_return", args.target)
    base = {"system": "seed-rs", "game": args.env or args.game, "seed": seed, "preset": args.preset or "defaults",
            "flags": args.flags}
    rec = record_from(records, summary, target, base)
    rec["cpu_seconds"] = {k: round(v, 2) for k, v in cpu.items()}
    wall = rec["wall_seconds"] or 0.0
    rec["cpu_share"] = {k: round(v / wall, 3) for k, v in cpu.items()} if wall > 0 else {}
    return rec


def run_sb3(args: argparse.Namespace, algo: str, seed: int, out: pathlib.Path) -> dict:
    name = f"sb3_{algo}_s{seed}"
    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [args.python, str(REPO / "benches" / "python" / "sb3_run.py"), "--algo", algo, "--env", args.env,
           "--seed", str(seed), "--seconds", str(args.seconds), "--out", str(run_dir),
           "--progress-secs", str(args.progress_secs), "--threads", str(args.sb3_threads)]
    print(f"[{datetime.datetime.now():%H:%M:%S}] sb3 {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    with open(run_dir / "sb3.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise SystemExit(f"{name}: exited with {rc}; see {run_dir / 'sb3.log'}")
    summary = json.loads((run_dir / "summary.json").read_text())
    records = read_metrics(run_dir / "metrics.jsonl")
    target = args.target if args.target is not None else summary["target_return"]
    base = {"system": f"sb3-{algo} (rl-zoo3)", "game": args.env, "seed": seed, "preset": "rl-zoo3", "flags": ""}
    return record_from(records, summary, target, base)


def fmt(v, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def cores(rec: dict) -> str:
    """The trainer's, the inference threads' and the actor's CPU share
    (cores on average over the run), where the record has them."""
    share = rec.get("cpu_share") or {}
    if not share:
        return ""
    inference = sum(v for k, v in share.items() if k.startswith("learner/inference"))
    return " / ".join(fmt(v, ".2f") if v is not None else "-"
                      for v in (share.get("learner/trainer"), inference, share.get("actor")))


def table(out: pathlib.Path, stay_above: float | None = None) -> str:
    """The Markdown table of a folder's records, per-system totals, and
    `summary.json`; a run "fell below" if its 100-episode mean went under
    `stay_above` (default: its target) after first reaching the target."""
    recs = []
    for path in sorted(out.glob("*.json")):
        if path.name == "summary.json":
            continue
        rec = json.loads(path.read_text())
        rec.setdefault("run", path.stem)
        recs.append(rec)
    lines = ["| run | system | game | seed | s to target | env steps to target | min after | s to target, min after: "
             "in the samples | at 300 s | at 600 s | at 900 s | at 1200 s | final | env steps/s "
             "| cores: trainer / inference / actor |", "|" + "---|" * 15]
    for r in sorted(recs, key=lambda r: (r["system"], r["run"])):
        lines.append("| " + " | ".join([
            r["run"], r["system"], str(r["game"]), str(r["seed"]), fmt(r["seconds_to_target"]),
            fmt(r["env_steps_to_target"], ".0f"), fmt(r["min_mean_after_target"]),
            f'{fmt(r.get("seconds_to_target_in_samples"))}, {fmt(r.get("min_mean_after_target_in_samples"))}',
            fmt(r["mean_at_300_s"]), fmt(r["mean_at_600_s"]), fmt(r["mean_at_900_s"]), fmt(r["mean_at_1200_s"]),
            fmt(r["final_mean"]), fmt(r["env_steps_per_second"], ".0f"), cores(r)]) + " |")
    per_system = {}
    for r in recs:
        per_system.setdefault(r["system"], []).append(r)
    totals = {}
    for system, rs in per_system.items():
        times = [r["seconds_to_target"] for r in rs if r["seconds_to_target"] is not None]
        steps = [r["env_steps_to_target"] for r in rs if r["env_steps_to_target"] is not None]
        totals[system] = {
            "runs": len(rs),
            "reached": len(times),
            "median_seconds_to_target": statistics.median(times) if times else None,
            "median_env_steps_to_target": statistics.median(steps) if steps else None,
            "stay_above": stay_above,
            "fell_below_after_target": sum(1 for r in rs if r["min_mean_after_target"] is not None
                                           and r["min_mean_after_target"] < (stay_above if stay_above
                                                                             is not None else r["target"])),
            "min_mean_after_target": min((r["min_mean_after_target"] for r in rs
                                          if r["min_mean_after_target"] is not None), default=None),
            "fell_below_after_target_in_samples": sum(
                1 for r in rs if r.get("min_mean_after_target_in_samples") is not None
                and r["min_mean_after_target_in_samples"] < (stay_above if stay_above is not None else r["target"])),
        }
        t = totals[system]
        lines.append(f"\n{system}: {t['reached']} of {t['runs']} reached the target; median "
                     f"{fmt(t['median_seconds_to_target'])} s, {fmt(t['median_env_steps_to_target'], '.0f')} env "
                     f"steps; {t['fell_below_after_target']} fell below "
                     f"{'it' if stay_above is None else fmt(stay_above)} afterwards (lowest "
                     f"{fmt(t['min_mean_after_target'])}); in the progress samples alone "
                     f"{t['fell_below_after_target_in_samples']} fell below")
    (out / "summary.json").write_text(json.dumps({"machine": machine(), "systems": totals,
                                                  "runs": recs}, indent=1) + "\n")
    return "\n".join(lines)


def plot(out: pathlib.Path, png: pathlib.Path) -> None:
    """Every run of a folder on one figure: the 100-episode mean against
    env steps and against wall seconds (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_steps, by_seconds) = plt.subplots(1, 2, figsize=(12, 4.5))
    colours = {}
    target = None
    for path in sorted(out.glob("*.json")):
        if path.name == "summary.json":
            continue
        rec = json.loads(path.read_text())
        target = rec["target"]
        run = out / path.stem
        metrics = run / "run" / "metrics.jsonl" if (run / "run").exists() else run / "metrics.jsonl"
        records = [r for r in read_metrics(metrics) if r.get("env/episodes", 0) >= 100]
        # One colour per configuration: the run's name less its seed.
        config = rec.get("run", path.stem).rsplit("_s", 1)[0]
        colour = colours.setdefault(config, f"C{len(colours)}")
        label = f"{config} seed {rec['seed']}"
        for ax, key in ((by_steps, "env/steps"), (by_seconds, "time/seconds")):
            ax.plot([r[key] for r in records], [r["env/mean_return_last_100"] for r in records],
                    color=colour, alpha=0.55 + 0.4 * (rec["seed"] % 2), label=label)
    for ax, xlabel in ((by_steps, "env steps"), (by_seconds, "wall seconds")):
        if target is not None:
            ax.axhline(target, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("mean return, last 100 episodes")
        ax.grid(alpha=0.3)
    by_seconds.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("ours", help="seeds of a learner run (optionally alternating with SB3)")
    o.add_argument("--learner", default=str(REPO / "target" / "release" / "learner"))
    o.add_argument("--preset", help="learner --preset NAME [default: the defaults]")
    o.add_argument("--flags", default="", help="further learner flags, one string")
    o.add_argument("--env", help="a Gymnasium id stepped by python -m seed_rs.actor (else the learner's own)")
    o.add_argument("--game", default="CartPole-v1", help="the record's game for a built-in env")
    o.add_argument("--envs", type=int, default=64, help="the actor's --envs [default: 64]")
    o.add_argument("--actor-flags", default="", help="further actor flags, one string")
    o.add_argument("--python", default=sys.executable, help="the Python with seed_rs (and SB3 for sb3)")
    o.add_argument("--seeds", type=seeds, default=[1, 2])
    o.add_argument("--seconds", type=float, required=True)
    o.add_argument("--target", type=float, help="the target return [default: the preset's]")
    o.add_argument("--progress-secs", type=float, default=2.0)
    o.add_argument("--label", default="ours", help="run names start with this [default: ours]")
    o.add_argument("--alternate", metavar="sb3:ALGO", help="interleave SB3 runs of ALGO, seed by seed")
    o.add_argument("--sb3-threads", type=int, default=2, help="torch threads for SB3 [default: 2]")
    o.add_argument("--out", type=pathlib.Path, required=True)
    t = sub.add_parser("table", help="the table and summary.json of a folder's records")
    t.add_argument("out", type=pathlib.Path)
    t.add_argument("--plot", type=pathlib.Path, metavar="PNG",
                   help="also draw every run's curve into PNG (needs matplotlib)")
    for q in (o, t):
        q.add_argument("--stay-above", type=float,
                       help="count runs whose mean fell below this after the target [default: the target]")
    args = p.parse_args()
    if args.cmd == "table":
        print(table(args.out, args.stay_above))
        if args.plot:
            plot(args.out, args.plot)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    algo = None
    if args.alternate:
        if not args.alternate.startswith("sb3:") or not args.env:
            p.error("--alternate takes sb3:ALGO and needs --env")
        algo = args.alternate.split(":", 1)[1]
    for i, seed in enumerate(args.seeds):
        sides = ["ours"] if algo is None else (["ours", "sb3"] if i % 2 == 0 else ["sb3", "ours"])
        for side in sides:
            rec = run_ours(args, seed, args.out) if side == "ours" else run_sb3(args, algo, seed, args.out)
            name = f"{args.label}_s{seed}" if side == "ours" else f"sb3_{algo}_s{seed}"
            (args.out / f"{name}.json").write_text(json.dumps(rec, indent=1) + "\n")
            print(f"  {name}: target at {fmt(rec['seconds_to_target'])} s, min after "
                  f"{fmt(rec['min_mean_after_target'])}, final {fmt(rec['final_mean'])}", file=sys.stderr, flush=True)
    print(table(args.out, args.stay_above))


if __name__ == "__main__":
    main()
