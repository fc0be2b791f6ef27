package plan

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
)

// tupleGraph is the shape of a convolution's gradients under tf.gradients: d (the output
// gradient) is read by in_grad (the input gradient, an activation) and filt_grad (the filter
// gradient, a small output, which also reads x, the saved forward activation); a NoOp
// group_deps waits for both, and each is read through an Identity that waits for group_deps,
// in_grad's by e. With in_grad run first, in_grad waits beside x and d while filt_grad runs:
// three activations. With filt_grad first, x is freed before in_grad runs: two. small makes
// filt_grad's output as large as in_grad's instead (no member is the largest).
func tupleGraph(small bool) *gpb.GraphDef {
	b := newBuilder()
	fshape := []int64{4}
	if !small {
		fshape = big
	}
	b.op("inp", "Placeholder", "", big)
	b.op("x", "Softmax", "", big, "inp")
	b.op("d", "Softmax", "", big, "x")
	b.op("in_grad", "Softmax", "", big, "d")
	b.op("filt_grad", "Mul", "", fshape, "d", "x")
	b.op("group_deps", "NoOp", "", nil, "^in_grad", "^filt_grad")
	b.op("cd", "Identity", "", big, "in_grad", "^group_deps")
	b.op("cd_1", "Identity", "", fshape, "filt_grad", "^group_deps")
	b.op("e", "Softmax", "", big, "cd")
	b.op("train", "NoOp", "", nil, "^e", "^cd_1")
	return b.g
}

// TestTupleOrderEdges: tupleOrderEdges orders the tuple's largest member after the other,
// and adds nothing where no member is larger than the others.
func TestTupleOrderEdges(t *testing.T) {
	for _, small := range []bool{true, false} {
		g, err := graphdef.NewGraph(tupleGraph(small), "tuple")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SortTopo(); err != nil {
			t.Fatal(err)
		}
		a := rewrite.Analyze(g, rewrite.Options{})
		bytes := func(n *graphdef.Node) int64 {
			var most int64
			for _, s := range n.OutputShapes {
				b := int64(4)
				for _, d := range s {
					b *= d
				}
				most = max(most, b)
			}
			return most
		}
		got := tupleOrderEdges(g, a, bytes)
		var want []rewrite.OrderEdge
		if small {
			want = []rewrite.OrderEdge{{Node: "in_grad", After: "filt_grad"}}
		}
		if len(got) != len(want) || len(want) == 1 && got[0] != want[0] {
			t.Errorf("small %v: edges %v, want %v", small, got, want)
		}
	}
}

// TestTupleOrderFitsWaitingGradient: on tupleGraph, with no tensor eligible for swapping or
// recomputation (MinTensorBytes above every activation), a budget between two and three
// activations is met only by the tuple ordering edge; the plan reports it and the rewritten
// graph carries it and fits when simulated.
func TestTupleOrderFitsWaitingGradient(t *testing.T) {
	gd := tupleGraph(true)
	g, err := graphdef.NewGraph(gd, "tuple")
	if err != nil {
		t.Fatal(err)
	}
	act := int64(512 * 1024 * 4)
	base, err := cost.Simulate(g, slowProfile(), cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := base.Compute().PeakBytes; p < 3*act {
		t.Fatalf("unswapped peak %d: the graph no longer holds three activations at once", p)
	}
	budget := 5 * act / 2
	m := graphdef.NewModel(gd)
	m.Source = "tuple"
	res, err := RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: 4 * act}, PlanOptions{Profile: slowProfile(), Budget: budget, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	want := rewrite.OrderEdge{Node: "in_grad", After: "filt_grad"}
	if len(res.Orders) != 1 || res.Orders[0] != want {
		t.Fatalf("orders %v, want [%v]", res.Orders, want)
	}
	if !strings.HasSuffix(res.Eval.Strategy, "+order") || len(res.Swaps) != 0 {
		t.Errorf("strategy %q with %d swaps, want an ordering alone", res.Eval.Strategy, len(res.Swaps))
	}
	out, err := graphdef.NewGraph(res.Model.Graph, "rewritten")
	if err != nil {
		t.Fatal(err)
	}
	if n := out.Node("in_grad"); len(n.ControlInputs) != 1 || n.ControlInputs[0].Name != "filt_grad" {
		t.Fatalf("in_grad's control inputs %v, want filt_grad", n.ControlInputs)
	}
	r, err := cost.Simulate(out, slowProfile(), cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Compute().PeakBytes; p > budget {
		t.Errorf("rewritten peak %d over the budget %d", p, budget)
	}
}
