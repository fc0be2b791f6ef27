//go:build tensorflow

package main

import (
	"strings"
	"testing"
)

// TestDelegationToRealRuntime runs train through a pure tfswap and the TensorFlow-backed
// tfswap-runtime beside it, as make setup installs them, and checks that TensorFlow's
// informational log (its oneDNN notice as the library loads, its MLIR pass notice when a
// session runs) is silenced unless -v.
func TestDelegationToRealRuntime(t *testing.T) {
	dir := t.TempDir()
	bin := installBinary(t, pureBinary(t), dir, "tfswap")
	installBinary(t, tfswapBinary(t), dir, runtimeBinaryName)
	args := []string{"train", "--fixture", fixtures + "mlp.json", fixtures + "mlp.pb", fixtures + "mlp.pb", "--steps", "1"}
	const notice = "oneDNN custom operations are on"
	code, stdout, stderr := runBinary(t, bin, cleanEnv(), args...)
	if code != 0 || !strings.Contains(stdout, "bit-identical to") {
		t.Fatalf("train through tfswap-runtime: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, noise := range []string{notice, "MLIR V1 optimization pass", "absl::InitializeLog"} {
		if strings.Contains(stderr, noise) {
			t.Errorf("TensorFlow's log was not silenced (%q):\n%s", noise, stderr)
		}
	}
	code, _, stderr = runBinary(t, bin, cleanEnv(), append(args, "-v")...)
	if code != 0 || !strings.Contains(stderr, notice) {
		t.Errorf("with -v: exit %d, TensorFlow's log silenced:\n%s", code, stderr)
	}
}
