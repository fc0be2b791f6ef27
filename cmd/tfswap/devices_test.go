package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestRewriteDeviceOptions: device kinds and budgets are checked where the options are
// parsed (exit 2, nothing written), a device budget for a GPU the graph lacks is refused, and
// the two-device emulation's CPU:1 is named CPU:1 (issue 11, item 6).
func TestRewriteDeviceOptions(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out.pb")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--host-device", "/device:GPU:1", "--budget", "6MiB", "--fetch", "train"}, 2, "is not a CPU"},
		{[]string{"--host-device", "/device:GPU:1"}, 2, "is not a CPU"},
		{[]string{"--compute-device", "/device:CPU:0"}, 2, "is the host"},
		{[]string{"--compute-device", "/device:CPU:1", "--host-device", "/device:CPU:1"}, 2, "the same device"},
		{[]string{"--compute-device", "/job:worker"}, 2, "names no device type"},
		{[]string{"--budget", "6MiB", "--device-budget", "/device:CPU:1=5MiB"}, 2, "not a compute device"},
		{[]string{"--budget", "6MiB", "--device-budget", "/device:GPU:3=5MiB", "--fetch", "train"}, 1, "no compute device of the graph matches /device:GPU:3"},
	} {
		args := append([]string{"rewrite", planFixture, "-o", out}, tc.args...)
		code, _, stderr := runSimCLI(t, args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d %q, want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: wrote %s", tc.args, out)
			os.Remove(out)
		}
	}

	// The emulation: the graph on CPU:1, swapped to CPU:0.
	m, err := graphdef.Load(planFixture, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Graph.Node {
		n.Device = "/device:CPU:1"
	}
	placed := filepath.Join(tmp, "placed.pb")
	if err := m.Save(placed, graphdef.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runSimCLI(t, "rewrite", placed, "-o", out, "--compute-device", "/device:CPU:1", "--budget", "1MiB", "--fetch", "train")
	if code != 1 || !strings.Contains(stderr, "no plan fits /device:CPU:1") || strings.Contains(stderr, "GPU:1") {
		t.Errorf("no fit on the emulated device: exit %d %s", code, stderr)
	}
	code, stdout, stderr := runSimCLI(t, "rewrite", placed, "-o", out, "--compute-device", "/device:CPU:1", "--budget", "1MiB", "--device-budget", "/device:CPU:1=6MiB", "--fetch", "train")
	if code != 0 || !strings.Contains(stdout, "predicted peak:  /device:CPU:1") || strings.Contains(stdout, "GPU:1") {
		t.Errorf("plan on the emulated device: exit %d %s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runSimCLI(t, "rewrite", placed, "-o", out, "--compute-device", "/device:CPU:1", "--strategy", "lms-fixed", "-v")
	if code != 0 || !strings.Contains(stdout, "on /device:CPU:0") || strings.Contains(stdout, "/device:GPU") {
		t.Errorf("rewrite of the emulated device: exit %d %s%s", code, stdout, stderr)
	}
}
