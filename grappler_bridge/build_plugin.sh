#!/usr/bin/env bash
# build_plugin.sh compiles the TensorFlow 2 graph-optimizer plugin,
# grappler_bridge/libtfswap_plugin.so (tfswap_plugin.cc), against the TensorFlow pip wheel of
# the project's virtual environment, with tf.sysconfig's compile and link flags. The plugin
# exports TF_InitGraph; python/tfswap loads it (see the README's TF2 section).
#
#   grappler_bridge/build_plugin.sh             build when out of date
#   grappler_bridge/build_plugin.sh --force     rebuild
#   grappler_bridge/build_plugin.sh -o FILE     build into FILE instead (always builds)
#
# Environment: PYTHON (default: .venv/bin/python of the checkout) picks the TensorFlow
# installation; CXX (default: c++) the compiler. Up to date means: newer than its source and
# this script, built for the same TensorFlow (recorded in grappler_bridge/.plugin-stamp).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
cxx="${CXX:-c++}"
src="$here/tfswap_plugin.cc"
out="$here/libtfswap_plugin.so"
stamp="$here/.plugin-stamp"
force=0
case "${1:-}" in
  --force) force=1 ;;
  -o) out="${2:?build_plugin.sh: -o needs a file}"; stamp=""; force=1 ;;
  "") ;;
  *) echo "usage: grappler_bridge/build_plugin.sh [--force | -o FILE]" >&2; exit 2 ;;
esac

if [ ! -x "$python" ] && ! command -v "$python" >/dev/null 2>&1; then
  echo "plugin: no Python at $python (run scripts/setup.sh first, or set PYTHON)" >&2
  exit 1
fi
where="$("$python" -c '
import importlib.util, os
spec = importlib.util.find_spec("tensorflow")
d = list(spec.submodule_search_locations)[0]
lib = os.path.join(d, "libtensorflow_framework.so.2")
print(d, os.stat(lib).st_mtime_ns if os.path.exists(lib) else 0)
' 2>/dev/null)" || where=""
want="$(printf '%s | %s' "$where" "$("$cxx" --version | head -n1)")"
if [ "$force" = 0 ] && [ -n "$where" ] && [ -f "$out" ] && [ -f "$stamp" ] &&
  [ "$out" -nt "$src" ] && [ "$out" -nt "$0" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "plugin: $out is up to date"
  exit 0
fi
info="$(TF_CPP_MIN_LOG_LEVEL=3 "$python" -c '
import tensorflow as tf
print("TFSWAP-PLUGIN", tf.__version__)
print("TFSWAP-PLUGIN", " ".join(tf.sysconfig.get_compile_flags()))
print("TFSWAP-PLUGIN", " ".join(tf.sysconfig.get_link_flags()))
' 2>/dev/null | sed -n 's/^TFSWAP-PLUGIN //p')" || true
if [ "$(printf '%s\n' "$info" | wc -l)" -ne 3 ]; then
  echo "plugin: cannot import tensorflow with $python" >&2
  exit 1
fi
tf_version="$(printf '%s\n' "$info" | sed -n 1p)"
read -r -a cflags <<<"$(printf '%s\n' "$info" | sed -n 2p)"
read -r -a lflags <<<"$(printf '%s\n' "$info" | sed -n 3p)"
libdir=""
for f in "${lflags[@]}"; do
  case "$f" in -L*) libdir="${f#-L}" ;; esac
done
echo "plugin: building $out (TensorFlow $tf_version)"
tmp="$(mktemp "$out.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
# The graph C API (TF_NewGraphProperties, TF_GetFetchNodesList, ...) lives in
# libtensorflow_cc.so.2, which TensorFlow's Python module has loaded already.
"$cxx" -shared -fPIC -O2 -Wall -Wno-sign-compare "${cflags[@]}" "$src" -o "$tmp" \
  "${lflags[@]}" -l:libtensorflow_cc.so.2 -Wl,--no-undefined -Wl,-rpath,"$libdir"
chmod 755 "$tmp"
mv -f "$tmp" "$out"
if [ -n "$stamp" ]; then
  printf '%s\n' "$want" >"$stamp.$$"
  mv -f "$stamp.$$" "$stamp"
fi
echo "plugin: ok"
