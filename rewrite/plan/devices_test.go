package plan

import (
	"errors"
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestCheckDevices: the compute device names a device type, the host is a CPU, and the two
// are never the same device (issue 11, item 6).
func TestCheckDevices(t *testing.T) {
	for _, c := range []struct {
		compute, host string
		want          string // "" for accepted
	}{
		{"", "", ""},
		{"/device:GPU:1", "", ""},
		{"/device:GPU:0", "/device:CPU:0", ""},
		{"/device:CPU:1", "", ""},
		{"/device:CPU:1", "/device:CPU:0", ""},
		{"/job:w/replica:0/task:1/device:CPU:0", "/job:w/replica:0/task:0/device:CPU:0", ""},
		{"", "/device:GPU:1", "is not a CPU"},
		{"", "/job:worker/task:0", "is not a CPU"},
		{"/device:CPU:0", "", "is the host"},
		{"/device:CPU", "", "is the host"},
		{"/device:CPU:1", "/device:CPU:1", "the same device"},
		{"/device:CPU:1", "/device:CPU:*", "the same device"},
		{"/job:worker", "", "names no device type"},
		{"gpu0", "", "compute device"},
	} {
		err := rewrite.CheckDevices(c.compute, c.host)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckDevices(%q, %q) = %v, want %q", c.compute, c.host, err, c.want)
		}
	}
}

// TestDeviceOptionsRefused: a GPU as the host and a compute device that is the host are
// refused by Rewrite and RewriteWithPlanner alike, not planned (a GPU host used to make the
// planner index past its devices and panic, and placed swap-outs on a GPU without planning).
func TestDeviceOptionsRefused(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	po := PlanOptions{Budget: 6 << 20, Sim: cost.Options{Fetch: []string{"train"}}}
	for _, o := range []rewrite.Options{{HostDevice: "/device:GPU:1"}, {ComputeDevice: "/device:CPU:0"}} {
		if _, err := Rewrite(m, o); err == nil {
			t.Errorf("Rewrite with %+v did not fail", o)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("RewriteWithPlanner with %+v panicked: %v", o, r)
				}
			}()
			if _, err := RewriteWithPlanner(m, o, po); err == nil {
				t.Errorf("RewriteWithPlanner with %+v did not fail", o)
			}
		}()
	}
}

// TestDeviceBudgetsMatchTheGraph: a device budget must match a compute device of the graph
// (by device specification, so /device:GPU:1 matches a device with a job and task), and one
// naming a GPU the graph does not have is refused instead of being ignored.
func TestDeviceBudgetsMatchTheGraph(t *testing.T) {
	m := graphdef.NewModel(towers(6))
	gpu1 := "/job:worker/replica:0/task:1/device:GPU:1"
	p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: slowProfile(), Budget: 1 << 40, DeviceBudgets: map[string]int64{"/device:GPU:1": 1 << 39}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range p.Eval.Devices {
		if d.Name == gpu1 {
			found = true
			if d.Budget != 1<<39 {
				t.Errorf("%s: budget %d, want the device budget %d", d.Name, d.Budget, int64(1<<39))
			}
		} else if d.Budget != 1<<40 {
			t.Errorf("%s: budget %d, want the default %d", d.Name, d.Budget, int64(1<<40))
		}
	}
	if !found {
		t.Fatalf("no device %s in %+v", gpu1, p.Eval.Devices)
	}
	for _, budgets := range []map[string]int64{
		{"/device:GPU:3": 1 << 30},
		{"/device:GPU:1": 1 << 30, "/task:1/device:GPU:1": 1 << 30},
	} {
		_, err := RewriteWithPlanner(graphdef.NewModel(towers(6)), rewrite.Options{}, PlanOptions{Profile: slowProfile(), Budget: 1 << 40, DeviceBudgets: budgets})
		if err == nil || !strings.Contains(err.Error(), "device budget") {
			t.Errorf("budgets %v: %v, want a device budget error", budgets, err)
		}
	}
}

// TestEmulatedDeviceNamed: a CPU compute device (the two-device emulation), which the
// simulator runs as a GPU, keeps its own name in a no-fit error and in budgets keyed by it.
func TestEmulatedDeviceNamed(t *testing.T) {
	m := resnetOnCPU1(t)
	opts := rewrite.Options{ComputeDevice: "/device:CPU:1"}
	_, err := RewriteWithPlanner(m, opts, PlanOptions{Budget: 1 << 20, Sim: cost.Options{Fetch: []string{"train"}}})
	var nf *NoFitError
	if !errors.As(err, &nf) || nf.Device != "/device:CPU:1" || strings.Contains(err.Error(), "GPU:1") {
		t.Errorf("no-fit error names %v: %v", nf, err)
	}
	p, err := RewriteWithPlanner(m, opts, PlanOptions{Budget: 1 << 20, DeviceBudgets: map[string]int64{"/device:CPU:1": 6 << 20}, Sim: cost.Options{Fetch: []string{"train"}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Eval.Devices; len(d) != 1 || d[0].Name != "/device:CPU:1" || d[0].Budget != 6<<20 || d[0].Peak > 6<<20 {
		t.Errorf("devices %+v", d)
	}
}

// TestEmulatedGatesOnComputeDevice: in the two-device emulation the simulator runs the CPU
// compute device as a GPU, and the nodes a plan adds there (gates, recomputations) run on
// that GPU too: no op of the planned step runs on the CPU compute device itself, and only the
// swapped tensors cross the host link (a gate left on the CPU made its trigger's output cross
// it as well).
func TestEmulatedGatesOnComputeDevice(t *testing.T) {
	m := resnetOnCPU1(t)
	p, err := RewriteWithPlanner(m, rewrite.Options{ComputeDevice: "/device:CPU:1"}, PlanOptions{Budget: 6 << 20, Sim: cost.Options{Fetch: []string{"train"}}})
	if err != nil {
		t.Fatal(err)
	}
	gates := 0
	for _, nd := range p.Model.Graph.GetNode() {
		if string(nd.GetAttr()[rewrite.RoleAttr].GetS()) == "gate" && strings.HasSuffix(nd.GetDevice(), "CPU:1") {
			gates++
		}
	}
	if gates == 0 {
		t.Fatal("the plan has no gate on the compute device: nothing checked")
	}
	var swapped int64
	for _, s := range p.Swaps {
		swapped += s.Bytes
	}
	r := p.Eval.Result
	for _, d := range r.Devices {
		if strings.HasSuffix(d.Name, "CPU:1") {
			t.Errorf("the planned step runs %d ops on %s, not on the GPU it is simulated as", d.Ops, d.Name)
		}
	}
	if r.D2H.Bytes != swapped {
		t.Errorf("%d bytes to the host, want the %d bytes swapped", r.D2H.Bytes, swapped)
	}
}

// resnetOnCPU1 loads the residual-network fixture with every node placed on /device:CPU:1,
// the compute device of the two-device emulation.
func resnetOnCPU1(t *testing.T) *graphdef.Model {
	t.Helper()
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Graph.Node {
		n.Device = "/device:CPU:1"
	}
	return m
}
