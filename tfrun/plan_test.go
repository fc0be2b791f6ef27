//go:build tensorflow

package tfrun

import (
	"fmt"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/rewrite"
)

// TestPlannedRewriteInRuntime is issue 4's real-runtime test: the budget-driven planner's
// plans for the residual-network fixture (budgets the unswapped graph's 7.9 MiB exceeds,
// simulated with /device:CPU:1 as the GPU) trains bit-identically to the original in
// the two-device emulation; the swap nodes and their _Send/_Recv pairs survive Grappler; every
// host-to-device copy waits for its trigger's gate; and every wait the plan added (an op held
// back until a swap-out has reached the host) starts only after that swap-out finished.
func TestPlannedRewriteInRuntime(t *testing.T) {
	for _, c := range []struct {
		strategy string
		budget   int64
	}{
		{"auto", 6 << 20},     // a few swaps, no waits
		{"auto", 3 << 20},     // tight: the plan adds waits
		{"vdnn-all", 5 << 20}, // every layer input offloaded, vDNN's per-layer sync as waits
	} {
		t.Run(fmt.Sprintf("%s/%dMiB", c.strategy, c.budget>>20), func(t *testing.T) {
			testPlannedRewrite(t, c.strategy, c.budget)
		})
	}
}

func testPlannedRewrite(t *testing.T, strategy string, budget int64) {
	fx, placed := placedFixture(t, "resnet")
	opts := rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice}
	p, err := rewrite.RewriteWithPlanner(placed, opts, rewrite.PlanOptions{Strategy: strategy, Budget: budget, Sim: cost.Options{Fetch: []string{fx.TrainOp}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Swaps) == 0 {
		t.Fatal("the plan swaps nothing")
	}
	t.Logf("strategy %s: %d swaps, %d waits; predicted peak %d of budget %d (unswapped %d), overhead %.1f%%",
		p.Strategy, len(p.Swaps), len(p.Waits), p.Eval.Devices[0].Peak, p.Budget, p.Base.Devices[0].Peak, 100*p.Eval.Overhead)

	// Bit-identical training, every variable compared.
	cfg := TwoDeviceConfigBytes()
	origModel, fxAll := withAllVariableReads(t, placed, fx)
	planModel, _ := withAllVariableReads(t, p.Model, fx)
	want, err := Train(marshalModel(t, origModel), fxAll, 5, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Train(marshalModel(t, planModel), fxAll, 5, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkFinite(t, got)
	for _, d := range want.Diff(got, variableNames(fxAll)) {
		t.Error(d)
	}

	// Partition graphs and the order of events in a traced step.
	probed, probes, err := AddProbes(p.Model, swapsOf(p.Result), computeDevice)
	if err != nil {
		t.Fatal(err)
	}
	targets := ProbeNames(probes)
	tr, err := TraceStep(marshalModel(t, probed), fx, cfg, 2, targets...)
	if err != nil {
		t.Fatal(err)
	}
	run := FixtureRun(probed.Graph, fx, targets...)
	problems, notes := CheckSwapPartitions(tr, swapsOf(p.Result), run)
	for _, pr := range problems {
		t.Error(pr)
	}
	vs, notes2, err := CheckSwapOrder(tr, swapsOf(p.Result), probes, computeDevice, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Gating() {
			t.Error(v)
		}
	}
	for _, n := range append(notes, notes2...) {
		t.Log("note: " + n)
	}
	checked := 0
	for _, w := range p.Waits {
		_, okW := tr.Node(w.Node)
		if _, okS := tr.Node(w.SwapOut); !okW || !okS {
			t.Errorf("wait of %s on %s: not in the partition graphs (Grappler removed or folded the waiting op)", w.Node, w.SwapOut)
			continue
		}
		ws, so := tr.TimingsOf(w.Node), tr.TimingsOf(w.SwapOut)
		if len(ws) != 1 || len(so) != 1 {
			t.Errorf("wait of %s on %s: %d and %d timings", w.Node, w.SwapOut, len(ws), len(so))
			continue
		}
		if ws[0].Start < so[0].OpEnd {
			t.Errorf("%s started at %d, before swap-out %s finished at %d", w.Node, ws[0].Start, w.SwapOut, so[0].OpEnd)
		}
		checked++
	}
	t.Logf("%d of %d waits checked in the trace", checked, len(p.Waits))
	if len(p.Waits) > 0 && checked == 0 {
		t.Error("no wait could be checked in the trace")
	}
}
