package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestTupleBypassPass: on the ResNet fixture within 3 MiB, no plan of auto fits all three
// accountings without the tuple-bypass pass (and the written bypass, which
// TestWrittenBypassPass checks there) (Grappler's VirtualCluster counts each
// tf.gradients tuple Identity as a buffer of its own); with it one does, on the graph whose
// tuple Identities are NoOps that no data input reads. With tfswap's accounting alone the
// pass runs only where the best plan costs more than +50% (TestTupleBypassCostlyByTfswap).
func TestTupleBypassPass(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	budget := int64(3 << 20)
	plan := func(acc string, on bool) (*Planned, error) {
		defer func(old, w bool) { TupleBypass, WrittenBypass = old, w }(TupleBypass, WrittenBypass)
		TupleBypass, WrittenBypass = on, false
		return RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: -1}, PlanOptions{Strategy: "auto", Budget: budget, FitAccounting: acc,
			Sim: cost.Options{Fetch: []string{"train"}}})
	}
	var nf *NoFitError
	if _, err := plan("all", false); !errors.As(err, &nf) {
		t.Fatalf("without the pass: %v, want no plan to fit (the case no longer needs the pass)", err)
	}
	p, err := plan("all", true)
	if err != nil {
		t.Fatalf("with the pass: %v", err)
	}
	d := p.Eval.Devices[0]
	t.Logf("plan from %s, %+.1f%%, peaks %d / %d / %d of %d, %d Identities bypassed", p.Eval.Strategy, 100*p.Eval.Overhead, d.Peak, d.GrapplerPeak, d.GrapplerPeakUS, d.Budget, len(p.Bypassed))
	if !p.Eval.Fits || d.Peak > d.Budget || d.GrapplerPeak > d.Budget || d.GrapplerPeakUS > d.Budget || d.GrapplerPeakUS == 0 {
		t.Errorf("the plan does not fit every accounting: %+v", d)
	}
	if !strings.Contains(p.Eval.Strategy, "+bypass") || len(p.Bypassed) == 0 {
		t.Fatalf("plan from %s bypassed %d Identities: want the pass's plan", p.Eval.Strategy, len(p.Bypassed))
	}
	g, err := graphdef.NewGraph(p.Model.Graph, "rewritten")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range p.Bypassed {
		n := g.Node(name)
		if n == nil || n.Op != "NoOp" || !strings.Contains(name, "tuple/control_dependency") {
			t.Errorf("bypassed %s: %v in the rewrite, want a NoOp of a tf.gradients tuple", name, n)
			continue
		}
		if len(n.ControlOutputs) == 0 {
			t.Errorf("bypassed %s: nothing waits for it", name)
		}
	}
	if p2, err := plan("tfswap", true); err != nil {
		t.Fatal(err)
	} else if len(p2.Bypassed) != 0 || strings.Contains(p2.Eval.Strategy, "bypass") {
		t.Errorf("by tfswap's accounting alone: plan from %s bypassed %d Identities, want none", p2.Eval.Strategy, len(p2.Bypassed))
	}
}

// TestTupleBypassCostlyByTfswap: with tfswap's accounting alone, the tuple-bypass pass runs
// where auto's best plan fits at more than +50% (it plans again, so planning simulates more)
// and keeps its plan only when it is better; where the best plan is cheaper it does not run.
func TestTupleBypassCostlyByTfswap(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan := func(budget int64, on bool) *Planned {
		t.Helper()
		defer func(old bool) { TupleBypass = old }(TupleBypass)
		TupleBypass = on
		p, err := RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: -1}, PlanOptions{Strategy: "auto", Budget: budget, FitAccounting: "tfswap",
			Sim: cost.Options{Fetch: []string{"train"}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		budget int64
		runs   bool
	}{{2560 << 10, true}, {6 << 20, false}} {
		off, on := plan(c.budget, false), plan(c.budget, true)
		t.Logf("budget %d: without the pass %s %+.1f%% (%d simulations), with it %s %+.1f%% (%d)", c.budget,
			off.Eval.Strategy, 100*off.Eval.Overhead, off.Simulations, on.Eval.Strategy, 100*on.Eval.Overhead, on.Simulations)
		if costly := off.Eval.Overhead > tupleOrderOverhead; costly != c.runs {
			t.Fatalf("budget %d: the plan without the pass costs %+.1f%%; the case needs it %v +50%%", c.budget, 100*off.Eval.Overhead, map[bool]string{true: "above", false: "within"}[c.runs])
		}
		if ran := on.Simulations > off.Simulations; ran != c.runs {
			t.Errorf("budget %d: the pass ran: %v, want %v", c.budget, ran, c.runs)
		}
		if on.Eval.StepTime > off.Eval.StepTime {
			t.Errorf("budget %d: with the pass the plan is slower: %d ns against %d", c.budget, on.Eval.StepTime, off.Eval.StepTime)
		}
	}
}
