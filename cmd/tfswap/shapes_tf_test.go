//go:build tensorflow

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestShapesDelegation strips the shapes of the zoo's tffunction graph (a v1 graph calling a
// tf.function, whose call outputs tfswap's own inference cannot size) and runs inspect with a
// pure tfswap: alone it warns about the unknown sizes; with tfswap-runtime beside it, it has
// TensorFlow infer them (the hidden shapes command) and does not warn.
func TestShapesDelegation(t *testing.T) {
	m, err := graphdef.Load(zooDir+"tffunction.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Graph.GetNode() {
		delete(n.Attr, "_output_shapes")
	}
	dir := t.TempDir()
	stripped := filepath.Join(dir, "tffunction.noshapes.pb")
	data, err := graphdef.NewModel(m.Graph).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stripped, data, 0o644); err != nil {
		t.Fatal(err)
	}
	alone := installBinary(t, pureBinary(t), t.TempDir(), "tfswap")
	code, _, stderr := runBinary(t, alone, cleanEnv(), "inspect", stripped)
	if code != 0 || !strings.Contains(stderr, "are unknown") || !strings.Contains(stderr, "tfswap-runtime") {
		t.Fatalf("pure tfswap alone: exit %d, want a warning naming tfswap-runtime: %s", code, stderr)
	}
	bin := installBinary(t, pureBinary(t), dir, "tfswap")
	installBinary(t, tfswapBinary(t), dir, runtimeBinaryName)
	code, stdout, stderr := runBinary(t, bin, cleanEnv(), "inspect", stripped)
	if code != 0 || strings.Contains(stderr, "warning") || !strings.Contains(stdout, "Predicted peak") {
		t.Fatalf("pure tfswap with tfswap-runtime: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr = runBinary(t, bin, cleanEnv(), "shapes", stripped)
	if code != 0 || !strings.Contains(stdout, `"shapes"`) {
		t.Errorf("shapes through the pure binary: exit %d: %s %s", code, stdout, stderr)
	}
}

// TestNoShapesRewriteTrains rewrites the zoo's MobileNetV2 written without shapes, which the
// rewrite can swap only thanks to shape inference, and trains it against the original for 2
// steps in TensorFlow (train: losses and every variable bit-identical); the rewritten nodes
// carry the inferred _output_shapes, which TensorFlow's import checks against its own.
func TestNoShapesRewriteTrains(t *testing.T) {
	out := filepath.Join(t.TempDir(), "noshapes.swap.pb")
	code, stdout, stderr := runSimCLI(t, "rewrite", zooDir+"noshapes.pb", "-o", out, "--strategy", "lms-fixed")
	if code != 0 || !strings.Contains(stdout, "tensors swapped: ") || strings.Contains(stdout, "tensors swapped: 0") {
		t.Fatalf("rewrite: exit %d, want swaps:\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runSimCLI(t, "train", "--fixture", zooDir+"noshapes.json", zooDir+"noshapes.pb", out, "--steps", "2")
	if code != 0 || !strings.Contains(stdout, "bit-identical to") {
		t.Fatalf("train: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
