package plan

import (
	"bytes"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/rewrite"
)

// TestAutoKeepsSwapOnlyPlan: auto is never worse than its own planning without
// recomputation. Both graphs are testmodels/large.py's, at the benchmark's ladder batches
// and budgets; the figures were simulated by every accounting when the test was written.
//
//   - testdata/unet_b1002.pb.gz, U-Net batch 1002 on h100: the swap-only plan did not fit,
//     auto's recompute pass found a plan that did not fit either, and auto's later passes,
//     gated by that plan, ended at +568.6%; `--recompute off` wrote its swap-only plan with
//     the tuple Identities bypassed and spaced, +506.7%. The pass runs because auto's plan
//     costs more than +50%.
//   - testdata/vgg16_b240.pb.gz, VGG-16 batch 240 on gtx1080ti (the benchmark at 2e06d64):
//     auto's tuple-bypass pass found a recomputing plan at +14.4%, so its written-bypass pass
//     did not run; without recomputation nothing fitted there, and the written bypass gave
//     +11.4%. auto's plan fits under +50% but its step is above the swap-only link bound,
//     so the pass runs (swapOnlyBelow).
//
// The test fails when auto is slower than `--recompute off`, when auto's output differs from
// it where auto took the swap-only plan, and when turning the case's rule off no longer makes
// auto slower (the case would no longer test it).
func TestAutoKeepsSwapOnlyPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("plans U-Net at batch 1002 and VGG-16 at batch 240 three times each (about 15 s of CPU time)")
	}
	for _, tc := range []struct {
		graph, device string
		budget        int64
		rule          *bool
	}{
		{"unet_b1002.pb", "h100", 84011909120, &SwapOnlyCandidate},
		{"vgg16_b240.pb", "gtx1080ti", 11286872064, &SwapOnlyBelowBound},
	} {
		t.Run(tc.graph, func(t *testing.T) {
			m := loadGzipped(t, tc.graph)
			prof, err := cost.LookupProfile(tc.device)
			if err != nil {
				t.Fatal(err)
			}
			plan := func(recompute string, on bool) *Planned {
				t.Helper()
				defer func(old bool) { *tc.rule = old }(*tc.rule)
				*tc.rule = on
				p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: prof, Budget: tc.budget, Recompute: recompute, Sim: cost.Options{Fetch: []string{"train"}}})
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
				if d.Peak > tc.budget || d.GrapplerPeak > tc.budget || d.GrapplerPeakUS > tc.budget {
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
				t.Errorf("without the rule auto's plan (%s %+.2f%%) is no slower than --recompute off's: the test no longer exercises it", off.Eval.Strategy, 100*off.Eval.Overhead)
			}
		})
	}
}
