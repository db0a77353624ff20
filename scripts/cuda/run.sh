#!/usr/bin/env bash
# Starts a `cuda` binary on a machine with an NVIDIA GPU and no Rust: puts the
# CUDA 13 user-space libraries the binary links at start-up (cudart, cuBLAS,
# cuRAND, nvrtc; cuDNN for a `cudnn` build) on LD_LIBRARY_PATH, unpacks BIN.xz
# if only that was carried, checks that every CUDA library resolves, and execs
# the binary with its arguments.
#
#   bash scripts/cuda/run.sh BIN [ARGS...]
#   source scripts/cuda/run.sh --env-only     # only set LD_LIBRARY_PATH (for scripts)
#
# Where the libraries come from, first found first: $SEED_CUDA_LIBS (a
# colon-separated list), the `nvidia` pip packages of the machine's python3
# (PyTorch's CUDA 13 wheels), /usr/local/cuda/lib64. The driver's
# libcuda.so.1 comes from the system (/usr/local/nvidia/lib64 or ld.so's
# cache); the build machine's link-time stub must never be on this path.

seed_cuda_library_path() {
  local libs=""
  libs=$(python3 - <<'PY' 2>/dev/null || true
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
seen = []
for root in nvidia.__path__:
    # CUDA 13 wheels: nvidia/cu13/lib; cuDNN and the older layout: nvidia/<pkg>/lib
    for lib in [os.path.join(root, "cu13", "lib")] + sorted(glob.glob(os.path.join(root, "*", "lib"))):
        if os.path.isdir(lib) and lib not in seen and "stubs" not in lib:
            seen.append(lib)
print(":".join(seen))
PY
)
  local path="${SEED_CUDA_LIBS:+$SEED_CUDA_LIBS:}${libs:+$libs:}/usr/local/cuda/lib64:/usr/local/nvidia/lib64"
  echo "${path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

if [ "${1:-}" = "--env-only" ]; then
  LD_LIBRARY_PATH=$(seed_cuda_library_path)
  export LD_LIBRARY_PATH
  return 0 2>/dev/null || exit 0
fi

set -euo pipefail
BIN=${1:?usage: bash scripts/cuda/run.sh BIN [ARGS...]}
shift
if [ ! -e "$BIN" ] && [ -f "$BIN.xz" ]; then
  echo "[cuda-run] unpacking $BIN.xz" >&2
  # xz may be missing on the GPU machine; Python's lzma is always there.
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$BIN.xz" "$BIN"
  chmod +x "$BIN"
fi
[ -x "$BIN" ] || { echo "[cuda-run] $BIN: no such executable (nor $BIN.xz)" >&2; exit 127; }

LD_LIBRARY_PATH=$(seed_cuda_library_path)
export LD_LIBRARY_PATH
if command -v ldd >/dev/null; then
  missing=$(ldd "$BIN" | grep 'not found' || true)
  if [ -n "$missing" ]; then
    echo "[cuda-run] $BIN cannot start, libraries not found:" >&2
    echo "$missing" >&2
    echo "[cuda-run] searched: $LD_LIBRARY_PATH (set SEED_CUDA_LIBS to the folder holding them)" >&2
    exit 127
  fi
  ldd "$BIN" | grep -E 'libcuda\.|cublas|curand|cudart|nvrtc|cudnn' | sed 's/^/[cuda-run] /' >&2 || true
fi
exec "$BIN" "$@"
