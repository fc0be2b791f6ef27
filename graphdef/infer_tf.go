//go:build tensorflow

package graphdef

import (
	"fmt"

	tf "github.com/wamuir/graft/tensorflow"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	"google.golang.org/protobuf/proto"
)

func init() { tensorflowInfer = InferShapesTensorFlow }

// InferShapesTensorFlow infers the shapes of m's outputs with TensorFlow's own shape
// functions: it imports the graph into a TF_Graph (TF_GraphImportGraphDef runs every op's
// registered shape function, constant-folding small shape computations as it goes) and reads
// each output's shape with TF_GraphGetTensorShape. batch, when positive, is first given to
// the unknown leading dimension of the placeholders' shape attrs (in a copy; m is not
// changed). It returns the shapes by node name (nil for an unknown rank, -1 for unknown
// dimensions).
func InferShapesTensorFlow(m *Model, batch int64) (map[string][][]int64, error) {
	def := m.Graph
	if batch > 0 {
		def = proto.Clone(m.Graph).(*gpb.GraphDef)
		for _, n := range def.GetNode() {
			if n.GetOp() != "Placeholder" && n.GetOp() != "PlaceholderWithDefault" {
				continue
			}
			sh := n.GetAttr()["shape"].GetShape()
			if sh == nil || sh.GetUnknownRank() || len(sh.GetDim()) == 0 || sh.GetDim()[0].GetSize() >= 0 {
				continue
			}
			c := proto.Clone(sh).(*tspb.TensorShapeProto)
			c.Dim[0].Size = batch
			n.Attr["shape"] = &apb.AttrValue{Value: &apb.AttrValue_Shape{Shape: c}}
			delete(n.Attr, "_output_shapes")
		}
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(def)
	if err != nil {
		return nil, err
	}
	g := tf.NewGraph()
	if err := g.Import(data, ""); err != nil {
		return nil, fmt.Errorf("%s: TensorFlow cannot import the graph to infer its shapes: %v", m.Source, err)
	}
	out := make(map[string][][]int64, len(def.GetNode()))
	for _, op := range g.Operations() {
		shapes := make([][]int64, op.NumOutputs())
		for i := range shapes {
			s := op.Output(i).Shape()
			if s.NumDimensions() < 0 {
				continue
			}
			dims, err := s.ToSlice()
			if err != nil {
				continue
			}
			if dims == nil {
				dims = []int64{}
			}
			shapes[i] = dims
		}
		out[op.Name()] = shapes
	}
	return out, nil
}
