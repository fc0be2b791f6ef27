//go:build tensorflow

package tfrun

import (
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
	fx, placed, _, p := planResNet3MiB(t, "all")
	t.Logf("plan from %s: %d swaps, %d recomputed tensors, %d tuple Identities bypassed, %+.1f%%", p.Eval.Strategy, len(p.Swaps), len(p.Recomputes), len(p.Bypassed), 100*p.Eval.Overhead)
	if len(p.Bypassed) == 0 || !strings.Contains(p.Eval.Strategy, "+bypass") {
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
