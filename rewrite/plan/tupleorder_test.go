package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

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

// tupleEdgesOf returns tupleOrderEdges of gd, with a node's bytes its largest output shape's
// size in float32.
func tupleEdgesOf(t *testing.T, gd *gpb.GraphDef) []rewrite.OrderEdge {
	t.Helper()
	g, err := graphdef.NewGraph(gd, "tuple")
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
	return tupleOrderEdges(g, a, bytes)
}

// TestTupleOrderEdges: tupleOrderEdges orders the tuple's largest member after the other,
// and adds nothing where no member is larger than the others.
func TestTupleOrderEdges(t *testing.T) {
	for _, small := range []bool{true, false} {
		got := tupleEdgesOf(t, tupleGraph(small))
		var want []rewrite.OrderEdge
		if small {
			want = []rewrite.OrderEdge{{Node: "in_grad", After: "filt_grad"}}
		}
		if len(got) != len(want) || len(want) == 1 && got[0] != want[0] {
			t.Errorf("small %v: edges %v, want %v", small, got, want)
		}
	}
}

// tupleVariant is tupleGraph(true) with filt_grad's inputs and device, and in_grad's inputs,
// given; tuples is the number of group_deps NoOps (each with its own Identity of in_grad)
// that wait for both members.
func tupleVariant(filtInputs []string, filtDevice string, inInputs []string, tuples int) *gpb.GraphDef {
	b := newBuilder()
	b.op("inp", "Placeholder", "", big)
	b.op("x", "Softmax", "", big, "inp")
	b.op("d", "Softmax", "", big, "x")
	b.op("in_grad", "Softmax", "", big, inInputs...)
	b.op("filt_grad", "Mul", filtDevice, []int64{4}, filtInputs...)
	train := []string{}
	for i := range tuples {
		grp := fmt.Sprintf("group_deps_%d", i)
		b.op(grp, "NoOp", "", nil, "^in_grad", "^filt_grad")
		b.op(fmt.Sprintf("cd_%d", i), "Identity", "", big, "in_grad", "^"+grp)
		b.op(fmt.Sprintf("e_%d", i), "Softmax", "", big, fmt.Sprintf("cd_%d", i))
		train = append(train, fmt.Sprintf("^e_%d", i))
	}
	b.op("train", "NoOp", "", nil, train...)
	return b.g
}

// TestTupleOrderEdgesSkips: tupleOrderEdges adds no edge where the smaller member descends
// from the largest (the edge would make a cycle), runs on another device, or is already
// ordered before the largest (in_grad's control input from filt_grad, which the graph's
// reachability labels, one depth-first search in node order, leave undecided); and adds an
// edge once when two tuples wait for the same members (edgeSet's de-duplication).
func TestTupleOrderEdgesSkips(t *testing.T) {
	want := rewrite.OrderEdge{Node: "in_grad", After: "filt_grad"}
	for _, c := range []struct {
		name   string
		gd     *gpb.GraphDef
		orders []rewrite.OrderEdge
	}{
		{"control", tupleVariant([]string{"d", "x"}, "", []string{"d"}, 1), []rewrite.OrderEdge{want}},
		{"filt_grad reads in_grad", tupleVariant([]string{"in_grad", "x"}, "", []string{"d"}, 1), nil},
		{"filt_grad on another device", tupleVariant([]string{"d", "x"}, "/device:CPU:1", []string{"d"}, 1), nil},
		{"in_grad already after filt_grad", tupleVariant([]string{"d", "x"}, "", []string{"d", "^filt_grad"}, 1), nil},
		{"two tuples", tupleVariant([]string{"d", "x"}, "", []string{"d"}, 2), []rewrite.OrderEdge{want}},
	} {
		got := tupleEdgesOf(t, c.gd)
		if !slices.Equal(got, c.orders) {
			t.Errorf("%s: edges %v, want %v", c.name, got, c.orders)
		}
	}
}

// TestTupleOrderFitsWaitingGradient: on tupleGraph, with no tensor eligible for swapping or
// recomputation, a budget between two and three activations is met only by the tuple
// ordering edge (checkOrderingAlone).
func TestTupleOrderFitsWaitingGradient(t *testing.T) {
	checkOrderingAlone(t, tupleGraph(true), "tuple", rewrite.OrderEdge{Node: "in_grad", After: "filt_grad"})
}

// TestTupleOrderGateBelowOverhead: auto does not plan again with the tuple ordering edges
// where its plan fits at an overhead of at most tupleOrderOverhead. On tupleGraph at two
// and a half activations, swaps fit at a few percent (slowProfile), and with no swaps and
// more than three activations the graph fits as it is; the ordering, which would fit both
// at no overhead, is not tried.
func TestTupleOrderGateBelowOverhead(t *testing.T) {
	act := int64(512 * 1024 * 4)
	for _, budget := range []int64{5 * act / 2, 7 * act / 2} {
		m := graphdef.NewModel(tupleGraph(true))
		m.Source = "tuple"
		res, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Profile: slowProfile(), Budget: budget, FitAccounting: "tfswap"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Eval.Fits || res.Eval.Overhead > tupleOrderOverhead {
			t.Fatalf("budget %d: %s fits %v at %+.1f%%: the case no longer fits below the gate", budget, res.Eval.Strategy, res.Eval.Fits, 100*res.Eval.Overhead)
		}
		if len(res.Orders) != 0 || strings.HasSuffix(res.Eval.Strategy, "+order") {
			t.Errorf("budget %d: %s with orders %v, want none below the gate", budget, res.Eval.Strategy, res.Orders)
		}
	}
}

// TestTupleOrderHandsOnOrderedGraph: where passTupleOrder keeps the plan of the graph with
// the tuple ordering edges (TestTupleOrderFitsWaitingGradient's case: only the edge fits),
// the state it hands to the later passes describes that graph: each of the plan's ordering
// edges is a control input in st.model and st.g, and st.a analyses st.g. The pass kept the
// input graph there while only the branch where nothing fits took the ordered one.
func TestTupleOrderHandsOnOrderedGraph(t *testing.T) {
	act := int64(512 * 1024 * 4)
	m := graphdef.NewModel(tupleGraph(true))
	m.Source = "tuple"
	po := PlanOptions{Profile: slowProfile(), Budget: 5 * act / 2, FitAccounting: "tfswap"}
	opts, g, err := rewrite.PrepareGraph(m, nil, rewrite.Options{MinTensorBytes: 4 * act})
	if err != nil {
		t.Fatal(err)
	}
	opts.GateSmallestOutput = true
	st := &planState{model: m, g: g, opts: opts, po: po, planner: autoStrategy, mode: "auto"}
	for _, p := range planPasses {
		if err := p.fn(st); err != nil {
			t.Fatal(err)
		}
		if p.name == "tuple-order" {
			break
		}
	}
	want := rewrite.OrderEdge{Node: "in_grad", After: "filt_grad"}
	if ev := st.final.ev; ev == nil || !ev.Fits || !slices.Equal(st.orders, []rewrite.OrderEdge{want}) {
		t.Fatalf("after tuple-order: plan %v with orders %v, want a plan that fits with [%v]", ev, st.orders, want)
	}
	for _, e := range st.orders {
		if n := st.g.Node(e.Node); n == nil || !slices.ContainsFunc(n.ControlInputs, func(c *graphdef.Node) bool { return c.Name == e.After }) {
			t.Errorf("st.g: %s has no control input from %s", e.Node, e.After)
		}
		found := false
		for _, nd := range st.model.Graph.GetNode() {
			found = found || nd.GetName() == e.Node && slices.Contains(nd.GetInput(), "^"+e.After)
		}
		if !found {
			t.Errorf("st.model: %s has no control input ^%s", e.Node, e.After)
		}
	}
	if st.a.Graph != st.g {
		t.Error("st.a does not analyse st.g")
	}
}
