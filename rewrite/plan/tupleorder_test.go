package plan

import (
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
// recomputation, a budget between two and three activations is met only by the tuple
// ordering edge (checkOrderingAlone).
func TestTupleOrderFitsWaitingGradient(t *testing.T) {
	checkOrderingAlone(t, tupleGraph(true), "tuple", rewrite.OrderEdge{Node: "in_grad", After: "filt_grad"})
}
