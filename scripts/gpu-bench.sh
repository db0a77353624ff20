#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (no Rust needed): measures CPU vs GPU with
# the binaries built by build-cuda.sh and writes the figures as JSON.
#
#   bash scripts/gpu-bench.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds learner, actor, inference_bench, latency (plain or .xz).
# Writes OUT_DIR/{inference,e2e_*,solve_*,latency_*}.json and OUT_DIR/gpu-bench.json
# (all of them in one object). Each step is bounded so the whole script ends
# in about 8 minutes on an H100 machine with 16 cores.
set -uo pipefail
BIN=$(cd "${1:-.gpu}" && pwd)
OUT=${2:-gpu-results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# The CUDA 13 user-space libraries: from the machine's pip `nvidia` packages
# if present, else the usual system locations.
NVLIB=$(python3 -c 'import os,nvidia
for q in nvidia.__path__:
    p=os.path.join(q,"cu13","lib")
    if os.path.isdir(p): print(p); break' 2>/dev/null || true)
export LD_LIBRARY_PATH=${NVLIB:+$NVLIB:}/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-4}

for b in learner actor inference_bench latency; do
  if [ -f "$BIN/$b.xz" ] && [ ! -x "$BIN/$b" ]; then
    python3 -c "import lzma,shutil,sys;shutil.copyfileobj(lzma.open(sys.argv[1]),open(sys.argv[2],'wb'))" "$BIN/$b.xz" "$BIN/$b"
    chmod +x "$BIN/$b"
  fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/device.txt" 2>&1 || true
ldd "$BIN/learner" | grep -E 'cuda|cublas|curand|not found' || true

step() { echo "== $*" >&2; }
CORES=$(nproc)
ACTORS=$(( CORES > 4 ? CORES / 2 : 2 ))

# PHASES (default "inference e2e") and DEVICES (default "cuda:0 cpu") split the
# run across several device calls of at most 10 minutes each.
PHASES=${PHASES:-inference e2e}
DEVICES=${DEVICES:-cuda:0 cpu}

if [[ " $PHASES " == *" inference "* ]]; then
step "inference rows/s, MLP and conv, cpu vs cuda:0"
timeout 180 "$BIN/inference_bench" --devices cpu,cuda:0 --batch-sizes 1,64,256,1024,4096 \
  --budget-ms 300 --json "$OUT/inference.json"
fi

for dev in $DEVICES; do
  [[ " $PHASES " == *" e2e "* ]] || break
  tag=${dev%%:*}
  step "serving only (--no-train), CartPole, learner on $dev, $ACTORS actors x 256 envs"
  timeout 45 "$BIN/learner" --device "$dev" --no-train --local-actors "$ACTORS" --envs-per-actor 256 \
    --max-batch 1024 --max-seconds 15 --progress-secs 5 --summary-json "$OUT/serve_cartpole_$tag.json"
  step "serving only (--no-train), synthetic 84x84x4 u8, learner on $dev, $ACTORS actors x 64 envs"
  timeout 45 "$BIN/learner" --device "$dev" --no-train --env synthetic --obs-shape 4,84,84 \
    --obs-dtype u8 --num-actions 6 --local-actors "$ACTORS" --envs-per-actor 64 --max-batch 512 \
    --max-seconds 15 --progress-secs 5 --summary-json "$OUT/serve_atari_$tag.json"
  step "end to end with training, CartPole, learner on $dev, $ACTORS actors x 256 envs"
  timeout 45 "$BIN/learner" --device "$dev" --local-actors "$ACTORS" --envs-per-actor 256 \
    --max-seconds 20 --progress-secs 10 --summary-json "$OUT/e2e_cartpole_$tag.json"
  step "end to end with training, synthetic 84x84x4 u8, learner on $dev, $ACTORS actors x 64 envs"
  timeout 45 "$BIN/learner" --device "$dev" --env synthetic --obs-shape 4,84,84 --obs-dtype u8 \
    --num-actions 6 --local-actors "$ACTORS" --envs-per-actor 64 \
    --max-seconds 20 --progress-secs 10 --summary-json "$OUT/e2e_atari_$tag.json"
  step "time to solve CartPole, training on $dev"
  timeout 130 "$BIN/learner" --device "$dev" --stop-when-solved --max-seconds 100 \
    --progress-secs 10 --summary-json "$OUT/solve_$tag.json"
  step "actor-side round trip, one actor x one CartPole env, learner on $dev (beside a tonic echo)"
  timeout 60 "$BIN/latency" --device "$dev" --duration-secs 4 \
    --json "$OUT/latency_cartpole_1x1_$tag.json"
  step "actor-side round trip, $ACTORS actors x 64 synthetic 84x84x4 u8 envs, learner on $dev"
  timeout 60 "$BIN/latency" --device "$dev" --env synthetic --obs-shape 4,84,84 --obs-dtype u8 \
    --actors "$ACTORS" --envs-per-actor 64 --max-batch 512 --duration-secs 4 \
    --json "$OUT/latency_atari_${ACTORS}x64_$tag.json"
done

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
combined = {}
for name in sorted(os.listdir(out)):
    if name.endswith(".json") and name != "gpu-bench.json":
        try:
            combined[name[:-5]] = json.load(open(os.path.join(out, name)))
        except ValueError as e:
            combined[name[:-5]] = {"error": str(e)}
dev = os.path.join(out, "device.txt")
combined["device"] = open(dev).read().strip() if os.path.exists(dev) else None
json.dump(combined, open(os.path.join(out, "gpu-bench.json"), "w"), indent=2)
print(json.dumps(combined)[:2000])
PY
