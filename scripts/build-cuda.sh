#!/usr/bin/env bash
# Builds the `cuda` learner, actor, inference_bench and latency binaries on a
# machine WITHOUT a GPU (CUDA 13.0 build toolchain from PyPI wheels, see
# ../shared/gpu/README.md), strips and xz-compresses them into .gpu/ (ignored
# by git) so they can be carried to a GPU machine and run by gpu-bench.sh.
#
#   bash scripts/build-cuda.sh            # -> .gpu/{learner,actor,inference_bench,latency}.xz
#
# Env: CUDA_TOOLCHAIN (default /tmp/cuda13), CUDA_COMPUTE_CAP (default 90: H100/H200),
# CARGO_TARGET_DIR (default target/cuda, so the CPU build in target/ is untouched).
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLCHAIN=${CUDA_TOOLCHAIN:-/tmp/cuda13}
if [ ! -f "$TOOLCHAIN/cuda-env.sh" ]; then
  echo "installing the CUDA 13.0 build toolchain into $TOOLCHAIN" >&2
  bash ../shared/gpu/setup_cuda13_toolchain.sh "$TOOLCHAIN"
fi
# shellcheck disable=SC1091
source "$TOOLCHAIN/cuda-env.sh"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/cuda}
echo "building with CUDA_HOME=$CUDA_HOME CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP (first build ~10 min: candle's kernels)" >&2
cargo build --release --features seed-benches/cuda -p seed-learner-cli -p seed-actor -p seed-benches \
  --bin learner --bin actor --bin inference_bench --bin latency
mkdir -p .gpu
for b in learner actor inference_bench latency; do
  strip -o ".gpu/$b" "$CARGO_TARGET_DIR/release/$b"
  xz -9 -T0 -f ".gpu/$b"
done
ls -la .gpu >&2
echo "carry .gpu and run: bash scripts/gpu-bench.sh .gpu \$OUT" >&2
