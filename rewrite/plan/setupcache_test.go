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
						t.Fatalf("%s/%s: plan %s, conventions %s: the simulation with the set-up cache differs from a fresh one:\n%s\nfresh:\n%s",
							gr.name, name, k, cost.ConventionsName(conv), setupSummary(cached), setupSummary(fresh))
					}
				}
			}
		}
	}
	if hits == 0 || planned == 0 {
		t.Fatalf("nothing checked: %d cached estimates used, %d plans with swaps", hits, planned)
	}
}

func setupSummary(r *cost.Result) string {
	s := fmt.Sprintf("step %d, simulated %d", r.StepTime, r.Simulated)
	for _, d := range r.Devices {
		s += fmt.Sprintf("; %s peak %d at %d", d.Name, d.PeakBytes, d.PeakTime)
	}
	return s
}
