package cost

import (
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// TestFusedBatchNormForwarding: FusedBatchNormV3 writes y into x's buffer when it is x's last
// reader (TensorFlow's kernel forwards input 0 to output 0), so a conv -> batch norm -> relu
// chain holds one 1 MiB activation less at the batch norm than when x is read again later (as
// the gradient reads it); FusedBatchNormGradV3 never forwards, and Grappler's accounting
// (NoForwarding) counts both alike.
var i32 = tpb.DataType_DT_INT32

func TestFusedBatchNormForwarding(t *testing.T) {
	act := []int64{64, 64, 64, 1} // 1 MiB of float32
	build := func(keepX bool) *builder {
		b := newBuilder()
		b.op("x0", "Placeholder", "", []int64{1, 64, 64, 1})
		b.node("mult", "Const", "", [][]int64{{4}}, map[string]*apb.AttrValue{"dtype": tAttr(i32)})
		b.node("c", "Tile", "", [][]int64{act}, map[string]*apb.AttrValue{"Tmultiples": tAttr(i32)}, "x0", "mult") // x: 1 MiB, not fed
		ch := []int64{1}
		b.op("scale", "Const", "", ch)
		b.node("bn", "FusedBatchNormV3", "", [][]int64{act, ch, ch, ch, ch, ch},
			map[string]*apb.AttrValue{"U": tAttr(f32), "is_training": bAttr(true)}, "c", "scale", "scale", "scale", "scale")
		b.op("y", "Relu", "", act, "bn")
		last := "y"
		if keepX {
			b.op("later", "AddV2", "", act, "y", "c") // reads x after the batch norm
			last = "later"
		}
		b.op("train", "NoOp", "", nil, "^"+last)
		return b
	}
	peak := func(keepX bool, conv Conventions) int64 {
		t.Helper()
		r, err := Simulate(build(keepX).graph(t), unitProfile(), Options{Conventions: conv})
		if err != nil {
			t.Fatal(err)
		}
		return r.Compute().PeakBytes
	}
	const mib = 1 << 20
	forwarded, kept := peak(false, Conventions{}), peak(true, Conventions{})
	// With x forwarded, c's buffer becomes bn's y and then (Relu forwarding) y's: 1 MiB and
	// small tensors. With x read later, bn allocates y beside x.
	if kept-forwarded < mib*15/16 {
		t.Errorf("peak with x forwarded into y %d, with x read later %d: want about 1 MiB less when forwarded (the small statistics aside)", forwarded, kept)
	}
	if g1, g2 := peak(false, GrapplerConventions()), peak(true, GrapplerConventions()); g1 < forwarded+mib*15/16 {
		t.Errorf("Grappler's accounting %d (x read later: %d) should count y apart from x, 1 MiB above tfswap's %d", g1, g2, forwarded)
	}
}
