package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"reflect"
	"sort"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestSetupCacheMatchesFresh: simulating the graphs of the plans a strategy evaluated with
// the problem's cost.SetupCache (warmed by that planning) gives the same results, timelines
// included, as simulating them without a cache, by tfswap's accounting and by Grappler's. It
// runs auto and vdnn-dyn on the fixtures and on a synthetic residual graph and fails unless
// the cache supplied estimates and some plans swapped or recomputed.
func TestSetupCacheMatchesFresh(t *testing.T) {
	graphs, v100 := fixturesAndSynth400(t)
	hits, planned := 0, 0
	for _, gr := range graphs {
		g, err := graphdef.NewGraph(gr.m.Graph, gr.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"auto", "vdnn-dyn"} {
			s, err := LookupStrategy(name)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := newProblemRun(gr.m, rewrite.Analyze(g, rewrite.Options{}), PlanOptions{Profile: v100, Budget: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.plan(pr); err != nil {
				t.Fatalf("%s/%s: %v", gr.name, name, err)
			}
			keys := make([]string, 0, len(pr.cache))
			for k := range pr.cache {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if len(keys) > 12 {
				keys = keys[:12]
			}
			for _, k := range keys {
				plan := pr.cache[k].Plan
				if len(plan.Swaps) > 0 {
					planned++
				}
				pg, err := pr.graphFor(plan)
				if err != nil {
					t.Fatal(err)
				}
				hits += cachedMatchesFresh(t, pr.Problem, pg, fmt.Sprintf("%s/%s: plan %s", gr.name, name, k))
			}
		}
	}
	if hits == 0 || planned == 0 {
		t.Fatalf("nothing checked: %d cached estimates used, %d plans with swaps", hits, planned)
	}
}

// cachedMatchesFresh simulates pg, a graph of a plan of pr, with pr's set-up cache and
// without one, by tfswap's accounting and by Grappler's, timelines included, and fails the
// test (naming the plan by what) unless they are the same. It returns how many estimates the
// cache supplied.
func cachedMatchesFresh(t *testing.T, pr *Problem, pg *graphdef.Graph, what string) int {
	t.Helper()
	hits := 0
	for _, conv := range []cost.Conventions{{}, cost.GrapplerConventions()} {
		opts := pr.simOpts
		opts.Conventions, opts.Timeline, opts.TopLive = conv, true, 5
		before := opts.Setup.Hits()
		cached, err := cost.Simulate(pg, pr.Profile, opts)
		if err != nil {
			t.Fatal(err)
		}
		hits += opts.Setup.Hits() - before
		opts.Setup = nil
		fresh, err := cost.Simulate(pg, pr.Profile, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cached, fresh) {
			t.Fatalf("%s, conventions %s: the simulation with the set-up cache differs from a fresh one:\n%s\nfresh:\n%s",
				what, cost.ConventionsName(conv), setupSummary(cached), setupSummary(fresh))
		}
	}
	return hits
}

func setupSummary(r *cost.Result) string {
	s := fmt.Sprintf("step %d, simulated %d", r.StepTime, r.Simulated)
	for _, d := range r.Devices {
		s += fmt.Sprintf("; %s peak %d at %d", d.Name, d.PeakBytes, d.PeakTime)
	}
	return s
}

// screenedLevel is a planning of plannedAtShares at half the unswapped peak and the level of
// recomputations its recompute pass screens.
type screenedLevel struct {
	c  budgetCase
	pr *planRun
	lv *rcLevel
}

// screenedAtHalf returns the screened level of each graph of plannedAtShares at half its
// unswapped peak that has one.
func screenedAtHalf(t *testing.T) []screenedLevel {
	t.Helper()
	var out []screenedLevel
	for _, c := range plannedAtShares(t, 50) {
		g, err := graphdef.NewGraph(c.m.Graph, c.name)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := newProblemRun(c.m, rewrite.Analyze(g, rewrite.Options{}), c.po)
		if err != nil {
			t.Fatal(err)
		}
		lv, err := pr.screenRecomputes("auto", false, false)
		if err != nil {
			t.Fatal(err)
		}
		if lv != nil {
			out = append(out, screenedLevel{c, pr, lv})
		}
	}
	return out
}

// TestRecomputedSetupCacheMatchesFresh: a graph with recomputations (the level the recompute
// pass screens) is set up from a cost.SetupCache of its own, made by the first problem that
// plans it, rather than the original graph's (which serves only the nodes the recomputations
// leave unchanged); simulating the graphs of the plans vdnn-dyn evaluated on it with that
// cache gives the same results, timelines included, as without a cache, by both accountings.
// It runs the fixtures and a synthetic residual graph at half their unswapped peaks and fails
// unless some recomputed graph was planned and its cache supplied estimates.
func TestRecomputedSetupCacheMatchesFresh(t *testing.T) {
	s, err := LookupStrategy("vdnn-dyn")
	if err != nil {
		t.Fatal(err)
	}
	levels, hits := 0, 0
	for _, sc := range screenedAtHalf(t) {
		c, pr, lv, a := sc.c, sc.pr, sc.lv, sc.pr.Analysis
		a2, err := lv.graph.analysis(pr)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := pr.newDerived(lv.model, a2, recomputeGrapplerMargin, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a2.Setup == nil || a2.Setup == a.Setup || !a2.Setup.Serves(p2.Profile) || p2.simOpts.Setup != a2.Setup {
			t.Fatalf("%s: the recomputed graph's problem is not set up from a cache of its own", c.name)
		}
		pr2 := p2.newRun(s.Name)
		if _, err := s.plan(pr2); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		levels++
		keys := make([]string, 0, len(pr2.cache))
		for k := range pr2.cache {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys[:min(len(keys), 8)] {
			pg, err := pr2.graphFor(pr2.cache[k].Plan)
			if err != nil {
				t.Fatal(err)
			}
			hits += cachedMatchesFresh(t, pr2.Problem, pg, fmt.Sprintf("%s (recomputed): plan %s", c.name, k))
		}
	}
	t.Logf("%d recomputed graphs planned, %d cached estimates used", levels, hits)
	if levels == 0 || hits == 0 {
		t.Fatalf("nothing checked: %d recomputed graphs planned, %d cached estimates used", levels, hits)
	}
}

// TestRecomputedGraphIndexedOnce: the graph with a screened level of recomputations is indexed
// once, by rewrite.ApplyRecomputesIndexed: its unswapped step is simulated on that index, with
// the result of a simulation of a fresh index of the model's graph (simulateModel), and its
// analysis is made of the same index, named as the problem's graph.
func TestRecomputedGraphIndexedOnce(t *testing.T) {
	levels := 0
	for _, sc := range screenedAtHalf(t) {
		c, pr := sc.c, sc.pr
		levels++
		rg := sc.lv.graph
		if rg.index == nil || rg.index.Def != rg.model.Graph {
			t.Fatalf("%s: the recomputed graph's index is not of its model's graph", c.name)
		}
		got, err := rg.unswapped(pr)
		if err != nil {
			t.Fatal(err)
		}
		want, err := pr.simulateModel(rg.model)
		if err != nil {
			t.Fatal(err)
		}
		want.Shapes = want.Shapes.Summary()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the unswapped step on the shared index: %s; on a fresh one: %s", c.name, setupSummary(got), setupSummary(want))
		}
		a2, err := rg.analysis(pr)
		if err != nil {
			t.Fatal(err)
		}
		if a2.Graph != rg.index || a2.Graph.Source != pr.Model.Source {
			t.Fatalf("%s: the analysis is not of the shared index named %q (%q)", c.name, pr.Model.Source, a2.Graph.Source)
		}
	}
	if levels == 0 {
		t.Fatal("no level of recomputation screened")
	}
}
