package plan

import (
	"strconv"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/tfswap/tfswap/testmodels/synth"
)

// synthV100 returns bench/scale.py's synthetic residual training graph of n nodes (source
// "synthN"), the v100-16gb profile and the simulation options that fetch its training step.
func synthV100(t *testing.T, n int) (*graphdef.Model, *cost.Profile, cost.Options) {
	t.Helper()
	m := graphdef.NewModel(synth.Generate(synth.Config{Nodes: n}))
	m.Source = "synth" + strconv.Itoa(n)
	v100, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	return m, v100, cost.Options{Fetch: []string{"train"}}
}

// TestBeatenSkipSamePlan: on a graph past auto's effort bound, runRequired runs window
// before vdnn-all and vdnn-conv and leaves Grappler's accountings out for a vDNN plan slower
// than window's fitting plan (evaluateBeaten). On a synthetic residual graph planned with
// the bound below its candidates, at budgets where that happens, the rewrite keeps the same
// plan by the same strategy with the same figures as with the skip turned off, in fewer
// simulations (so the skip fired).
func TestBeatenSkipSamePlan(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a synthetic graph at several budgets, twice each")
	}
	skipKeepsPlan(t, 400, []int64{80, 60, 50, 40}, &skipBeatenGrappler)
}

// skipKeepsPlan plans the synthetic residual graph of n nodes (synthV100) with auto's
// effort bound below its candidates at each of pcts percent of its unswapped peak, with
// *skip off and on, and fails unless each planning keeps the same plan by the same strategy
// with the same figures, judged in full, in no more simulations with the skip, and fewer at
// one budget at least (else the skip fired nowhere and the test checks nothing).
func skipKeepsPlan(t *testing.T, n int, pcts []int64, skip *bool) {
	t.Helper()
	m, v100, sim := synthV100(t, n)
	base, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: v100, Budget: 1 << 50, Sim: sim})
	if err != nil {
		t.Fatal(err)
	}
	defer func(v bool) { *skip = v }(*skip)
	fired := 0
	for _, pct := range pcts {
		budget := base.Base.Devices[0].Peak * pct / 100
		plan := func(on bool) *Planned {
			t.Helper()
			*skip = on
			p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: v100, Budget: budget, Sim: sim, SearchCandidates: 1})
			if err != nil {
				t.Fatalf("budget %d%%, skip %v: %v", pct, on, err)
			}
			return p
		}
		off, on := plan(false), plan(true)
		if planKey(on.Eval.Plan) != planKey(off.Eval.Plan) || on.Eval.Strategy != off.Eval.Strategy || on.Eval.Fits != off.Eval.Fits ||
			on.Eval.StepTime != off.Eval.StepTime || on.Eval.Excess != off.Eval.Excess || on.Eval.Transferred != off.Eval.Transferred {
			t.Errorf("budget %d%%: with the skip the plan is by %s (fits %v, step %d), without it by %s (fits %v, step %d)",
				pct, on.Eval.Strategy, on.Eval.Fits, on.Eval.StepTime, off.Eval.Strategy, off.Eval.Fits, off.Eval.StepTime)
		}
		if on.Eval.unjudged {
			t.Errorf("budget %d%%: the plan kept was not judged in full", pct)
		}
		switch {
		case on.Simulations < off.Simulations:
			fired++
		case on.Simulations > off.Simulations:
			t.Errorf("budget %d%%: %d simulations with the skip, %d without", pct, on.Simulations, off.Simulations)
		}
		t.Logf("budget %d%%: %s, fits %v, %d simulations with the skip, %d without", pct, on.Eval.Strategy, on.Eval.Fits, on.Simulations, off.Simulations)
	}
	if fired == 0 {
		t.Fatalf("the skip fired at none of the budgets: the test checks nothing")
	}
}

// TestEvaluateBeatenJudges: evaluateBeaten leaves a plan unjudged only when bar fits and is
// faster; against a bar as slow as the plan, or one that does not fit, or none, it judges the
// plan in full, as Evaluate does, and caches it.
func TestEvaluateBeatenJudges(t *testing.T) {
	m, v100, sim := synthV100(t, 200)
	g, err := graphdef.NewGraph(m.Graph, "synth200")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := rewrite.Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	pr, err := newProblemRun(m, a, PlanOptions{Profile: v100, Budget: 1 << 50, Sim: sim})
	if err != nil {
		t.Fatal(err)
	}
	if !pr.fit.tfswap || !pr.fit.grappler() {
		t.Fatalf("the default accounting is not tfswap's and Grappler's: nothing to skip")
	}
	p, _ := pr.buildPlan(pr.vdnnChoices(false), layerRule(convAny))
	p = pr.vdnnSync(p)
	if len(p.Swaps) == 0 {
		t.Fatal("vdnn-all swaps nothing on synth200")
	}
	fresh := func() *planRun { r := pr.Problem.newRun("vdnn-all"); return r }
	ref, err := fresh().Evaluate(p)
	if err != nil {
		t.Fatal(err)
	}
	if !ref.Fits || ref.unjudged || ref.Devices[0].GrapplerPeak == 0 {
		t.Fatalf("vdnn-all's plan at an unbounded budget: fits %v, unjudged %v, Grappler's peak %d", ref.Fits, ref.unjudged, ref.Devices[0].GrapplerPeak)
	}
	for _, c := range []struct {
		name    string
		bar     *Evaluation
		skipped bool
	}{
		{"no bar", nil, false},
		{"as slow", &Evaluation{Fits: true, StepTime: ref.StepTime}, false},
		{"slower", &Evaluation{Fits: true, StepTime: ref.StepTime + 1}, false},
		{"faster, not fitting", &Evaluation{Fits: false, StepTime: ref.StepTime - 1}, false},
		{"faster, unjudged", &Evaluation{Fits: true, StepTime: ref.StepTime - 1, unjudged: true}, false},
		{"faster", &Evaluation{Fits: true, StepTime: ref.StepTime - 1}, true},
	} {
		r := fresh()
		ev, err := r.evaluateBeaten(p, c.bar)
		if err != nil {
			t.Fatal(err)
		}
		_, cached := r.cache[planKey(p)]
		if ev.unjudged != c.skipped || cached == c.skipped {
			t.Errorf("%s: unjudged %v, cached %v; want unjudged %v", c.name, ev.unjudged, cached, c.skipped)
		}
		if ev.StepTime != ref.StepTime || ev.Transferred != ref.Transferred || ev.Devices[0].Peak != ref.Devices[0].Peak {
			t.Errorf("%s: step %d, moved %d, peak %d; Evaluate: %d, %d, %d", c.name, ev.StepTime, ev.Transferred, ev.Devices[0].Peak, ref.StepTime, ref.Transferred, ref.Devices[0].Peak)
		}
		if !c.skipped && (ev.Devices[0].GrapplerPeak != ref.Devices[0].GrapplerPeak || ev.Fits != ref.Fits) {
			t.Errorf("%s: judged to Grappler's peak %d (fits %v), Evaluate's %d (fits %v)", c.name, ev.Devices[0].GrapplerPeak, ev.Fits, ref.Devices[0].GrapplerPeak, ref.Fits)
		}
		if c.skipped && ev.Devices[0].GrapplerPeak != 0 {
			t.Errorf("%s: left unjudged, but Grappler's peak is %d", c.name, ev.Devices[0].GrapplerPeak)
		}
	}
}
