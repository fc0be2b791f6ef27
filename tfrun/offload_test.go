//go:build tensorflow

package tfrun

import (
	"github.com/tfswap/tfswap/rewrite/plan"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// offloadModels are the models the offload runtime tests train: the fixtures, and the
// GPT-style decoder and the Transformer encoder of testmodels/large.py at their tiny sizes
// (testmodels/fixtures/large, made with large.py --feeds).
var offloadModels = append(append([]string(nil), fixtureNames...), "large/gpt-tiny", "large/transformer-tiny")

// offloadFixture offloads every variable of a model of offloadModels placed on the compute
// device of the two-device emulation and checks the result with rewrite.VerifyOffload.
func offloadFixture(t *testing.T, name string) (*Fixture, *graphdef.Model, *rewrite.OffloadResult) {
	t.Helper()
	var fx *Fixture
	var placed *graphdef.Model
	if dir, base, ok := strings.Cut(name, "/"); ok {
		var err error
		fx, err = LoadFixture(filepath.Join(fixtureDir, dir, base+".json"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := graphdef.Load(fx.GraphPath(), graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		placed = PlaceAll(m, computeDevice)
	} else {
		fx, placed = placedFixture(t, name)
	}
	res, err := rewrite.OffloadVariables(placed, rewrite.Options{ComputeDevice: computeDevice}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(placed.Graph, placed.Source)
	if err != nil {
		t.Fatal(err)
	}
	if err := rewrite.VerifyOffload(g, res); err != nil {
		t.Fatal(err)
	}
	if len(res.Variables) == 0 || len(res.Copies) == 0 {
		t.Fatalf("nothing offloaded: %d groups, %d copies", len(res.Variables), len(res.Copies))
	}
	for _, v := range res.Variables {
		if !SameDevice(v.Host, hostDevice) {
			t.Fatalf("variable %s offloaded to %s, want %s", v.Name, v.Host, hostDevice)
		}
	}
	return fx, placed, res
}

// copiesAsSwaps turns an offload's weight copies into the form the swap checks take: the
// host tensor's producer stands for the swap-out (it already lives on the host), each copy
// for a swap-in gated by its gate.
func copiesAsSwaps(res *rewrite.OffloadResult) []Swap {
	var out []Swap
	for _, c := range res.Copies {
		t, _, err := ParseTensorName(c.Tensor)
		if err != nil {
			panic(err)
		}
		out = append(out, Swap{Tensor: c.Tensor, Producer: t, Host: hostDevice, SwapOut: t,
			SwapIns: []SwapIn{{Node: c.Node, Device: hostDevice, Trigger: c.Gate, Consumers: c.Consumers}}})
	}
	return out
}

// TestOffloadEquivalence trains every fixture, placed on /device:CPU:1, and the same graph
// with every variable and its optimizer slots offloaded to /device:CPU:0 for 5 steps in the
// two-device emulation, and requires the loss at every step and every variable (trainable
// or not) to be bit-identical.
func TestOffloadEquivalence(t *testing.T) {
	for _, name := range offloadModels {
		t.Run(name, func(t *testing.T) {
			fx, placed, res := offloadFixture(t, name)
			got, fxAll := checkTrainsLike(t, placed, res.Model, fx, 5)
			t.Logf("%d groups offloaded (%d bytes), %d gated copies; losses %v; %d variables compared",
				len(res.Variables), res.Bytes(), len(res.Copies), got.LossValues, len(fxAll.Variables))
		})
	}
}

// TestOffloadTiming traces a training step of each offloaded fixture and checks that every
// weight copy that ran neither started its host-to-device send nor arrived on the compute
// device before its trigger had finished, and that the variables and their updates ran on
// the host.
func TestOffloadTiming(t *testing.T) {
	for _, name := range offloadModels {
		t.Run(name, func(t *testing.T) {
			fx, _, res := offloadFixture(t, name)
			swaps := copiesAsSwaps(res)
			probed, probes, err := AddProbes(res.Model, swaps, computeDevice)
			if err != nil {
				t.Fatal(err)
			}
			targets := ProbeNames(probes)
			tr, err := TraceStep(marshalModel(t, probed), fx, TwoDeviceConfigBytes(), 2, targets...)
			if err != nil {
				t.Fatal(err)
			}
			vs, notes, err := CheckSwapOrder(tr, swaps, probes, computeDevice, FixtureRun(probed.Graph, fx, targets...))
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				if v.Gating() {
					t.Error(v)
				}
			}
			checked := 0
			for _, c := range res.Copies {
				if _, ok := tr.Node(c.Node); ok {
					checked++
				}
			}
			if checked == 0 {
				t.Fatal("no weight copy is in the partition graphs: nothing checked")
			}
			onHost := 0
			for _, v := range res.Variables {
				for _, name := range v.Variables {
					if pn, ok := tr.Node(name); ok {
						onHost++
						if !SameDevice(pn.Device, hostDevice) {
							t.Errorf("variable %s runs on %s, want %s", name, pn.Device, hostDevice)
						}
					}
				}
			}
			if onHost == 0 {
				t.Error("no offloaded variable in the partition graphs")
			}
			for _, n := range notes {
				t.Log("note: " + n)
			}
			t.Logf("%d weight copies, %d in the partition graphs and checked against their gates; %d variables seen on the host", len(res.Copies), checked, onHost)
		})
	}
}

// TestPlannedOffloadInRuntime plans the resnet fixture with every variable offloaded and a
// budget that needs activation swaps on top (the planner's copies triggered from predicted
// times), trains the result bit-identically for 5 steps against the original, and checks
// every weight copy and every swap-in against its gate in a traced step.
func TestPlannedOffloadInRuntime(t *testing.T) {
	fx, placed := placedFixture(t, "resnet")
	opts := rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice}
	p, err := plan.RewriteWithPlanner(placed, opts, plan.PlanOptions{Budget: 4 << 20, Offload: rewrite.OffloadAll,
		Sim: cost.Options{Fetch: []string{fx.TrainOp}}, FitAccounting: "both"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Offload == nil || len(p.Offload.Copies) == 0 || len(p.Swaps) == 0 {
		t.Fatalf("the plan offloads or swaps nothing: offload %v, %d swaps", p.Offload != nil, len(p.Swaps))
	}
	t.Logf("%d groups offloaded, %d weight copies, %d swaps, %d recomputations; predicted peak %d of %d (original %d)",
		len(p.Offload.Variables), len(p.Offload.Copies), len(p.Swaps), len(p.Recomputes), p.Eval.Devices[0].Peak, p.Budget, p.Base.Devices[0].Peak)
	checkTrainsLike(t, placed, p.Model, fx, 5)
	cfg := TwoDeviceConfigBytes()
	swaps := append(copiesAsSwaps(p.Offload), swapsOf(p.Result)...)
	probed, probes, err := AddProbes(p.Model, swaps, computeDevice)
	if err != nil {
		t.Fatal(err)
	}
	targets := ProbeNames(probes)
	tr, err := TraceStep(marshalModel(t, probed), fx, cfg, 2, targets...)
	if err != nil {
		t.Fatal(err)
	}
	vs, notes, err := CheckSwapOrder(tr, swaps, probes, computeDevice, FixtureRun(probed.Graph, fx, targets...))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Gating() {
			t.Error(v)
		}
	}
	for _, n := range notes {
		t.Log("note: " + n)
	}
}
