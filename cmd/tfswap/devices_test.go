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
		{[]string{"--compute-device", "/device:CPU:1,/device:CPU:1"}, 2, "named twice"},
		{[]string{"--compute-device", "/device:CPU:1", "--compute-device", "/device:GPU:0"}, 2, "different types"},
		{[]string{"--compute-device", "/device:CPU:1", "--budget", "6MiB", "--device-budget", "/device:CPU:2=5MiB"}, 2, "not a compute device"},
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

// TestRewriteComputeDeviceList: two replicas of the plan fixture, on CPU:1 and CPU:2 (the
// CPU emulation of a two-GPU MirroredStrategy step), named by a repeated --compute-device or
// a comma list: each is planned against the budget (which applies per device), both swap
// to CPU:0, and the output is byte-identical either way and run to run.
func TestRewriteComputeDeviceList(t *testing.T) {
	tmp := t.TempDir()
	m, err := graphdef.Load(planFixture, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	two, err := graphdef.Load(planFixture, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Graph.Node {
		n.Device = "/device:CPU:1"
	}
	for _, n := range two.Graph.Node {
		n.Device = "/device:CPU:2"
		n.Name = "replica_1/" + n.Name
		for i, in := range n.Input {
			if strings.HasPrefix(in, "^") {
				n.Input[i] = "^replica_1/" + in[1:]
			} else {
				n.Input[i] = "replica_1/" + in
			}
		}
	}
	m.Graph.Node = append(m.Graph.Node, two.Graph.Node...)
	placed := filepath.Join(tmp, "mirrored.pb")
	if err := m.Save(placed, graphdef.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	var outs [][]byte
	for i, devs := range [][]string{
		{"--compute-device", "/device:CPU:1", "--compute-device", "/device:CPU:2"},
		{"--compute-device", "/device:CPU:1,/device:CPU:2"},
	} {
		out := filepath.Join(tmp, "out"+string(rune('0'+i))+".pb")
		args := append([]string{"rewrite", placed, "-o", out, "--budget", "6MiB", "--strategy", "lms", "--fetch", "train", "--fetch", "replica_1/train"}, devs...)
		code, stdout, stderr := runSimCLI(t, args...)
		if code != 0 || !strings.Contains(stdout, "/device:CPU:1") || !strings.Contains(stdout, "/device:CPU:2") || strings.Contains(stdout, "/device:GPU") {
			t.Fatalf("%v: exit %d %s%s", devs, code, stdout, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
		r, err := graphdef.Load(out, graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		swapped := map[string]int{}
		for _, n := range r.Graph.Node {
			if strings.HasSuffix(n.Name, "/swap_out") {
				if n.Device != "/device:CPU:0" {
					t.Errorf("%s on %s, want /device:CPU:0", n.Name, n.Device)
				}
				if strings.HasPrefix(n.Name, "tfswap/replica_1/") {
					swapped["/device:CPU:2"]++
				} else {
					swapped["/device:CPU:1"]++
				}
			}
		}
		if swapped["/device:CPU:1"] == 0 || swapped["/device:CPU:2"] == 0 {
			t.Errorf("%v: swap-outs by replica %v, want both", devs, swapped)
		}
	}
	if string(outs[0]) != string(outs[1]) {
		t.Error("a repeated --compute-device and a comma list give different rewrites")
	}
}
