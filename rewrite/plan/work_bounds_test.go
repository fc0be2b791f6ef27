package plan

import (
	"fmt"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestPruneKeptCap: autoPruneKept bounds the drops improve's pruning keeps for free. On
// planChain(n) on the slow-link profile with room for every activation (as in
// TestPruneCountsOnlyRejectedDrops), a plan swapping each of f1..fn, n = autoPruneKept +
// autoPruneTries + 4, has every swap droppable, one per simulation with PruneHalves off. The
// first autoPruneKept drops cost no try, the next autoPruneTries use up the tries, and four
// swaps are left: improve's work is bounded by the two constants, not by the plan's size.
// Checked by raising autoPruneKept to 1000: improve then drops all n and the test fails.
func TestPruneKeptCap(t *testing.T) {
	const n = autoPruneKept + autoPruneTries + 4
	act := int64(512 * 1024 * 4)
	m := graphdef.NewModel(planChain(n, ""))
	m.Source = "chain"
	g, err := graphdef.NewGraph(m.Graph, "chain")
	if err != nil {
		t.Fatal(err)
	}
	plan := &rewrite.Plan{}
	for i := 1; i <= n; i++ {
		trigger := "loss_grad"
		if i < n {
			trigger = fmt.Sprintf("g%d", i+1)
		}
		plan.Swaps = append(plan.Swaps, rewrite.PlannedSwap{Tensor: graphdef.Tensor{Node: g.Node(fmt.Sprintf("f%d", i)), Port: 0}, Bytes: act,
			Groups: []rewrite.SwapInGroup{{Uses: []graphdef.Use{{Node: g.Node(fmt.Sprintf("g%d", i)), Input: 1}}, Trigger: g.Node(trigger)}}})
	}
	defer func(v bool) { PruneHalves = v }(PruneHalves)
	PruneHalves = false
	pr, err := newProblemRun(m, rewrite.Analyze(g, rewrite.Options{}), PlanOptions{Profile: slowLinkProfile(), Budget: 4 * n * act, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	ev0, err := pr.Evaluate(plan)
	if err != nil {
		t.Fatal(err)
	}
	if !ev0.Fits || len(ev0.Plan.Swaps) != n {
		t.Fatalf("the plan of %d swaps fits %v; the test needs one of %d that fits", len(ev0.Plan.Swaps), ev0.Fits, n)
	}
	ev, err := pr.improve(ev0)
	if err != nil {
		t.Fatal(err)
	}
	if want := n - autoPruneKept - autoPruneTries; !ev.Fits || len(ev.Plan.Swaps) != want {
		t.Fatalf("after improve: fits %v, %d swaps left (%+.1f%%, from %+.1f%%); want %d, pruning bounded by autoPruneKept (%d) and autoPruneTries (%d)",
			ev.Fits, len(ev.Plan.Swaps), 100*ev.Overhead, 100*ev0.Overhead, want, autoPruneKept, autoPruneTries)
	}
}
