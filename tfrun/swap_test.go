//go:build tensorflow

package tfrun

import (
	"github.com/tfswap/tfswap/rewrite/plan"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// swapVariants are the rewrite options the runtime tests use: the defaults (64 KiB minimum,
// threshold 10), an aggressive setting that swaps far more, and smaller, tensors, and the
// aggressive setting with L2Loss gates (GateReduce) instead of Identities.
var swapVariants = []struct {
	name string
	opts rewrite.Options
}{
	{"default", rewrite.Options{}},
	{"aggressive", rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1, SwapinGroupBy: -1}},
	{"reduce-gates", rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1, SwapinGroupBy: -1, GateKind: rewrite.GateReduce}},
}

// unswappedCases are the fixture/variant pairs whose rewrite swaps nothing, with the reason.
// A runtime test of such a pair would compare or trace a graph without a swap, so it is
// skipped with the reason; requireSwaps fails it when the pair starts swapping, so that the
// reason cannot go stale. Every other pair must swap something.
var unswappedCases = map[string]string{
	"mlp/default": "every tensor of the mlp fixture is 32 KiB or less, below the default 64 KiB minimum " +
		"(the aggressive variant swaps mlp)",
	"lstm/default": "the lstm fixture's tensors of 64 KiB or more are the unrolled steps' weight gradients, whose only " +
		"path to their reader (the AddN summing them) is that direct edge, so no op descending from them can " +
		"trigger a swap-in (the aggressive variant swaps lstm)",
}

// requireSwaps fails t when the rewrite of fixture name with variant swapped nothing, and
// skips t, with the reason, for the pairs in unswappedCases (failing it if such a pair now
// swaps something).
func requireSwaps(t *testing.T, name, variant string, res *rewrite.Result) {
	t.Helper()
	key := name + "/" + variant
	reason, excluded := unswappedCases[key]
	switch {
	case excluded && len(res.Swaps) > 0:
		t.Fatalf("%s now swaps %d tensors: remove it from unswappedCases (%q)", key, len(res.Swaps), reason)
	case excluded:
		t.Skip("nothing to check, the rewrite swaps nothing: " + reason)
	case len(res.Swaps) == 0:
		t.Fatalf("the rewrite of %s swapped nothing: nothing to check (add it to unswappedCases only with a reason)", key)
	}
}

// placedFixture loads a fixture's model with every node placed on the compute device.
func placedFixture(t testing.TB, name string) (*Fixture, *graphdef.Model) {
	t.Helper()
	fx, _ := loadFixture(t, name)
	m, err := graphdef.Load(fx.GraphPath(), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fx, PlaceAll(m, computeDevice)
}

// swapsOf copies a rewrite's swaps into the form the checks take, with each swap-in's gate
// as the node that must finish before the copy.
func swapsOf(res *rewrite.Result) []Swap {
	var out []Swap
	for _, sw := range res.Swaps {
		s := Swap{Tensor: sw.Tensor, Producer: sw.Producer, Host: sw.Host, SwapOut: sw.SwapOut}
		for _, in := range sw.SwapIns {
			// The swap-in's control edge comes from its gate, a preserved Identity or L2Loss
			// that reads the trigger's output: the gate finishes after the trigger, so checking the
			// copy against the gate checks it against the trigger too, and the gate, unlike
			// an original op, is never removed or fused by Grappler.
			s.SwapIns = append(s.SwapIns, SwapIn{Node: in.Node, Device: in.Device, Trigger: in.Gate, Consumers: in.Consumers})
		}
		out = append(out, s)
	}
	return out
}

// rewriteModel rewrites m for the two-device emulation with opts (compute device CPU:1; the
// host defaults to CPU:0) and checks the result with rewrite.Verify.
func rewriteModel(t testing.TB, m *graphdef.Model, opts rewrite.Options) *rewrite.Result {
	t.Helper()
	opts.ComputeDevice = computeDevice
	res, err := plan.Rewrite(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	if err := rewrite.Verify(g, res, opts.Gate); err != nil {
		t.Fatalf("rewrite.Verify: %v", err)
	}
	for _, sw := range res.Swaps {
		if !SameDevice(sw.Host, hostDevice) {
			t.Fatalf("swap of %s goes to %s, want the default host %s", sw.Tensor, sw.Host, hostDevice)
		}
	}
	return res
}

// withAllVariableReads returns m plus a ReadVariableOp for every variable the fixture does
// not already fetch (the batch-norm moving statistics are not trainable, so the sidecar
// leaves them out), and a copy of fx that fetches them too. Comparing every variable, not
// only the trainable ones, catches a rewrite that disturbs the moving-statistics updates.
func withAllVariableReads(t testing.TB, m *graphdef.Model, fx *Fixture) (*graphdef.Model, *Fixture) {
	t.Helper()
	known := map[string]bool{}
	for _, v := range fx.Variables {
		known[v.Name] = true
	}
	out := m.Clone()
	fx2 := *fx
	fx2.Variables = append([]FixtureVariable(nil), fx.Variables...)
	for _, nd := range m.Graph.Node {
		if nd.GetOp() != "VarHandleOp" || known[nd.GetName()] {
			continue
		}
		name := "tfrun_read/" + nd.GetName()
		out.Graph.Node = append(out.Graph.Node, &npb.NodeDef{
			Name: name, Op: "ReadVariableOp", Input: []string{nd.GetName()}, Device: nd.GetDevice(),
			Attr: map[string]*apb.AttrValue{"dtype": nd.GetAttr()["dtype"]},
		})
		fx2.Variables = append(fx2.Variables, FixtureVariable{Name: nd.GetName(), Fetch: name + ":0"})
	}
	return out, &fx2
}

// marshalModel serializes a model's GraphDef.
func marshalModel(t testing.TB, m *graphdef.Model) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRewriteEquivalence trains every fixture, placed on /device:CPU:1, and its rewrite in
// the two-device emulation for 5 steps from the same initial values, and requires the loss
// at every step and every variable (trainable or not) to be bit-identical.
func TestRewriteEquivalence(t *testing.T) {
	for _, name := range fixtureNames {
		for _, v := range swapVariants {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				fx, placed := placedFixture(t, name)
				res := rewriteModel(t, placed, v.opts)
				t.Logf("%d tensors swapped (%d bytes out, %d in per step), %d skipped", len(res.Swaps), res.BytesOut(), res.BytesIn(), len(res.Skipped))
				requireSwaps(t, name, v.name, res)
				got, fxAll := checkTrainsLike(t, placed, res.Model, fx, 5)
				t.Logf("losses %v; %d variables compared", got.LossValues, len(fxAll.Variables))
			})
		}
	}
}

// traceRewrite rewrites a placed fixture with the options of variant, adds probes
// (AddProbes), and traces one training step after two warm-up steps. It returns the rewrite,
// the probes, the trace and the RunSpec of the traced step. A rewrite that swapped nothing
// fails t, or skips it for the pairs of unswappedCases (requireSwaps).
func traceRewrite(t *testing.T, name, variant string, opts rewrite.Options) (*rewrite.Result, map[string]string, *Trace, RunSpec) {
	t.Helper()
	fx, placed := placedFixture(t, name)
	res := rewriteModel(t, placed, opts)
	requireSwaps(t, name, variant, res)
	probed, probes, err := AddProbes(res.Model, swapsOf(res), computeDevice)
	if err != nil {
		t.Fatal(err)
	}
	targets := ProbeNames(probes)
	tr, err := TraceStep(marshalModel(t, probed), fx, TwoDeviceConfigBytes(), 2, targets...)
	if err != nil {
		t.Fatal(err)
	}
	return res, probes, tr, FixtureRun(probed.Graph, fx, targets...)
}

// TestSwapPartitions checks that the swap nodes survive Grappler: they are in the partition
// graphs, the swap-outs and swap-ins on /device:CPU:0, with the _Send/_Recv pairs they
// imply (producer to swap-out, trigger to swap-in as a control transfer, swap-in to each
// consumer on CPU:1).
func TestSwapPartitions(t *testing.T) {
	for _, name := range fixtureNames {
		for _, v := range swapVariants {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				res, _, tr, run := traceRewrite(t, name, v.name, v.opts)
				problems, notes := CheckSwapPartitions(tr, swapsOf(res), run)
				for _, p := range problems {
					t.Error(p)
				}
				for _, n := range notes {
					t.Log("note: " + n)
				}
				present := 0
				for _, sw := range res.Swaps {
					for _, n := range append([]string{sw.SwapOut}, swapInNodes(sw)...) {
						if pn, ok := tr.Node(n); ok {
							present++
							if !SameDevice(pn.Device, hostDevice) {
								t.Errorf("%s runs on %s, want %s", n, pn.Device, hostDevice)
							}
						}
					}
				}
				if present == 0 {
					t.Fatal("no swap node is in the partition graphs")
				}
				t.Logf("%d swaps; %d swap nodes in %d partition graphs; %d transfers; %d notes", len(res.Swaps), present, len(tr.PartitionGraphs), len(tr.Transfers()), len(notes))
			})
		}
	}
}

// TestSwapTiming traces a training step of each rewritten fixture in the two-device
// emulation and checks every swap-in against its trigger (CheckSwapOrder). The gating rules
// must hold for every swap-in: the host-to-device copy neither starts nor arrives before the
// trigger has finished. Whether the swap-out had finished before the trigger started is a
// property of the schedule, not of the graph (nothing makes the trigger wait for it); it is
// reported, not required. In the emulation the host's nodes share the inter-op threads with
// the device's, and the executor hands a received tensor's consumers to the thread pool
// behind the sending thread's own work, so a swap-out can run a millisecond after its
// producer even when the trigger is close.
func TestSwapTiming(t *testing.T) {
	for _, name := range fixtureNames {
		for _, v := range swapVariants {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				res, probes, tr, run := traceRewrite(t, name, v.name, v.opts)
				vs, notes, err := CheckSwapOrder(tr, swapsOf(res), probes, computeDevice, run)
				if err != nil {
					t.Fatal(err)
				}
				late := 0
				for _, v := range vs {
					if v.Gating() {
						t.Error(v)
					} else {
						late++
						t.Log("schedule: " + v.String())
					}
				}
				for _, n := range notes {
					t.Log("note: " + n)
				}
				t.Logf("%d swaps, %d swap-ins traced: %d swap-outs still running when their trigger started", len(res.Swaps), len(probes), late)
			})
		}
	}
}

// TestSwapTimingGateDevice is the control experiment: with the trigger's control edge on a
// swap-in placed on the consumer's device (GateDevice), TensorFlow copies the tensor back
// right after the swap-out, long before the trigger. CheckSwapOrder must report it, which
// shows that the check can fail. It runs on cnn and resnet, whose swapped tensors are
// forward activations: their swap-outs run in the forward pass, well before the backward
// triggers, so an early copy has time to show. (In lstm the swapped tensors are made in the
// backward pass and the swap-outs often run only after their triggers, so whether the copy
// is early depends on the schedule.)
func TestSwapTimingGateDevice(t *testing.T) {
	for _, name := range []string{"cnn", "resnet"} {
		t.Run(name, func(t *testing.T) {
			res, probes, tr, run := traceRewrite(t, name, "gate-device", rewrite.Options{Gate: rewrite.GateDevice})
			for _, sw := range res.Swaps {
				for _, in := range sw.SwapIns {
					if !SameDevice(in.Device, computeDevice) {
						t.Fatalf("GateDevice put swap-in %s on %s, want %s", in.Node, in.Device, computeDevice)
					}
				}
			}
			vs, notes, err := CheckSwapOrder(tr, swapsOf(res), probes, computeDevice, run)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range notes {
				t.Log("note: " + n)
			}
			early := map[string]bool{}
			for _, v := range vs {
				if v.Check == CheckH2DRecv {
					early[v.SwapIn] = true
				}
				if v.Gating() {
					t.Log("violation (expected): " + v.String())
				}
			}
			if len(early) == 0 {
				t.Fatal("with the gate on the device, no swap-in was seen copied back before its trigger: the timing check cannot tell the gates apart")
			}
			t.Logf("%d of %d swap-ins copied back before their trigger finished", len(early), len(probes))
		})
	}
}

// swapInNodes returns the names of a swap's swap-ins.
func swapInNodes(sw rewrite.Swap) []string {
	var names []string
	for _, in := range sw.SwapIns {
		names = append(names, in.Node)
	}
	return names
}
