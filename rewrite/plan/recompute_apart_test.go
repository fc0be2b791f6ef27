package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestRecomputeApartChains: on the Relu chain f1..f8, whose backward reads f8 first and f1
// last, recomputing every activation with chains that serve the other targets they make (the
// default) makes f1..f8 again in one chain when the backward pass starts, and those copies
// stay on the device until their reads: the backward pass holds every activation as the
// unswapped step does. With chains apart (rcPlanner.apart) each activation is made again just
// before its read, and the recomputed step peaks lower.
func TestRecomputeApartChains(t *testing.T) {
	const n = 8
	g, err := graphdef.NewGraph(planChain(n, ""), "chain")
	if err != nil {
		t.Fatal(err)
	}
	m := graphdef.NewModel(planChain(n, ""))
	m.Source = "chain"
	opts, err := rewrite.Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	pr, err := newProblemRun(m, rewrite.Analyze(g, opts), PlanOptions{Profile: slowLinkProfile(), Budget: 1 << 20, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	peak := func(apart bool) (int64, int, int) {
		rp := pr.newRCPlanner(false)
		rp.apart = apart
		sel := rp.plan(-1)
		served := 0
		for _, rc := range sel {
			served += len(rc.Also)
		}
		m2, _, err := rewrite.ApplyRecomputes(pr.Model, pr.Analysis, sel)
		if err != nil {
			t.Fatal(err)
		}
		res, err := pr.simulateModel(m2)
		if err != nil {
			t.Fatal(err)
		}
		return res.Compute().PeakBytes, len(sel), served
	}
	p0, c0, s0 := peak(false)
	p1, c1, s1 := peak(true)
	t.Logf("served: peak %d, %d chains serving %d more targets; apart: peak %d, %d chains serving %d", p0, c0, s0, p1, c1, s1)
	if s0 == 0 {
		t.Fatalf("no chain serves another target by default (%d chains): the test needs one", c0)
	}
	if s1 != 0 || c1 != c0+s0 {
		t.Errorf("apart: %d chains serving %d more targets; want %d chains serving none", c1, s1, c0+s0)
	}
	if p1 >= p0 {
		t.Errorf("apart: recomputed peak %d, not below %d with served chains", p1, p0)
	}
}

// TestAutoRecomputesApart: at 5 MiB no plan of the chain with served chains fits (the
// lowest reaches 6 MiB: a chain's copies wait together for their reads), so auto plans the
// recomputations again with chains apart (passRecomputeApart), and that plan fits, every
// chain serving only its own target. With the pass off the best plan is slower (vdnn-all's,
// which swaps and synchronises after each swap-out; before planKey named waits, that plan was
// given the outcome of a plan with the same swaps and no waits, and nothing fitted), so the
// test keeps exercising the pass.
func TestAutoRecomputesApart(t *testing.T) {
	const budget = 5 << 20
	res, err := planWith(t, planChain(8, ""), slowLinkProfile(), "auto", "", budget)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Eval.Fits || res.Eval.Devices[0].Peak > budget || len(res.Recomputes) == 0 {
		t.Fatalf("auto at %d bytes: fits %v, peak %d, %d recomputations", budget, res.Eval.Fits, res.Eval.Devices[0].Peak, len(res.Recomputes))
	}
	for _, rc := range res.Recomputes {
		if len(rc.Also) > 0 {
			t.Errorf("the chain of %s serves %d other targets; want chains apart", rc.Tensor, len(rc.Also))
		}
	}
	RecomputeApart = false
	defer func() { RecomputeApart = true }()
	if off, err := planWith(t, planChain(8, ""), slowLinkProfile(), "auto", "", budget); err == nil && off.Eval.StepTime <= res.Eval.StepTime {
		t.Errorf("without chains apart a plan fits %d bytes as fast (%s, step %d ns, peak %d; with them %d ns): the test does not exercise them",
			budget, off.Eval.Strategy, off.Eval.StepTime, off.Eval.Devices[0].Peak, res.Eval.StepTime)
	}
}

// TestAutoRecomputesApartWhenCostly: at 8 MiB the chain's best plan without chains apart
// fits but costs more than +50% (window+recompute, +107.1%, simulated for the slow-link
// profile), and it is not bound by the host link, so before passRecomputeApart ran also for
// costly plans it was kept. With chains apart recomputation alone fits at +42.9%. It fails
// when the pass runs only where nothing fits or the plan is link-bound.
func TestAutoRecomputesApartWhenCostly(t *testing.T) {
	const budget = 8 << 20
	RecomputeApart = false
	off, err := planWith(t, planChain(8, ""), slowLinkProfile(), "auto", "", budget)
	RecomputeApart = true
	if err != nil {
		t.Fatal(err)
	}
	if !off.Eval.Fits || off.Eval.Overhead <= tupleOrderOverhead {
		t.Fatalf("without chains apart: fits %v at %+.1f%% (%s); the test needs a plan that fits and costs more than %+.0f%%",
			off.Eval.Fits, 100*off.Eval.Overhead, off.Eval.Strategy, 100*tupleOrderOverhead)
	}
	res, err := planWith(t, planChain(8, ""), slowLinkProfile(), "auto", "", budget)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Eval.Fits || res.Eval.Overhead > tupleOrderOverhead || len(res.Recomputes) == 0 {
		t.Fatalf("auto at %d bytes: %s, fits %v, %+.1f%%, %d recomputations; want chains apart within %+.0f%% (without them %s, %+.1f%%)",
			budget, res.Eval.Strategy, res.Eval.Fits, 100*res.Eval.Overhead, len(res.Recomputes), 100*tupleOrderOverhead, off.Eval.Strategy, 100*off.Eval.Overhead)
	}
	for _, rc := range res.Recomputes {
		if len(rc.Also) > 0 {
			t.Errorf("the chain of %s serves %d other targets; want chains apart", rc.Tensor, len(rc.Also))
		}
	}
}
