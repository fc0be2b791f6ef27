package plan

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/rewrite"
)

// TestDeferSwapOnlyKeepsPlan plans issue 14's planning-time target, ResNet-50 at batch 740
// (batch 2 planned 370 times larger) on v100-16gb for 16078864384 bytes, with and without
// DeferSwapOnly. There the tighter pass plans the graph with the tuple Identities bypassed at
// 95% of the budget (tighterBypass), whose swap-only plans cannot beat the best plan so far by
// their link bound, and whose recomputed plan wins. The plans must be the same, and the
// planning with the swap-only planning deferred must spend fewer simulations (it fails when
// deferSwapOnly never defers).
func TestDeferSwapOnlyKeepsPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("plans ResNet-50 at batch 740 twice (about 6 s of CPU time)")
	}
	m := loadResNet50B2(t)
	prof, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	plan := func(on bool) *Planned {
		t.Helper()
		defer func(v bool) { DeferSwapOnly = v }(DeferSwapOnly)
		DeferSwapOnly = on
		p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: prof, Budget: 16078864384, Sim: cost.Options{Fetch: []string{"train"}, BatchScale: 370}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	off, on := plan(false), plan(true)
	if a, b := describePlan(off), describePlan(on); a != b {
		t.Errorf("the plan with the swap-only planning deferred differs:\nwithout:\n%s\nwith:\n%s", a, b)
	}
	if !on.Eval.Fits || !strings.Contains(on.Eval.Strategy, "+bypass") {
		t.Errorf("the plan is %s (fits %v): want one of the bypassed graph (the case no longer exercises the tighter bypass)", on.Eval.Strategy, on.Eval.Fits)
	}
	if on.Simulations >= off.Simulations {
		t.Errorf("%d simulations with the swap-only planning deferred, %d without: want fewer", on.Simulations, off.Simulations)
	}
	t.Logf("%s %+.1f%%: %d simulations deferred, %d not", on.Eval.Strategy, 100*on.Eval.Overhead, on.Simulations, off.Simulations)
}
