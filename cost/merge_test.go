package cost

import (
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
)

// TestMergeForwardsItsInput: a Merge's output is its one live input's tensor
// (MergeOp::Compute sets output 0 to that input, a buffer shared, not copied), like an
// Identity's. A 256 KiB MatMul read by a Merge then by a MatMul peaks where the same chain
// with an Identity in the Merge's place peaks (the MatMul's output fetched), by tfswap's
// accounting; under Grappler's (no aliasing) the Merge's output is a buffer of its own.
func TestMergeForwardsItsInput(t *testing.T) {
	peak := func(op string, conv Conventions) int64 {
		b := newBuilder()
		const dev = "/device:GPU:0"
		b.op("x", "Placeholder", dev, []int64{256, 1})
		b.variable("v", dev, []int64{1, 256})
		b.op("a", "MatMul", dev, []int64{256, 256}, "x", "v/read")
		if op == "Merge" {
			b.node("m", "Merge", dev, [][]int64{{256, 256}, {}}, map[string]*apb.AttrValue{"N": iAttr(1)}, "a")
		} else {
			b.op("m", op, dev, []int64{256, 256}, "a")
		}
		b.variable("w", dev, []int64{256, 1})
		b.op("y", "MatMul", dev, []int64{256, 1}, "m", "w/read")
		g := b.graph(t)
		r, err := Simulate(g, unitProfile(), Options{Fetch: []string{"y"}, Conventions: conv})
		if err != nil {
			t.Fatal(err)
		}
		return r.Compute().PeakBytes
	}
	merge, ident := peak("Merge", Conventions{}), peak("Identity", Conventions{})
	t.Logf("tfswap: the Merge chain peaks at %d bytes, the Identity chain at %d", merge, ident)
	if merge != ident {
		t.Errorf("tfswap: the Merge chain peaks at %d bytes, the Identity chain at %d", merge, ident)
	}
	// Under Grappler's rules the Merge's output is a second 256 KiB buffer.
	if g := peak("Merge", GrapplerConventions()); g < merge+256*256*4 {
		t.Errorf("grappler: the Merge chain peaks at %d bytes, less than a second buffer above %d", g, merge)
	}
}

// TestShapeMadeTensorsCarryTheBatch: the tensors a Fill or a random op makes from the
// Shape of a tensor that carries the batch carry it too, read directly or through an
// Identity (array_ops.zeros(shape(x)) in a v1 conditional's zero gradients, dropout's
// random_uniform(shape(x))), so that a batch scale scales them; the Shape's own value is
// not scaled, nor is a Fill whose shape is a constant.
func TestShapeMadeTensorsCarryTheBatch(t *testing.T) {
	b := newBuilder()
	const dev = "/device:GPU:0"
	b.op("x", "Placeholder", dev, []int64{4, 16})
	b.op("a", "Relu", dev, []int64{4, 16}, "x")
	b.node("s", "Shape", dev, [][]int64{{2}}, map[string]*apb.AttrValue{"out_type": tAttr(i32)}, "a")
	b.node("si", "Identity", dev, [][]int64{{2}}, map[string]*apb.AttrValue{"T": tAttr(i32)}, "s")
	b.node("c", "Const", dev, [][]int64{{}}, nil)
	b.node("k", "Const", dev, [][]int64{{2}}, map[string]*apb.AttrValue{"dtype": tAttr(i32)})
	b.node("zeros", "Fill", dev, [][]int64{{4, 16}}, map[string]*apb.AttrValue{"index_type": tAttr(i32)}, "si", "c")
	b.node("u", "RandomUniform", dev, [][]int64{{4, 16}}, map[string]*apb.AttrValue{"dtype": tAttr(f32), "T": tAttr(i32)}, "s")
	b.node("fixed", "Fill", dev, [][]int64{{4, 16}}, map[string]*apb.AttrValue{"index_type": tAttr(i32)}, "k", "c")
	g := b.graph(t)
	s, err := NewShapes(g, 8)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"a": 32, "zeros": 32, "u": 32, "fixed": 4, "s": 2} {
		if got := s.Out(g.Node(name), 0); len(got) == 0 || got[0] != want {
			t.Errorf("%s: shape %v, want dimension 0 %d", name, got, want)
		}
	}
}
