//go:build tensorflow

package tfrun

import (
	"slices"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/tfswap/tfswap/rewrite/plan"
)

// TestTupleBypassInRuntime: auto's plan for the residual-network fixture within 3 MiB by all
// three accountings is made on the graph whose tf.gradients tuple Identities are bypassed
// (the tuple-bypass pass; no plan fits there without it). In the two-device emulation the
// rewrite trains bit-identically to the original for 5 steps, every variable compared, and
// TensorFlow runs no bypassed name as anything but a NoOp (or not at all: Grappler may
// remove it).
func TestTupleBypassInRuntime(t *testing.T) {
	defer func(old bool) { plan.WrittenBypass = old }(plan.WrittenBypass)
	plan.WrittenBypass = false
	fx, placed, _, p := planResNet3MiB(t, "all")
	checkBypassInRuntime(t, fx, placed, p, "+bypass")
}

// TestWrittenBypassInRuntime: auto's plan for the residual-network fixture within 3 MiB by
// tfswap's accounting, written with its tf.gradients tuple Identities bypassed
// (rewrite.BypassWritten, as the written bypass pass writes the plan tfswap's accounting
// chooses), passes Verify, trains bit-identically to the original for 5 steps in the
// two-device emulation, every variable compared, and TensorFlow runs no bypassed name as
// anything but a NoOp. (The emulation's compute device is a CPU, where no spacer goes, so
// the pass itself does not fit there: TestWrittenBypassPass checks it on a GPU profile.)
func TestWrittenBypassInRuntime(t *testing.T) {
	fx, placed, opts, p := planResNet3MiB(t, "tfswap")
	g, err := graphdef.NewGraph(placed.Graph, "placed")
	if err != nil {
		t.Fatal(err)
	}
	opts, err = opts.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range rewrite.TupleIdentities(g, rewrite.Analyze(g, opts), []string{fx.TrainOp}) {
		names = append(names, n.Name)
	}
	res := *p.Result
	res.Swaps = slices.Clone(p.Swaps)
	for i := range res.Swaps {
		res.Swaps[i].SwapIns = slices.Clone(p.Swaps[i].SwapIns)
	}
	done, err := rewrite.BypassWritten(&res, names)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) == 0 || len(res.Bypassed) != len(p.Bypassed)+len(done) {
		t.Fatalf("bypassed %d of %d tuple Identities: nothing checked", len(done), len(names))
	}
	if err := rewrite.Verify(g, &res, opts.Gate); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	t.Logf("plan from %s: %d swaps, %d recomputed tensors, %d of %d tuple Identities bypassed in the written graph", p.Eval.Strategy, len(p.Swaps), len(p.Recomputes), len(done), len(names))
	q := *p
	q.Result = &res
	checkBypassInRuntime(t, fx, placed, &q, "")
}

// checkBypassInRuntime checks p, a plan of the fixture fx (placed model placed) made with
// the bypass its strategy names by suffix: it bypasses tuple Identities, trains
// bit-identically to placed for 5 steps, and runs every bypassed name as a NoOp or not at
// all.
func checkBypassInRuntime(t *testing.T, fx *Fixture, placed *graphdef.Model, p *plan.Planned, suffix string) {
	t.Helper()
	t.Logf("plan from %s: %d swaps, %d recomputed tensors, %d tuple Identities bypassed, %+.1f%%", p.Eval.Strategy, len(p.Swaps), len(p.Recomputes), len(p.Bypassed), 100*p.Eval.Overhead)
	if len(p.Bypassed) == 0 || !strings.Contains(p.Eval.Strategy, suffix) {
		t.Fatal("the plan bypasses no tuple Identity: nothing checked")
	}
	checkTrainsLike(t, placed, p.Model, fx, 5)

	tr, err := TraceStep(marshalModel(t, p.Model), fx, TwoDeviceConfigBytes(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]string{}
	for _, n := range tr.Nodes {
		ran[n.Name] = n.Op
	}
	for _, name := range p.Bypassed {
		if op, ok := ran[name]; ok && op != "NoOp" {
			t.Errorf("bypassed %s ran as %s", name, op)
		}
	}
}

// planResNet3MiB plans the placed residual-network fixture with auto within 3 MiB, fitting
// by the accountings acc, for the emulation's devices. It returns the fixture, its placed
// model, the rewrite's options and the plan.
func planResNet3MiB(t testing.TB, acc string) (*Fixture, *graphdef.Model, rewrite.Options, *plan.Planned) {
	t.Helper()
	fx, placed := placedFixture(t, "resnet")
	opts := rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice}
	p, err := plan.RewriteWithPlanner(placed, opts, plan.PlanOptions{Strategy: "auto", Budget: 3 << 20,
		Sim: cost.Options{Fetch: []string{fx.TrainOp}}, FitAccounting: acc})
	if err != nil {
		t.Fatal(err)
	}
	return fx, placed, opts, p
}
