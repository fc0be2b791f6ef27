#!/usr/bin/env bash
# build.sh compiles the Grappler bridge, grappler_bridge/libtfswap_grappler.so (the optimizer,
# tfswap_optimizer.cc, and the shared core, swap_core.cc), against the
# TensorFlow pip wheel of the project's virtual environment, with the flags that
# tf.sysconfig.get_compile_flags() and get_link_flags() report.
#
#   grappler_bridge/build.sh            build when out of date, else say it is up to date
#   grappler_bridge/build.sh --force    rebuild
#
# Environment: PYTHON (default: .venv/bin/python of the checkout) picks the TensorFlow
# installation; CXX (default: c++) the compiler. The build is skipped when the library is
# newer than its source and was built with the same compiler, flags and TensorFlow version
# (recorded in grappler_bridge/.build-stamp). Checking takes well under a second when nothing
# changed: TensorFlow is only imported (for its flags) when a build may be needed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
cxx="${CXX:-c++}"
srcs=("$here/tfswap_optimizer.cc" "$here/swap_core.cc")
# newer reports whether the library is newer than every source, header and this script.
newer() {
  local f
  for f in "${srcs[@]}" "$here/swap_core.h" "$0"; do
    [ "$out" -nt "$f" ] || return 1
  done
}
out="$here/libtfswap_grappler.so"
stamp="$here/.build-stamp"

if [ ! -x "$python" ] && ! command -v "$python" >/dev/null 2>&1; then
  echo "bridge: no Python at $python (run scripts/setup.sh first, or set PYTHON)" >&2
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
if [ "${1:-}" != "--force" ] && [ -n "$where" ] && [ -f "$out" ] && [ -f "$stamp" ] &&
  newer && [ "$(head -n1 "$stamp")" = "$quick" ]; then
  echo "bridge: $out is up to date"
  exit 0
fi

# One line each: version, compile flags, link flags. TensorFlow's import chatter goes to
# stderr; keep only our three lines.
info="$(TF_CPP_MIN_LOG_LEVEL=3 "$python" -c '
import tensorflow as tf
print("TFSWAP-BRIDGE", tf.__version__)
print("TFSWAP-BRIDGE", " ".join(tf.sysconfig.get_compile_flags()))
print("TFSWAP-BRIDGE", " ".join(tf.sysconfig.get_link_flags()))
' 2>/dev/null | sed -n 's/^TFSWAP-BRIDGE //p')" || true
if [ "$(printf '%s\n' "$info" | wc -l)" -ne 3 ]; then
  echo "bridge: cannot import tensorflow with $python" >&2
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

cmd=("$cxx" -shared -fPIC -O2 -Wall -Wno-sign-compare "${cflags[@]}" "${srcs[@]}" -o OUTPUT
  "${lflags[@]}" -Wl,--no-undefined -Wl,-rpath,"$libdir")
want="$(printf '%s\n' "$quick" "tensorflow $tf_version" "${cmd[*]}")"

if [ "${1:-}" != "--force" ] && [ -f "$out" ] && [ -f "$stamp" ] && newer &&
  [ "$(cat "$stamp")" = "$want" ]; then
  echo "bridge: $out is up to date"
  exit 0
fi
echo "bridge: building $out (TensorFlow $tf_version)"
# Build into a temporary name and rename: a concurrent build (two test suites at once) or a
# process that has the library loaded never sees a half-written file.
tmp="$(mktemp "$out.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
"${cmd[@]/#OUTPUT/$tmp}"
chmod 755 "$tmp"
mv -f "$tmp" "$out"
printf '%s\n' "$want" >"$stamp.$$"
mv -f "$stamp.$$" "$stamp"
echo "bridge: ok"
