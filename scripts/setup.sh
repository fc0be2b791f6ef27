#!/usr/bin/env bash
# setup.sh installs everything tfswap needs into the checkout, idempotently:
#   .venv/   a Python virtual environment with the pinned tensorflow-cpu wheel
#   .tflib/  linker-name shims (libtensorflow.so, libtensorflow_framework.so)
#            pointing at the wheel's shared libraries, for graft's -ltensorflow
#   .tfenv   shell exports (CGO_CFLAGS, CGO_LDFLAGS, TFSWAP_PYTHON) for cgo builds
#   bin/     tfswap built with the TensorFlow runtime (-tags tensorflow)
#   grappler_bridge/libtfswap_grappler.so  the Grappler custom optimizer
# Running it again only redoes what is missing or out of date.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info[:2] <= (3, 12) else 1)'; then
  echo "setup: tensorflow-cpu 2.18 needs Python 3.9-3.12; $("$python" --version 2>&1) found (set PYTHON=...)" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
stamp=.venv/.tfswap-requirements
if [ ! -f "$stamp" ] || ! cmp -s requirements.txt "$stamp"; then
  echo "setup: installing $(grep -v '^#' requirements.txt | xargs) into .venv"
  .venv/bin/python -m pip install --disable-pip-version-check -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install --disable-pip-version-check -q -r requirements.txt
  cp requirements.txt "$stamp"
fi

tfdir="$(.venv/bin/python -c 'import os, tensorflow as tf; print(os.path.dirname(tf.__file__))' 2>/dev/null | tail -n1)"
if [ ! -f "$tfdir/libtensorflow_cc.so.2" ] || [ ! -f "$tfdir/include/tensorflow/c/c_api.h" ]; then
  echo "setup: the tensorflow wheel in .venv has no libtensorflow_cc.so.2 or C API headers under $tfdir" >&2
  exit 1
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
go build -tags tensorflow -o bin/tfswap ./cmd/tfswap
# The Grappler custom optimizer (grappler_bridge/libtfswap_grappler.so), against the wheel.
./grappler_bridge/build.sh
echo "setup: ok (TensorFlow $(.venv/bin/python -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -n1) at $tfdir; bin/tfswap built)"
