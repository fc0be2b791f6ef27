package testgraph

import (
	"strings"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// Builder builds small GraphDefs for tests: every tensor is float32 of a given shape.
type Builder struct {
	// Graph is the GraphDef built so far.
	Graph *gpb.GraphDef
}

// NewBuilder returns a Builder of an empty graph.
func NewBuilder() *Builder { return &Builder{Graph: &gpb.GraphDef{}} }

// ShapeAttr returns an _output_shapes value listing shapes (nil: unknown rank).
func ShapeAttr(shapes ...[]int64) *apb.AttrValue {
	l := &apb.AttrValue_ListValue{}
	for _, s := range shapes {
		sp := &tspb.TensorShapeProto{}
		if s == nil {
			sp.UnknownRank = true
		}
		for _, d := range s {
			sp.Dim = append(sp.Dim, &tspb.TensorShapeProto_Dim{Size: d})
		}
		l.Shape = append(l.Shape, sp)
	}
	return &apb.AttrValue{Value: &apb.AttrValue_List{List: l}}
}

// TypeAttr returns an attr value holding dtype dt.
func TypeAttr(dt tpb.DataType) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_Type{Type: dt}}
}

// Op adds a node named name running op on device (may be empty) whose outputs have shape
// (nil: unknown rank), reading inputs ("^name" for a control input), and returns its NodeDef.
// The attrs are set for the ops tests use (dtype, T, N, frame_name, shape, _output_shapes).
func (b *Builder) Op(name, op, device string, shape []int64, inputs ...string) *npb.NodeDef {
	nd := &npb.NodeDef{Name: name, Op: op, Device: device, Input: inputs, Attr: map[string]*apb.AttrValue{}}
	f := TypeAttr(tpb.DataType_DT_FLOAT)
	switch op {
	case "Placeholder", "Const", "VariableV2":
		nd.Attr["dtype"] = f
	case "NoOp", "ControlTrigger":
	case "AddN", "Pack":
		nd.Attr["T"] = f
		n := 0
		for _, in := range inputs {
			if !strings.HasPrefix(in, "^") {
				n++
			}
		}
		nd.Attr["N"] = &apb.AttrValue{Value: &apb.AttrValue_I{I: int64(n)}}
	case "Enter":
		nd.Attr["T"] = f
		nd.Attr["frame_name"] = &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte("loop")}}
	default:
		nd.Attr["T"] = f
	}
	if op == "VariableV2" {
		nd.Attr["shape"] = &apb.AttrValue{Value: &apb.AttrValue_Shape{Shape: &tspb.TensorShapeProto{}}}
	}
	switch op {
	case "NoOp", "ControlTrigger":
	case "Switch":
		nd.Attr["_output_shapes"] = ShapeAttr(shape, shape)
	case "Merge":
		nd.Attr["_output_shapes"] = ShapeAttr(shape, []int64{})
	default:
		nd.Attr["_output_shapes"] = ShapeAttr(shape)
	}
	b.Graph.Node = append(b.Graph.Node, nd)
	return nd
}
