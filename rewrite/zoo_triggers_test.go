package rewrite

import (
	"errors"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// zooModel loads a graph of testmodels/zoo.
func zooModel(t *testing.T, name string) (*graphdef.Model, *graphdef.Graph) {
	t.Helper()
	m, err := graphdef.Load("../testmodels/zoo/"+name+".pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, name)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

// TestCondV1PlansAcyclic is issue 12's cond_v1 bug: in the Keras learning-phase graph with v1
// conds, the simulator runs one side of each cond, so the Merge that sums a Switch's
// gradient with the other side's zeros runs as soon as the zeros exist, long before the
// gradient it structurally waits for. A swap-in triggered from such a Merge (chosen because
// it runs early enough) had a cycle through the Merge's untaken input, and planning failed.
// The test checks that the timing marks these Merges early (so the graph still exercises
// the case), and that auto's plans at 90% and 70% of the batch-x64 peak either fit, pass
// Verify and trigger nothing early, or end in a no-fit diagnosis: never a cycle.
func TestCondV1PlansAcyclic(t *testing.T) {
	m, g := zooModel(t, "cond_v1")
	sim := cost.Options{Fetch: []string{"train"}, BatchScale: zooPlanScale}
	opts, err := Options{MinTensorBytes: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	pr, err := newProblem(m, Analyze(g, opts), PlanOptions{Strategy: "auto", Budget: 1 << 40, Sim: sim})
	if err != nil {
		t.Fatal(err)
	}
	early := map[string]bool{}
	for _, n := range g.Nodes {
		if pr.timing.isEarly(g, n) {
			early[n.Name] = true
		}
	}
	if !early["gradients/cnn/batch_normalization/cond/ReadVariableOp_3/Switch_grad/cond_grad"] {
		t.Errorf("the Merge of the zeros and the gradient of the moving variance is not early; early: %v", early)
	}
	peak := pr.Base.Result.Compute().PeakBytes
	for _, pct := range []int64{90, 70} {
		res, err := RewriteWithPlanner(m, Options{MinTensorBytes: -1}, PlanOptions{Strategy: "auto", Budget: peak * pct / 100, Sim: sim})
		var nf *NoFitError
		if errors.As(err, &nf) {
			t.Logf("%d%%: no fit", pct)
			continue
		}
		if err != nil {
			t.Fatalf("%d%%: %v", pct, err)
		}
		for _, s := range res.Swaps {
			for _, in := range s.SwapIns {
				if early[in.Trigger] {
					t.Errorf("%d%%: swap-in %s is triggered by %s, which runs before its own ancestors", pct, in.Node, in.Trigger)
				}
			}
		}
		t.Logf("%d%%: fits with %d swaps, %d recomputes", pct, len(res.Swaps), len(res.Recomputes))
	}
}

// TestLMSTriggerRunsWithConsumers is issue 12's cond_v2 bug: the zoo's Keras graph holds the
// model built on its own input placeholder conv2d_input (never fed) beside the training
// step built on input, and both read the learning-phase tensor. LMS grouped the two graphs'
// consumers into one swap-in triggered from the first graph's Conv2D, so the training step
// needed conv2d_input. Every swap-in's trigger must now be one the step of each of its
// readers already runs (runsWith), and the step's readers of the learning phase must not
// depend on conv2d_input through their gate.
func TestLMSTriggerRunsWithConsumers(t *testing.T) {
	m, g := zooModel(t, "cond_v2")
	ph := g.Node("conv2d_input")
	if ph == nil || ph.Op != "Placeholder" {
		t.Fatal("cond_v2 has no placeholder conv2d_input")
	}
	res, err := Rewrite(m, Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
	if err != nil {
		t.Fatal(err)
	}
	stepReaders := 0
	for _, s := range res.Swaps {
		for _, in := range s.SwapIns {
			trig := g.Node(in.Trigger)
			for _, c := range in.Consumers {
				cn := g.Node(c)
				if !runsWith(g, trig, cn) {
					t.Errorf("swap-in %s: trigger %s needs what the step of its reader %s does not run", in.Node, in.Trigger, c)
				}
				if !g.Reachable(ph, cn) {
					stepReaders++
					if g.Reachable(ph, trig) {
						t.Errorf("swap-in %s: trigger %s depends on the unfed conv2d_input, its reader %s does not", in.Node, in.Trigger, c)
					}
				}
			}
		}
	}
	if stepReaders == 0 {
		t.Fatal("no swap-in is read by the training step: nothing to check")
	}
}

// TestVerifyRejectsBranchTrigger: Verify refuses a rewrite whose swap-in is triggered from
// inside a branch of a v1 conditional (a dead trigger would make the swap-in dead).
func TestVerifyRejectsBranchTrigger(t *testing.T) {
	m, g := controlFlowModel(t, "cond_cnn")
	branch := g.InCondBranch()
	opts, err := Options{SwapoutThreshold: 3, SwapinAhead: 1, MinTensorBytes: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(g, opts)
	plan, _ := PlanLMS(a)
	// Re-trigger one swap-in from a branch node that descends from the producer and from
	// none of the readers, so that only the branch rule is broken.
	for i, ps := range plan.Swaps {
		grp := ps.Groups[0]
		for _, n := range g.Topo {
			if !branch[n.Index] || !g.Reachable(ps.Tensor.Node, n) {
				continue
			}
			if _, _, ok := GatePort(n); !ok {
				continue
			}
			fromReader := false
			for _, u := range grp.Uses {
				fromReader = fromReader || g.Reachable(u.Node, n)
			}
			if fromReader {
				continue
			}
			bad := retriggered(plan, i, 0, n)
			res, err := Apply(m, a, bad)
			if err != nil {
				t.Fatal(err)
			}
			err = Verify(g, res, opts.Gate)
			if err == nil || !strings.Contains(err.Error(), "inside a conditional branch") {
				t.Fatalf("Verify of a swap-in triggered by %s (inside a branch): %v, want a branch error", n.Name, err)
			}
			if err := Verify(g, mustApply(t, m, a, plan), opts.Gate); err != nil {
				t.Fatalf("Verify of the LMS plan itself: %v", err)
			}
			return
		}
	}
	t.Fatal("no swap could be re-triggered from inside a branch: nothing checked")
}

func mustApply(t *testing.T, m *graphdef.Model, a *Analysis, plan *Plan) *Result {
	t.Helper()
	res, err := Apply(m, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
