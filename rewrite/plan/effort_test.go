package plan

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestSearchEffortRule: auto's effort rule (PlanOptions.SearchCandidates) bounds the search
// only on a graph with more swap candidates than the bound. On a synthetic residual graph
// planned at half its unswapped peak, a bound below its candidate count leaves auto with the
// plans of scaleStrategies alone (the plan kept is one of theirs, nothing recomputed), fewer
// simulations than the full search, and a report that names the count and the bound; the
// default bound and no bound (-1) leave the search and its plan as they were, with no note.
func TestSearchEffortRule(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a synthetic graph three times")
	}
	m, v100, sim := synthV100(t, 400)
	base, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: v100, Budget: 1 << 50, Sim: sim})
	if err != nil {
		t.Fatal(err)
	}
	budget := base.Base.Devices[0].Peak / 2
	g, err := graphdef.NewGraph(m.Graph, "synth400")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := rewrite.Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cands, _ := rewrite.Analyze(g, opts).Candidates()
	if len(cands) < 2 || len(cands) > DefaultSearchCandidates {
		t.Fatalf("synth400 has %d swap candidates: want 2 to %d for this test", len(cands), DefaultSearchCandidates)
	}
	plan := func(limit int) *Planned {
		t.Helper()
		p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: v100, Budget: budget, Sim: sim, SearchCandidates: limit})
		if err != nil {
			t.Fatalf("--search-candidates %d: %v", limit, err)
		}
		return p
	}
	full, unbounded, bounded := plan(0), plan(-1), plan(len(cands)-1)
	for _, p := range []*Planned{full, unbounded} {
		if p.Effort != "" {
			t.Errorf("the full search reports an effort bound: %s", p.Effort)
		}
	}
	if planKey(full.Eval.Plan) != planKey(unbounded.Eval.Plan) || full.Eval.Strategy != unbounded.Eval.Strategy || full.Simulations != unbounded.Simulations {
		t.Errorf("the default bound changed the plan of a graph below it: %s, %d simulations, against %s, %d",
			full.Eval.Strategy, full.Simulations, unbounded.Eval.Strategy, unbounded.Simulations)
	}
	if !bounded.Eval.Fits {
		t.Fatalf("the bounded search's plan does not fit")
	}
	scale := map[string]bool{}
	for _, s := range scaleStrategies {
		scale[s.Name] = true
	}
	if !scale[bounded.Eval.Strategy] || len(bounded.Recomputes) != 0 {
		t.Errorf("the bounded search kept a plan of %s with %d recomputations: want one of %v, none recomputed", bounded.Eval.Strategy, len(bounded.Recomputes), scale)
	}
	if bounded.Simulations >= full.Simulations {
		t.Errorf("the bounded search ran %d simulations, the full one %d", bounded.Simulations, full.Simulations)
	}
	for _, want := range []string{"effort bounded", "more than", "--search-candidates"} {
		if !strings.Contains(bounded.Effort, want) {
			t.Errorf("the bounded search's note lacks %q: %q", want, bounded.Effort)
		}
	}
	if !strings.Contains(bounded.Effort, " "+strconv.Itoa(len(cands))+" swap candidates") {
		t.Errorf("the note does not give the candidate count %d: %q", len(cands), bounded.Effort)
	}
}

// TestBoundedAutoSparesSetupCache: auto past its effort bound simulates a few whole plans,
// so it keeps no estimate tables in its set-up cache (cost.SetupCache.Spare): on a synthetic
// residual graph at half its unswapped peak, the bounded search takes no estimate from the
// cache (with tables it takes some), while the full search does. That the results are the
// same with tables and without is TestSetupCacheMatchesFresh's and TestSetupCacheSpare's.
func TestBoundedAutoSparesSetupCache(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a synthetic graph twice")
	}
	m, v100, sim := synthV100(t, 400)
	base, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: v100, Budget: 1 << 50, Sim: sim})
	if err != nil {
		t.Fatal(err)
	}
	budget := base.Base.Devices[0].Peak / 2
	run := func(limit int) (*planRun, *Evaluation) {
		t.Helper()
		g, err := graphdef.NewGraph(m.Graph, "synth400")
		if err != nil {
			t.Fatal(err)
		}
		pr, err := newProblemRun(m, rewrite.Analyze(g, rewrite.Options{}), PlanOptions{Profile: v100, Budget: budget, Sim: sim, SearchCandidates: limit})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := autoStrategy.plan(pr)
		if err != nil {
			t.Fatalf("--search-candidates %d: %v", limit, err)
		}
		return pr, ev
	}
	bounded, ev := run(1)
	if h := bounded.simOpts.Setup.Hits(); h != 0 {
		t.Errorf("the bounded search took %d estimates from its set-up cache after %d simulations, want none (no tables)", h, bounded.sims)
	}
	if !ev.Fits {
		t.Fatalf("the bounded search's plan does not fit")
	}
	full, _ := run(-1)
	if full.simOpts.Setup.Hits() == 0 {
		t.Errorf("the full search took no estimates from its set-up cache after %d simulations", full.sims)
	}
}
