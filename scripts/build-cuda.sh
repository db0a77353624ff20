#!/usr/bin/env bash
# Builds the `cuda` learner, actor, inference_bench and latency binaries on a
# machine WITHOUT a GPU, using only this repository and PyPI: the CUDA 13.0
# build toolchain comes from pinned wheels (scripts/cuda/install-toolchain.sh).
# The binaries are stripped and xz-compressed into .gpu/ (ignored by git),
# small enough to carry to a GPU machine, where scripts/gpu-bench.sh or
# scripts/cuda/run.sh starts them.
#
#   bash scripts/build-cuda.sh            # features `cuda`
#   bash scripts/build-cuda.sh --cudnn    # features `cudnn` (implies `cuda`): cuDNN convolutions
#   bash scripts/build-cuda.sh --pong-wheels   # also .gpu/wheels/ for gpu-bench.sh's Pong phase:
#        the seed_rs actor (abi3) and scripts/cuda/pong-requirements.txt for
#        CPython $PONG_PYTHON_VERSION (default 3.12) on manylinux x86_64
#
# Env: CUDA_TOOLCHAIN (default ~/.cache/seed-rs/cuda13: installed there on
#      first use), CUDA_COMPUTE_CAP (default 90: H100/H200; 80: A100, 89: L4/L40),
#      CARGO_TARGET_DIR (default target/cuda, so the CPU build in target/ is untouched),
#      SEED_GPU_DIR (default .gpu: where the compressed binaries go).
# Cost: the first build is about 10 minutes of nvcc (candle's kernels) on two
# cores; later builds only recompile what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

FEATURE=cuda
PONG_WHEELS=0
for arg in "$@"; do
  case "$arg" in
    --cudnn) FEATURE=cudnn ;;
    --pong-wheels) PONG_WHEELS=1 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "build-cuda.sh: unknown argument $arg (expected --cudnn or --pong-wheels)" >&2; exit 2 ;;
  esac
done

for tool in cargo strip xz; do
  command -v "$tool" >/dev/null || { echo "build-cuda.sh: $tool not found" >&2; exit 1; }
done

TOOLCHAIN=${CUDA_TOOLCHAIN:-${XDG_CACHE_HOME:-$HOME/.cache}/seed-rs/cuda13}
INSTALL_ARGS=()
[ "$FEATURE" = cudnn ] && INSTALL_ARGS+=(--cudnn)
if [ ! -f "$TOOLCHAIN/cuda-env.sh" ] || { [ "$FEATURE" = cudnn ] && ! ls "$TOOLCHAIN"/venv/lib/python3*/site-packages/nvidia/cu13/lib/libcudnn.so >/dev/null 2>&1; }; then
  echo "[build-cuda] installing the CUDA 13.0 build toolchain into $TOOLCHAIN" >&2
  # cudarc's sources give the stub its complete list of driver entry points.
  cargo fetch --locked >/dev/null 2>&1 || cargo fetch
  bash scripts/cuda/install-toolchain.sh "${INSTALL_ARGS[@]}" "$TOOLCHAIN"
fi
# shellcheck disable=SC1091
source "$TOOLCHAIN/cuda-env.sh"
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/cuda}
# Absolute: the Python wheel below is built from python.
mkdir -p "$CARGO_TARGET_DIR"
CARGO_TARGET_DIR=$(cd "$CARGO_TARGET_DIR" && pwd)
export CARGO_TARGET_DIR
GPU_DIR=${SEED_GPU_DIR:-.gpu}

echo "[build-cuda] features $FEATURE, CUDA_HOME=$CUDA_HOME, CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP, target $CARGO_TARGET_DIR" >&2
echo "[build-cuda] a first build spends about 10 minutes in nvcc on candle's kernels" >&2
start=$(date +%s)
cargo build --release --features "seed-benches/$FEATURE,seed-learner-cli/$FEATURE" \
  -p seed-learner-cli -p seed-actor -p seed-benches \
  --bin learner --bin actor --bin inference_bench --bin latency
echo "[build-cuda] cargo build took $(( $(date +%s) - start )) s" >&2

mkdir -p "$GPU_DIR"
for b in learner actor inference_bench latency; do
  strip -o "$GPU_DIR/$b" "$CARGO_TARGET_DIR/release/$b"
  xz -9 -T0 -f "$GPU_DIR/$b"
done
echo "$FEATURE" >"$GPU_DIR/FEATURES"
# The link-time stub satisfied -lcuda here; on the GPU machine the driver's
# libcuda.so.1 must be found instead. Show what the learner needs at start-up.
if command -v readelf >/dev/null; then
  echo "[build-cuda] the learner links: $(readelf -d "$CARGO_TARGET_DIR/release/learner" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')" >&2
fi
if [ "$PONG_WHEELS" = 1 ]; then
  PYV=${PONG_PYTHON_VERSION:-3.12}
  echo "[build-cuda] wheels for the Pong phase (CPython $PYV) into $GPU_DIR/wheels" >&2
  mkdir -p "$GPU_DIR/wheels"
  python3 -m pip wheel --no-deps -w "$GPU_DIR/wheels" ./python
  python3 -m pip download --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$GPU_DIR/wheels" -r scripts/cuda/pong-requirements.txt
fi
ls -la "$GPU_DIR" >&2
echo "[build-cuda] carry $GPU_DIR and run there: bash scripts/gpu-bench.sh $GPU_DIR \$OUT" >&2
