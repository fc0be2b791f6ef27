package plan

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/rewrite"
)

// TestAutoKeepsSwapOnlyPlan: auto is never worse than its own planning without
// recomputation. testdata/unet_b1002.pb.gz is the U-Net of testmodels/large.py at batch 1002
// (the benchmark's ladder graph on h100, 80 GiB; its budget there is 84,011,909,120 B).
// There, when this test was written (simulated for h100 by every accounting), the swap-only
// plan did not fit, auto's recompute pass found a plan that did not fit either, and auto's
// later passes, gated by that plan, ended at +568.6%; `--recompute off` wrote its swap-only
// plan with the tuple Identities bypassed and spaced, +506.7%. With the swap-only pass auto
// keeps that plan, byte for byte. The test fails when auto is slower than `--recompute off`,
// when auto's output differs from it where auto took the swap-only plan, and when turning
// the pass off no longer makes auto slower (the case would no longer test it).
func TestAutoKeepsSwapOnlyPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("plans U-Net at batch 1002 three times (about 12 s of CPU time)")
	}
	m := loadGzipped(t, "unet_b1002.pb")
	prof, err := cost.LookupProfile("h100")
	if err != nil {
		t.Fatal(err)
	}
	const budget = 84011909120
	plan := func(recompute string, on bool) *Planned {
		t.Helper()
		defer func(old bool) { SwapOnlyCandidate = old }(SwapOnlyCandidate)
		SwapOnlyCandidate = on
		p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: prof, Budget: budget, Recompute: recompute, Sim: cost.Options{Fetch: []string{"train"}}})
		if err != nil {
			t.Fatalf("--recompute %q: %v", recompute, err)
		}
		if !p.Eval.Fits {
			t.Fatalf("--recompute %q: the plan does not fit", recompute)
		}
		return p
	}
	swapOnly := plan("off", true)
	auto := plan("", true)
	t.Logf("auto: %s %+.2f%%; --recompute off: %s %+.2f%%", auto.Eval.Strategy, 100*auto.Eval.Overhead, swapOnly.Eval.Strategy, 100*swapOnly.Eval.Overhead)
	if auto.Eval.StepTime > swapOnly.Eval.StepTime {
		t.Errorf("auto (%s) takes %d ns a step, its swap-only planning (%s) %d ns", auto.Eval.Strategy, auto.Eval.StepTime, swapOnly.Eval.Strategy, swapOnly.Eval.StepTime)
	}
	for _, d := range auto.Eval.Devices {
		if d.Peak > budget || d.GrapplerPeak > budget || d.GrapplerPeakUS > budget {
			t.Errorf("auto's plan does not fit every accounting: %+v", d)
		}
	}
	if auto.Eval.StepTime == swapOnly.Eval.StepTime {
		a, err := auto.Result.Model.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		s, err := swapOnly.Result.Model.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, s) {
			t.Errorf("auto took the swap-only plan (%s) but wrote another graph than --recompute off", auto.Eval.Strategy)
		}
	}
	if off := plan("", false); off.Eval.StepTime <= swapOnly.Eval.StepTime {
		t.Errorf("without the swap-only pass auto's plan (%s %+.2f%%) is no slower than --recompute off's: the test no longer exercises it", off.Eval.Strategy, 100*off.Eval.Overhead)
	}
}

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
