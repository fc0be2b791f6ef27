#!/usr/bin/env bash
# setup.sh installs everything tfswap needs into the checkout, idempotently:
#   .venv/   a Python virtual environment with the pinned TensorFlow wheel: tensorflow-cpu
#            (requirements.txt), or, on a machine with an NVIDIA GPU or with GPU=1,
#            tensorflow[and-cuda] of the same release (requirements-gpu.txt); GPU=0 keeps
#            the CPU wheel
#   .tflib/  linker-name shims (libtensorflow.so, libtensorflow_framework.so)
#            pointing at the wheel's shared libraries, for graft's -ltensorflow
#   .tfenv   shell exports (CGO_CFLAGS, CGO_CXXFLAGS, CGO_LDFLAGS, TFSWAP_PYTHON) for cgo builds
#   bin/     tfswap, pure Go (CGO_ENABLED=0: it never loads TensorFlow), and tfswap-runtime,
#            built with the TensorFlow runtime (-tags tensorflow), which tfswap runs for the
#            commands that need it (train, profile, tune, gpu-check)
#   grappler_bridge/libtfswap_grappler.so  the Grappler custom optimizer
#   grappler_bridge/libtfswap_plugin.so    the TF2 graph-optimizer plugin (tfswap.enable())
# Running it again only redoes what is missing or out of date.
#   scripts/setup.sh --print-requirements   say which requirements file setup would install, and why
#   scripts/setup.sh --gpu-libs             list the CUDA libraries the GPU wheel's packages install
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# select_requirements prints the requirements file to install and why: GPU=1 or GPU=0 decide;
# otherwise an NVIDIA GPU that nvidia-smi lists, or that the driver lists under
# /proc/driver/nvidia/gpus (TFSWAP_NVIDIA_PROC replaces /proc/driver/nvidia, for tests), means
# the GPU wheel.
select_requirements() {
  case "${GPU:-}" in
    1) echo "requirements-gpu.txt GPU=1"; return ;;
    0) echo "requirements.txt GPU=0"; return ;;
    "") ;;
    *) echo "setup: GPU must be 1 (install the GPU runtime) or 0 (the CPU one), not '$GPU'" >&2; return 2 ;;
  esac
  local n=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    n="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
  fi
  if [ "${n:-0}" -gt 0 ]; then
    echo "requirements-gpu.txt nvidia-smi lists $n NVIDIA GPU(s)"
  elif [ -n "$(ls -A "${TFSWAP_NVIDIA_PROC:-/proc/driver/nvidia}/gpus" 2>/dev/null)" ]; then
    echo "requirements-gpu.txt the NVIDIA driver lists GPUs in ${TFSWAP_NVIDIA_PROC:-/proc/driver/nvidia}/gpus"
  else
    echo "requirements.txt no NVIDIA GPU found"
  fi
}

# gpu_libs lists, relative to site-packages, the CUDA libraries TensorFlow 2.18's GPU wheel
# loads from the pip packages its and-cuda extra pins (nvidia-cuda-runtime-cu12 12.5,
# nvidia-cudnn-cu12 9.3, nvidia-cublas-cu12 12.5): TensorFlow's libraries find them through
# their run paths, $ORIGIN/../nvidia/*/lib (cuda_rpath_flags in TensorFlow's CUDA build rules).
gpu_libs() {
  printf '%s\n' nvidia/cuda_runtime/lib/libcudart.so.12 nvidia/cudnn/lib/libcudnn.so.9 nvidia/cublas/lib/libcublas.so.12
}

case "${1:-}" in
  --print-requirements)
    sel="$(select_requirements)" || exit 2
    echo "${sel%% *} (${sel#* })"
    exit 0 ;;
  --gpu-libs) gpu_libs; exit 0 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--print-requirements | --gpu-libs]" >&2; exit 2 ;;
esac
sel="$(select_requirements)" || exit 2
req="${sel%% *}"
echo "setup: TensorFlow runtime from $req (${sel#* })"

python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info[:2] <= (3, 12) else 1)'; then
  echo "setup: TensorFlow 2.18 needs Python 3.9-3.12; $("$python" --version 2>&1) found (set PYTHON=...)" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
stamp=.venv/.tfswap-requirements
if [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
  # Both wheels install the package `tensorflow`: remove the other distribution first, so
  # that its files do not stay mixed with the new ones.
  other=tensorflow
  [ "$req" = requirements-gpu.txt ] && other=tensorflow-cpu
  if .venv/bin/python -m pip show -q "$other" >/dev/null 2>&1; then
    echo "setup: removing $other from .venv"
    .venv/bin/python -m pip uninstall --disable-pip-version-check -y -q "$other"
  fi
  echo "setup: installing $(grep -v '^#' "$req" | sed 's/#.*//' | xargs) into .venv"
  .venv/bin/python -m pip install --disable-pip-version-check -q --upgrade pip >/dev/null
  # Lines marked "# no-deps" are installed with --no-deps (tf-keras: its requirements would
  # pull the package tensorflow over tensorflow-cpu).
  grep -v '#[[:space:]]*no-deps' "$req" > .venv/.tfswap-requirements.deps
  .venv/bin/python -m pip install --disable-pip-version-check -q -r .venv/.tfswap-requirements.deps
  rm -f .venv/.tfswap-requirements.deps
  nodeps="$(grep '#[[:space:]]*no-deps' "$req" | sed 's/#.*//' | xargs)"
  if [ -n "$nodeps" ]; then
    # shellcheck disable=SC2086
    .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps $nodeps
  fi
  cp "$req" "$stamp"
fi

tfdir="$(.venv/bin/python -c 'import os, tensorflow as tf; print(os.path.dirname(tf.__file__))' 2>/dev/null | tail -n1)"
if [ ! -f "$tfdir/libtensorflow_cc.so.2" ] || [ ! -f "$tfdir/include/tensorflow/c/c_api.h" ]; then
  echo "setup: the tensorflow wheel in .venv has no libtensorflow_cc.so.2 or C API headers under $tfdir" >&2
  exit 1
fi
if [ "$req" = requirements-gpu.txt ]; then
  site="$(dirname "$tfdir")"
  while read -r lib; do
    if [ ! -e "$site/$lib" ]; then
      echo "setup: the GPU runtime's $site/$lib is missing: reinstall with rm .venv/.tfswap-requirements && make setup GPU=1" >&2
      exit 1
    fi
  done < <(gpu_libs)
fi
mkdir -p .tflib
ln -sfn "$tfdir/libtensorflow_cc.so.2" .tflib/libtensorflow.so
ln -sfn "$tfdir/libtensorflow_framework.so.2" .tflib/libtensorflow_framework.so
cat > .tfenv.tmp <<ENV
# Written by scripts/setup.sh: cgo flags for the TensorFlow runtime in .venv.
export TFSWAP_TF_DIR="$tfdir"
export TFSWAP_PYTHON="$root/.venv/bin/python"
export CGO_ENABLED=1
export CGO_CFLAGS="-I$tfdir/include"
export CGO_CXXFLAGS="-I$tfdir/include"
export CGO_LDFLAGS="-L$root/.tflib -Wl,-rpath,$tfdir -ltensorflow_framework"
export TF_CPP_MIN_LOG_LEVEL=\${TF_CPP_MIN_LOG_LEVEL:-2}
ENV
mv .tfenv.tmp .tfenv
# shellcheck disable=SC1091
. ./.tfenv
mkdir -p bin
CGO_ENABLED=0 go build -o bin/tfswap ./cmd/tfswap
go build -tags tensorflow -o bin/tfswap-runtime ./cmd/tfswap
# The Grappler custom optimizer (grappler_bridge/libtfswap_grappler.so) and the TensorFlow 2
# graph-optimizer plugin (grappler_bridge/libtfswap_plugin.so) that python/tfswap's enable()
# loads, against the wheel.
./grappler_bridge/build.sh
if [ "$req" = requirements-gpu.txt ]; then
  n="$(TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/python -c 'import tensorflow as tf; print(len(tf.config.list_physical_devices("GPU")))' 2>/dev/null | tail -n1)"
  echo "setup: TensorFlow sees ${n:-no} GPU(s)"
  if [ "${n:-0}" = 0 ]; then
    echo "setup: warning: the GPU runtime is installed but TensorFlow finds no GPU (driver missing or too old for CUDA 12.5?)" >&2
  fi
fi
echo "setup: ok (TensorFlow $(.venv/bin/python -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -n1) at $tfdir; bin/tfswap and bin/tfswap-runtime built)"
