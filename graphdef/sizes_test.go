package graphdef

import (
	"fmt"
	"math"
	"strings"
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

func TestCheckedSizeArithmetic(t *testing.T) {
	for _, c := range []struct {
		a, b, limit int64
		want        int64
		ok          bool
	}{
		{3, 4, 100, 12, true},
		{1 << 40, 1 << 40, math.MaxInt64, 0, false}, // 2^80 wraps to 0 in int64
		{1 << 62, 4, math.MaxInt64, 0, false},
		{1 << 25, 1 << 25, MaxTensorBytes, 1 << 50, true},
		{1<<25 + 1, 1 << 25, MaxTensorBytes, 0, false},
		{-1, 2, 100, 0, false},
		{0, math.MaxInt64, 100, 0, true},
	} {
		got, ok := MulBytes(c.a, c.b, c.limit)
		if got != c.want || ok != c.ok {
			t.Errorf("MulBytes(%d, %d, %d) = %d, %v; want %d, %v", c.a, c.b, c.limit, got, ok, c.want, c.ok)
		}
	}
	if _, ok := AddBytes(math.MaxInt64-1, 2, math.MaxInt64); ok {
		t.Error("AddBytes overflowed")
	}
	if n, ok := AddBytes(1<<55, 1<<55, MaxGraphBytes); !ok || n != 1<<56 {
		t.Errorf("AddBytes(2^55, 2^55) = %d, %v", n, ok)
	}
	// Unknown and zero dimensions count as 1, so that every partial product stays bounded.
	if n, ok := SizeBound(4, []int64{-1, 1 << 20, 0, 1 << 20}); !ok || n != 4<<40 {
		t.Errorf("SizeBound = %d, %v", n, ok)
	}
	if _, ok := SizeBound(4, []int64{1 << 40, 0, 1 << 40}); ok {
		t.Error("SizeBound accepted dimensions whose partial product is 2^80")
	}
}

// sizedGraph returns a graph of a placeholder and n Relus of it, each with _output_shapes
// shape.
func sizedGraph(n int, shape []int64) *gpb.GraphDef {
	sh := &tspb.TensorShapeProto{}
	for _, d := range shape {
		sh.Dim = append(sh.Dim, &tspb.TensorShapeProto_Dim{Size: d})
	}
	shapes := &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{Shape: []*tspb.TensorShapeProto{sh}}}}
	f32 := &apb.AttrValue{Value: &apb.AttrValue_Type{Type: tpb.DataType_DT_FLOAT}}
	g := &gpb.GraphDef{Node: []*npb.NodeDef{{Name: "x", Op: "Placeholder", Attr: map[string]*apb.AttrValue{"dtype": f32, "_output_shapes": shapes}}}}
	for i := 0; i < n; i++ {
		g.Node = append(g.Node, &npb.NodeDef{Name: fmt.Sprintf("r%d", i), Op: "Relu", Input: []string{"x"}, Attr: map[string]*apb.AttrValue{"T": f32, "_output_shapes": shapes}})
	}
	return g
}

// TestTensorSizesNeverWrap: a shape whose size overflows int64 is refused with the tensor
// named, instead of printing as a negative or small size (issue 11, item 5); a graph whose
// tensors together pass MaxGraphBytes is refused by TotalBytes with the tensor named.
func TestTensorSizesNeverWrap(t *testing.T) {
	_, err := NewGraph(sizedGraph(1, []int64{1 << 62, 4}), "huge.pb")
	if err == nil || !strings.Contains(err.Error(), `tensor x:0 has shape (4611686018427387904, 4) float32, more than 1 PiB`) {
		t.Errorf("huge shape: %v", err)
	}
	// 2^48 float32s are 2^50 bytes: one is accepted and sized exactly.
	g, err := NewGraph(sizedGraph(62, []int64{1 << 48}), "big.pb")
	if err != nil {
		t.Fatal(err)
	}
	if n, ok, _ := (Tensor{Node: g.Nodes[1]}).Bytes(); !ok || n != 1<<50 {
		t.Errorf("Bytes = %d, %v", n, ok)
	}
	if total, err := g.TotalBytes(); err != nil || total != 63<<50 {
		t.Errorf("TotalBytes = %d, %v", total, err)
	}
	g, err = NewGraph(sizedGraph(64, []int64{1 << 48}), "bigger.pb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.TotalBytes(); err == nil || !strings.Contains(err.Error(), "bigger.pb: ") || !strings.Contains(err.Error(), "passed at tensor r63:0") {
		t.Errorf("TotalBytes over the limit: %v", err)
	}
}

// TestElementBytesTable checks that ElementBytes's table gives dtypeBytes's sizes, for every
// dtype, its reference dtype and values outside the enum.
func TestElementBytesTable(t *testing.T) {
	sized := 0
	for v := -3; v < 2*refOffset+30; v++ {
		dt := DataType(v)
		want, wantOK := dtypeBytes[BaseType(dt)]
		got, ok := ElementBytes(dt)
		if got != want || ok != wantOK {
			t.Errorf("ElementBytes(%d) = %d, %v; want %d, %v", v, got, ok, want, wantOK)
		}
		if ok {
			sized++
		}
	}
	// Each fixed-size dtype and its reference dtype.
	if sized != 2*len(dtypeBytes) {
		t.Errorf("%d dtypes sized, want %d", sized, 2*len(dtypeBytes))
	}
}
