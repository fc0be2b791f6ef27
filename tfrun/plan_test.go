//go:build tensorflow

package tfrun

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/rewrite"
)

// TestPlannedRewriteInRuntime is issue 4's real-runtime test: the budget-driven planner's
// plans for the residual-network fixture (budgets the unswapped graph's 7.9 MiB exceeds,
// simulated with /device:CPU:1 as the GPU) trains bit-identically to the original in
// the two-device emulation; the swap nodes and their _Send/_Recv pairs survive Grappler; every
// host-to-device copy waits for its trigger's gate; and every wait the plan added (an op held
// back until a swap-out has reached the host) starts only after that swap-out finished. Plans
// with recomputations train bit-identically too, and every recomputed copy is in the
// partition graphs (no common-subexpression elimination merged it into its original) and
// starts only after its gate finished.
func TestPlannedRewriteInRuntime(t *testing.T) {
	for _, c := range []struct {
		strategy  string
		budget    int64
		recompute string
	}{
		{"auto", 6 << 20, "off"},     // a few swaps, no waits
		{"auto", 3 << 20, "off"},     // tight: the plan adds waits
		{"vdnn-all", 5 << 20, "off"}, // every layer input offloaded, vDNN's per-layer sync as waits
		{"auto", 4 << 20, "auto"},    // auto weighs recomputation against swapping
		{"window", 4 << 20, "max"},   // every candidate recomputed (convolutions included), swaps for the rest
	} {
		t.Run(fmt.Sprintf("%s/%dMiB/recompute-%s", c.strategy, c.budget>>20, c.recompute), func(t *testing.T) {
			testPlannedRewrite(t, c.strategy, c.budget, c.recompute)
		})
	}
}

func testPlannedRewrite(t *testing.T, strategy string, budget int64, recompute string) {
	fx, placed := placedFixture(t, "resnet")
	opts := rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice}
	// The budgets were chosen with the accountings of --fit-accounting both. The fixture's
	// whole step lasts about 140 us, and by the microsecond reading of Grappler's trace
	// (docs/SIMULATOR.md) the 1 ns swap-ins and gates of its plans share a microsecond with
	// the tensors beside them: no plan meets the tightest budgets by that figure.
	p, err := plan.RewriteWithPlanner(placed, opts, plan.PlanOptions{Strategy: strategy, Budget: budget, Recompute: recompute,
		Sim: cost.Options{Fetch: []string{fx.TrainOp}}, FitAccounting: "both"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Swaps) == 0 && len(p.Recomputes) == 0 {
		t.Fatal("the plan swaps and recomputes nothing")
	}
	if recompute == "max" && len(p.Recomputes) == 0 {
		t.Fatal("--recompute max recomputed nothing")
	}
	copies := 0
	for _, rc := range p.Recomputes {
		copies += len(rc.Copies)
	}
	t.Logf("strategy %s (plan from %s): %d swaps, %d waits, %d recomputed tensors (%d op copies); predicted peak %d of budget %d (unswapped %d), overhead %.1f%%",
		p.Strategy, p.Eval.Strategy, len(p.Swaps), len(p.Waits), len(p.Recomputes), copies, p.Eval.Devices[0].Peak, p.Budget, p.Base.Devices[0].Peak, 100*p.Eval.Overhead)

	// Bit-identical training, every variable compared.
	checkTrainsLike(t, placed, p.Model, fx, 5)
	cfg := TwoDeviceConfigBytes()

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
	// Every recomputed copy ran, late: after the gate of its trigger.
	for _, rc := range p.Recomputes {
		gs := tr.TimingsOf(rc.Gate)
		if len(gs) != 1 {
			t.Errorf("recomputation of %s: gate %s has %d timings in the trace, want 1", rc.Tensor, rc.Gate, len(gs))
			continue
		}
		for _, cp := range rc.Copies {
			if _, ok := tr.Node(cp); !ok {
				t.Errorf("recomputation of %s: copy %s is not in the partition graphs (merged or removed)", rc.Tensor, cp)
				continue
			}
			ts := tr.TimingsOf(cp)
			if len(ts) != 1 {
				t.Errorf("recomputation of %s: copy %s has %d timings, want 1", rc.Tensor, cp, len(ts))
				continue
			}
			if ts[0].Start < gs[0].OpEnd {
				t.Errorf("recomputation of %s: copy %s started at %d, before its gate %s finished at %d", rc.Tensor, cp, ts[0].Start, rc.Gate, gs[0].OpEnd)
			}
		}
	}
}
