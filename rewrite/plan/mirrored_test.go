package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// mirroredDevices are the replicas of the CPU emulation of a two-GPU MirroredStrategy step:
// CPU:1 and CPU:2 compute, CPU:0 the host.
var mirroredDevices = []string{"/device:CPU:1", "/device:CPU:2"}

// mirroredGraph is a data-parallel training step as tf.distribute.MirroredStrategy builds
// it, on one replica per device of devs: each replica runs the forward chain f1..f4 (of
// shape shape) and its backward chain, with a synchronised batch statistic taken by a
// CollectiveReduceV2 of f2 (read again by the loss, far later, as SyncBatchNormalization's
// statistics are) and the gradient summed across replicas by a second CollectiveReduceV2
// before the update. The collectives of one kind share their group and instance keys, as
// the replicas' ops meet at run time, not by graph edges. The step's NoOp runs on CPU:0.
func mirroredGraph(devs []string, shape []int64) *gpb.GraphDef {
	b := newBuilder()
	var updates []string
	for r, dev := range devs {
		p := fmt.Sprintf("replica_%d/", r)
		keys := func(name string, key float32) []string {
			// group_size, group_key, instance_key (float in this builder; the ops are
			// never run, only planned).
			var out []string
			for _, k := range []string{"group_size", "group_key", "instance_key"} {
				out = append(out, b.op(p+name+"/"+k, "Const", dev, []int64{}).Name)
			}
			return out
		}
		b.op(p+"x", "Placeholder", dev, shape)
		prev := p + "x"
		for i := 1; i <= 4; i++ {
			prev = b.op(fmt.Sprintf("%sf%d", p, i), "Relu", dev, shape, prev).Name
		}
		sync := b.op(p+"sync_stat", "CollectiveReduceV2", dev, shape, append([]string{p + "f2"}, keys("sync_stat", 1)...)...).Name
		grad := b.op(p+"loss_grad", "AddV2", dev, shape, prev, sync).Name
		for i := 4; i >= 1; i-- {
			grad = b.op(fmt.Sprintf("%sg%d", p, i), "ReluGrad", dev, shape, grad, fmt.Sprintf("%sf%d", p, i)).Name
		}
		red := b.op(p+"allreduce", "CollectiveReduceV2", dev, shape, append([]string{grad}, keys("allreduce", 2)...)...).Name
		updates = append(updates, "^"+b.op(p+"update", "Relu", dev, shape, red).Name)
	}
	b.op("train", "NoOp", "/device:CPU:0", nil, updates...)
	return b.g
}

// checkMirrored checks a rewrite of mirroredGraph(devs): every replica swaps, to CPU:0;
// every swap-in is gated by work of the replica its consumers run on; no collective is
// swapped, gates a swap-in, or has an input changed (its NodeDef is the original's).
func checkMirrored(t *testing.T, orig *gpb.GraphDef, res *rewrite.Result, devs []string) {
	t.Helper()
	nodes := map[string]*npb.NodeDef{}
	for _, n := range res.Model.Graph.Node {
		nodes[n.Name] = n
	}
	swapped := map[string]int{}
	for _, s := range res.Swaps {
		prod := nodes[s.Producer]
		swapped[prod.Device]++
		if s.Host != "/device:CPU:0" {
			t.Errorf("%s swapped to %s, want /device:CPU:0", s.Tensor, s.Host)
		}
		if rewrite.IsCollective(prod.Op) {
			t.Errorf("collective output %s swapped", s.Tensor)
		}
		for _, si := range s.SwapIns {
			trig := nodes[si.Trigger]
			if rewrite.IsCollective(trig.Op) {
				t.Errorf("swap-in %s gated by collective %s", si.Node, si.Trigger)
			}
			for _, c := range si.Consumers {
				if d := nodes[c].Device; d != trig.Device {
					t.Errorf("swap-in %s: trigger %s on %s, consumer %s on %s", si.Node, si.Trigger, trig.Device, c, d)
				}
				if rewrite.IsCollective(nodes[c].Op) {
					t.Errorf("swap-in %s read by collective %s", si.Node, c)
				}
			}
		}
	}
	for _, d := range devs {
		if swapped[d] == 0 {
			t.Errorf("replica device %s swapped nothing (swaps by device %v)", d, swapped)
		}
	}
	for _, o := range orig.Node {
		if rewrite.IsCollective(o.Op) && !proto.Equal(o, nodes[o.Name]) {
			t.Errorf("collective %s changed:\n%v\nwant\n%v", o.Name, nodes[o.Name], o)
		}
	}
}

// TestMirroredReplicasSwap: with both replica devices named (a comma list), LMS swaps on each
// replica to the host and keeps the collectives as they are; naming only CPU:1 leaves CPU:2's
// replica alone (the single --compute-device of before). The rewrite is deterministic.
func TestMirroredReplicasSwap(t *testing.T) {
	g := mirroredGraph(mirroredDevices, act)
	opts := rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, ComputeDevice: strings.Join(mirroredDevices, ",")}
	var first string
	for i := 0; i < 2; i++ {
		res, err := Rewrite(graphdef.NewModel(proto.Clone(g).(*gpb.GraphDef)), opts)
		if err != nil {
			t.Fatal(err)
		}
		checkMirrored(t, g, res, mirroredDevices)
		if d := describe(res); i == 0 {
			first = d
		} else if d != first {
			t.Errorf("two rewrites differ:\n%s\n---\n%s", first, d)
		}
	}
	one, err := Rewrite(graphdef.NewModel(proto.Clone(g).(*gpb.GraphDef)), rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, ComputeDevice: "/device:CPU:1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Swaps) == 0 {
		t.Fatal("CPU:1 alone swapped nothing")
	}
	for _, s := range one.Swaps {
		if !strings.HasPrefix(s.Producer, "replica_0/") {
			t.Errorf("with CPU:1 alone, %s (of the CPU:2 replica) was swapped", s.Tensor)
		}
	}
}

// TestMirroredPlannedPerDevice: the auto and LMS planners plan each replica device against its own
// budget (a per-device budget for each, both below its unswapped peak), every replica swaps,
// the collectives stay untouched, and the plan is the same twice.
func TestMirroredPlannedPerDevice(t *testing.T) {
	big := []int64{512, 1024} // 2 MiB of float32, as slowProfile's chains
	g := mirroredGraph(mirroredDevices, big)
	opts := rewrite.Options{ComputeDevice: strings.Join(mirroredDevices, ",")}
	gr, err := graphdef.NewGraph(proto.Clone(g).(*gpb.GraphDef), "mirrored")
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(gr, opts)
	sg, _ := graphdef.NewGraph(proto.Clone(g).(*gpb.GraphDef), "mirrored")
	relabelCompute(a, sg)
	base, err := cost.Simulate(sg, slowProfile(), cost.Options{ComputeDevice: "/device:GPU:1"})
	if err != nil {
		t.Fatal(err)
	}
	budgets := map[string]int64{}
	for i, d := range mirroredDevices {
		sd := strings.Replace(d, "CPU", "GPU", 1)
		bd := base.Device(sd)
		if bd == nil {
			t.Fatalf("no simulated device %s: %+v", sd, base.Devices)
		}
		// Two activations below the peak on the first replica, one on the second.
		budgets[d] = bd.PeakBytes - int64(2-i)*2<<20
	}
	for _, strategy := range []string{"auto", "lms"} {
		t.Run(strategy, func(t *testing.T) {
			var first string
			for i := 0; i < 2; i++ {
				m := graphdef.NewModel(proto.Clone(g).(*gpb.GraphDef))
				m.Source = "mirrored"
				p, err := RewriteWithPlanner(m, opts, PlanOptions{Strategy: strategy, Profile: slowProfile(), Budget: 1 << 40, DeviceBudgets: budgets, FitAccounting: "tfswap"})
				if err != nil {
					t.Fatal(err)
				}
				checkMirrored(t, g, p.Result, mirroredDevices)
				if len(p.Eval.Devices) != 2 {
					t.Fatalf("devices %+v, want the two replicas", p.Eval.Devices)
				}
				for _, d := range p.Eval.Devices {
					if d.Budget != budgets[d.Name] || d.Peak > d.Budget {
						t.Errorf("device %s: peak %d, budget %d (want %d)", d.Name, d.Peak, d.Budget, budgets[d.Name])
					}
				}
				if d := describePlan(p); i == 0 {
					first = d
				} else if d != first {
					t.Errorf("two plans differ:\n%s\n---\n%s", first, d)
				}
			}
		})
	}
}

// TestCollectivesUntouched: a collective's output is never swapped, it never gates a
// swap-in, and its inputs are never redirected, whatever device it runs on.
func TestCollectivesUntouched(t *testing.T) {
	g, err := graphdef.NewGraph(mirroredGraph(mirroredDevices, act), "mirrored")
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, rewrite.Options{ComputeDevice: strings.Join(mirroredDevices, ",")})
	seen := 0
	for _, n := range g.Nodes {
		if !rewrite.IsCollective(n.Op) {
			continue
		}
		seen++
		if !a.OnCompute(n) {
			t.Errorf("%s on %s is not on a compute device", n.Name, n.Device)
		}
		if ex, why := a.Excluded(n); !ex || !strings.Contains(why, "collective") {
			t.Errorf("%s: excluded %v (%q), want excluded as a collective", n.Name, ex, why)
		}
		if a.TriggerEligible(n) {
			t.Errorf("%s may gate a swap-in", n.Name)
		}
		for _, in := range n.Inputs {
			for _, u := range in.Node.Consumers[in.Port] {
				if u.Node == n && a.ConsumerEligible(u) {
					t.Errorf("%s's input %s may be redirected to a swap-in", n.Name, in)
				}
			}
		}
	}
	if seen != 4 {
		t.Errorf("%d collectives, want 4", seen)
	}
}

// TestCheckComputeDeviceList: a compute-device list names distinct devices of one type, none
// of them the host.
func TestCheckComputeDeviceList(t *testing.T) {
	for _, c := range []struct {
		compute, host string
		want          string // "" for accepted
	}{
		{"/device:CPU:1,/device:CPU:2", "", ""},
		{" /device:GPU:0 , /device:GPU:1 ", "", ""},
		{"/device:GPU:0,/device:GPU:1", "/device:CPU:0", ""},
		{"/device:CPU:1,/device:CPU:1", "", "named twice"},
		{"/device:GPU,/device:GPU:0", "", "named twice"},
		{"/device:CPU:1,/device:GPU:0", "", "different types"},
		{"/device:CPU:1,/device:CPU:0", "", "is the host"},
		{"/device:CPU:1,/device:CPU:2", "/device:CPU:2", "the same device"},
		{"/device:CPU:1,gpu0", "", "compute device"},
	} {
		err := rewrite.CheckDevices(c.compute, c.host)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckDevices(%q, %q) = %v, want %q", c.compute, c.host, err, c.want)
		}
	}
}
