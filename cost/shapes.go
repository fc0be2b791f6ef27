package cost

import (
	"fmt"

	"github.com/tfswap/tfswap/graphdef"
)

// Shapes gives the shape and size of every tensor of a graph as the simulator sees them: the
// shapes from _output_shapes, with the batch dimension scaled when a batch scale is set.
type Shapes struct {
	g *graphdef.Graph
	// out[node index][port] is the (possibly scaled) shape, nil when unknown.
	out [][][]int64
	// Scale is the batch scale applied; Batch the batch size found (0 when none was).
	Scale int
	Batch int64
	// Scaled counts the tensors whose dimension 0 was scaled.
	Scaled int
	// BatchInputs names the placeholders taken to carry the batch.
	BatchInputs []string
}

// Summary returns the figures of s a report shows (Scale, Batch, Scaled and BatchInputs)
// without the per-tensor shapes or the graph: what a simulation's Result keeps once the
// simulated graph is no longer needed (a planner's cached evaluation would otherwise hold
// its whole derived graph). Its Bytes knows no tensor. A nil s gives nil.
func (s *Shapes) Summary() *Shapes {
	if s == nil {
		return nil
	}
	return &Shapes{Scale: s.Scale, Batch: s.Batch, Scaled: s.Scaled, BatchInputs: s.BatchInputs}
}

// batchContracting lists ops whose outputs never carry the batch in dimension 0 even when
// an input does: they sum over the batch (weight and bias gradients) or describe shapes.
var batchContracting = map[string]bool{
	"Conv2DBackpropFilter": true, "Conv3DBackpropFilter": true, "Conv3DBackpropFilterV2": true,
	"DepthwiseConv2dNativeBackpropFilter": true, "BiasAddGrad": true,
	"Shape": true, "ShapeN": true, "Size": true, "Rank": true, "BroadcastGradientArgs": true,
	"ConcatOffset": true,
}

// NewShapes reads the shapes of g's tensors and scales the batch dimension by scale (1 for
// none). The rule, applied in topological order:
//
//   - the batch size B is dimension 0 of the first Placeholder (in graph order) of rank 1 or
//     more whose dimension 0 is known; every Placeholder whose dimension 0 equals B carries
//     the batch;
//   - any other tensor carries the batch when its producer has a data input that carries it
//     (or makes a tensor of a shape its input gives, Fill, BroadcastTo or a random op, and
//     that input is the Shape or ShapeN of a tensor that carries it, read directly or through
//     Identity, Switch, Merge and the like), its rank is 1 or more and its dimension 0 is a
//     known positive multiple of B, and its
//     producer does not sum over the batch: not a filter or bias gradient
//     (Conv2DBackpropFilter, DepthwiseConv2dNativeBackpropFilter, BiasAddGrad, ...), not a
//     shape op, not a MatMul with transpose_a (a weight gradient), and not one of
//     FusedBatchNorm*'s per-channel outputs (ports 1 to 5);
//   - dimension 0 of every tensor that carries the batch is multiplied by scale.
//
// The body of a function a call runs (costed from the library, see calls.go) is scaled the
// same way, with the caller's B: its arguments (_Arg) whose dimension 0 is B carry the batch.
//
// Batch-major layouts are assumed: a time-major sequence tensor ([T, B, ...]) is not scaled,
// nor are the values of shape tensors (only sizes matter to the simulator).
//
// Sizes stay within what int64 arithmetic counts exactly: NewShapes fails, naming the tensor,
// when a scaled tensor would hold more than graphdef.MaxTensorBytes, or the graph's tensors
// (scaled) more than graphdef.MaxGraphBytes together.
func NewShapes(g *graphdef.Graph, scale int) (*Shapes, error) {
	return newShapes(g, scale, 0)
}

// newShapes is NewShapes; for a function body (callerBatch > 0: the calling graph's batch),
// the batch is callerBatch and the body's arguments (_Arg) whose dimension 0 it is carry
// it, where a graph's placeholders would. A body none of whose arguments carries it is not
// scaled.
func newShapes(g *graphdef.Graph, scale int, callerBatch int64) (*Shapes, error) {
	return newShapesChecked(g, scale, callerBatch, true)
}

// newShapesChecked is newShapes, whose check that the graph's tensors hold at most
// graphdef.MaxGraphBytes together runs only when check is set (a simulation of a graph
// already checked at the same batch scale leaves it out).
func newShapesChecked(g *graphdef.Graph, scale int, callerBatch int64, check bool) (*Shapes, error) {
	if scale < 1 {
		return nil, fmt.Errorf("batch scale must be at least 1, not %d", scale)
	}
	s := &Shapes{g: g, out: make([][][]int64, len(g.Nodes)), Scale: scale, Batch: callerBatch}
	for _, n := range g.Nodes {
		s.out[n.Index] = n.OutputShapes
	}
	if scale > 1 {
		if err := s.scale(scale); err != nil {
			return nil, err
		}
	}
	if check {
		if err := s.checkTotal(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// scale multiplies dimension 0 of the tensors that carry the batch by scale (see NewShapes).
func (s *Shapes) scale(scale int) error {
	g := s.g
	body := s.Batch > 0 // a function body, scaled with its caller's batch
	for _, n := range g.Nodes {
		if body {
			break
		}
		if n.Op == "Placeholder" {
			if sh := portShape(n, 0); len(sh) > 0 && sh[0] > 0 {
				s.Batch = sh[0]
				break
			}
		}
	}
	if s.Batch == 0 {
		return fmt.Errorf("cannot scale the batch: no Placeholder has a known dimension 0")
	}
	carries := make([][]bool, len(g.Nodes))
	shapeOf := make([]bool, len(g.Nodes)) // every data output's value is a batch tensor's shape
	for _, n := range g.Topo {
		switch {
		case n.Op == "Shape" || n.Op == "ShapeN":
			for _, t := range n.Inputs {
				if cc := carries[t.Node.Index]; t.Port < len(cc) && cc[t.Port] {
					shapeOf[n.Index] = true
				}
			}
		case aliasOps[n.Op] || n.Op == "Merge":
			for _, t := range n.Inputs {
				if shapeOf[t.Node.Index] {
					shapeOf[n.Index] = true
				}
			}
		}
		if n.OutputShapes == nil {
			continue
		}
		c := make([]bool, len(n.OutputShapes))
		carries[n.Index] = c
		if n.Op == "Placeholder" || body && n.Op == "_Arg" {
			if sh := portShape(n, 0); len(sh) > 0 && sh[0] == s.Batch {
				c[0] = true
				s.BatchInputs = append(s.BatchInputs, n.Name)
			}
		} else if !batchContracting[n.Op] && !(n.Op == "MatMul" && attrBool(n, "transpose_a")) {
			in := false
			for i, t := range n.Inputs {
				if cc := carries[t.Node.Index]; t.Port < len(cc) && cc[t.Port] {
					in = true
					break
				}
				if i == shapeInput(n.Op) && shapeOf[t.Node.Index] {
					in = true
					break
				}
			}
			if in {
				for port, sh := range n.OutputShapes {
					if isFusedBatchNorm(n.Op) && port > 0 {
						continue
					}
					if len(sh) > 0 && sh[0] > 0 && sh[0]%s.Batch == 0 {
						c[port] = true
					}
				}
			}
		}
		var scaled [][]int64
		for port, sh := range n.OutputShapes {
			if !c[port] {
				continue
			}
			if scaled == nil {
				scaled = make([][]int64, len(n.OutputShapes))
				copy(scaled, n.OutputShapes)
			}
			ns := append([]int64(nil), sh...)
			d0, ok := graphdef.MulBytes(ns[0], int64(scale), graphdef.MaxTensorBytes)
			ns[0] = d0
			if elem := s.elemBound(graphdef.Tensor{Node: n, Port: port}); ok {
				_, ok = graphdef.SizeBound(elem, ns)
			}
			if !ok {
				return fmt.Errorf("batch scale %d: tensor %s:%d of shape %s would hold more than 1 PiB (2^50 bytes), the largest tensor tfswap accepts",
					scale, n.Name, port, graphdef.FormatShape(sh))
			}
			scaled[port] = ns
			s.Scaled++
		}
		if scaled != nil {
			s.out[n.Index] = scaled
		}
	}
	return nil
}

// elemBound returns t's element size, or 1 when it is not fixed or not known.
func (s *Shapes) elemBound(t graphdef.Tensor) int64 {
	if dt, ok := t.DataType(); ok {
		if e, ok := graphdef.ElementBytes(dt); ok {
			return e
		}
	}
	return 1
}

// checkTotal fails when the graph's tensors, with their scaled shapes, hold more than
// graphdef.MaxGraphBytes together (each bounded as graphdef.SizeBound bounds it), naming the
// tensor at which the sum passed it; variables count with their shape attrs.
func (s *Shapes) checkTotal() error {
	var total int64
	for _, n := range s.g.Nodes {
		for port, sh := range s.out[n.Index] {
			if sh == nil {
				continue
			}
			t := graphdef.Tensor{Node: n, Port: port}
			if dt, ok := t.DataType(); !ok || graphdef.IsHandle(dt) {
				continue
			}
			b, ok := graphdef.SizeBound(s.elemBound(t), sh)
			if ok {
				total, ok = graphdef.AddBytes(total, b, graphdef.MaxGraphBytes)
			}
			if !ok {
				msg := "the graph's tensors"
				if s.Scale > 1 {
					msg = fmt.Sprintf("batch scale %d: the graph's tensors", s.Scale)
				}
				return fmt.Errorf("%s would hold more than 64 PiB (2^56 bytes) together, the most tfswap accepts (passed at tensor %s)", msg, t)
			}
		}
		if !isVariableOp(n.Op) {
			continue
		}
		// A variable's attrs are read only for variable ops (the lookups of every node's
		// attrs were 2% of a planning's CPU time).
		if b, ok := variableBytes(n); ok {
			if total, ok = graphdef.AddBytes(total, b, graphdef.MaxGraphBytes); !ok {
				return fmt.Errorf("the graph's tensors would hold more than 64 PiB (2^56 bytes) together, the most tfswap accepts (passed at variable %s)", n.Name)
			}
		}
	}
	return nil
}

// shapeInputOps are the ops that make a tensor of the shape one input's value gives (the
// zeros of a conditional's untaken gradient, array_ops.zeros(shape); dropout's
// random_uniform(shape(x))), with that input's index.
var shapeInputOps = map[string]int{
	"Fill": 0, "BroadcastTo": 1, "Empty": 0,
	"RandomUniform": 0, "RandomStandardNormal": 0, "TruncatedNormal": 0, "RandomUniformInt": 0,
	"StatelessRandomUniformV2": 0, "StatelessRandomNormalV2": 0, "StatelessTruncatedNormalV2": 0,
	"StatelessRandomUniform": 0, "StatelessRandomNormal": 0, "StatelessTruncatedNormal": 0,
}

// shapeInput returns the index of the input of op that gives its output's shape
// (shapeInputOps), or -1.
func shapeInput(op string) int {
	if i, ok := shapeInputOps[op]; ok {
		return i
	}
	return -1
}

func isFusedBatchNorm(op string) bool {
	return op == "FusedBatchNorm" || op == "FusedBatchNormV2" || op == "FusedBatchNormV3"
}

func portShape(n *graphdef.Node, port int) []int64 {
	if port < len(n.OutputShapes) {
		return n.OutputShapes[port]
	}
	return nil
}

// Out returns the shape of output port of n, or nil when unknown.
func (s *Shapes) Out(n *graphdef.Node, port int) []int64 {
	if n.Index >= len(s.out) {
		return nil // a Summary, or a node of another graph
	}
	if sh := s.out[n.Index]; port < len(sh) {
		return sh[port]
	}
	return nil
}

// In returns the shape of n's data input i, or nil when unknown.
func (s *Shapes) In(n *graphdef.Node, i int) []int64 {
	if i >= len(n.Inputs) {
		return nil
	}
	t := n.Inputs[i]
	return s.Out(t.Node, t.Port)
}

// Bytes returns the size of tensor t: ok is false when its dtype has no fixed size or its
// shape is not fully known.
func (s *Shapes) Bytes(t graphdef.Tensor) (int64, bool) {
	dt, ok := t.DataType()
	if !ok {
		return 0, false
	}
	elem, ok := graphdef.ElementBytes(dt)
	if !ok {
		return 0, false
	}
	sh := s.Out(t.Node, t.Port)
	if sh == nil {
		return 0, false
	}
	n := elem
	for _, d := range sh {
		if d < 0 {
			return 0, false
		}
	}
	for _, d := range sh {
		if n, ok = graphdef.MulBytes(n, d, graphdef.MaxTensorBytes); !ok {
			return 0, false // NewShapes refused such shapes
		}
	}
	return n, true
}

// Elements returns the number of elements of shape sh, or -1 when it is not fully known.
func Elements(sh []int64) int64 {
	if sh == nil {
		return -1
	}
	n := int64(1)
	for _, d := range sh {
		if d < 0 {
			return -1
		}
		n *= d
	}
	return n
}

// elementsMin1 is Grappler's rule for sizes: unknown dimensions count as 1, an unknown rank
// as a scalar.
func elementsMin1(sh []int64) int64 {
	n := int64(1)
	for _, d := range sh {
		if d > 0 {
			n *= d
		} else if d == 0 {
			return 0
		}
	}
	return n
}
