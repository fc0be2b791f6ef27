package graphdef

import (
	"fmt"
	"maps"
	"sort"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
)

// InferOptions say how InferShapes completes a graph's shapes.
type InferOptions struct {
	// Batch, when positive, is the size given to an unknown leading dimension of the graph's
	// placeholders (Placeholder, PlaceholderWithDefault): the batch a graph built with a
	// None batch dimension is run with.
	Batch int64
	// Engine chooses who infers: "" the best available (TensorFlow's own shape functions
	// in a binary built with the TensorFlow runtime, else tfswap's), EngineTensorFlow or
	// EngineTfswap.
	Engine string
}

// Shape inference engines (InferOptions.Engine, ShapeStats.Engine).
const (
	// EngineTensorFlow imports the graph into a TF_Graph, which runs TensorFlow's registered
	// shape function of every op, and reads each output's shape (TF_GraphGetTensorShape).
	EngineTensorFlow = "tensorflow"
	// EngineTfswap is tfswap's own inference, in pure Go, for the ops its cost model knows
	// (InferShapesPure).
	EngineTfswap = "tfswap"
)

// ShapeStats describe how completely a graph's tensor sizes are known.
type ShapeStats struct {
	// Engine is the engine that inferred shapes ("" when none ran).
	Engine string `json:"engine,omitempty"`
	// Batch is InferOptions.Batch (0 when not given).
	Batch int64 `json:"batch,omitempty"`
	// Outputs counts the graph's outputs of a dtype with a fixed element size (the tensors
	// whose bytes the simulator counts).
	Outputs int `json:"outputs"`
	// Unknown counts those whose size is not known (no shape, unknown rank or an unknown
	// dimension) after inference.
	Unknown int `json:"unknown"`
	// Inferred counts the outputs whose shape inference completed (they had no known size
	// before).
	Inferred int `json:"inferred"`
	// Examples names up to five tensors whose size stays unknown.
	Examples []string `json:"examples,omitempty"`
}

// UnknownShare returns the fraction of Outputs whose size is unknown (0 for no outputs).
func (s ShapeStats) UnknownShare() float64 {
	if s.Outputs == 0 {
		return 0
	}
	return float64(s.Unknown) / float64(s.Outputs)
}

// UnknownWarnShare is the share of unknown tensor sizes above which tfswap warns that its
// figures undercount (ShapeStats.Warning).
const UnknownWarnShare = 0.05

// Warning returns the warning to print when more than UnknownWarnShare of the graph's tensor
// sizes stay unknown, naming the share and the fixes; "" otherwise.
func (s ShapeStats) Warning() string {
	if s.UnknownShare() <= UnknownWarnShare {
		return ""
	}
	msg := fmt.Sprintf("the sizes of %d of %d tensors (%.1f%%) are unknown", s.Unknown, s.Outputs, 100*s.UnknownShare())
	if len(s.Examples) > 0 {
		msg += fmt.Sprintf(" (e.g. %s)", s.Examples[0])
	}
	msg += "; they count as 0 bytes, so peaks, swaps and plans undercount. Fixes: write the graph with shapes (as_graph_def(add_shapes=True)); give the batch of an unknown batch dimension with --batch N"
	if s.Engine != EngineTensorFlow && s.Engine != EngineDelegated {
		msg += "; run the command with tfswap-runtime (the TensorFlow-backed binary make setup builds next to tfswap), which infers shapes with TensorFlow's own shape functions"
	}
	return msg
}

// skipInferShare is the share of unknown sizes up to which InferShapes does not infer
// (without a batch to give).
const skipInferShare = 0.01

// tensorflowInfer is TensorFlow-backed inference (InferShapesTensorFlow), set in a build with
// the TensorFlow runtime (-tags tensorflow); nil otherwise. It returns the shapes of every
// node's outputs by node name (nil for an unknown rank, -1 for unknown dimensions).
var tensorflowInfer func(m *Model, batch int64) (map[string][][]int64, error)

// DelegatedInference, when set, infers shapes with TensorFlow in another process (a pure
// tfswap runs tfswap-runtime's hidden shapes command). InferShapes calls it, in a binary
// without the runtime, only when tfswap's own inference leaves more than UnknownWarnShare of
// the sizes unknown; an error from it leaves tfswap's inference in place.
var DelegatedInference func(m *Model, batch int64) (map[string][][]int64, error)

// EngineDelegated is ShapeStats.Engine when DelegatedInference completed the shapes.
const EngineDelegated = "tensorflow (tfswap-runtime)"

// TensorFlowShapes returns the shapes TensorFlow's shape functions infer for m's outputs
// (InferShapesTensorFlow), by node name; an error in a binary without the runtime.
func TensorFlowShapes(m *Model, batch int64) (map[string][][]int64, error) {
	if tensorflowInfer == nil {
		return nil, fmt.Errorf("this binary was built without the TensorFlow runtime: it cannot infer shapes with TensorFlow")
	}
	return tensorflowInfer(m, batch)
}

// HaveTensorFlowInference reports whether this binary infers shapes with TensorFlow.
func HaveTensorFlowInference() bool { return tensorflowInfer != nil }

// InferShapes completes the _output_shapes of m's nodes: it infers every output's shape
// (TensorFlow's shape functions when the binary has the runtime, else tfswap's own for the
// ops it knows) and, for each node whose outputs become better known, sets the node's
// _output_shapes attr. Known dimensions in the graph are kept; inference only fills unknown
// ones. Without opts.Batch, a graph with at most 1% of its sizes unknown is left as it is.
// It returns how completely sizes are known afterwards.
//
// The attrs are set on the loaded NodeDef messages in place, deliberately: Model.Marshal
// writes a node still holding its loaded message with its original bytes, so the shapes
// serve tfswap's analysis without appearing in the output, except on nodes a rewrite
// replaces, and in text GraphDefs and SavedModels, which are serialised whole. The shapes
// written are compatible with the graph (TensorFlow's import checks that).
func InferShapes(m *Model, opts InferOptions) (ShapeStats, error) {
	st, _, err := InferShapesIndexed(m, opts)
	return st, err
}

// InferShapesIndexed is InferShapes, also returning the index of m's graph it built last
// (NewGraph of m.Graph after the attrs it set), for a caller that would index the graph
// next: a million-node graph's index takes seconds to build. The index is nil on error.
func InferShapesIndexed(m *Model, opts InferOptions) (ShapeStats, *Graph, error) {
	if opts.Batch < 0 {
		return ShapeStats{}, nil, fmt.Errorf("the batch must be positive, not %d", opts.Batch)
	}
	g, err := NewGraph(m.Graph, m.Source)
	if err != nil {
		return ShapeStats{}, nil, err
	}
	before := Stats(g)
	engine := opts.Engine
	if engine == "" {
		engine = EngineTfswap
		if tensorflowInfer != nil {
			engine = EngineTensorFlow
		}
	}
	if before.UnknownShare() <= skipInferShare && opts.Batch == 0 {
		// Nothing to gain (a graph written with shapes, where TensorFlow's own shape
		// functions left a few outputs unknown, such as FusedBatchNormV3's reserve space).
		before.Engine = ""
		return before, g, nil
	}
	var inferred map[string][][]int64
	switch engine {
	case EngineTensorFlow:
		if tensorflowInfer == nil {
			return ShapeStats{}, nil, fmt.Errorf("this binary was built without the TensorFlow runtime: it cannot infer shapes with TensorFlow")
		}
		var terr error
		inferred, terr = tensorflowInfer(m, opts.Batch)
		if terr != nil {
			// A graph TensorFlow cannot import (an op its registry lacks): tfswap's own
			// inference still does what it can.
			engine = EngineTfswap
			inferred = InferShapesPure(g, opts.Batch)
		}
	case EngineTfswap:
		inferred = InferShapesPure(g, opts.Batch)
	default:
		return ShapeStats{}, nil, fmt.Errorf("unknown shape inference engine %q", engine)
	}
	ApplyShapes(g, inferred)
	g2, err := NewGraph(m.Graph, m.Source)
	if err != nil {
		return ShapeStats{}, nil, err
	}
	if engine == EngineTfswap && opts.Engine == "" && DelegatedInference != nil && Stats(g2).UnknownShare() > UnknownWarnShare {
		if shapes, err := DelegatedInference(m, opts.Batch); err == nil {
			ApplyShapes(g2, shapes)
			if g2, err = NewGraph(m.Graph, m.Source); err != nil {
				return ShapeStats{}, nil, err
			}
			engine = EngineDelegated
		}
	}
	if engine == EngineTensorFlow {
		// TensorFlow's import leaves a v1 while loop's tensors unknown (its Merge nodes
		// meet their back edges unknown): tfswap's inference fills in what it can after it.
		if s := Stats(g2); s.Unknown > 0 {
			ApplyShapes(g2, InferShapesPure(g2, opts.Batch))
			if g2, err = NewGraph(m.Graph, m.Source); err != nil {
				return ShapeStats{}, nil, err
			}
		}
	}
	after := Stats(g2)
	after.Engine = engine
	after.Batch = opts.Batch
	after.Inferred = max(0, before.Unknown-after.Unknown)
	return after, g2, nil
}

// Stats counts g's outputs of fixed-size dtypes and those of unknown size.
func Stats(g *Graph) ShapeStats {
	var s ShapeStats
	for _, n := range g.Nodes {
		for port, dt := range n.OutputTypes {
			if _, ok := ElementBytes(dt); !ok {
				continue
			}
			s.Outputs++
			if !knownShape(Tensor{Node: n, Port: port}.Shape()) || n.OutputShapes == nil {
				s.Unknown++
				if len(s.Examples) < 5 {
					s.Examples = append(s.Examples, Tensor{Node: n, Port: port}.String()+" ("+n.Op+")")
				}
			}
		}
	}
	return s
}

// knownShape reports whether sh is a shape of known rank with every dimension known.
func knownShape(sh []int64) bool {
	if sh == nil {
		return false
	}
	for _, d := range sh {
		if d < 0 {
			return false
		}
	}
	return true
}

// mergeShape returns the shape that keeps a's known dimensions and takes b's where a's are
// unknown; b when a's rank is unknown; a when the ranks differ.
func mergeShape(a, b []int64) []int64 {
	if a == nil {
		return b
	}
	if b == nil || len(a) != len(b) {
		return a
	}
	out := make([]int64, len(a))
	for i := range a {
		out[i] = a[i]
		if out[i] < 0 {
			out[i] = b[i]
		}
	}
	return out
}

// ApplyShapes merges inferred shapes (by node name, per output) into the _output_shapes attr
// of g's nodes (see InferShapes), for the nodes whose shapes become better known.
func ApplyShapes(g *Graph, inferred map[string][][]int64) {
	names := make([]string, 0, len(inferred))
	for k := range inferred {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		n := g.Node(name)
		if n == nil || n.OutputTypes == nil || len(n.OutputTypes) == 0 {
			continue
		}
		shapes := inferred[name]
		if len(shapes) != len(n.OutputTypes) {
			continue
		}
		merged := make([][]int64, len(shapes))
		changed := n.OutputShapes == nil
		for i := range shapes {
			var old []int64
			if n.OutputShapes != nil {
				old = n.OutputShapes[i]
			}
			merged[i] = mergeShape(old, shapes[i])
			if !equalShape(merged[i], old) {
				changed = true
			}
		}
		if !changed {
			continue
		}
		list := &apb.AttrValue_ListValue{}
		for _, sh := range merged {
			p := &tspb.TensorShapeProto{}
			if sh == nil {
				p.UnknownRank = true
			} else {
				for _, d := range sh {
					p.Dim = append(p.Dim, &tspb.TensorShapeProto_Dim{Size: d})
				}
			}
			list.Shape = append(list.Shape, p)
		}
		// The node's own attr map: a parsed node may share its map with nodes of the same
		// attrs (see Model).
		attrs := maps.Clone(n.Def.Attr)
		if attrs == nil {
			attrs = map[string]*apb.AttrValue{}
		}
		attrs["_output_shapes"] = &apb.AttrValue{Value: &apb.AttrValue_List{List: list}}
		n.Def.Attr = attrs
		n.OutputShapes = merged
	}
}

func equalShape(a, b []int64) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
