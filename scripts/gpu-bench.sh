#!/usr/bin/env bash
# The GPU figures in one call, on a machine with an NVIDIA GPU and no Rust:
# the same binaries on --device cuda:0 and --device cpu, side by side.
#
#   bash scripts/gpu-bench.sh [--cpu-only] [--quick] BIN_DIR OUT_DIR
#
# BIN_DIR: what scripts/build-cuda.sh made (.gpu/): learner, inference_bench
# (plain or .xz), and for the Pong phase wheels/ (build-cuda.sh --pong-wheels:
# the seed_rs actor, gymnasium, ale-py). Phases (PHASES, default all three):
#   inference  conv torso (84x84x4 u8) rows/s at batch 64/256/1024/4096:
#              cuda f32 and bf16, cpu f32 (bf16 on a CPU is software)
#   cartpole   CartPole training to a mean return of 475 (--stop-when-solved):
#              learner steps/s and seconds to solve, cuda then cpu
#   pong       ALE/Pong-v5 through the Python actor on all cores but two,
#              learner on cuda:0: learning curve, frames/s, seconds to +20
# Writes OUT_DIR/gpu-bench.json (everything, one object),
# OUT_DIR/pong_learning_curve.png and OUT_DIR/logs.tar.xz; raw files go to
# WORK_DIR (default: a fresh temporary folder).
#
# --cpu-only   no GPU needed: every phase on --device cpu only (a dry run of
#              the JSON's shape; the Pong phase is skipped without gymnasium)
# --quick      short budgets (a dry run in about a minute)
# Env: PHASES, CARTPOLE_SECONDS (120), PONG_SECONDS (330), PONG_ENVS_PER_ACTOR
#      (8), PONG_ACTORS (cores - 2), PYTHON (python3), SEED_CUDA_LIBS (see
#      scripts/cuda/run.sh). With the defaults the whole run takes about
#      9.5 minutes on a 16-core H100 machine; Pong to +20 may need longer:
#      PHASES=pong PONG_SECONDS=560 in a call of its own.
set -uo pipefail

CPU_ONLY=0
QUICK=0
ARGS=()
for arg in "$@"; do
  case "$arg" in
    --cpu-only) CPU_ONLY=1 ;;
    --quick) QUICK=1 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    -*) echo "gpu-bench.sh: unknown option $arg" >&2; exit 2 ;;
    *) ARGS+=("$arg") ;;
  esac
done
[ "${#ARGS[@]}" -eq 2 ] || { echo "usage: bash scripts/gpu-bench.sh [--cpu-only] [--quick] BIN_DIR OUT_DIR" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(cd "${ARGS[0]}" && pwd) || { echo "gpu-bench.sh: no folder ${ARGS[0]}" >&2; exit 2; }
mkdir -p "${ARGS[1]}"
OUT=$(cd "${ARGS[1]}" && pwd)
WORK=${WORK_DIR:-$(mktemp -d /tmp/gpu-bench.XXXXXX)}
mkdir -p "$WORK"
PY=${PYTHON:-python3}

PHASES=${PHASES:-inference cartpole pong}
CARTPOLE_SECONDS=${CARTPOLE_SECONDS:-120}
PONG_SECONDS=${PONG_SECONDS:-330}
INFER_BUDGET_MS=300
BATCHES=64,256,1024,4096
if [ "$QUICK" = 1 ]; then
  CARTPOLE_SECONDS=15; PONG_SECONDS=30; INFER_BUDGET_MS=50; BATCHES=64,256
fi
if [ "$CPU_ONLY" = 1 ]; then DEVICES="cpu"; else DEVICES="cuda:0 cpu"; fi
CORES=$(nproc)
PONG_ACTORS=${PONG_ACTORS:-$(( CORES > 4 ? CORES - 2 : 2 ))}
PONG_ENVS_PER_ACTOR=${PONG_ENVS_PER_ACTOR:-8}

step() { echo "[gpu-bench $(date -u +%H:%M:%S)] $*" >&2; }
# phase NAME SECONDS CMD...: runs CMD under a time limit, records its exit
# status and wall time (ms) in WORK/phases.tsv.
phase() {
  local name=$1 limit=$2; shift 2
  local start rc
  start=$(date +%s%N)
  timeout --signal=INT --kill-after=20 "$limit" "$@"
  rc=$?
  echo -e "$name\t$rc\t$(( ($(date +%s%N) - start) / 1000000 ))" >>"$WORK/phases.tsv"
  [ "$rc" = 0 ] || step "$name exited with $rc (see logs)"
  return 0
}

# The CUDA libraries (cuDNN too) on LD_LIBRARY_PATH; unpack the binaries.
# shellcheck disable=SC1091
source "$HERE/cuda/run.sh" --env-only
for b in learner inference_bench; do
  if [ ! -x "$BIN/$b" ] && [ -f "$BIN/$b.xz" ]; then
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$BIN/$b.xz" "$WORK/$b"
    chmod +x "$WORK/$b"
  elif [ -x "$BIN/$b" ]; then
    ln -sf "$BIN/$b" "$WORK/$b"
  else
    step "no $b (nor $b.xz) in $BIN"; exit 1
  fi
done
L="$WORK/learner"
: >"$WORK/phases.tsv"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU (nvidia-smi)"
} >"$WORK/device.txt"
if [ "$CPU_ONLY" = 0 ]; then
  missing=$(ldd "$L" | grep 'not found' || true)
  [ -z "$missing" ] || { step "the learner cannot start: $missing"; exit 1; }
fi

if [[ " $PHASES " == *" inference "* ]]; then
  # All cores for candle's CPU pool: the CPU figures are the CPU at its best.
  if [ "$CPU_ONLY" = 0 ]; then
    step "conv torso inference on cuda:0, f32 and bf16, batches $BATCHES"
    RAYON_NUM_THREADS=$CORES phase inference_cuda 240 "$WORK/inference_bench" --devices cuda:0 \
      --models conv --dtypes f32,bf16 --batch-sizes "$BATCHES" --budget-ms "$INFER_BUDGET_MS" \
      --json "$WORK/inference_cuda.json"
  fi
  step "conv torso inference on the CPU ($CORES threads), f32, batches $BATCHES"
  RAYON_NUM_THREADS=$CORES phase inference_cpu 240 "$WORK/inference_bench" --devices cpu \
    --models conv --dtypes f32 --batch-sizes "$BATCHES" --budget-ms "$INFER_BUDGET_MS" \
    --json "$WORK/inference_cpu.json"
fi

if [[ " $PHASES " == *" cartpole "* ]]; then
  for dev in $DEVICES; do
    tag=${dev%%:*}
    step "CartPole to 475 on $dev (at most $CARTPOLE_SECONDS s)"
    phase "cartpole_$tag" $((CARTPOLE_SECONDS + 30)) "$L" --device "$dev" --stop-when-solved \
      --max-seconds "$CARTPOLE_SECONDS" --progress-secs 10 --run-dir "$WORK/cartpole_$tag" \
      --summary-json "$WORK/cartpole_$tag.json" >"$WORK/cartpole_$tag.log" 2>&1
  done
fi

if [[ " $PHASES " == *" pong "* ]]; then
  WHEELS="$BIN/wheels"
  SITE="$WORK/site"
  if [ -d "$WHEELS" ] && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    step "installing the carried wheels ($(ls "$WHEELS" | wc -l)) into $SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$WHEELS"/*.whl \
      || step "pip could not install the carried wheels"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  fi
  if ! "$PY" -c 'import seed_rs, gymnasium, ale_py, cv2' 2>"$WORK/pong_import.log"; then
    step "Pong skipped: $PY cannot import seed_rs, gymnasium, ale_py and cv2 (carry wheels/: build-cuda.sh --pong-wheels)"
    echo -e "pong\tskipped\t0" >>"$WORK/phases.tsv"
  else
    dev=${DEVICES%% *}
    port=50091
    step "Pong on $dev: $PONG_ACTORS actors x $PONG_ENVS_PER_ACTOR envs, at most $PONG_SECONDS s"
    # No --env: the actors' hello fixes the spec (u8 [4, 84, 84], 6 actions).
    # The atari preset (learner/presets/atari.toml): its flags, its target of 20.
    "$L" --preset atari --device "$dev" --listen "127.0.0.1:$port" \
      --stop-when-solved --max-seconds "$PONG_SECONDS" --progress-secs 15 \
      --run-dir "$WORK/pong_run" --summary-json "$WORK/pong_learner.json" >"$WORK/pong_learner.log" 2>&1 &
    lpid=$!
    start=$(date +%s%N)
    apids=()
    for i in $(seq 1 "$PONG_ACTORS"); do
      "$PY" -m seed_rs.actor --env ALE/Pong-v5 --envs "$PONG_ENVS_PER_ACTOR" --seed "$i" \
        --learner "127.0.0.1:$port" --max-reconnects 2 --log warn \
        --max-seconds "$((PONG_SECONDS + 10))" >"$WORK/pong_actor_$i.log" 2>&1 &
      apids+=($!)
    done
    wait "$lpid"
    rc=$?
    echo -e "pong\t$rc\t$(( ($(date +%s%N) - start) / 1000000 ))" >>"$WORK/phases.tsv"
    for p in "${apids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${apids[@]}"; do wait "$p" 2>/dev/null || true; done
    [ -f "$WORK/pong_run/learning_curve.png" ] && cp "$WORK/pong_run/learning_curve.png" "$OUT/pong_learning_curve.png"
  fi
fi

step "writing $OUT/gpu-bench.json"
python3 - "$WORK" "$OUT" "$CPU_ONLY" "$QUICK" "$PONG_ACTORS" "$PONG_ENVS_PER_ACTOR" "$(cat "$BIN/FEATURES" 2>/dev/null || echo unknown)" <<'PY'
import json, os, platform, sys
work, out, cpu_only, quick, actors, envs, features = sys.argv[1:8]

def load(name):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as e:
        return {"error": f"{name}: {e}"}

def curve(run_dir, every=1):
    """(seconds, env steps, frames, mean return) from metrics.jsonl."""
    path = os.path.join(work, run_dir, "metrics.jsonl")
    points = []
    if os.path.exists(path):
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            points.append({
                "seconds": r.get("time/seconds"),
                "env_steps": r.get("env/steps"),
                "mean_return_last_100": r.get("env/mean_return_last_100"),
            })
    return points[::every]

phases = {}
for line in open(os.path.join(work, "phases.tsv")):
    name, rc, secs = line.rstrip("\n").split("\t")
    phases[name] = {"exit": rc, "seconds": int(secs or 0) / 1000}

report = {
    "device": open(os.path.join(work, "device.txt")).read().strip(),
    "host": {"cores": os.cpu_count(), "machine": platform.machine()},
    "build_features": features,
    "cpu_only": cpu_only == "1",
    "quick": quick == "1",
    "phases": phases,
}

rows = []
for name in ("inference_cuda.json", "inference_cpu.json"):
    r = load(name)
    if r and "results" in r:
        rows += r["results"]
if rows:
    by = {(r["device"], r["dtype"], r["batch"]): r["rows_per_second"] for r in rows}
    report["inference_conv"] = {
        "rows": rows,
        # cuda over cpu at each batch, f32 and bf16 (bf16 against the CPU's f32).
        "cuda_over_cpu": {
            f"{dtype}@{batch}": by[("cuda:0", dtype, batch)] / by[("cpu", "f32", batch)]
            for (dev, dtype, batch) in by
            if dev == "cuda:0" and ("cpu", "f32", batch) in by
        },
    }

cartpole = {}
for tag in ("cuda", "cpu"):
    s = load(f"cartpole_{tag}.json")
    if s is not None:
        keep = ("solved", "seconds_to_solve", "env_steps_to_solve", "learner_steps",
                "learner_steps_per_second", "env_steps_per_second", "final_mean_return",
                "wall_seconds", "trainer_wait_fraction")
        cartpole[tag] = {k: s.get(k) for k in keep} | {"summary": s}
if cartpole:
    report["cartpole"] = cartpole

pong = load("pong_learner.json")
if pong is not None:
    points = curve("pong_run")
    report["pong"] = {
        "actors": int(actors),
        "envs_per_actor": int(envs),
        # ALE/Pong-v5 through AtariPreprocessing: 4 frames per env step.
        "frames_per_second": 4 * pong.get("env_steps_per_second", 0.0),
        "seconds_to_plus_20": pong.get("seconds_to_solve"),
        "final_mean_return": pong.get("final_mean_return"),
        "learner_steps_per_second": pong.get("learner_steps_per_second"),
        "learning_curve": points,
        "summary": pong,
    }
elif phases.get("pong", {}).get("exit") == "skipped":
    report["pong"] = {"skipped": open(os.path.join(work, "pong_import.log")).read()[-400:]}

with open(os.path.join(out, "gpu-bench.json"), "w") as f:
    json.dump(report, f, indent=2)
brief = {k: v for k, v in report.items() if k not in ("pong",)}
print(json.dumps(brief)[:3000])
PY
tar -C "$WORK" -cJf "$OUT/logs.tar.xz" --exclude='*.safetensors' --exclude=site \
  --exclude=learner --exclude=inference_bench . 2>/dev/null || true
step "done: $OUT/gpu-bench.json"
