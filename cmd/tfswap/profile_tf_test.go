//go:build tensorflow

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/npy"
)

var (
	tfBinOnce sync.Once
	tfBin     string
	tfBinErr  error
	tfBinDir  string
)

// tfswapBinary builds tfswap with the TensorFlow runtime into a temporary directory, once per
// test process.
func tfswapBinary(t *testing.T) string {
	t.Helper()
	tfBinOnce.Do(func() {
		tfBinDir, tfBinErr = os.MkdirTemp("", "tfswap-bin")
		if tfBinErr != nil {
			return
		}
		tfBin = filepath.Join(tfBinDir, "tfswap")
		out, err := exec.Command("go", "build", "-tags", "tensorflow", "-o", tfBin, ".").CombinedOutput()
		if err != nil {
			tfBinErr = errors.New(err.Error() + "\n" + string(out))
		}
	})
	if tfBinErr != nil {
		t.Fatalf("building tfswap -tags tensorflow: %v", tfBinErr)
	}
	return tfBin
}

// runTF runs the tensorflow-built tfswap with args and returns its exit status, stdout and
// stderr. TensorFlow's oneDNN rewrites are off, as for the package's other runtime tests.
func runTF(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(tfswapBinary(t), args...)
	cmd.Env = append(os.Environ(), "TF_ENABLE_ONEDNN_OPTS=0", "TF_CPP_MIN_LOG_LEVEL=2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

const fixtures = "../../testmodels/fixtures/"

func TestProfileCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cnn.profile")
	code, stdout, stderr := runTF(t, "profile", fixtures+"cnn.pb", "--iterations", "4", "--warmup", "1",
		"--feed", "input="+fixtures+"cnn.input.npy", "--feed", "labels:0="+fixtures+"cnn.labels.npy", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, s := range []string{"step time over 4 traced steps: median", "slowest ops", "stability:", "profile: " + out} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	// stderr is not a terminal: plain progress lines.
	if !strings.Contains(stderr, "measured: 4/4 steps, elapsed") || strings.Contains(stderr, "\r") {
		t.Errorf("progress on stderr:\n%q", stderr)
	}
	m, err := cost.LoadMeasured(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Iterations != 4 || m.Machine == nil || m.Machine.OneDNN == nil || *m.Machine.OneDNN || m.TensorFlowVersion == "" || len(m.Nodes) < 50 {
		t.Errorf("profile: iterations %d, machine %+v, TF %q, %d nodes", m.Iterations, m.Machine, m.TensorFlowVersion, len(m.Nodes))
	}
	// simulate --profile reads it, scaling the CPU times to the GPU.
	code, stdout, stderr = runTF(t, "simulate", fixtures+"cnn.pb", "--device", "v100-16gb", "--fetch", "train", "--profile", out)
	if code != 0 || !strings.Contains(stdout, "measured on another kind of device, scaled by") {
		t.Errorf("simulate --profile: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Random feeds of the placeholders' shapes when no --feed is given.
	code, stdout, stderr = runTF(t, "profile", fixtures+"mlp.pb", "--iterations", "2", "--warmup", "0", "--config", "two-device", "-o", filepath.Join(dir, "mlp.profile"))
	if code != 0 || !strings.Contains(stdout, "2 feed(s)") {
		t.Errorf("random feeds: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// tinyModel writes a small graph in pbtxt: x = Placeholder float32 (?, 4) -> y = Relu(x);
// bad = CheckNumerics(Log(x - x)), which fails when run (log 0 is -inf); train = NoOp(^y);
// train_bad = NoOp(^bad).
func tinyModel(t *testing.T, dir string) string {
	t.Helper()
	const pbtxt = `
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: -1 } dim { size: 4 } } } } }
node { name: "y" op: "Relu" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "zero" op: "Sub" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "log" op: "Log" input: "zero" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "bad" op: "CheckNumerics" input: "log" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "message" value { s: "log of zero" } } }
node { name: "train" op: "NoOp" input: "^y" }
node { name: "train_bad" op: "NoOp" input: "^bad" }
`
	path := filepath.Join(dir, "tiny.pbtxt")
	if err := os.WriteFile(path, []byte(pbtxt), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := graphdef.Load(path, graphdef.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeNpy(t *testing.T, path string, a *npy.Array) string {
	t.Helper()
	if err := npy.Write(path, a); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProfileCommandBadInput checks that bad feeds and a graph that fails to run end with
// exit status 1 and a message naming the node.
func TestProfileCommandBadInput(t *testing.T) {
	dir := t.TempDir()
	tiny := tinyModel(t, dir)
	good := writeNpy(t, filepath.Join(dir, "x.npy"), npy.FromFloat32s([]int64{2, 4}, make([]float32, 8)))
	wrongShape := writeNpy(t, filepath.Join(dir, "shape.npy"), npy.FromFloat32s([]int64{2, 5}, make([]float32, 10)))
	wrongDType := writeNpy(t, filepath.Join(dir, "dtype.npy"), npy.FromFloat64s([]int64{2, 4}, make([]float64, 8)))
	cnnWrong := writeNpy(t, filepath.Join(dir, "cnn.npy"), npy.FromFloat32s([]int64{8, 28, 28, 2}, make([]float32, 8*28*28*2)))
	out := filepath.Join(dir, "p.profile")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"wrong shape", []string{tiny, "--feed", "x=" + wrongShape}, []string{`node "x" (Placeholder) takes shape (?, 4)`, "float32(2, 5)"}},
		{"wrong dtype", []string{tiny, "--feed", "x=" + wrongDType}, []string{`node "x" (Placeholder) takes float32(?, 4)`, "float64(2, 4)"}},
		{"wrong shape, fixture", []string{fixtures + "cnn.pb", "--feed", "input=" + cnnWrong}, []string{`node "input" (Placeholder) takes shape (8, 28, 28, 1)`}},
		{"missing feed", []string{tiny}, []string{`placeholder "x" (float32(?, 4)) has no feed`, "--feed x=FILE.npy"}},
		{"fails to run", []string{tiny, "--feed", "x=" + good, "--target", "train_bad"}, []string{"warm-up step 1", "node bad", "INVALID_ARGUMENT"}},
		{"unknown target", []string{tiny, "--feed", "x=" + good, "--target", "nope"}, []string{`target "nope": no such node`}},
		{"unknown feed", []string{tiny, "--feed", "nope=" + good}, []string{`no node "nope"`}},
	}
	for _, c := range cases {
		args := append([]string{"profile", "--iterations", "1", "--warmup", "1", "-o", out}, c.args...)
		code, stdout, stderr := runTF(t, args...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1\n%s\n%s", c.name, code, stdout, stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, stderr)
			}
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a failed profile wrote %s", out)
	}
	// The good feed runs.
	if code, stdout, stderr := runTF(t, "profile", tiny, "--iterations", "2", "--feed", "x="+good, "-o", out); code != 0 {
		t.Errorf("good feed: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Usage errors: exit 2.
	if code, _, stderr := runTF(t, "profile", tiny, "--iterations", "0"); code != 2 || !strings.Contains(stderr, "--iterations") {
		t.Errorf("--iterations 0: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runTF(t, "profile", tiny, "--feed", "x"); code != 2 || !strings.Contains(stderr, "NAME=FILE.npy") {
		t.Errorf("--feed x: exit %d\n%s", code, stderr)
	}
}

// TestTuneCommand tunes the MLP fixture in the two-device emulation through the CLI.
func TestTuneCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "mlp.tuned.pb")
	report := filepath.Join(dir, "tune.json")
	args := []string{"tune", fixtures + "mlp.pb", "--config", "two-device", "--iterations", "3", "--warmup", "1", "--steps", "4",
		"--feed", "input=" + fixtures + "mlp.input.npy", "--feed", "labels=" + fixtures + "mlp.labels.npy",
		"--min-bytes", "0", "--swapout-threshold", "4", "-o", out, "--report", report}
	code, stdout, stderr := runTF(t, append(args, "--budget", "1")...)
	if code != 1 || !strings.Contains(stderr, "over the budget of 1 B") {
		t.Errorf("budget too small: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runTF(t, append(args, "--budget", "1GiB")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, s := range []string{"round 1 earliest", "round 2 latest", "untuned (rewrite's triggers) vs tuned", "measured median step time", "-> " + out} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep tuneReport
	if err := json.Unmarshal(data, &rep); err != nil || len(rep.Rounds) < 2 || rep.Tuned.MedianStepNS <= 0 {
		t.Errorf("report: %v %+v", err, rep)
	}
	if _, err := graphdef.Load(out, graphdef.LoadOptions{}); err != nil {
		t.Error(err)
	}
}
