package plan

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestAutoMonotoneTighterWritten: a plan the written bypass finds for a smaller budget is a
// candidate for every larger one (issue 14 item 3). The ResNet fixture on v100-16gb, by
// every accounting: at 3 MiB the plan without the written bypass costs more than +50% (or
// none fits), so the written bypass runs there (+29.0%, simulated when this test was
// written); at 3200 KiB the tuple-bypass pass's plan fits at +44.6%, so the written bypass
// did not run and auto gave a slower plan for the larger budget. With the written bypass at
// the tighter budgets (passTighterWritten) the plan at 3200 KiB is +29.0%, from 95% of that
// budget. The test fails when the plan for the larger budget is slower than the one for the
// smaller, or does not fit it by every accounting (re-simulated on the graph written), and
// when turning the tighter budgets' written bypass off no longer makes it slower (the case
// would no longer test it).
func TestAutoMonotoneTighterWritten(t *testing.T) {
	const loose = 3200 << 10
	pl := fixtureMonotone(t, 3<<20, loose, &TighterWritten, "+wbypass")
	if got := strings.Join(pl.Accountings, ","); got != "tfswap,grappler-ns,grappler-us" {
		t.Errorf("accountings %s, want all three", got)
	}
	// The fit is re-checked on the graph written, by Grappler's accountings too.
	g, err := graphdef.NewGraph(pl.Model.Graph, "rewritten")
	if err != nil {
		t.Fatal(err)
	}
	r, err := cost.Simulate(g, pl.Profile, cost.Options{Fetch: []string{"train"}, Conventions: cost.GrapplerConventions()})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range pl.Eval.Devices {
		gd := r.Device(d.Name)
		if gd == nil || d.Peak > loose || gd.PeakBytes > loose || gd.MicrosecondPeakBytes > loose {
			t.Errorf("at %d the plan does not fit every accounting: %+v, written graph %+v", loose, d, gd)
		}
	}
}

// planMonotonePair plans m on prof by auto at the budgets tight and loose with *flag (a
// package var that turns a pass off) on, each plan required to fit, and fails t when the
// plan at tight is not from a strategy with suffix (the case no longer needs the pass) or
// the plan at loose is slower than the one at tight. It returns the planning, by budget and
// flag, and the two plans.
func planMonotonePair(t *testing.T, m *graphdef.Model, ro rewrite.Options, prof *cost.Profile, tight, loose int64, flag *bool, suffix string) (func(int64, bool) *Planned, *Planned, *Planned) {
	t.Helper()
	plan := func(budget int64, on bool) *Planned {
		t.Helper()
		defer func(old bool) { *flag = old }(*flag)
		*flag = on
		p, err := RewriteWithPlanner(m, ro, PlanOptions{Profile: prof, Budget: budget, Sim: cost.Options{Fetch: []string{"train"}}})
		if err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		if !p.Eval.Fits {
			t.Fatalf("budget %d: the plan does not fit", budget)
		}
		return p
	}
	pt := plan(tight, true)
	pl := plan(loose, true)
	t.Logf("at %d: %s %+.2f%%; at %d: %s %+.2f%%", tight, pt.Eval.Strategy, 100*pt.Eval.Overhead, loose, pl.Eval.Strategy, 100*pl.Eval.Overhead)
	if !strings.Contains(pt.Eval.Strategy, suffix) {
		t.Errorf("at %d the plan is %s: want one with %s (the case no longer needs it)", tight, pt.Eval.Strategy, suffix)
	}
	if pl.Eval.StepTime > pt.Eval.StepTime {
		t.Errorf("not monotone in the budget: %s at %d takes %d ns a step, %s at the smaller %d takes %d ns", pl.Eval.Strategy, loose, pl.Eval.StepTime, pt.Eval.Strategy, tight, pt.Eval.StepTime)
	}
	return plan, pt, pl
}
