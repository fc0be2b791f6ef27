package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// TestDeriveGraphMatchesApply checks that the derived graph planners simulate is the graph
// applyMatchingDerived applies plan to m and fails the test unless the written graph, parsed
// again, is the graph DeriveGraph hands the simulator. It returns Apply's result, that parsed
// graph and the derived one.
func applyMatchingDerived(t *testing.T, m *graphdef.Model, a *rewrite.Analysis, plan *rewrite.Plan) (*rewrite.Result, *graphdef.Graph, *graphdef.Graph) {
	t.Helper()
	res, err := rewrite.Apply(m, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	want, err := graphdef.NewGraph(res.Model.Graph, "applied")
	if err != nil {
		t.Fatal(err)
	}
	got, err := rewrite.DeriveGraph(a, plan)
	if err != nil {
		t.Fatal(err)
	}
	if msg := testgraph.Same(got, want); msg != "" {
		t.Fatal(msg)
	}
	return res, want, got
}

// Apply writes: same nodes, edges, topological order and levels, and the same simulation.
func TestDeriveGraphMatchesApply(t *testing.T) {
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mlp", "cnn", "resnet", "lstm"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("../../testmodels/fixtures", name+".pb")
			m, err := graphdef.Load(path, graphdef.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, opts := range []rewrite.Options{{}, {SwapoutThreshold: 3, SwapinAhead: 1, SwapinGroupBy: -1}} {
				opts, _ = opts.WithDefaults()
				g, err := graphdef.NewGraph(m.Graph, path)
				if err != nil {
					t.Fatal(err)
				}
				a := rewrite.Analyze(g, opts)
				plan, _ := PlanLMS(a)
				_, want, got := applyMatchingDerived(t, m, a, plan)
				rw, err := cost.Simulate(want, p, cost.Options{BatchScale: 2})
				if err != nil {
					t.Fatal(err)
				}
				rg, err := cost.Simulate(got, p, cost.Options{BatchScale: 2})
				if err != nil {
					t.Fatal(err)
				}
				rw.Shapes, rg.Shapes = nil, nil
				rw.Options, rg.Options = cost.Options{}, cost.Options{}
				if !reflect.DeepEqual(rw, rg) {
					t.Errorf("simulations differ:\napplied %+v\nderived %+v", rw, rg)
				}
			}
		})
	}
}

// resnetLMSProblem returns the analysis of the resnet fixture with default options and a
// planning problem on it for a 1 GiB budget, for the tests of LMS's cached planning.
func resnetLMSProblem(t *testing.T) (*rewrite.Analysis, *Problem) {
	t.Helper()
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := graphdef.NewGraph(m.Graph, "resnet")
	opts, _ := rewrite.Options{}.WithDefaults()
	a := rewrite.Analyze(g, opts)
	pr, err := newProblem(m, a, PlanOptions{Budget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return a, pr
}

// TestLMSPlanCacheMatchesPlanLMS checks that the planner's cached LMS planning makes the plan
// PlanLMS makes.
func TestLMSPlanCacheMatchesPlanLMS(t *testing.T) {
	a, pr := resnetLMSProblem(t)
	// Twice, in opposite orders of threshold: the second time lmsPlan hands out the swap-ins
	// it kept (lmsCache.groups) for other thresholds.
	ths := []int{1, 3, 10, 40}
	for round := 0; round < 2; round++ {
		for _, th := range ths {
			for _, ahead := range []int{1, 3} {
				for _, gb := range []int{-1, 5} {
					a2 := *a
					a2.Opts.SwapoutThreshold, a2.Opts.SwapinAhead, a2.Opts.SwapinGroupBy = th, ahead, gb
					want, _ := PlanLMS(&a2)
					if got := pr.lmsPlan(th, ahead, gb); planKey(got) != planKey(want) {
						t.Errorf("round %d threshold %d ahead %d groupby %d: plans differ", round, th, ahead, gb)
					}
				}
			}
		}
		slices.Reverse(ths)
	}
}

// TestLMSCanonAndSignature checks what lmsFit's kept predictions rest on: every threshold
// makes the plan of its canonical threshold (lmsCanon; an empty plan past the farthest use),
// the canonical thresholds are a handful of the range, and two plans have the same
// lmsSignature exactly when they have the same planKey.
func TestLMSCanonAndSignature(t *testing.T) {
	_, pr := resnetLMSProblem(t)
	maxT := pr.maxDistance() + 1
	bySig := map[string]string{}
	byKey := map[string]string{}
	canons := map[int]bool{}
	for _, ahead := range []int{1, 4} {
		for _, gb := range []int{-1, 2, 10} {
			for th := 1; th <= maxT; th++ {
				plan := pr.lmsPlan(th, ahead, gb)
				c := pr.lmsCanon(th)
				canons[c] = true
				if c == math.MaxInt {
					if len(plan.Swaps) != 0 {
						t.Errorf("threshold %d past every use: %d swaps, want none", th, len(plan.Swaps))
					}
				} else if c < th {
					t.Fatalf("lmsCanon(%d) = %d, below the threshold", th, c)
				} else if planKey(pr.lmsPlan(c, ahead, gb)) != planKey(plan) {
					t.Errorf("ahead %d groupby %d: threshold %d and its canonical %d plan differently", ahead, gb, th, c)
				}
				sig, key := string(lmsSignature(nil, plan)), planKey(plan)
				if k, ok := bySig[sig]; ok && k != key {
					t.Errorf("ahead %d groupby %d threshold %d: one signature for two plans", ahead, gb, th)
				}
				if s, ok := byKey[key]; ok && s != sig {
					t.Errorf("ahead %d groupby %d threshold %d: two signatures for one plan", ahead, gb, th)
				}
				bySig[sig], byKey[key] = key, sig
			}
		}
	}
	if len(canons) < 2 || len(canons) >= maxT {
		t.Errorf("%d canonical thresholds for %d thresholds: want several, and fewer than the thresholds", len(canons), maxT)
	}
	if len(bySig) < 2 {
		t.Errorf("%d distinct plans: the check compared nothing", len(bySig))
	}
}

// TestDeriveGraphSharesOffloadGates checks the one builder on a graph whose variables were
// offloaded: a swap-in triggered by an op that already has a gate (an offload's weight copies
// are gated on it) shares that gate, in the graph the simulator runs as in the GraphDef Apply
// writes, which parsed again is the derived graph.
func TestDeriveGraphSharesOffloadGates(t *testing.T) {
	m := loadFixtureModel(t, "resnet")
	off, err := rewrite.OffloadVariables(m, rewrite.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The offloaded graph is indexed directly, as the offload planner does (prepare refuses
	// a graph tfswap rewrote).
	g, err := graphdef.NewGraph(off.Model.Graph, "offloaded")
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, SwapinGroupBy: -1}.WithDefaults()
	a := rewrite.Analyze(g, opts)
	plan, _ := PlanLMS(a)
	if len(plan.Swaps) == 0 {
		t.Fatal("LMS swaps nothing on the offloaded resnet")
	}
	// Move each group's trigger, where that keeps the graph acyclic, to a descendant of the
	// tensor's producer that has a gate already.
	shared := 0
	for i := range plan.Swaps {
		ps := &plan.Swaps[i]
		for k := range ps.Groups {
			grp := &ps.Groups[k]
			for _, n := range g.Topo {
				if g.Node(rewrite.GateNodeName(n)) == nil || n == grp.Trigger || !g.Reachable(ps.Tensor.Node, n) || !a.TriggerEligible(n) {
					continue
				}
				old := grp.Trigger
				grp.Trigger = n
				if _, err := rewrite.DeriveGraph(a, plan); err != nil {
					grp.Trigger = old
					continue
				}
				shared++
				break
			}
		}
	}
	if shared == 0 {
		t.Fatal("no swap-in could be triggered by an op with an offload gate: the test checks nothing")
	}
	res, _, _ := applyMatchingDerived(t, off.Model, a, plan)
	// Every trigger moved above has its gate in the offloaded graph: none is added for it
	// (the old derived graph added a second node of the same name).
	sharing := 0
	for _, s := range res.Swaps {
		for _, si := range s.SwapIns {
			if g.Node(si.Gate) != nil {
				sharing++
			}
		}
	}
	if sharing < shared {
		t.Errorf("%d swap-ins share a gate the offloaded graph has, want %d", sharing, shared)
	}
}
