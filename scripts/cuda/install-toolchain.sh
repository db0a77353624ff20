#!/usr/bin/env bash
# Installs what `cargo build --features cuda` needs on a machine WITHOUT a GPU
# and without a CUDA install: the CUDA 13.0 compiler, headers and libraries
# from NVIDIA's PyPI wheels (pinned in toolchain-requirements.txt), plus a
# link-time stub of the driver library. Nothing is downloaded from outside
# PyPI and nothing is installed system-wide.
#
#   bash scripts/cuda/install-toolchain.sh [--cudnn] DIR
#   source DIR/cuda-env.sh        # CUDA_HOME, PATH, CUDA_COMPUTE_CAP
#
# --cudnn also installs cuDNN 9 for CUDA 13 (cudnn-requirements.txt) and links
# it into CUDA_HOME/lib, so the `cudnn` feature links too. Running it again on
# the same DIR only adds what is missing.
#
# Why a stub: the `cuda` binaries link libcuda.so.1, the driver's library,
# which only a machine with an NVIDIA driver has. The stub defines every
# driver entry point the CUDA 13.0 headers (and cudarc, if its sources are in
# the cargo registry) name, each returning an error; it satisfies the linker
# here and is never shipped: on the GPU machine the driver's real
# libcuda.so.1 is found at start-up (scripts/cuda/run.sh).
#
# Cost: about 1.3 GB of wheels (1.9 GB with cuDNN), a minute or two.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
WITH_CUDNN=0
DIR=""
for arg in "$@"; do
  case "$arg" in
    --cudnn) WITH_CUDNN=1 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "install-toolchain.sh: unknown option $arg (expected --cudnn)" >&2; exit 2 ;;
    *) [ -z "$DIR" ] || { echo "install-toolchain.sh: one DIR only (got $DIR and $arg)" >&2; exit 2; }
       DIR=$arg ;;
  esac
done
[ -n "$DIR" ] || { echo "usage: bash scripts/cuda/install-toolchain.sh [--cudnn] DIR" >&2; exit 2; }

die() { echo "install-toolchain.sh: $*" >&2; exit 1; }
step() { echo "[cuda-toolchain] $*" >&2; }

command -v python3 >/dev/null || die "python3 not found (needed for the wheels' venv)"
command -v gcc >/dev/null || die "gcc not found (needed to build the link-time libcuda stub; nvcc needs it too)"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

if [ ! -x "$DIR/venv/bin/pip" ]; then
  step "creating a venv in $DIR/venv"
  python3 -m venv "$DIR/venv" || die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
fi
PIP=("$DIR/venv/bin/pip" install --no-deps --disable-pip-version-check --progress-bar off)

step "installing the CUDA 13.0 wheels pinned in scripts/cuda/toolchain-requirements.txt"
"${PIP[@]}" -r "$HERE/toolchain-requirements.txt" || die "pip install of the CUDA wheels failed (is PyPI reachable?)"
if [ "$WITH_CUDNN" = 1 ]; then
  step "installing cuDNN (scripts/cuda/cudnn-requirements.txt)"
  "${PIP[@]}" -r "$HERE/cudnn-requirements.txt" || die "pip install of the cuDNN wheel failed"
fi

SITE=$(ls -d "$DIR"/venv/lib/python3*/site-packages | head -n1)
CUDA_ROOT="$SITE/nvidia/cu13"
[ -x "$CUDA_ROOT/bin/nvcc" ] || die "no nvcc at $CUDA_ROOT/bin/nvcc after the install: the wheels' layout changed?"
[ -f "$CUDA_ROOT/include/cuda.h" ] || die "no cuda.h at $CUDA_ROOT/include"

if [ "$WITH_CUDNN" = 1 ]; then
  # The cuDNN wheel installs under nvidia/cudnn (its own prefix); put its
  # libraries and headers where the build looks for everything else.
  CUDNN_LIB=$(dirname "$(ls "$SITE"/nvidia/cudnn*/lib/libcudnn.so.* "$CUDA_ROOT"/lib/libcudnn.so.* 2>/dev/null | head -n1)")
  [ -n "$CUDNN_LIB" ] && [ -d "$CUDNN_LIB" ] || die "no libcudnn.so.* found under $SITE/nvidia after the cuDNN install"
  if [ "$CUDNN_LIB" != "$CUDA_ROOT/lib" ]; then
    for f in "$CUDNN_LIB"/libcudnn*.so.*; do ln -sf "$f" "$CUDA_ROOT/lib/$(basename "$f")"; done
    for h in "$(dirname "$CUDNN_LIB")"/include/cudnn*.h; do
      [ -e "$h" ] && ln -sf "$h" "$CUDA_ROOT/include/$(basename "$h")"
    done
  fi
fi

# The wheels ship only versioned sonames (libcublas.so.13); `-lcublas` wants
# libcublas.so. Link each major-versioned library to its bare name.
step "adding the unversioned library names the linker looks for"
(
  cd "$CUDA_ROOT/lib"
  for f in lib*.so.[0-9]*; do
    case "$f" in *.so.*.*) continue ;; esac  # only lib*.so.MAJOR
    base=${f%%.so.*}.so
    [ -e "$base" ] || ln -s "$f" "$base"
  done
)

step "building the link-time libcuda stub"
STUB_DIR="$CUDA_ROOT/lib/stubs"
mkdir -p "$STUB_DIR"
SYMS=$(mktemp)
trap 'rm -f "$SYMS"' EXIT
# Entry points as cuda.h declares them, and the versioned names (_v2, _ptsz,
# ...) its #defines map them to: the binary references the latter.
grep -ohE 'CUDAAPI cu[A-Za-z0-9_]+' "$CUDA_ROOT/include/cuda.h" | awk '{print $2}' >>"$SYMS"
grep -ohE 'define cu[A-Za-z0-9_]+ +cu[A-Za-z0-9_]+' "$CUDA_ROOT/include/cuda.h" | awk '{print $3}' >>"$SYMS"
# cudarc's own extern list, when its sources are already in the registry.
CARGO_REGISTRY=${CARGO_HOME:-$HOME/.cargo}/registry/src
for src in "$CARGO_REGISTRY"/*/cudarc-0.19.*/src/driver/sys/mod.rs; do
  [ -f "$src" ] && grep -oE '^\s+(pub )?fn cu[A-Za-z0-9_]+\(' "$src" | sed -E 's/^\s+(pub )?fn //; s/\($//' >>"$SYMS"
done
sort -u "$SYMS" | awk '{print "int " $1 "(void) { return 999; /* CUDA_ERROR_UNKNOWN */ }"}' >"$STUB_DIR/libcuda_stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$STUB_DIR/libcuda.so" "$STUB_DIR/libcuda_stub.c" \
  || die "gcc failed to build the libcuda stub"
step "stub defines $(grep -c . "$STUB_DIR/libcuda_stub.c") driver entry points"

cat >"$DIR/cuda-env.sh" <<EOT
# Generated by scripts/cuda/install-toolchain.sh: the CUDA 13.0 build toolchain.
export CUDA_HOME="$CUDA_ROOT"
export CUDA_PATH="$CUDA_ROOT"
export PATH="$CUDA_ROOT/bin:\$PATH"
# 90: H100/H200. Set it before sourcing for another GPU (80: A100, 89: L4/L40, 120: RTX 50xx).
export CUDA_COMPUTE_CAP=\${CUDA_COMPUTE_CAP:-90}
# The linker finds libcuda.so here (the stub) and the CUDA libraries beside it.
export LIBRARY_PATH="$CUDA_ROOT/lib:$STUB_DIR\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
EOT
"$CUDA_ROOT/bin/nvcc" --version | tail -n2 >&2
step "done; use it with: source $DIR/cuda-env.sh"
