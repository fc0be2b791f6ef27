package plan

import (
	"testing"
)

// TestLinkBoundSkipKeepsPlans: skipping the plannings (tighter budgets, recomputed retries)
// whose plans cannot beat the best plan so far by their link bounds (LinkBoundSkip) leaves
// auto's plan as it was: on the fixtures and a synthetic residual graph (the training step,
// fetch "train") at 80%, 60% and 50% of the unswapped peak on v100-16gb, the plans with and
// without the skip have the same swaps, waits, recomputations, strategy and step, or both
// fail to fit. The test fails unless the skip saved simulations somewhere (it would then test
// nothing).
func TestLinkBoundSkipKeepsPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("plans five graphs at three budgets twice")
	}
	defer func(saved bool) { LinkBoundSkip = saved }(LinkBoundSkip)
	saved := false
	for _, c := range plannedAtShares(t, 80, 60, 50) {
		LinkBoundSkip = true
		on, errOn := c.plan(t, nil)
		LinkBoundSkip = false
		off, errOff := c.plan(t, nil)
		if (errOn != nil) != (errOff != nil) {
			t.Fatalf("%s at %d%%: with the link bound %v, without it %v", c.name, c.pct, errOn, errOff)
		}
		if errOn != nil {
			continue
		}
		if kOn, kOff := planKey(on.Eval.Plan), planKey(off.Eval.Plan); kOn != kOff || on.Eval.Strategy != off.Eval.Strategy || on.Eval.StepTime != off.Eval.StepTime ||
			len(on.Recomputes) != len(off.Recomputes) {
			t.Errorf("%s at %d%%: plan with the link bound (%s, step %d, %d recomputations) differs from the plan without it (%s, step %d, %d)",
				c.name, c.pct, on.Eval.Strategy, on.Eval.StepTime, len(on.Recomputes), off.Eval.Strategy, off.Eval.StepTime, len(off.Recomputes))
		}
		if on.Simulations > off.Simulations {
			t.Errorf("%s at %d%%: %d simulations with the link bound, %d without", c.name, c.pct, on.Simulations, off.Simulations)
		}
		saved = saved || on.Simulations < off.Simulations
	}
	if !saved {
		t.Fatal("the link bound skipped no tighter budget: nothing checked")
	}
}
