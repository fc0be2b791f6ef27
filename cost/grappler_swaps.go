package cost

import (
	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	"google.golang.org/protobuf/proto"
)

// Grappler's own swapping (memory_optimizer.cc, RewriterConfig.memory_optimization =
// SWAPPING_HEURISTICS or the _swap_to_host attr with MANUAL) inserts a pair of kernels per
// swapped input, both placed on the consumer's GPU:
//
//	producer -> swap_out_X (_CopyFromGpuToHost) -> swap_in_X (_CopyFromHostToGpu, ^trigger) -> consumer
//
// _CopyFromGpuToHost copies its GPU input into a host-memory output (an asynchronous
// device-to-host copy); _CopyFromHostToGpu, once its control trigger has run, copies that host
// buffer back into a new GPU buffer. Neither kernel is in tfswap's op registry, and both sit on
// the GPU, so simulated as they are their outputs would count as GPU memory and the copies
// would take no link time.
//
// The simulator models host transfers as cross-device edges, so it sees the pair as what
// it does: swap_out becomes an Identity on the host (receiving the tensor is the
// device-to-host copy) and swap_in an Identity on the host gated by the trigger, whose GPU
// consumer receives the tensor through a host-to-device copy that cannot start before the
// trigger has run. That is the same shape as tfswap's own swap pair with its host-side gate;
// the one difference is that the trigger's control edge now crosses devices (a small
// control-message latency the real kernel does not pay).

const (
	grapplerSwapOut = "_CopyFromGpuToHost"
	grapplerSwapIn  = "_CopyFromHostToGpu"
)

// HasGrapplerSwaps reports whether def holds Grappler's swap kernels.
func HasGrapplerSwaps(def *gpb.GraphDef) bool {
	for _, n := range def.GetNode() {
		if n.GetOp() == grapplerSwapOut || n.GetOp() == grapplerSwapIn {
			return true
		}
	}
	return false
}

// LowerGrapplerSwaps returns a copy of def in which every _CopyFromGpuToHost and
// _CopyFromHostToGpu node is an Identity placed on the host CPU of its task (CPU:0; plain
// /device:CPU:0 when the node names no task), with an _output_shapes attr copied from the
// tensor it moves, and the number of nodes so replaced. Inputs, control inputs and names are
// kept, so consumers and triggers are unchanged. def itself is not modified; when it holds
// no such node it is returned as is.
func LowerGrapplerSwaps(def *gpb.GraphDef) (*gpb.GraphDef, int) {
	if !HasGrapplerSwaps(def) {
		return def, 0
	}
	byName := make(map[string]*npb.NodeDef, len(def.GetNode()))
	for _, n := range def.GetNode() {
		byName[n.GetName()] = n
	}
	// inputShape returns the _output_shapes entry of the tensor a node reads as input 0,
	// following chains of swap nodes (which may not have been given one yet).
	var inputShape func(n *npb.NodeDef, depth int) *tspb.TensorShapeProto
	inputShape = func(n *npb.NodeDef, depth int) *tspb.TensorShapeProto {
		if depth > 8 || len(n.GetInput()) == 0 {
			return nil
		}
		name, port, control, err := graphdef.ParseInput(n.GetInput()[0])
		if err != nil || control {
			return nil
		}
		p := byName[name]
		if p == nil {
			return nil
		}
		if p.GetOp() == grapplerSwapOut || p.GetOp() == grapplerSwapIn {
			return inputShape(p, depth+1)
		}
		shapes := p.GetAttr()["_output_shapes"].GetList().GetShape()
		if port < len(shapes) {
			return shapes[port]
		}
		return nil
	}
	out := proto.Clone(def).(*gpb.GraphDef)
	count := 0
	for i, n := range def.GetNode() {
		if n.GetOp() != grapplerSwapOut && n.GetOp() != grapplerSwapIn {
			continue
		}
		nd := out.Node[i]
		nd.Op = "Identity"
		host := "/device:CPU:0"
		if d, err := graphdef.ParseDevice(n.GetDevice()); err == nil && !d.IsZero() {
			host = d.WithDevice("CPU", 0).String()
		}
		nd.Device = host
		if nd.Attr == nil {
			nd.Attr = map[string]*apb.AttrValue{}
		}
		delete(nd.Attr, "_class") // the colocation with the GPU consumer no longer holds
		if sh := inputShape(n, 0); sh != nil {
			nd.Attr["_output_shapes"] = &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{
				Shape: []*tspb.TensorShapeProto{proto.Clone(sh).(*tspb.TensorShapeProto)},
			}}}
		}
		count++
	}
	return out, count
}

// lowerGrapplerSwaps is Simulate's hook: g with Grappler's swap kernels lowered, or g.
func lowerGrapplerSwaps(g *graphdef.Graph) (*graphdef.Graph, error) {
	def, n := LowerGrapplerSwaps(g.Def)
	if n == 0 {
		return g, nil
	}
	return graphdef.NewGraph(def, g.Source)
}
