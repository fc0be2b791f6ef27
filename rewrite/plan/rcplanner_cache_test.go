package plan

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/testmodels/synth"
)

// TestRCPlannerCacheMatchesFresh: the recomputation planner that keeps each target's
// marginal until a selection changes what it depends on selects the same targets in the
// same order, with the same chains, cumulative bytes and plans, as the planner that computes
// every marginal afresh at every step. It runs on the fixtures and on a synthetic residual
// graph, with chains limited to one large output and not, and fails unless the cache saved
// some marginals and the planner selected more than one target somewhere.
func TestRCPlannerCacheMatchesFresh(t *testing.T) {
	graphs, v100 := fixturesAndSynth400(t)
	saved, multi := false, false
	for _, gr := range graphs {
		g, err := graphdef.NewGraph(gr.m.Graph, gr.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, prof := range []*cost.Profile{slowLinkProfile(), v100} {
			pr, err := newProblem(gr.m, rewrite.Analyze(g, rewrite.Options{}), PlanOptions{Profile: prof, Budget: 1 << 20, FitAccounting: "tfswap"})
			if err != nil {
				t.Fatal(err)
			}
			for _, single := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/single=%v", gr.name, prof.Name, single)
				fresh := pr.newRCPlannerWith(single, false)
				cached := pr.newRCPlannerWith(single, true)
				if len(fresh.order) != len(cached.order) {
					t.Fatalf("%s: %d targets selected, fresh %d", name, len(cached.order), len(fresh.order))
				}
				for i := range fresh.order {
					if f, c := fresh.order[i], cached.order[i]; f.t != c.t || fresh.bytes[i] != cached.bytes[i] {
						t.Fatalf("%s: selection %d is %s (%d bytes in all), fresh %s (%d)", name, i, c.t, cached.bytes[i], f.t, fresh.bytes[i])
					}
				}
				if len(fresh.chains) != len(cached.chains) {
					t.Fatalf("%s: %d chains, fresh %d", name, len(cached.chains), len(fresh.chains))
				}
				for tt, fc := range fresh.chains {
					cc := cached.chains[tt]
					if cc == nil || cc.cost != fc.cost || fmt.Sprint(cc.nodes) != fmt.Sprint(fc.nodes) {
						t.Fatalf("%s: chain of %s differs from the fresh planner's", name, tt)
					}
				}
				for k := 0; k <= len(fresh.order); k++ {
					if fp, cp := planString(fresh.plan(k)), planString(cached.plan(k)); fp != cp {
						t.Fatalf("%s: plan of the first %d targets differs:\n%s\nfresh:\n%s", name, k, cp, fp)
					}
				}
				saved = saved || cached.marginals < fresh.marginals
				multi = multi || len(fresh.order) > 1
			}
		}
	}
	if !saved || !multi {
		t.Fatalf("nothing checked: cache saved marginals %v, more than one target selected %v", saved, multi)
	}
}

// planString describes recomputations for comparison.
func planString(rcs []*rewrite.PlannedRecompute) string {
	s := ""
	for _, rc := range rcs {
		s += fmt.Sprintf("%s %d %v %v %s %d %v\n", rc.Tensor, rc.Bytes, rc.Chain, rc.Uses, rc.Trigger.Name, rc.Cost, rc.Also)
	}
	return s
}

// namedModel is a test graph and the name its analyses use.
type namedModel struct {
	name string
	m    *graphdef.Model
}

// fixturesAndSynth400 loads the four committed fixtures (cnn, resnet, mlp, lstm) and a
// synthetic residual graph of 400 nodes, with the v100-16gb profile, for the tests that
// compare a cached planning path with a fresh one.
func fixturesAndSynth400(t *testing.T) ([]namedModel, *cost.Profile) {
	t.Helper()
	var graphs []namedModel
	for _, f := range []string{"cnn", "resnet", "mlp", "lstm"} {
		m, err := graphdef.Load("../../testmodels/fixtures/"+f+".pb", graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		graphs = append(graphs, namedModel{f, m})
	}
	sm := graphdef.NewModel(synth.Generate(synth.Config{Nodes: 400}))
	sm.Source = "synth400"
	graphs = append(graphs, namedModel{"synth400", sm})
	v100, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	return graphs, v100
}

// budgetCase is one planning of plannedAtShares: a graph of fixturesAndSynth400 and its
// options at a share of its unswapped peak.
type budgetCase struct {
	name string
	m    *graphdef.Model
	pct  int64
	po   PlanOptions
}

// plannedAtShares returns a planning of each graph of fixturesAndSynth400 (the training step,
// fetch "train", on v100-16gb) at each of pcts percent of its unswapped peak.
func plannedAtShares(t *testing.T, pcts ...int64) []budgetCase {
	t.Helper()
	graphs, v100 := fixturesAndSynth400(t)
	var out []budgetCase
	for _, gr := range graphs {
		sim := cost.Options{Fetch: []string{"train"}}
		base, err := RewriteWithPlanner(gr.m, rewrite.Options{}, PlanOptions{Profile: v100, Budget: 1 << 50, Sim: sim})
		if err != nil {
			t.Fatal(err)
		}
		peak := base.Base.Devices[0].Peak
		for _, pct := range pcts {
			out = append(out, budgetCase{gr.name, gr.m, pct, PlanOptions{Profile: v100, Budget: peak * pct / 100, Sim: sim}})
		}
	}
	return out
}

// plan plans c with po (c.po when po is nil): a plan, or the NoFitError that nothing fits;
// any other error fails the test.
func (c budgetCase) plan(t *testing.T, po *PlanOptions) (*Planned, error) {
	t.Helper()
	if po == nil {
		po = &c.po
	}
	res, err := RewriteWithPlanner(c.m, rewrite.Options{}, *po)
	var nf *NoFitError
	if err != nil && !errors.As(err, &nf) {
		t.Fatalf("%s at %d%%: %v", c.name, c.pct, err)
	}
	return res, err
}
