#!/usr/bin/env bash
# build.sh compiles tfswap's two TensorFlow libraries against the TensorFlow pip wheel of the
# project's virtual environment, with the flags that tf.sysconfig.get_compile_flags() and
# get_link_flags() report. Both share the core (swap_core.cc: running tfswap, checking its
# answer); they differ only in how TensorFlow finds them:
#
#   bridge  grappler_bridge/libtfswap_grappler.so  the Grappler custom optimizer
#           (tfswap_optimizer.cc), named in a tf.compat.v1 session's RewriterConfig
#   plugin  grappler_bridge/libtfswap_plugin.so    the TF2 graph-optimizer plugin
#           (tfswap_plugin.cc, exports TF_InitGraph), which python/tfswap's enable() loads
#
#   grappler_bridge/build.sh                      build both when out of date
#   grappler_bridge/build.sh bridge|plugin        build one
#   grappler_bridge/build.sh --force [TARGET]     rebuild
#   grappler_bridge/build.sh plugin -o FILE       build the plugin into FILE (always builds;
#                                                 setup.py puts it in the wheel this way)
#
# Environment: PYTHON (default: .venv/bin/python of the checkout) picks the TensorFlow
# installation; CXX (default: c++) the compiler. A build is skipped when the library is newer
# than its sources and this script and was built with the same compiler, flags and TensorFlow
# version (recorded in grappler_bridge/.build-stamp and .plugin-stamp). Checking takes well
# under a second when nothing changed: TensorFlow is only imported (for its flags) when a
# build may be needed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
cxx="${CXX:-c++}"

usage() {
  echo "usage: grappler_bridge/build.sh [--force] [bridge|plugin|all] [-o FILE]" >&2
  exit 2
}
force=0
targets=()
output=""
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    bridge | plugin) targets+=("$1") ;;
    all) targets+=(bridge plugin) ;;
    -o)
      [ $# -ge 2 ] || usage
      output="$2"
      shift
      ;;
    *) usage ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || targets=(bridge plugin)
if [ -n "$output" ] && [ "${targets[*]}" != bridge ] && [ "${targets[*]}" != plugin ]; then
  echo "build.sh: -o builds one library: name it (bridge or plugin)" >&2
  exit 2
fi

if [ ! -x "$python" ] && ! command -v "$python" >/dev/null 2>&1; then
  echo "build: no Python at $python (run scripts/setup.sh first, or set PYTHON)" >&2
  exit 1
fi
# Fast path: the stamp's first line records where TensorFlow is and when its framework
# library changed, which Python can tell without importing TensorFlow (seconds).
where="$("$python" -c '
import importlib.util, os
spec = importlib.util.find_spec("tensorflow")
d = list(spec.submodule_search_locations)[0]
lib = os.path.join(d, "libtensorflow_framework.so.2")
print(d, os.stat(lib).st_mtime_ns if os.path.exists(lib) else 0)
' 2>/dev/null)" || where=""
quick="$(printf '%s | %s' "$where" "$("$cxx" --version | head -n1)")"

# newer reports whether file $1 is newer than every source of the target, the core's header
# and this script.
newer() {
  local f
  for f in "${srcs[@]}" "$here/swap_core.h" "$0"; do
    [ "$1" -nt "$f" ] || return 1
  done
}

# flags imports TensorFlow once for its version and flags (one line each).
info=""
flags() {
  [ -z "$info" ] || return 0
  # TensorFlow's import chatter goes to stderr; keep only our three lines.
  info="$(TF_CPP_MIN_LOG_LEVEL=3 "$python" -c '
import tensorflow as tf
print("TFSWAP-BUILD", tf.__version__)
print("TFSWAP-BUILD", " ".join(tf.sysconfig.get_compile_flags()))
print("TFSWAP-BUILD", " ".join(tf.sysconfig.get_link_flags()))
' 2>/dev/null | sed -n 's/^TFSWAP-BUILD //p')" || true
  if [ "$(printf '%s\n' "$info" | wc -l)" -ne 3 ]; then
    echo "build: cannot import tensorflow with $python" >&2
    exit 1
  fi
  tf_version="$(printf '%s\n' "$info" | sed -n 1p)"
  read -r -a cflags <<<"$(printf '%s\n' "$info" | sed -n 2p)"
  read -r -a lflags <<<"$(printf '%s\n' "$info" | sed -n 3p)"
  # The library directory, for the runtime search path: the -L flag.
  libdir=""
  for f in "${lflags[@]}"; do
    case "$f" in -L*) libdir="${f#-L}" ;; esac
  done
}

for target in "${targets[@]}"; do
  extra=()
  case "$target" in
    bridge)
      srcs=("$here/tfswap_optimizer.cc" "$here/swap_core.cc")
      out="$here/libtfswap_grappler.so"
      stamp="$here/.build-stamp"
      ;;
    plugin)
      srcs=("$here/tfswap_plugin.cc" "$here/swap_core.cc")
      out="$here/libtfswap_plugin.so"
      stamp="$here/.plugin-stamp"
      # The graph C API (TF_NewGraphProperties, TF_GetFetchNodesList, ...) lives in
      # libtensorflow_cc.so.2, which TensorFlow's Python module has loaded already.
      extra=(-l:libtensorflow_cc.so.2)
      ;;
  esac
  if [ -n "$output" ]; then
    out="$output"
    stamp=""
  elif [ "$force" = 0 ] && [ -n "$where" ] && [ -f "$out" ] && [ -f "$stamp" ] &&
    newer "$out" && [ "$(head -n1 "$stamp")" = "$quick" ]; then
    echo "$target: $out is up to date"
    continue
  fi
  flags
  cmd=("$cxx" -shared -fPIC -O2 -Wall -Wno-sign-compare "${cflags[@]}" "${srcs[@]}" -o OUTPUT
    "${lflags[@]}" "${extra[@]}" -Wl,--no-undefined -Wl,-rpath,"$libdir")
  want="$(printf '%s\n' "$quick" "tensorflow $tf_version" "${cmd[*]}")"
  if [ -n "$stamp" ] && [ "$force" = 0 ] && [ -f "$out" ] && [ -f "$stamp" ] &&
    newer "$out" && [ "$(cat "$stamp")" = "$want" ]; then
    echo "$target: $out is up to date"
    continue
  fi
  echo "$target: building $out (TensorFlow $tf_version)"
  # Build into a temporary name and rename: a concurrent build (two test suites at once) or a
  # process that has the library loaded never sees a half-written file.
  tmp="$(mktemp "$out.XXXXXX")"
  trap 'rm -f "$tmp"' EXIT
  "${cmd[@]/#OUTPUT/$tmp}"
  chmod 755 "$tmp"
  mv -f "$tmp" "$out"
  if [ -n "$stamp" ]; then
    printf '%s\n' "$want" >"$stamp.$$"
    mv -f "$stamp.$$" "$stamp"
  fi
  echo "$target: ok"
done
