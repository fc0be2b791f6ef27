package cost

import (
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
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

// TestLoopMergeReruns: under MergeReruns a while loop's Merge runs again when its
// NextIteration ends, as Grappler's VirtualScheduler runs it, and holds the loop Enter's
// tensor and its own output until then; both are then released, the NextIteration's tensor
// too. A one-op loop body over a 16 KiB tensor: the Merge's span ends after the
// NextIteration's, the peak holds the Enter's tensor and the Merge's output beside the
// body's (without the rule both are freed before the body runs), and nothing is left at the
// end of the step.
func TestLoopMergeReruns(t *testing.T) {
	b := newBuilder()
	const dev = "/device:GPU:0"
	sq := []int64{64, 64}
	frame := map[string]*apb.AttrValue{"frame_name": sAttr("loop")}
	b.op("x", "Placeholder", dev, sq)
	b.node("e", "Enter", dev, [][]int64{sq}, frame, "x")
	b.node("m", "Merge", dev, [][]int64{sq, {}}, map[string]*apb.AttrValue{"N": iAttr(2)}, "e", "ni")
	b.node("p", "Placeholder", dev, [][]int64{{}}, map[string]*apb.AttrValue{"dtype": tAttr(tpb.DataType_DT_BOOL)})
	b.node("pe", "Enter", dev, [][]int64{{}}, map[string]*apb.AttrValue{"frame_name": sAttr("loop"), "T": tAttr(tpb.DataType_DT_BOOL)}, "p")
	b.node("lc", "LoopCond", dev, [][]int64{{}}, nil, "pe")
	b.node("s", "Switch", dev, [][]int64{sq, sq}, nil, "m", "lc")
	b.op("i", "Identity", dev, sq, "s:1")
	b.op("y", "Relu", dev, sq, "i")
	b.op("ni", "NextIteration", dev, sq, "y")
	b.op("ex", "Exit", dev, sq, "s")
	b.op("out", "Relu", dev, sq, "ex")
	g := b.graph(t)
	sim := func(reruns bool) *Result {
		conv := GrapplerConventions()
		conv.BothBranches, conv.MergeReruns = true, reruns
		r, err := Simulate(g, unitProfile(), Options{Fetch: []string{"out"}, Conventions: conv, Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	with, without := sim(true), sim(false)
	var merges []OpSpan
	var ni OpSpan
	for _, o := range with.Timeline.Ops {
		switch o.Node.Name {
		case "m":
			merges = append(merges, o)
		case "ni":
			ni = o
		}
	}
	// The trace gives the Merge one span, from its first run's start to its second's end.
	if len(merges) != 1 || merges[0].Start >= ni.Start || merges[0].End <= ni.End {
		t.Fatalf("merge-reruns: the Merge's spans %v, the NextIteration's %d-%d ns: want one span from before it to after it", merges, ni.Start, ni.End)
	}
	const tensor = 64 * 64 * 4
	pw, pwo := with.Compute().PeakBytes, without.Compute().PeakBytes
	t.Logf("peak %d bytes with merge-reruns, %d without", pw, pwo)
	if pw <= pwo+tensor {
		t.Errorf("merge-reruns: peak %d bytes, want more than the Enter's %d bytes above %d", pw, tensor, pwo)
	}
	live := map[string]bool{}
	for _, l := range with.Compute().Live {
		live[l.Name] = true
	}
	for _, n := range []string{"e:0", "m:0", "i:0"} {
		if !live[n] {
			t.Errorf("merge-reruns: %s not live at the peak (%v)", n, with.Compute().Live)
		}
	}
	mem := with.Timeline.Memory[0]
	if end := mem[len(mem)-1]; end.Bytes != 0 {
		t.Errorf("merge-reruns: %d bytes still allocated at the end of the step (%d ns)", end.Bytes, end.T)
	}
}
