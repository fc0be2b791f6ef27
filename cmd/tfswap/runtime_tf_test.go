//go:build tensorflow

package main

import (
	"strings"
	"testing"
)

// loadNotices are the informational lines TensorFlow's C++ log prints as the library loads,
// which of them depending on the CPU: the oneDNN notice where oneDNN's rewrites are on by
// default, the CPU feature guard's where the CPU has instructions the wheel was not built
// for. A machine may print either, both or neither.
var loadNotices = []string{"oneDNN custom operations are on", "cpu_feature_guard"}

// TestDelegationToRealRuntime runs train through a pure tfswap and the TensorFlow-backed
// tfswap-runtime beside it, as make setup installs them, and checks that TensorFlow's
// informational log (the notices printed as the library loads, its MLIR pass notice when a
// session runs) is silenced unless -v, and that -v passes on every notice the runtime binary
// prints on this machine when run alone with TF_CPP_MIN_LOG_LEVEL=0.
func TestDelegationToRealRuntime(t *testing.T) {
	dir := t.TempDir()
	bin := installBinary(t, pureBinary(t), dir, "tfswap")
	runtime := installBinary(t, tfswapBinary(t), dir, runtimeBinaryName)
	args := []string{"train", "--fixture", fixtures + "mlp.json", fixtures + "mlp.pb", fixtures + "mlp.pb", "--steps", "1"}
	const mlir = "MLIR V1 optimization pass"
	code, stdout, stderr := runBinary(t, bin, cleanEnv(), args...)
	if code != 0 || !strings.Contains(stdout, "bit-identical to") {
		t.Fatalf("train through tfswap-runtime: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, noise := range append([]string{mlir, "absl::InitializeLog"}, loadNotices...) {
		if strings.Contains(stderr, noise) {
			t.Errorf("TensorFlow's log was not silenced (%q):\n%s", noise, stderr)
		}
	}
	code, _, alone := runBinary(t, runtime, cleanEnv(delegatedEnv+"=1", "TF_CPP_MIN_LOG_LEVEL=0"), args...)
	if code != 0 || !strings.Contains(alone, mlir) {
		t.Fatalf("%s alone with TF_CPP_MIN_LOG_LEVEL=0: exit %d, no %q:\n%s", runtimeBinaryName, code, mlir, alone)
	}
	want := []string{mlir}
	for _, n := range loadNotices {
		if strings.Contains(alone, n) {
			want = append(want, n)
		}
	}
	code, _, stderr = runBinary(t, bin, cleanEnv(), append(args, "-v")...)
	if code != 0 {
		t.Fatalf("with -v: exit %d:\n%s", code, stderr)
	}
	for _, n := range want {
		if !strings.Contains(stderr, n) {
			t.Errorf("with -v, TensorFlow's %q was silenced (printed by %s alone):\n%s", n, runtimeBinaryName, stderr)
		}
	}
}
