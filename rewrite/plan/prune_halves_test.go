package plan

import (
	"testing"
)

// TestPruneHalvesSpendsFewerSimulations: on TestPruneCountsOnlyRejectedDrops's chain, whose
// twelve swaps can all go, improve with PruneHalves drops half the candidates in one
// simulation while the fast model says the plan still fits, and so reaches the same plan (no
// swap) with fewer simulations than pruning one swap per simulation.
func TestPruneHalvesSpendsFewerSimulations(t *testing.T) {
	const n = 12
	act := int64(512 * 1024 * 4)
	improved := func(halves bool) (*Evaluation, int) {
		t.Helper()
		defer func(v bool) { PruneHalves = v }(PruneHalves)
		PruneHalves = halves
		pr, ev0 := chainSwapStart(t, n, act)
		before := pr.sims
		ev, err := pr.improve(ev0)
		if err != nil {
			t.Fatal(err)
		}
		return ev, pr.sims - before
	}
	one, simsOne := improved(false)
	half, simsHalf := improved(true)
	for _, c := range []struct {
		name string
		ev   *Evaluation
	}{{"one per simulation", one}, {"halves", half}} {
		if !c.ev.Fits || len(c.ev.Plan.Swaps) != 0 {
			t.Errorf("%s: fits %v, %d swaps left; want none", c.name, c.ev.Fits, len(c.ev.Plan.Swaps))
		}
	}
	if half.StepTime != one.StepTime {
		t.Errorf("halves: step %d ns, one per simulation %d ns; want the same plan's", half.StepTime, one.StepTime)
	}
	if simsHalf >= simsOne {
		t.Errorf("improve spent %d simulations with halves, %d one swap per simulation; want fewer", simsHalf, simsOne)
	}
	t.Logf("improve: %d simulations with halves, %d one swap per simulation", simsHalf, simsOne)
}
