package plan

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"sort"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"google.golang.org/protobuf/proto"
)

// controlFlowModel loads a graph of testmodels/controlflow (testmodels/controlflow.py).
func controlFlowModel(t *testing.T, name string) (*graphdef.Model, *graphdef.Graph) {
	t.Helper()
	return loadTestModel(t, "controlflow", name, "regenerate with .venv/bin/python testmodels/controlflow.py")
}

// loadTestModel loads testmodels/DIR/NAME.pb and indexes it; a failure to load names how to
// regenerate the file (hint).
func loadTestModel(t *testing.T, dir, name, hint string) (*graphdef.Model, *graphdef.Graph) {
	t.Helper()
	m, err := graphdef.Load("../../testmodels/"+dir+"/"+name+".pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatalf("%v (%s)", err, hint)
	}
	g, err := graphdef.NewGraph(m.Graph, name)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

// branchNodes returns the names of the nodes inside a branch of a v1 conditional of g.
func branchNodes(t *testing.T, g *graphdef.Graph) map[string]bool {
	t.Helper()
	in := map[string]bool{}
	for i, b := range g.InCondBranch() {
		if b {
			in[g.Nodes[i].Name] = true
		}
	}
	if len(in) == 0 {
		t.Fatal("the graph has no conditional branch")
	}
	return in
}

// checkNothingInBranches fails when a swap of res swaps a tensor made inside a branch, or
// hangs a swap-in on a trigger or gate inside one, or feeds a consumer inside one.
func checkNothingInBranches(t *testing.T, res *rewrite.Result, branch map[string]bool) {
	t.Helper()
	for _, s := range res.Swaps {
		if branch[s.Producer] {
			t.Errorf("swapped %s, made inside a conditional branch", s.Tensor)
		}
		for _, in := range s.SwapIns {
			if branch[in.Trigger] || branch[in.Gate] {
				t.Errorf("swap-in %s of %s triggered from inside a branch (trigger %s, gate %s)", in.Node, s.Tensor, in.Trigger, in.Gate)
			}
			for _, c := range in.Consumers {
				if branch[c] {
					t.Errorf("swap-in %s of %s is consumed inside a branch by %s", in.Node, s.Tensor, c)
				}
			}
		}
	}
}

// TestCondBranchesNeverSwapped is issue 12's item 7: in a CNN whose middle block is a v1
// tf.cond on a learning-phase placeholder, the branch's activations (the largest tensors of
// the graph, which LMS's thresholds would otherwise pick) are excluded as inside a
// conditional branch, the rewrite still swaps what lies outside, and nothing is swapped
// into, triggered from or consumed inside a branch.
func TestCondBranchesNeverSwapped(t *testing.T) {
	m, g := controlFlowModel(t, "cond_cnn")
	branch := branchNodes(t, g)
	opts, err := rewrite.Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	for _, name := range []string{"cond/block/a", "cond/Conv2D", "gradients/cond/block/a_grad/ReluGrad", "gradients/zeros_1"} {
		n := g.Node(name)
		if n == nil {
			t.Fatalf("no node %s", name)
		}
		if ex, why := a.Excluded(n); !ex || why != "inside a conditional branch" {
			t.Errorf("%s: excluded %v (%q), want excluded as inside a conditional branch", name, ex, why)
		}
		if a.TriggerEligible(n) {
			t.Errorf("%s may trigger a swap-in", name)
		}
		for _, u := range n.Consumers[0] {
			if a.ConsumerEligible(u) {
				t.Errorf("%s's reader %s may read a swapped-in copy", name, u.Node.Name)
			}
		}
	}
	cands, _ := a.Candidates()
	for _, c := range cands {
		if branch[c.Tensor.Node.Name] {
			t.Errorf("candidate %s is inside a branch", c.Tensor)
		}
	}
	// Lower thresholds so that more than the one far tensor is swapped.
	res, err := Rewrite(m, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, MinTensorBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Swaps) == 0 {
		t.Fatal("nothing was swapped")
	}
	checkNothingInBranches(t, res, branch)
	t.Logf("%d swaps outside the branches", len(res.Swaps))
}

// TestControlFlowBudgetPlans: on the conditional CNN (v1 and v2) and the graph calling a
// tf.function, the auto planner's plans at 90% and 70% of the unswapped peak either fit the
// budget or end in a no-fit diagnosis that names what is live, the two budgets' outcomes
// differ, no plan touches a conditional branch, and the function library is left as it was.
func TestControlFlowBudgetPlans(t *testing.T) {
	prof, _ := cost.LookupProfile(DefaultDevice)
	for _, name := range []string{"cond_cnn", "if_cnn", "fn_call"} {
		t.Run(name, func(t *testing.T) {
			m, g := controlFlowModel(t, name)
			var branch map[string]bool
			if name == "cond_cnn" {
				branch = branchNodes(t, g)
			}
			fetch := cost.Options{Fetch: []string{"train"}}
			base, err := cost.Simulate(g, prof, fetch)
			if err != nil {
				t.Fatal(err)
			}
			var outcomes []string
			for _, pct := range []int64{90, 70} {
				budget := base.Compute().PeakBytes * pct / 100
				p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: budget, Sim: fetch})
				var nf *NoFitError
				switch {
				case errors.As(err, &nf):
					if !strings.Contains(err.Error(), ":0") {
						t.Errorf("%d%%: the no-fit diagnosis names no live tensor:\n%v", pct, err)
					}
					outcomes = append(outcomes, "no fit")
					t.Logf("%d%%: no fit: %v", pct, firstLine(err.Error()))
				case err != nil:
					t.Fatalf("%d%%: %v", pct, err)
				default:
					if !p.Eval.Fits {
						t.Fatalf("%d%%: a plan was returned that does not fit", pct)
					}
					for _, d := range p.Eval.Devices {
						if d.Peak > d.Budget {
							t.Errorf("%d%%: %s peaks at %d, over its budget %d", pct, d.Name, d.Peak, d.Budget)
						}
					}
					if p.Unchanged() {
						t.Errorf("%d%%: the plan changes nothing, yet the unswapped peak %d is over the budget %d", pct, base.Compute().PeakBytes, budget)
					}
					var swapped []string
					for _, s := range p.Swaps {
						swapped = append(swapped, s.Tensor)
					}
					sort.Strings(swapped)
					outcomes = append(outcomes, fmt.Sprintf("swaps %v, %d waits, %d recomputes", swapped, len(p.Waits), len(p.Recomputes)))
					t.Logf("%d%%: %s, overhead %+.1f%%", pct, outcomes[len(outcomes)-1], 100*p.Eval.Overhead)
					if branch != nil {
						checkNothingInBranches(t, p.Result, branch)
					}
					// Function bodies are never rewritten: the library comes out unchanged.
					if !proto.Equal(p.Model.Graph.GetLibrary(), m.Graph.GetLibrary()) {
						t.Errorf("%d%%: the function library changed", pct)
					}
				}
			}
			if outcomes[0] == outcomes[1] {
				t.Errorf("the 90%% and 70%% budgets give the same outcome: %s", outcomes[0])
			}
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestLoopGraphSwapsOutsideTheLoop: in a v1 while-loop RNN, what follows the loop's Exit is
// no conditional branch (the loop's Switches are not conditionals): LMS with low thresholds
// swaps the input projection's activation, made before the loop and read again by its
// gradient after the loop's backward pass, and nothing inside the loop.
func TestLoopGraphSwapsOutsideTheLoop(t *testing.T) {
	m, g := controlFlowModel(t, "rnn_v1")
	res, err := Rewrite(m, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, MinTensorBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := rewrite.Options{}.WithDefaults()
	a := rewrite.Analyze(g, opts)
	found := false
	for _, s := range res.Swaps {
		found = found || s.Tensor == "Tanh:0"
		if a.InLoop(g.Node(s.Producer)) {
			t.Errorf("swapped %s, made inside the loop", s.Tensor)
		}
		for _, in := range s.SwapIns {
			for _, c := range in.Consumers {
				if a.InLoop(g.Node(c)) {
					t.Errorf("swap-in %s is consumed inside the loop by %s", in.Node, c)
				}
			}
		}
	}
	if !found {
		t.Errorf("Tanh:0 (the input projection) was not swapped; swaps: %v", res.Swaps)
	}
}
