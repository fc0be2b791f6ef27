package cost

import (
	"github.com/tfswap/tfswap/graphdef"
)

// This file derives the shapes Grappler's static shape inference (GraphProperties::
// InferStatically, which the VirtualScheduler runs) gives a graph's tensors from the shapes
// the graph records (_output_shapes, which TensorFlow's graph construction computed). The
// two agree except where a shape depends on the *value* of a tensor that graph
// construction could evaluate but Grappler cannot: Grappler only knows the values of Const
// nodes there, so a Transpose whose permutation is computed (an InvertPermutation in a
// gradient), a Pad whose paddings are, or an UnsortedSegmentSum whose number of segments
// is, gets dimensions Grappler calls unknown (TransposeShapeFn, PadShapeFn and
// UnsortedSegmentReductionShapeFn in tensorflow/core/ops and framework/common_shape_fns.cc
// return unknown dimensions when input_tensor() is null). Unknown dimensions then flow on
// through the shape functions of the ops that read them, and come back when a shape
// function merges them with a known one (a matrix product's inner dimensions, AddN's
// inputs, a gradient op's two inputs): Grappler's symbolic shapes are merged across the
// graph. Grappler sizes a tensor, and times an op, with unknown dimensions counted as 1,
// so these dimensions change both GraphMemory's figures and the op times of the trace.
//
// The model below follows dimensions as handles with a union-find (InferenceContext's
// DimensionHandles and SymbolicShapeManager's merges) through the ops the benchmark and
// fixture graphs use; any other op starts from the recorded shape. TestVirtualClusterAgreement
// checks the result against the VirtualCluster's trace op by op.

// dimSet is a union-find of dimension handles, each class with a value (-1: unknown).
type dimSet struct {
	parent []int32
	val    []int64
}

func (u *dimSet) fresh(v int64) int32 {
	if v < 0 {
		v = -1
	}
	u.parent = append(u.parent, int32(len(u.parent)))
	u.val = append(u.val, v)
	return int32(len(u.parent) - 1)
}

func (u *dimSet) find(x int32) int32 {
	for u.parent[x] != x {
		u.parent[x] = u.parent[u.parent[x]]
		x = u.parent[x]
	}
	return x
}

func (u *dimSet) value(x int32) int64 { return u.val[u.find(x)] }

// merge unifies two handles (InferenceContext::Merge): the class keeps the known value.
func (u *dimSet) merge(a, b int32) int32 {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return ra
	}
	if u.val[ra] < 0 {
		ra, rb = rb, ra
	}
	u.parent[rb] = ra
	return ra
}

// grapplerUnaryShapeOps keep their input's shape (UnchangedShape).
var grapplerUnaryShapeOps = map[string]bool{
	"Identity": true, "StopGradient": true, "PreventGradient": true, "Snapshot": true,
	"CheckNumerics": true, "ZerosLike": true, "OnesLike": true, "Cast": true, "Neg": true,
	"Relu": true, "Relu6": true, "Elu": true, "Selu": true, "Tanh": true, "Sigmoid": true,
	"Exp": true, "Expm1": true, "Log": true, "Log1p": true, "Sqrt": true, "Rsqrt": true,
	"Square": true, "Reciprocal": true, "Inv": true, "Abs": true, "Sign": true, "Floor": true,
	"Ceil": true, "Round": true, "Rint": true, "Erf": true, "Erfc": true, "Softplus": true,
	"Softsign": true, "LogicalNot": true, "Softmax": true, "LogSoftmax": true, "LeakyRelu": true,
	"Gelu": true, "Sin": true, "Cos": true, "Tan": true, "Atan": true, "Asin": true, "Acos": true,
	"IsFinite": true, "IsNan": true, "IsInf": true,
}

// grapplerMergeBothOps merge their two inputs' shapes (MergeBothInputsShapeFn).
var grapplerMergeBothOps = map[string]bool{
	"ReluGrad": true, "Relu6Grad": true, "EluGrad": true, "SeluGrad": true, "SoftplusGrad": true,
	"SoftsignGrad": true, "TanhGrad": true, "SigmoidGrad": true, "RsqrtGrad": true,
	"SqrtGrad": true, "ReciprocalGrad": true, "InvGrad": true, "LeakyReluGrad": true, "GeluGrad": true,
}

// grapplerBroadcastOps broadcast their two inputs (BroadcastBinaryOpShapeFn).
var grapplerBroadcastOps = map[string]bool{
	"Add": true, "AddV2": true, "Sub": true, "Mul": true, "Div": true, "RealDiv": true,
	"FloorDiv": true, "FloorMod": true, "Maximum": true, "Minimum": true, "SquaredDifference": true,
	"Pow": true, "Equal": true, "NotEqual": true, "Greater": true, "GreaterEqual": true, "Less": true,
	"LessEqual": true, "LogicalAnd": true, "LogicalOr": true, "DivNoNan": true, "MulNoNan": true,
	"Xlogy": true, "Xdivy": true, "Atan2": true, "TruncateDiv": true, "TruncateMod": true,
}

// grapplerReductionOps drop (or keep as 1) the axes their second input lists.
var grapplerReductionOps = map[string]bool{
	"Sum": true, "Mean": true, "Max": true, "Min": true, "Prod": true, "All": true, "Any": true,
	"EuclideanNorm": true,
}

// The shape-function kinds of an op (grapplerShapeKinds), as bits: an op in several of the
// maps above has each of their bits.
const (
	shapeKindUnary uint8 = 1 << iota
	shapeKindMergeBoth
	shapeKindBroadcast
	shapeKindReduction
)

// grapplerShapeKindMaps are the maps of ops by shape-function kind, with the kind's bit.
var grapplerShapeKindMaps = []struct {
	ops  map[string]bool
	kind uint8
}{
	{grapplerUnaryShapeOps, shapeKindUnary},
	{grapplerMergeBothOps, shapeKindMergeBoth},
	{grapplerBroadcastOps, shapeKindBroadcast},
	{grapplerReductionOps, shapeKindReduction},
}

// grapplerShapeKinds gives each op of grapplerUnaryShapeOps, grapplerMergeBothOps,
// grapplerBroadcastOps and grapplerReductionOps its kinds, so that infer looks an op up once
// rather than in each map (the lookups were 1.7% of the CPU profile of planning ResNet-50 at
// 4x its batch, which infers the shapes of every graph it judges by Grappler's accounting).
var grapplerShapeKinds = func() map[string]uint8 {
	kinds := map[string]uint8{}
	for _, m := range grapplerShapeKindMaps {
		for op, in := range m.ops {
			if in {
				kinds[op] |= m.kind
			}
		}
	}
	return kinds
}()

// isConstNode reports whether t is a Const's output: the only values Grappler's shape
// functions see.
func isConstNode(t graphdef.Tensor) bool {
	return t.Node.Op == "Const" || t.Node.Op == "HostConst"
}

// constInts returns the integer values of Const tensor t (a scalar or a vector).
func constInts(t graphdef.Tensor) ([]int64, bool) {
	if !isConstNode(t) {
		return nil, false
	}
	tp := attr(t.Node, "value").GetTensor()
	if tp == nil {
		return nil, false
	}
	if len(tp.GetTensorShape().GetDim()) == 0 {
		switch {
		case len(tp.GetIntVal()) == 1:
			return []int64{int64(tp.GetIntVal()[0])}, true
		case len(tp.GetInt64Val()) == 1:
			return []int64{tp.GetInt64Val()[0]}, true
		}
		return nil, false
	}
	return constIntVector(t.Node)
}

// grapplerShapeModel computes the shapes.
type grapplerShapeModel struct {
	g    *graphdef.Graph
	base *Shapes
	u    dimSet
	// h[node][port] are the output's dimension handles, nil for an unknown rank.
	h [][][]int32
	// handles and lists are where fresh handle lists and nodes' output lists are cut from
	// (handleList, outputLists): a graph's thousands of short lists in a few allocations.
	handles []int32
	lists   [][]int32
}

// handleList returns a zeroed list of n handles, cut from m.handles (capped at n, so that an
// append copies).
func (m *grapplerShapeModel) handleList(n int) []int32 {
	if len(m.handles) < n {
		m.handles = make([]int32, max(n, 4096))
	}
	l := m.handles[:n:n]
	m.handles = m.handles[n:]
	return l
}

// outputLists returns a list of n output lists (nil), cut from m.lists (capped at n).
func (m *grapplerShapeModel) outputLists(n int) [][]int32 {
	if len(m.lists) < n {
		m.lists = make([][]int32, max(n, 1024))
	}
	l := m.lists[:n:n]
	m.lists = m.lists[n:]
	return l
}

// GrapplerShapes returns base with the dimensions Grappler's static shape inference cannot
// infer set to -1 (see the comment at the top of grappler_shapes.go).
func GrapplerShapes(g *graphdef.Graph, base *Shapes) *Shapes {
	m := &grapplerShapeModel{g: g, base: base, h: make([][][]int32, len(g.Nodes))}
	for _, n := range g.Topo {
		m.node(n)
	}
	out := *base
	out.out = make([][][]int64, len(g.Nodes))
	changed := false
	for i, n := range g.Nodes {
		out.out[i] = base.out[i]
		var copied [][]int64
		for port, hs := range m.h[i] {
			b := base.Out(n, port)
			if hs == nil || len(hs) != len(b) {
				continue
			}
			for d, x := range hs {
				if v := m.u.value(x); v < 0 && b[d] >= 0 {
					if copied == nil {
						copied = make([][]int64, len(base.out[i]))
						copy(copied, base.out[i])
					}
					if &copied[port][0] == &b[0] {
						copied[port] = append([]int64(nil), b...)
					}
					copied[port][d] = -1
				}
			}
		}
		if copied != nil {
			out.out[i] = copied
			changed = true
		}
	}
	if !changed {
		return base
	}
	return &out
}

// fresh returns new handles for output port of n from its recorded shape.
func (m *grapplerShapeModel) fresh(n *graphdef.Node, port int) []int32 {
	b := m.base.Out(n, port)
	if b == nil {
		return nil
	}
	hs := m.handleList(len(b))
	for i, v := range b {
		hs[i] = m.u.fresh(v)
	}
	return hs
}

// unknownOfRank returns new unknown handles for every dimension of n's output port.
func (m *grapplerShapeModel) unknownOfRank(n *graphdef.Node, port int) []int32 {
	b := m.base.Out(n, port)
	if b == nil {
		return nil
	}
	hs := m.handleList(len(b))
	for i := range b {
		hs[i] = m.u.fresh(-1)
	}
	return hs
}

// in returns the handles of n's data input i (nil when unknown).
func (m *grapplerShapeModel) in(n *graphdef.Node, i int) []int32 {
	if i >= len(n.Inputs) {
		return nil
	}
	t := n.Inputs[i]
	if hs := m.h[t.Node.Index]; t.Port < len(hs) {
		return hs[t.Port]
	}
	return nil
}

// broadcast is BroadcastBinaryOpOutputShapeFnHelper on handles.
func (m *grapplerShapeModel) broadcast(x, y []int32) []int32 {
	if x == nil || y == nil {
		return nil
	}
	rank := max(len(x), len(y))
	out := make([]int32, rank)
	one := int32(-1)
	dim := func(s []int32, i int) (int32, bool) {
		if i < rank-len(s) {
			if one < 0 {
				one = m.u.fresh(1)
			}
			return one, true
		}
		return s[i-(rank-len(s))], false
	}
	for i := 0; i < rank; i++ {
		dx, _ := dim(x, i)
		dy, yIsOne := dim(y, i)
		vx, vy := m.u.value(dx), m.u.value(dy)
		switch {
		case vx < 0 || vy < 0:
			switch {
			case vx > 1:
				out[i] = dx
			case vy > 1:
				out[i] = dy
			case vx == 1:
				out[i] = dy
			case vy == 1:
				out[i] = dx
			case m.u.find(dx) == m.u.find(dy):
				out[i] = dx
			default:
				out[i] = m.u.fresh(-1)
			}
		case vx == 1 || vy == 1:
			if vx == 1 && !yIsOne {
				out[i] = dy
			} else {
				out[i] = dx
			}
		default:
			out[i] = m.u.merge(dx, dy)
		}
	}
	return out
}

func (m *grapplerShapeModel) mergeAll(a, b []int32) []int32 {
	if a == nil {
		return b
	}
	if b == nil || len(a) != len(b) {
		return a
	}
	for i := range a {
		m.u.merge(a[i], b[i])
	}
	return a
}

// axis normalises a possibly negative axis for rank r; ok is false when out of range.
func axis(a int64, r int) (int, bool) {
	if a < 0 {
		a += int64(r)
	}
	return int(a), a >= 0 && a < int64(r)
}

// node sets the handles of n's outputs.
func (m *grapplerShapeModel) node(n *graphdef.Node) {
	if n.Op == "ResourceApplyGradientDescent" && len(n.Inputs) >= 3 && n.Inputs[0].Node.Op == "VarHandleOp" {
		// ApplyGradientDescentShapeFn merges the gradient's shape with the variable's, which
		// makes known again the dimensions a gradient Merge relaxed (cond_cnn's filter
		// gradients in the VirtualCluster's trace).
		if sh, ok := attrShape(n.Inputs[0].Node, "shape"); ok {
			if grad := m.in(n, 2); len(grad) == len(sh) {
				for d, v := range sh {
					m.u.merge(grad[d], m.u.fresh(v))
				}
			}
		}
	}
	nOut := len(n.OutputTypes)
	if nOut == 0 {
		nOut = len(m.base.out[n.Index])
	}
	outs := m.outputLists(nOut)
	m.h[n.Index] = outs
	for port := range outs {
		outs[port] = m.infer(n, port)
		if b := m.base.Out(n, port); outs[port] != nil && (b == nil || len(b) != len(outs[port])) {
			outs[port] = m.fresh(n, port)
		}
	}
}

// infer returns the handles of output port of n.
func (m *grapplerShapeModel) infer(n *graphdef.Node, port int) []int32 {
	op := n.Op
	kind := grapplerShapeKinds[op]
	switch {
	case op == "IdentityN":
		if hs := m.in(n, port); hs != nil {
			return hs
		}
	case kind&shapeKindUnary != 0 && port == 0:
		if hs := m.in(n, 0); hs != nil {
			return hs
		}
	case kind&shapeKindMergeBoth != 0 && port == 0:
		if hs := m.mergeAll(m.in(n, 0), m.in(n, 1)); hs != nil {
			return hs
		}
	case kind&shapeKindBroadcast != 0 && port == 0:
		if hs := m.broadcast(m.in(n, 0), m.in(n, 1)); hs != nil {
			return hs
		}
	case op == "SelectV2" && port == 0:
		if hs := m.broadcast(m.in(n, 0), m.broadcast(m.in(n, 1), m.in(n, 2))); hs != nil {
			return hs
		}
	case op == "AddN" && port == 0:
		var hs []int32
		for i := range n.Inputs {
			hs = m.mergeAll(hs, m.in(n, i))
		}
		if hs != nil {
			return hs
		}
	case op == "BiasAdd" && port == 0:
		x, b := m.in(n, 0), m.in(n, 1)
		if x != nil && len(b) == 1 && len(x) >= 2 {
			c := len(x) - 1
			if attrString(n, "data_format", "NHWC") == "NCHW" {
				c = len(x) - 3
			}
			if c >= 0 && c < len(x) {
				out := append([]int32(nil), x...)
				out[c] = m.u.merge(x[c], b[0])
				return out
			}
		}
	case op == "BiasAddGrad" && port == 0:
		if x := m.in(n, 0); len(x) >= 2 {
			c := len(x) - 1
			if attrString(n, "data_format", "NHWC") == "NCHW" {
				c = len(x) - 3
			}
			if c >= 0 {
				return []int32{x[c]}
			}
		}
	case (op == "MatMul") && port == 0:
		a, b := m.in(n, 0), m.in(n, 1)
		if len(a) == 2 && len(b) == 2 {
			am, ak := a[0], a[1]
			if attrBool(n, "transpose_a") {
				am, ak = ak, am
			}
			bk, bn := b[0], b[1]
			if attrBool(n, "transpose_b") {
				bk, bn = bn, bk
			}
			m.u.merge(ak, bk)
			return []int32{am, bn}
		}
	case (op == "BatchMatMulV2" || op == "BatchMatMulV3" || op == "BatchMatMul") && port == 0:
		a, b := m.in(n, 0), m.in(n, 1)
		if len(a) >= 2 && len(b) >= 2 {
			am, ak := a[len(a)-2], a[len(a)-1]
			if attrBool(n, "adj_x") {
				am, ak = ak, am
			}
			bk, bn := b[len(b)-2], b[len(b)-1]
			if attrBool(n, "adj_y") {
				bk, bn = bn, bk
			}
			var batch []int32
			if op == "BatchMatMul" {
				batch = m.mergeAll(append([]int32(nil), a[:len(a)-2]...), b[:len(b)-2])
			} else {
				batch = m.broadcast(a[:len(a)-2], b[:len(b)-2])
			}
			m.u.merge(ak, bk)
			return append(batch, am, bn)
		}
	case op == "Transpose" && port == 0:
		x := m.in(n, 0)
		if len(n.Inputs) < 2 {
			break
		}
		perm, ok := constInts(n.Inputs[1])
		if !ok {
			// TransposeShapeFn: no permutation value, no dimension.
			return m.unknownOfRank(n, 0)
		}
		if x != nil && len(perm) == len(x) {
			out := make([]int32, len(x))
			for i, p := range perm {
				a, ok := axis(p, len(x))
				if !ok {
					return m.fresh(n, 0)
				}
				out[i] = x[a]
			}
			return out
		}
	case (op == "Pad" || op == "PadV2" || op == "MirrorPad") && port == 0:
		if len(n.Inputs) >= 2 && !isConstNode(n.Inputs[1]) {
			return m.unknownOfRank(n, 0)
		}
	case (op == "UnsortedSegmentSum" || op == "UnsortedSegmentMax" || op == "UnsortedSegmentMin" ||
		op == "UnsortedSegmentProd") && port == 0:
		data, ids := m.in(n, 0), m.in(n, 1)
		if data != nil && ids != nil && len(ids) <= len(data) && len(n.Inputs) >= 3 {
			first := m.fresh(n, 0)
			if first == nil {
				break
			}
			if !isConstNode(n.Inputs[2]) {
				first[0] = m.u.fresh(-1)
			}
			return append([]int32{first[0]}, data[len(ids):]...)
		}
	case op == "Reshape" && port == 0:
		if len(n.Inputs) >= 2 && n.Inputs[1].Node.Op == "Shape" {
			if hs := m.in(n.Inputs[1].Node, 0); hs != nil {
				return hs
			}
		}
	case kind&shapeKindReduction != 0 && port == 0:
		x := m.in(n, 0)
		if x == nil || len(n.Inputs) < 2 {
			break
		}
		axes, ok := constInts(n.Inputs[1])
		if !ok {
			break
		}
		red := map[int]bool{}
		for _, a := range axes {
			i, ok := axis(a, len(x))
			if !ok {
				return m.fresh(n, 0)
			}
			red[i] = true
		}
		var out []int32
		for i, h := range x {
			switch {
			case !red[i]:
				out = append(out, h)
			case attrBool(n, "keep_dims"):
				out = append(out, m.u.fresh(1))
			}
		}
		return out
	case op == "ExpandDims" && port == 0:
		x := m.in(n, 0)
		if x == nil || len(n.Inputs) < 2 {
			break
		}
		v, ok := constInts(n.Inputs[1])
		if !ok || len(v) != 1 {
			break
		}
		a, ok := axis(v[0], len(x)+1)
		if !ok {
			break
		}
		out := append(append(append([]int32(nil), x[:a]...), m.u.fresh(1)), x[a:]...)
		return out
	case op == "ConcatV2" && port == 0 && len(n.Inputs) >= 2:
		v, ok := constInts(n.Inputs[len(n.Inputs)-1])
		first := m.in(n, 0)
		if !ok || len(v) != 1 || first == nil {
			break
		}
		a, ok := axis(v[0], len(first))
		if !ok {
			break
		}
		out := append([]int32(nil), first...)
		sum := int64(0)
		for i := 0; i < len(n.Inputs)-1; i++ {
			x := m.in(n, i)
			if len(x) != len(out) {
				return m.fresh(n, 0)
			}
			for d := range x {
				if d != a {
					out[d] = m.u.merge(out[d], x[d])
				}
			}
			if v := m.u.value(x[a]); v < 0 || sum < 0 {
				sum = -1
			} else {
				sum += v
			}
		}
		out[a] = m.u.fresh(sum)
		return out
	case op == "Fill" && port == 0 && len(n.Inputs) >= 1 && n.Inputs[0].Node.Op == "VariableShape":
		// FillShapeFn makes its shape from the value of its dims input, which Grappler knows
		// for a Shape or a Const but not for a VariableShape (a resource variable's zero
		// gradient, gradients/zeros_N of a v1 conditional): every dimension is unknown.
		return m.unknownOfRank(n, 0)
	case (op == "Merge" || op == "RefMerge") && port == 0:
		// MergeShape (control_flow_ops.cc): the first input's shape, with every dimension
		// whose value differs in another input of the same rank made unknown.
		first := m.in(n, 0)
		if first == nil {
			break
		}
		out := append([]int32(nil), first...)
		for i := 1; i < len(n.Inputs); i++ {
			x := m.in(n, i)
			if len(x) != len(out) {
				return m.fresh(n, 0)
			}
			for d := range x {
				if m.u.value(x[d]) != m.u.value(out[d]) {
					out[d] = m.u.fresh(-1)
				}
			}
		}
		return out
	case (op == "FusedBatchNorm" || op == "FusedBatchNormV2" || op == "FusedBatchNormV3") && port == 0:
		if hs := m.in(n, 0); hs != nil {
			return hs
		}
	case (op == "FusedBatchNormGrad" || op == "FusedBatchNormGradV2" || op == "FusedBatchNormGradV3") && port == 0:
		if hs := m.mergeAll(m.in(n, 0), m.in(n, 1)); hs != nil {
			return hs
		}
	}
	return m.fresh(n, port)
}
