#!/usr/bin/env bash
# demo.sh rewrites the bundled residual-network training graph with tfswap and trains both
# graphs for a few steps in a Go TensorFlow session. Run `make demo` (it runs setup first).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck disable=SC1091
. ./.tfenv
mkdir -p out
model=testmodels/fixtures/resnet.pb
echo "== tfswap inspect $model"
bin/tfswap inspect "$model" --top 5
echo
echo "== tfswap rewrite (two-device emulation: /device:CPU:1 stands for the GPU, CPU:0 is the host)"
bin/tfswap place "$model" --device /device:CPU:1 -o out/resnet.placed.pb
echo "-- with no options: a plan for the GPU TensorFlow sees, else the default profile, at its default budget"
bin/tfswap rewrite out/resnet.placed.pb -o out/resnet.default.pb --compute-device /device:CPU:1
echo "-- the fixture is small; for a budget of 6 MiB, below its peak, one training step (--fetch train):"
bin/tfswap rewrite out/resnet.placed.pb -o out/resnet.swap.pb --compute-device /device:CPU:1 --budget 6MiB --fetch train
echo
echo "== training both graphs for 5 steps in a Go TensorFlow session (oneDNN off for bit-exact comparison)"
TF_ENABLE_ONEDNN_OPTS=0 bin/tfswap train out/resnet.placed.pb out/resnet.swap.pb --fixture testmodels/fixtures/resnet.json --steps 5
