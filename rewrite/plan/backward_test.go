package plan

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
)

// accumulationChain is planChain(n) with a gradient that waits for its accumulation: acc, made
// from x at the start of the step, is read only by the AddN that sums it with g1 at the end,
// as a shortcut branch's gradient waits for the main branch's in a residual block.
func accumulationChain(n int) *gpb.GraphDef {
	b := newBuilder()
	b.op("x", "Placeholder", "", big)
	b.op("acc", "Neg", "", big, "x")
	grad := b.reluForward(n)
	for i := n; i >= 1; i-- {
		grad = b.op(fmt.Sprintf("g%d", i), "ReluGrad", "", big, grad, fmt.Sprintf("f%d", i)).Name
	}
	b.op("sum", "AddN", "", big, grad, "acc")
	b.op("train", "NoOp", "", nil, "^sum")
	return b.g
}

// TestSwapFromProduction: a tensor that waits between its production and its first read is a
// swap candidate across that wait. With the forward activations excluded (--exclude-op Relu),
// the only tensor whose absence lowers the peak is acc, which has a single read: auto must
// swap it out as soon as it is made and bring it back for the AddN, every read taking the copy.
func TestSwapFromProduction(t *testing.T) {
	const n = 6
	act := int64(512 * 1024 * 4)
	g := accumulationChain(n)
	gr, err := graphdef.NewGraph(g, "acc")
	if err != nil {
		t.Fatal(err)
	}
	base, err := cost.Simulate(gr, slowProfile(), cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	budget := base.Compute().PeakBytes - act/2
	m := graphdef.NewModel(g)
	m.Source = "acc"
	p, err := RewriteWithPlanner(m, rewrite.Options{ExcludeOps: []string{"Relu"}}, PlanOptions{Strategy: "auto", Profile: slowProfile(), Budget: budget, Recompute: "off", FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Eval.Fits {
		t.Fatalf("the plan does not fit: peak %d, budget %d", p.Eval.Devices[0].Peak, budget)
	}
	var acc *rewrite.Swap
	for i := range p.Swaps {
		if p.Swaps[i].Tensor == "acc:0" {
			acc = &p.Swaps[i]
		}
	}
	if acc == nil {
		t.Fatalf("auto swapped %v, want acc:0 swapped across the wait before its only read", swappedNames(p))
	}
	if len(acc.SwapIns) != 1 || len(acc.SwapIns[0].Consumers) != 1 || acc.SwapIns[0].Consumers[0] != "sum" {
		t.Errorf("acc:0 swap-ins %+v, want one read by sum", acc.SwapIns)
	}
	// Nothing reads the original but the swap-out.
	out, err := graphdef.NewGraph(p.Model.Graph, "out")
	if err != nil {
		t.Fatal(err)
	}
	for _, uses := range out.Node("acc").Consumers {
		for _, u := range uses {
			if u.Node.Name != acc.SwapOut {
				t.Errorf("acc:0 is still read by %s", u.Node.Name)
			}
		}
	}
	// The swap-in's trigger, an op of the chain that does not descend from acc, waits for
	// the swap-out.
	if g := p.Eval.Plan.Swaps[0].Groups[0]; !g.TriggerWaits {
		t.Errorf("the trigger %s of acc:0's swap-in does not wait for the swap-out", g.Trigger.Name)
	} else {
		found := false
		for _, w := range p.Waits {
			found = found || w.Node == g.Trigger.Name && w.SwapOut == acc.SwapOut
		}
		if !found {
			t.Errorf("waits %+v lack %s waiting for %s", p.Waits, g.Trigger.Name, acc.SwapOut)
		}
	}
	// The graph planners simulate is the one Apply writes.
	opts, err := rewrite.Options{ExcludeOps: []string{"Relu"}}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(gr, opts)
	want, err := graphdef.NewGraph(p.Model.Graph, "applied")
	if err != nil {
		t.Fatal(err)
	}
	got, err := rewrite.DeriveGraph(a, onGraph(p.Eval.Plan, gr))
	if err != nil {
		t.Fatal(err)
	}
	if d := testgraph.Same(got, want); d != "" {
		t.Error(d)
	}
	t.Logf("swaps %v, waits %d, peak %d of budget %d (unswapped %d), overhead %.1f%%", swappedNames(p), len(p.Waits), p.Eval.Devices[0].Peak, budget, base.Compute().PeakBytes, 100*p.Eval.Overhead)
}

// onGraph returns plan with its nodes replaced by those of g at the same indices (g must be
// a graph of the same GraphDef as the plan's).
func onGraph(plan *rewrite.Plan, g *graphdef.Graph) *rewrite.Plan {
	node := func(n *graphdef.Node) *graphdef.Node { return g.Nodes[n.Index] }
	tensor := func(t graphdef.Tensor) graphdef.Tensor { return graphdef.Tensor{Node: node(t.Node), Port: t.Port} }
	out := &rewrite.Plan{}
	for _, ps := range plan.Swaps {
		np := rewrite.PlannedSwap{Tensor: tensor(ps.Tensor), Bytes: ps.Bytes}
		for _, grp := range ps.Groups {
			ng := rewrite.SwapInGroup{Trigger: node(grp.Trigger), TriggerWaits: grp.TriggerWaits}
			for _, u := range grp.Uses {
				ng.Uses = append(ng.Uses, graphdef.Use{Node: node(u.Node), Input: u.Input})
			}
			np.Groups = append(np.Groups, ng)
		}
		out.Swaps = append(out.Swaps, np)
	}
	for _, w := range plan.Waits {
		out.Waits = append(out.Waits, rewrite.Wait{Node: node(w.Node), After: tensor(w.After)})
	}
	return out
}

// TestPeakRepair: on the residual-network fixture at 2700 KiB, by tfswap's accounting, no
// strategy nor the lowest-memory plan fits (held back by waits or not); re-triggering the
// copies that wait at the peak (repairPeak) finds a plan that does.
func TestPeakRepair(t *testing.T) {
	// Since the rewrite keeps Grappler's fan-out decisions (grappler_fanout.go), the fixture
	// no longer has a budget that only the repair meets: at 2715 KiB no plan fits with or
	// without it, at 2716 KiB one fits without it. The case needs another graph (open).
	t.Skip("no budget on the resnet fixture needs peak repair any more since the Grappler fan-out rules (open: find another case)")
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	budget := int64(2700 << 10)
	plan := func() (*Planned, error) {
		return RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: -1}, PlanOptions{Strategy: "auto", Budget: budget,
			Sim: cost.Options{Fetch: []string{"train"}}, FitAccounting: "tfswap"})
	}
	defer func() { peakRepair = true }()
	peakRepair = false
	var nf *NoFitError
	if _, err := plan(); !errors.As(err, &nf) {
		t.Fatalf("without peak repair: %v, want no plan to fit (the case no longer needs the repair)", err)
	}
	peakRepair = true
	p, err := plan()
	if err != nil {
		t.Fatalf("with peak repair: %v", err)
	}
	if d := p.Eval.Devices[0]; !p.Eval.Fits || d.Peak > budget {
		t.Fatalf("with peak repair the plan peaks at %d of %d", d.Peak, budget)
	}
	t.Logf("without repair the lowest peak was %d; with it %d (%s, %+.1f%%)", nf.Peak, p.Eval.Devices[0].Peak, p.Eval.Strategy, 100*p.Eval.Overhead)
}
