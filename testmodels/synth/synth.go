// Package synth generates synthetic TensorFlow training graphs of any size for tfswap's scale
// benchmark (issue 14): a chain of residual blocks, each a 3x3 Conv2D, a Relu and an AddV2
// of the block's input, followed by the backward half (ReluGrad, Conv2DBackpropInput,
// Conv2DBackpropFilter, AddN) and one ResourceApplyGradientDescent per filter. Every
// activation a block keeps for its backward step (the block's input and its Relu output) is a
// swap candidate, so the planning problem grows with the graph.
//
// Graphs are deterministic: the same Config gives the same GraphDef, and Marshal gives the
// same bytes. Every node carries _output_shapes, node devices are empty, and the GraphDef is
// in topological order. The graphs are valid TensorFlow 2.18 graphs (loss "loss", train op
// "train", placeholder "input"), but they have no initializer: they are built for planning
// and simulation, not for training.
package synth

import (
	"fmt"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	vpb "github.com/wamuir/graft/tensorflow/core/framework/versions_go_proto"
)

// Config sizes a synthetic graph.
type Config struct {
	// Nodes is the number of nodes wanted; the graph has the largest whole number of blocks
	// that keeps it within Nodes (NodesPerBlock per block, plus Fixed), and at least one block.
	Nodes int
	// Batch, Size and Channels shape the activations, [Batch, Size, Size, Channels] float32;
	// zero means 8, 32 and 16 (512 KiB per activation).
	Batch, Size, Channels int
}

// NodesPerBlock is the number of nodes one residual block adds (forward and backward).
const NodesPerBlock = 10

// Fixed is the number of nodes a graph has besides its blocks.
const Fixed = 8

// Blocks returns the number of residual blocks Generate builds for c.
func (c Config) Blocks() int {
	return max(1, (c.Nodes-Fixed)/NodesPerBlock)
}

func (c Config) withDefaults() Config {
	if c.Batch <= 0 {
		c.Batch = 8
	}
	if c.Size <= 0 {
		c.Size = 32
	}
	if c.Channels <= 0 {
		c.Channels = 16
	}
	return c
}

// builder accumulates nodes.
type builder struct {
	g *gpb.GraphDef
}

func shapeProto(dims ...int64) *tspb.TensorShapeProto {
	s := &tspb.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &tspb.TensorShapeProto_Dim{Size: d})
	}
	return s
}

func shapesAttr(shapes ...*tspb.TensorShapeProto) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{Shape: shapes}}}
}

func typeAttr(t typb.DataType) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_Type{Type: t}}
}

func strAttr(s string) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(s)}} }

func boolAttr(b bool) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_B{B: b}} }

func intsAttr(v ...int64) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{I: v}}}
}

func (b *builder) add(name, op string, inputs []string, attrs map[string]*apb.AttrValue) {
	b.g.Node = append(b.g.Node, &npb.NodeDef{Name: name, Op: op, Input: inputs, Attr: attrs})
}

// convAttrs are the attrs of the three convolution ops.
func convAttrs(out *tspb.TensorShapeProto) map[string]*apb.AttrValue {
	return map[string]*apb.AttrValue{
		"T": typeAttr(typb.DataType_DT_FLOAT), "strides": intsAttr(1, 1, 1, 1), "padding": strAttr("SAME"),
		"explicit_paddings": intsAttr(), "dilations": intsAttr(1, 1, 1, 1), "data_format": strAttr("NHWC"),
		"use_cudnn_on_gpu": boolAttr(true), "_output_shapes": shapesAttr(out),
	}
}

func (b *builder) constInt32(name string, v []int64) {
	var vals []int32
	for _, x := range v {
		vals = append(vals, int32(x))
	}
	b.add(name, "Const", nil, map[string]*apb.AttrValue{
		"dtype": typeAttr(typb.DataType_DT_INT32),
		"value": {Value: &apb.AttrValue_Tensor{Tensor: &tpb.TensorProto{Dtype: typb.DataType_DT_INT32,
			TensorShape: shapeProto(int64(len(v))), IntVal: vals}}},
		"_output_shapes": shapesAttr(shapeProto(int64(len(v)))),
	})
}

// Generate builds the synthetic training graph c describes.
func Generate(c Config) *gpb.GraphDef {
	c = c.withDefaults()
	n := c.Blocks()
	B, S, C := int64(c.Batch), int64(c.Size), int64(c.Channels)
	act := shapeProto(B, S, S, C)
	filt := shapeProto(3, 3, C, C)
	b := &builder{g: &gpb.GraphDef{Versions: &vpb.VersionDef{Producer: 1994}}}
	f32 := typeAttr(typb.DataType_DT_FLOAT)
	elt := func() map[string]*apb.AttrValue {
		return map[string]*apb.AttrValue{"T": f32, "_output_shapes": shapesAttr(act)}
	}

	// Fixed nodes (Fixed of them): input, the shape constants, the learning rate, the loss,
	// its axes, the gradient seed and the train op.
	b.add("input", "Placeholder", nil, map[string]*apb.AttrValue{
		"dtype": f32, "shape": {Value: &apb.AttrValue_Shape{Shape: act}}, "_output_shapes": shapesAttr(act)})
	b.constInt32("input_sizes", []int64{B, S, S, C})
	b.constInt32("filter_sizes", []int64{3, 3, C, C})
	b.add("learning_rate", "Const", nil, map[string]*apb.AttrValue{
		"dtype": f32,
		"value": {Value: &apb.AttrValue_Tensor{Tensor: &tpb.TensorProto{Dtype: typb.DataType_DT_FLOAT,
			TensorShape: shapeProto(), FloatVal: []float32{0.01}}}},
		"_output_shapes": shapesAttr(shapeProto()),
	})

	x := func(i int) string { // the input of block i (i = n: the last block's output)
		if i == 0 {
			return "input"
		}
		return fmt.Sprintf("block%d/add", i-1)
	}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("block%d/", i)
		b.add(p+"w", "VarHandleOp", nil, map[string]*apb.AttrValue{
			"dtype": f32, "shape": {Value: &apb.AttrValue_Shape{Shape: filt}}, "container": strAttr(""),
			"shared_name": strAttr(p + "w"), "allowed_devices": {Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{}}},
			"_output_shapes": shapesAttr(shapeProto())})
		b.add(p+"w/read", "ReadVariableOp", []string{p + "w"}, map[string]*apb.AttrValue{
			"dtype": f32, "_output_shapes": shapesAttr(filt)})
		b.add(p+"conv", "Conv2D", []string{x(i), p + "w/read"}, convAttrs(act))
		b.add(p+"relu", "Relu", []string{p + "conv"}, elt())
		b.add(p+"add", "AddV2", []string{p + "relu", x(i)}, elt())
	}
	b.constInt32("loss/axes", []int64{0, 1, 2, 3})
	b.add("loss", "Sum", []string{x(n), "loss/axes"}, map[string]*apb.AttrValue{
		"T": f32, "Tidx": typeAttr(typb.DataType_DT_INT32), "keep_dims": boolAttr(false),
		"_output_shapes": shapesAttr(shapeProto())})
	b.add("grad/seed", "OnesLike", []string{x(n)}, elt())

	// g(i) is the gradient of block i's output.
	g := func(i int) string {
		if i == n-1 {
			return "grad/seed"
		}
		return fmt.Sprintf("grad/block%d/addn", i+1)
	}
	var updates []string
	for i := n - 1; i >= 0; i-- {
		p := fmt.Sprintf("grad/block%d/", i)
		q := fmt.Sprintf("block%d/", i)
		b.add(p+"relu", "ReluGrad", []string{g(i), q + "relu"}, elt())
		b.add(p+"input", "Conv2DBackpropInput", []string{"input_sizes", q + "w/read", p + "relu"}, convAttrs(act))
		b.add(p+"filter", "Conv2DBackpropFilter", []string{x(i), "filter_sizes", p + "relu"}, convAttrs(filt))
		b.add(p+"addn", "AddN", []string{p + "input", g(i)}, map[string]*apb.AttrValue{
			"T": f32, "N": {Value: &apb.AttrValue_I{I: 2}}, "_output_shapes": shapesAttr(act)})
		b.add(p+"update", "ResourceApplyGradientDescent", []string{q + "w", "learning_rate", p + "filter"},
			map[string]*apb.AttrValue{"T": f32, "use_locking": boolAttr(false), "_output_shapes": shapesAttr()})
		updates = append(updates, "^"+p+"update")
	}
	b.add("train", "NoOp", updates, map[string]*apb.AttrValue{"_output_shapes": shapesAttr()})
	return b.g
}
