#!/usr/bin/env bash
# bazel_check.sh checks the Bazel files (WORKSPACE, BUILD, grappler_bridge/BUILD,
# grappler_bridge/tensorflow_pip.bzl) on a machine without network access, where rules_go,
# Gazelle and (for Bazel 4) rules_cc and rules_java cannot be downloaded:
#
#   1. buildifier --lint=warn on the four files (when buildifier is on PATH or BUILDIFIER is set;
#      npm's @bazel/buildifier ships the binaries);
#   2. a real `bazel build //grappler_bridge:libtfswap_grappler.so` against the pip wheel, with
#      the repositories that would need the network replaced by local stubs
#      (--override_repository); the stub go_library/go_binary are filegroups, so
#   3. `bazel build` of the Go targets checks their globs and embedded files exist, not that
#      they compile (that needs the real rules_go).
#
# Bazel: $BAZEL, else Debian's bazel-bootstrap (apt-get install bazel-bootstrap: Bazel 4.2.3,
# run as /usr/bin/bazel-4 with its install base), else `bazel` on PATH. The convenience
# symlinks are not made (--symlink_prefix=/); the library's path is printed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

buildifier="${BUILDIFIER:-$(command -v buildifier || true)}"
if [ -n "$buildifier" ]; then
  echo "bazel_check: buildifier --lint=warn"
  "$buildifier" --mode=check --lint=warn WORKSPACE BUILD grappler_bridge/BUILD grappler_bridge/tensorflow_pip.bzl
else
  echo "bazel_check: no buildifier (set BUILDIFIER or put it on PATH); skipping the lint"
fi

if [ -n "${BAZEL:-}" ]; then
  read -r -a bazel <<<"$BAZEL"
elif [ -x /usr/bin/bazel-4 ] && [ -d /usr/share/bazel ]; then
  bazel=(/usr/bin/bazel-4 --install_base=/usr/share/bazel --trust_install_base)
elif command -v bazel >/dev/null; then
  bazel=(bazel)
else
  echo "bazel_check: no Bazel (apt-get install bazel-bootstrap, or set BAZEL)" >&2
  exit 1
fi
version="$("${bazel[@]}" --version 2>/dev/null || true)"
echo "bazel_check: using ${bazel[*]} (${version:-unknown version})"

stubs="$(mktemp -d)"
trap 'rm -rf "$stubs"' EXIT
mkdir -p "$stubs/rules_go/go" "$stubs/gazelle" "$stubs/rules_cc/cc" "$stubs/rules_java/java"
touch "$stubs"/{rules_go,gazelle,rules_cc,rules_java}/{WORKSPACE,BUILD} "$stubs/rules_go/go/BUILD" \
  "$stubs/rules_cc/cc/BUILD" "$stubs/rules_java/java/BUILD"
cat >"$stubs/rules_go/go/deps.bzl" <<'EOF'
def go_rules_dependencies():
    pass

def go_register_toolchains(**kwargs):
    pass
EOF
cat >"$stubs/rules_go/go/def.bzl" <<'EOF'
def go_library(name, srcs = [], embedsrcs = [], deps = [], importpath = None, **kwargs):
    native.filegroup(name = name, srcs = srcs + embedsrcs, **kwargs)

def go_binary(name, srcs = [], deps = [], **kwargs):
    native.filegroup(name = name, srcs = srcs, **kwargs)
EOF
cat >"$stubs/gazelle/deps.bzl" <<'EOF'
def gazelle_dependencies(**kwargs):
    pass

def go_repository(**kwargs):
    pass
EOF
forward() { # forward FILE RULE...: a .bzl whose rules call the native ones
  local file="$1"
  shift
  for r in "$@"; do printf 'def %s(**kwargs):\n    native.%s(**kwargs)\n\n' "$r" "$r"; done >"$file"
}
forward "$stubs/rules_cc/cc/defs.bzl" cc_library cc_binary cc_import cc_test cc_toolchain cc_toolchain_suite
forward "$stubs/rules_java/java/defs.bzl" java_import java_runtime java_toolchain java_binary java_library

overrides=(
  --override_repository=io_bazel_rules_go="$stubs/rules_go"
  --override_repository=bazel-gazelle="$stubs/gazelle"
)
flags=(--symlink_prefix=/)
case "$version" in
  "bazel no_version" | "bazel 4."* | "bazel 5."*)
    # Bazel 4 and 5 know neither --enable_workspace nor --noenable_bzlmod from .bazelrc,
    # and fetch rules_cc and rules_java for their own toolchains.
    bazel+=(--ignore_all_rc_files)
    flags+=(--cxxopt=-std=c++17)
    overrides+=(
      --override_repository=rules_cc="$stubs/rules_cc"
      --override_repository=rules_java="$stubs/rules_java"
    )
    [ -d /usr/share/bazel/tools/platforms ] &&
      overrides+=(--override_repository=platforms=/usr/share/bazel/tools/platforms)
    ;;
esac

echo "bazel_check: bazel build //grappler_bridge:libtfswap_grappler.so"
"${bazel[@]}" build "${flags[@]}" "${overrides[@]}" //grappler_bridge:libtfswap_grappler.so
echo "bazel_check: bazel build of the Go targets (stub rules_go: sources only)"
"${bazel[@]}" build "${flags[@]}" "${overrides[@]}" //:units //:graphdef //:triggers //:rewrite //:cost //:tfswap
lib="$("${bazel[@]}" info "${overrides[@]}" bazel-bin 2>/dev/null)/grappler_bridge/libtfswap_grappler.so"
echo "bazel_check: ok; the library is $lib"
