package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestEvaluateTellsWaitsApart: two plans with the same swaps, one holding an op back until a
// swap-out reaches the host, are different graphs and must not share a cached evaluation.
// Before planKey named the waits, the second Evaluate returned the first plan's outcome, so
// auto's throttle pass, which adds waits to the lowest-memory plan it has just evaluated,
// never saw its own plan (ResNet-50 at 8x B0 on v100-16gb, every candidate recomputed: the
// throttled plan peaks at 14.58 GiB by tfswap's accounting, the cached one at 15.68).
func TestEvaluateTellsWaitsApart(t *testing.T) {
	m := graphdef.NewModel(planChain(4, ""))
	g, _ := graphdef.NewGraph(m.Graph, "chain")
	prof := slowProfile()
	prof.D2H = 100 << 20 // a 2 MiB swap-out takes 20 ms, twenty ops' time
	swaps := func() []rewrite.PlannedSwap {
		f1 := graphdef.Tensor{Node: g.Node("f1"), Port: 0}
		return []rewrite.PlannedSwap{{Tensor: f1, Bytes: 2 << 20, Groups: []rewrite.SwapInGroup{{Uses: []graphdef.Use{{Node: g.Node("g1"), Input: 1}}, Trigger: g.Node("g3")}}}}
	}
	bare := &rewrite.Plan{Swaps: swaps()}
	held := &rewrite.Plan{Swaps: swaps(), Waits: []rewrite.Wait{{Node: g.Node("f3"), After: graphdef.Tensor{Node: g.Node("f1"), Port: 0}}}}
	if planKey(bare) == planKey(held) {
		t.Errorf("planKey %q for both plans", planKey(bare))
	}
	evaluate := func(pr *planRun, p *rewrite.Plan) *Evaluation {
		t.Helper()
		ev, err := pr.Evaluate(p)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	newPr := func() *planRun {
		t.Helper()
		pr, err := newProblemRun(m, rewrite.Analyze(g, rewrite.Options{}), PlanOptions{Profile: prof, Budget: 1 << 30, FitAccounting: "tfswap"})
		if err != nil {
			t.Fatal(err)
		}
		return pr
	}
	// The held plan's outcome on a problem that never saw the bare plan.
	want := evaluate(newPr(), held)
	pr := newPr()
	first := evaluate(pr, bare)
	if first.StepTime == want.StepTime {
		t.Fatalf("the wait does not change the step (%d ns): the test checks nothing", want.StepTime)
	}
	if got := evaluate(pr, held); got.StepTime != want.StepTime {
		t.Errorf("the held plan evaluated after the bare one: step %d ns, want %d (the bare plan's is %d)", got.StepTime, want.StepTime, first.StepTime)
	}
}
