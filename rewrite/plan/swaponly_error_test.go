package plan

import (
	"errors"
	"slices"
	"testing"
)

// TestSwapOnlyErrorKeepsItsCounts: where the swap-only pass's planning fails on an internal
// error (outside tests, StrictPasses off), the plan is auto's as without the pass, and the
// report still counts the simulations that planning spent and the candidates it dropped
// before the error (as for every other pass). planChain(4) on the slow-link profile within
// two activations is a case where the pass runs (auto's plan, recomputing, fits at more than
// +50%); the error is injected after its tighter-wbypass pass, once it has planned
// everything. The test fails when the error's path drops the count or the warnings.
func TestSwapOnlyErrorKeepsItsCounts(t *testing.T) {
	act := int64(512 * 1024 * 4)
	defer func(s, c bool, f func() []planPass) { StrictPasses, SwapOnlyCandidate, passesToReplan = s, c, f }(StrictPasses, SwapOnlyCandidate, passesToReplan)
	StrictPasses = false
	plan := func(on bool) *Planned {
		t.Helper()
		SwapOnlyCandidate = on
		p, err := planWith(t, planChain(4, ""), slowLinkProfile(), "auto", "", 2*act)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	without := plan(false)
	ran := false
	passesToReplan = func() []planPass {
		ps := slices.Clone(planPasses)
		for i := range ps {
			if fn := ps[i].fn; ps[i].name == "tighter-wbypass" {
				ps[i].fn = func(st *planState) error {
					if err := fn(st); err != nil || st.input == nil {
						return err
					}
					// Only the swap-only pass re-plans the input itself (st.input set).
					ran = true
					st.dropped = append(st.dropped, "a candidate of the swap-only planning was dropped: injected")
					return errors.New("injected")
				}
			}
		}
		return ps
	}
	failed := plan(true)
	if !ran {
		t.Fatal("the swap-only pass did not run; the case no longer tests it")
	}
	if failed.Eval.StepTime != without.Eval.StepTime || failed.Eval.Strategy != without.Eval.Strategy {
		t.Errorf("with the swap-only planning failed: %s %d ns; without the pass: %s %d ns; want the same plan",
			failed.Eval.Strategy, failed.Eval.StepTime, without.Eval.Strategy, without.Eval.StepTime)
	}
	if failed.Simulations <= without.Simulations {
		t.Errorf("%d simulations reported with the swap-only planning failed, %d without the pass: the planning's own are not counted",
			failed.Simulations, without.Simulations)
	}
	want := []string{"a candidate of the swap-only planning was dropped: injected", "auto's swap-only planning was dropped: injected"}
	if !slices.Equal(failed.Dropped, want) {
		t.Errorf("dropped %q, want %q", failed.Dropped, want)
	}
	t.Logf("simulations: %d with the swap-only planning failed, %d without the pass", failed.Simulations, without.Simulations)
}
