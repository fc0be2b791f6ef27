package plan

import (
	"fmt"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestPruneCountsOnlyRejectedDrops: on planChain(12) on the slow-link profile with room for
// every activation, a plan that swaps each of f1..f12 out and back in for its ReLU gradient
// stalls the chain on each copy, and every swap can go. improve drops all twelve: a drop the
// simulator keeps does not count against autoPruneTries (8), so pruning does not stop with
// four needless swaps left, as it did when every simulation counted.
func TestPruneCountsOnlyRejectedDrops(t *testing.T) {
	const n = 12
	act := int64(512 * 1024 * 4)
	if n <= autoPruneTries {
		t.Fatalf("the test needs more swaps than autoPruneTries (%d)", autoPruneTries)
	}
	pr, ev0 := chainSwapStart(t, n, act)
	plan := ev0.Plan
	ev, err := pr.improve(ev0)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Fits || len(ev.Plan.Swaps) != 0 {
		var left []string
		for _, ps := range ev.Plan.Swaps {
			left = append(left, ps.Tensor.Node.Name)
		}
		t.Fatalf("after improve: fits %v, %d swaps left %v (%+.1f%%, from %+.1f%%); want none", ev.Fits, len(left), left,
			100*ev.Overhead, 100*ev0.Overhead)
	}
	if len(plan.Swaps) != n {
		t.Errorf("the plan improved from was changed: %d swaps", len(plan.Swaps))
	}
}

// chainSwapPlan returns the model and graph of planChain(n) and a plan that swaps each of
// f1..fn (act bytes) out and back in for its ReLU gradient, triggered by the gradient before
// it (loss_grad for fn).
func chainSwapPlan(t *testing.T, n int, act int64) (*graphdef.Model, *graphdef.Graph, *rewrite.Plan) {
	t.Helper()
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
	return m, g, plan
}

// chainSwapStart returns a planning of chainSwapPlan(n)'s graph on the slow-link profile
// with room for every activation (4n of act bytes, tfswap's accounting) and its evaluation
// of the plan there, failing the test unless that plan fits with its n swaps.
func chainSwapStart(t *testing.T, n int, act int64) (*planRun, *Evaluation) {
	t.Helper()
	m, g, plan := chainSwapPlan(t, n, act)
	pr, err := newProblemRun(m, rewrite.Analyze(g, rewrite.Options{}), PlanOptions{Profile: slowLinkProfile(), Budget: 4 * int64(n) * act, FitAccounting: "tfswap"})
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
	return pr, ev0
}
