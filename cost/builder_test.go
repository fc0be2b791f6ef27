package cost

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// builder builds small GraphDefs for tests.
type builder struct{ g *gpb.GraphDef }

func newBuilder() *builder { return &builder{g: &gpb.GraphDef{}} }

func shapeProto(s []int64) *tspb.TensorShapeProto {
	sp := &tspb.TensorShapeProto{}
	if s == nil {
		sp.UnknownRank = true
	}
	for _, d := range s {
		sp.Dim = append(sp.Dim, &tspb.TensorShapeProto_Dim{Size: d})
	}
	return sp
}

func shapesAttr(shapes ...[]int64) *apb.AttrValue {
	l := &apb.AttrValue_ListValue{}
	for _, s := range shapes {
		l.Shape = append(l.Shape, shapeProto(s))
	}
	return &apb.AttrValue{Value: &apb.AttrValue_List{List: l}}
}

func tAttr(dt tpb.DataType) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_Type{Type: dt}}
}
func bAttr(b bool) *apb.AttrValue   { return &apb.AttrValue{Value: &apb.AttrValue_B{B: b}} }
func sAttr(s string) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(s)}} }
func iAttr(i int64) *apb.AttrValue  { return &apb.AttrValue{Value: &apb.AttrValue_I{I: i}} }
func intsAttr(v ...int64) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{I: v}}}
}
func shapeAttr(s []int64) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_Shape{Shape: shapeProto(s)}}
}

var f32 = tpb.DataType_DT_FLOAT

// node adds a node with the given output shapes (one per output) and attrs; "T" is set to
// float32 unless attrs give it or the op takes "dtype".
func (b *builder) node(name, op, device string, shapes [][]int64, attrs map[string]*apb.AttrValue, inputs ...string) *npb.NodeDef {
	nd := &npb.NodeDef{Name: name, Op: op, Device: device, Input: inputs, Attr: map[string]*apb.AttrValue{}}
	switch op {
	case "Placeholder", "Const", "VarHandleOp", "ReadVariableOp", "VariableV2":
		nd.Attr["dtype"] = tAttr(f32)
	case "NoOp", "ResourceApplyGradientDescent", "AssignVariableOp":
		if op == "ResourceApplyGradientDescent" {
			nd.Attr["T"] = tAttr(f32)
		}
		if op == "AssignVariableOp" {
			nd.Attr["dtype"] = tAttr(f32)
		}
	case "AddN":
		nd.Attr["T"] = tAttr(f32)
		n := 0
		for _, in := range inputs {
			if !strings.HasPrefix(in, "^") {
				n++
			}
		}
		nd.Attr["N"] = iAttr(int64(n))
	default:
		nd.Attr["T"] = tAttr(f32)
	}
	for k, v := range attrs {
		nd.Attr[k] = v
	}
	nd.Attr["_output_shapes"] = shapesAttr(shapes...)
	b.g.Node = append(b.g.Node, nd)
	return nd
}

// op adds a one-output node.
func (b *builder) op(name, op, device string, shape []int64, inputs ...string) *npb.NodeDef {
	var shapes [][]int64
	switch op {
	case "NoOp", "ResourceApplyGradientDescent", "AssignVariableOp":
	default:
		shapes = [][]int64{shape}
	}
	return b.node(name, op, device, shapes, nil, inputs...)
}

// variable adds a VarHandleOp of the given shape and its ReadVariableOp name+"/read".
func (b *builder) variable(name, device string, shape []int64) {
	b.node(name, "VarHandleOp", device, [][]int64{{}}, map[string]*apb.AttrValue{
		"shape": shapeAttr(shape), "shared_name": sAttr(name)})
	b.node(name+"/read", "ReadVariableOp", device, [][]int64{shape}, nil, name)
}

func (b *builder) graph(t testing.TB) *graphdef.Graph {
	t.Helper()
	g, err := graphdef.NewGraph(b.g, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// unitProfile has round figures so that times can be worked out by hand: 1 FLOP/ns, 1 byte/ns
// of memory bandwidth, host links of 1 byte/ns each way, no latencies.
func unitProfile() *Profile {
	return &Profile{
		Name: "unit", MemoryBytes: 1 << 20, FP32: 1e9, FP16: 1e9, MemBandwidth: 1e9,
		D2H: 1e9, H2D: 1e9, Duplex: true, HostFLOPS: 1e9, HostMemBandwidth: 1e9,
	}
}
