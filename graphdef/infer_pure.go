package graphdef

import (
	"encoding/binary"
	"strings"

	tpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	typb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// maxValueElems bounds the integer tensors whose values the pure inference tracks (shape
// vectors, axes, paddings).
const maxValueElems = 64

// pureInfer is the state of InferShapesPure: each output's shape and, for small integer
// tensors, its values.
type pureInfer struct {
	g     *Graph
	batch int64
	shape [][][]int64
	value [][][]int64
}

// InferShapesPure infers the shapes of g's outputs in pure Go, in topological order, for the
// ops tfswap's cost model knows (placeholders and variables, constants, element-wise and
// broadcasting ops, MatMul and BatchMatMul, convolutions and pooling with their gradients,
// batch norm, reductions, reshapes and the shape arithmetic gradient code does with Shape,
// Pack, ConcatV2, StridedSlice...). An output it cannot infer keeps its _output_shapes
// entry; known dimensions there are kept over inferred ones. batch, when positive, replaces
// an unknown leading dimension of placeholders. It returns the shapes by node name (nil
// for an unknown rank, -1 for unknown dimensions).
func InferShapesPure(g *Graph, batch int64) map[string][][]int64 {
	out := make(map[string][][]int64, len(g.Nodes))
	runPure(g, batch, func(n *Node, shapes [][]int64) { out[n.Name] = shapes })
	return out
}

// IntValues returns the values the pure shape inference knows of g's small integer tensors
// (constants, Shape outputs and the arithmetic and slicing done on them, up to maxValueElems
// elements), read with the shapes g records: a function giving a tensor's values, or nil
// where they are not known statically.
func IntValues(g *Graph) func(Tensor) []int64 {
	p := runPure(g, 0, nil)
	return func(t Tensor) []int64 {
		if t.Node == nil || t.Node.Index >= len(p.value) {
			return nil
		}
		if v := p.value[t.Node.Index]; t.Port < len(v) {
			return v[t.Port]
		}
		return nil
	}
}

// runPure infers g's shapes and small integer values in topological order, calling done
// (when set) with each node's output shapes once they are final.
func runPure(g *Graph, batch int64, done func(n *Node, shapes [][]int64)) *pureInfer {
	p := &pureInfer{g: g, batch: batch, shape: make([][][]int64, len(g.Nodes)), value: make([][][]int64, len(g.Nodes))}
	for _, n := range g.Topo {
		nout := len(n.OutputTypes)
		p.shape[n.Index] = make([][]int64, nout)
		p.value[n.Index] = make([][]int64, nout)
		p.infer(n)
		for i := 0; i < nout; i++ {
			var given []int64
			if n.OutputShapes != nil && i < len(n.OutputShapes) {
				given = n.OutputShapes[i]
			}
			p.shape[n.Index][i] = mergeShape(given, p.shape[n.Index][i])
			if n.Op == "Placeholder" || n.Op == "PlaceholderWithDefault" {
				p.shape[n.Index][i] = p.batched(p.shape[n.Index][i])
			}
			if v := p.value[n.Index][i]; v != nil && p.shape[n.Index][i] == nil {
				p.shape[n.Index][i] = []int64{int64(len(v))}
			}
		}
		if done != nil {
			done(n, p.shape[n.Index])
		}
	}
	return p
}

// batched replaces an unknown leading dimension with the batch.
func (p *pureInfer) batched(sh []int64) []int64 {
	if p.batch <= 0 || len(sh) == 0 || sh[0] >= 0 {
		return sh
	}
	c := append([]int64(nil), sh...)
	c[0] = p.batch
	return c
}

func (p *pureInfer) in(n *Node, i int) []int64 {
	if i >= len(n.Inputs) {
		return nil
	}
	t := n.Inputs[i]
	if s := p.shape[t.Node.Index]; t.Port < len(s) {
		return s[t.Port]
	}
	return nil
}

func (p *pureInfer) val(n *Node, i int) []int64 {
	if i >= len(n.Inputs) {
		return nil
	}
	t := n.Inputs[i]
	if v := p.value[t.Node.Index]; t.Port < len(v) {
		return v[t.Port]
	}
	return nil
}

func (p *pureInfer) set(n *Node, port int, sh []int64) {
	if port < len(p.shape[n.Index]) {
		p.shape[n.Index][port] = sh
	}
}

func (p *pureInfer) setVal(n *Node, port int, v []int64) {
	if port < len(p.value[n.Index]) && v != nil && len(v) <= maxValueElems {
		p.value[n.Index][port] = v
	}
}

func attrInts(n *Node, name string) []int64 { return n.Def.GetAttr()[name].GetList().GetI() }
func attrInt(n *Node, name string) int64    { return n.Def.GetAttr()[name].GetI() }
func attrBool(n *Node, name string) bool    { return n.Def.GetAttr()[name].GetB() }
func attrStr(n *Node, name string) string   { return string(n.Def.GetAttr()[name].GetS()) }

// sameAsInput0 are ops whose every output has the shape of input 0.
var sameAsInput0 = setOf("Identity", "StopGradient", "PreventGradient", "Snapshot", "CheckNumerics",
	"Relu", "Relu6", "Elu", "Selu", "Sigmoid", "Tanh", "Neg", "Exp", "Expm1", "Log", "Log1p", "Sqrt",
	"Rsqrt", "Square", "Abs", "Sign", "Floor", "Ceil", "Round", "Rint", "Cast", "Softplus", "Softsign",
	"LeakyRelu", "ZerosLike", "OnesLike", "Softmax", "LogSoftmax", "Reciprocal", "Inv", "Erf", "Erfc",
	"Sin", "Cos", "IsFinite", "IsNan", "LogicalNot", "Bitcast", "Gelu", "ClipByValue",
	"ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "SigmoidGrad", "TanhGrad", "RsqrtGrad",
	"SqrtGrad", "SoftplusGrad", "SoftsignGrad", "LeakyReluGrad", "ReciprocalGrad", "InvGrad",
	"BiasAdd", "BiasAddV1", "MatrixBandPart", "Softmax", "Selu", "MaxPoolGrad", "MaxPoolGradV2", "FusedBatchNormGrad", "Enter",
	"RefEnter", "Exit", "NextIteration", "DebugGradientIdentity", "EnsureShape", "Dropout")

// broadcasting are the element-wise ops whose inputs broadcast.
var broadcasting = setOf("Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "MulNoNan",
	"Maximum", "Minimum", "Pow", "SquaredDifference", "FloorDiv", "FloorMod", "TruncateDiv",
	"Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr",
	"Atan2", "Xdivy", "Xlogy", "Select", "SelectV2", "AddN")

var reductions = setOf("Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, s := range names {
		m[s] = true
	}
	return m
}

func (p *pureInfer) infer(n *Node) {
	op := n.Op
	switch {
	case sameAsInput0[op]:
		for i := range n.OutputTypes {
			p.set(n, i, p.in(n, 0))
		}
		if op == "Identity" || op == "Cast" || op == "StopGradient" || op == "Snapshot" {
			p.setVal(n, 0, p.val(n, 0))
		}
		return
	case broadcasting[op]:
		var sh []int64
		for i := range n.Inputs {
			if i == 0 {
				sh = p.in(n, 0)
				continue
			}
			sh = broadcast(sh, p.in(n, i))
		}
		p.set(n, 0, sh)
		p.arith(n)
		return
	case reductions[op]:
		p.set(n, 0, reduce(p.in(n, 0), p.val(n, 1), attrBool(n, "keep_dims")))
		if op == "Prod" || op == "Sum" {
			if v := p.val(n, 0); v != nil && len(p.in(n, 0)) == 1 {
				acc := int64(1)
				if op == "Sum" {
					acc = 0
				}
				for _, x := range v {
					if x < 0 {
						return
					}
					if op == "Prod" {
						acc *= x
					} else {
						acc += x
					}
				}
				p.setVal(n, 0, []int64{acc})
			}
		}
		return
	}
	switch op {
	case "Placeholder", "PlaceholderWithDefault", "VarHandleOp", "VariableV2", "Variable":
		if _, sh, ok := shapeAttr(n.Def.GetAttr()); ok {
			if op == "VarHandleOp" {
				p.set(n, 0, []int64{})
			} else {
				p.set(n, 0, sh)
			}
		} else if op == "VarHandleOp" {
			p.set(n, 0, []int64{})
		}
	case "ReadVariableOp":
		p.set(n, 0, p.varShape(n, 0))
	case "ResourceGather":
		if v := p.varShape(n, 0); v != nil {
			if ix := p.in(n, 1); ix != nil && len(v) >= 1 {
				p.set(n, 0, append(append([]int64(nil), ix...), v[1:]...))
			}
		}
	case "Const":
		t := n.Def.GetAttr()["value"].GetTensor()
		if t == nil {
			return
		}
		var sh []int64
		for _, d := range t.GetTensorShape().GetDim() {
			sh = append(sh, d.GetSize())
		}
		if sh == nil {
			sh = []int64{}
		}
		p.set(n, 0, sh)
		p.setVal(n, 0, constInts(t, sh))
	case "Shape":
		sh := p.in(n, 0)
		if sh != nil {
			p.set(n, 0, []int64{int64(len(sh))})
			if knownShape(sh) {
				p.setVal(n, 0, append([]int64{}, sh...))
			}
		}
	case "ShapeN":
		for i := range n.OutputTypes {
			if sh := p.in(n, i); sh != nil {
				p.set(n, i, []int64{int64(len(sh))})
				if knownShape(sh) {
					p.setVal(n, i, append([]int64{}, sh...))
				}
			}
		}
	case "Size", "Rank":
		p.set(n, 0, []int64{})
		if sh := p.in(n, 0); knownShape(sh) {
			if op == "Rank" {
				p.setVal(n, 0, []int64{int64(len(sh))})
			} else {
				p.setVal(n, 0, []int64{elems(sh)})
			}
		}
	case "L2Loss", "VarIsInitializedOp", "IsVariableInitialized":
		p.set(n, 0, []int64{})
	case "Einsum":
		p.einsum(n)
	case "UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd":
		d, ids, num := p.in(n, 0), p.in(n, 1), p.val(n, 2)
		if d != nil && ids != nil && len(num) == 1 && len(ids) <= len(d) {
			p.set(n, 0, append([]int64{num[0]}, d[len(ids):]...))
		}
	case "MatMul":
		a, b := p.in(n, 0), p.in(n, 1)
		if len(a) == 2 && len(b) == 2 {
			m, k := a[0], a[1]
			if attrBool(n, "transpose_a") {
				m = a[1]
			}
			_ = k
			c := b[1]
			if attrBool(n, "transpose_b") {
				c = b[0]
			}
			p.set(n, 0, []int64{m, c})
		}
	case "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3":
		a, b := p.in(n, 0), p.in(n, 1)
		if len(a) >= 2 && len(b) >= 2 {
			m := a[len(a)-2]
			if attrBool(n, "adj_x") {
				m = a[len(a)-1]
			}
			c := b[len(b)-1]
			if attrBool(n, "adj_y") {
				c = b[len(b)-2]
			}
			bs := broadcast(a[:len(a)-2], b[:len(b)-2])
			if bs != nil {
				p.set(n, 0, append(append([]int64{}, bs...), m, c))
			}
		}
	case "Conv2D", "DepthwiseConv2dNative", "MaxPool", "AvgPool":
		p.conv(n)
	case "Conv2DBackpropInput", "DepthwiseConv2dNativeBackpropInput", "AvgPoolGrad":
		p.set(n, 0, p.val(n, 0))
	case "Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter":
		p.set(n, 0, p.val(n, 1))
	case "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3":
		x := p.in(n, 0)
		p.set(n, 0, x)
		c := p.in(n, 1)
		for i := 1; i < len(n.OutputTypes) && i <= 4; i++ {
			p.set(n, i, c)
		}
	case "FusedBatchNormGradV2", "FusedBatchNormGradV3":
		p.set(n, 0, p.in(n, 1))
		c := p.in(n, 2)
		p.set(n, 1, c)
		p.set(n, 2, c)
		p.set(n, 3, []int64{0})
		p.set(n, 4, []int64{0})
	case "BiasAddGrad":
		if x := p.in(n, 0); len(x) > 0 {
			if attrStr(n, "data_format") == "NCHW" && len(x) >= 2 {
				p.set(n, 0, []int64{x[1]})
			} else {
				p.set(n, 0, []int64{x[len(x)-1]})
			}
		}
	case "Reshape":
		p.set(n, 0, reshape(p.in(n, 0), p.val(n, 1)))
		p.setVal(n, 0, p.val(n, 0))
	case "SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits":
		if l := p.in(n, 0); len(l) == 2 {
			p.set(n, 0, []int64{l[0]})
			p.set(n, 1, l)
		}
	case "ArgMax", "ArgMin":
		if ax := p.val(n, 1); len(ax) == 1 {
			p.set(n, 0, reduce(p.in(n, 0), ax, false))
		}
	case "Transpose":
		x, perm := p.in(n, 0), p.val(n, 1)
		if x != nil && len(perm) == len(x) {
			o := make([]int64, len(x))
			for i, q := range perm {
				if q < 0 || int(q) >= len(x) {
					return
				}
				o[i] = x[q]
			}
			p.set(n, 0, o)
		}
	case "ConcatV2", "Concat":
		p.concat(n)
	case "Pack":
		p.pack(n)
	case "ExpandDims":
		x, ax := p.in(n, 0), p.val(n, 1)
		if x != nil && len(ax) == 1 {
			a := ax[0]
			if a < 0 {
				a += int64(len(x)) + 1
			}
			if a >= 0 && int(a) <= len(x) {
				o := append(append(append([]int64{}, x[:a]...), 1), x[a:]...)
				p.set(n, 0, o)
			}
		}
		p.setVal(n, 0, p.val(n, 0))
	case "Squeeze":
		x := p.in(n, 0)
		if knownShape(x) {
			dims := attrInts(n, "squeeze_dims")
			o := []int64{}
			for i, d := range x {
				drop := false
				if len(dims) == 0 {
					drop = d == 1
				}
				for _, q := range dims {
					if q == int64(i) || q+int64(len(x)) == int64(i) {
						drop = true
					}
				}
				if !drop {
					o = append(o, d)
				}
			}
			p.set(n, 0, o)
		}
	case "Fill", "BroadcastTo", "Zeros", "RandomUniform", "RandomStandardNormal", "TruncatedNormal":
		if op == "Fill" || op == "RandomUniform" || op == "RandomStandardNormal" || op == "TruncatedNormal" {
			p.set(n, 0, p.val(n, 0))
		} else {
			p.set(n, 0, p.val(n, 1))
		}
	case "Tile":
		x, m := p.in(n, 0), p.val(n, 1)
		if x != nil && len(m) == len(x) {
			o := make([]int64, len(x))
			for i := range x {
				o[i] = -1
				if x[i] >= 0 {
					o[i] = x[i] * m[i]
				}
			}
			p.set(n, 0, o)
		}
	case "Pad", "PadV2", "MirrorPad":
		x, pads := p.in(n, 0), p.val(n, 1)
		if x != nil && len(pads) == 2*len(x) {
			o := make([]int64, len(x))
			for i := range x {
				o[i] = -1
				if x[i] >= 0 {
					o[i] = x[i] + pads[2*i] + pads[2*i+1]
				}
			}
			p.set(n, 0, o)
		}
	case "Slice":
		x, b, s := p.in(n, 0), p.val(n, 1), p.val(n, 2)
		if x != nil && len(s) == len(x) {
			o := make([]int64, len(x))
			for i := range x {
				o[i] = s[i]
				if s[i] < 0 {
					o[i] = -1
					if x[i] >= 0 && len(b) == len(x) {
						o[i] = x[i] - b[i]
					}
				}
			}
			p.set(n, 0, o)
			if v := p.val(n, 0); v != nil && knownShape(o) && len(b) == len(x) && knownShape(x) {
				p.setVal(n, 0, sliceValues(v, x, b, o))
			}
		}
	case "StridedSlice":
		p.stridedSlice(n)
	case "GatherV2":
		x, ix, ax := p.in(n, 0), p.in(n, 1), p.val(n, 2)
		if x != nil && ix != nil && len(ax) == 1 && attrInt(n, "batch_dims") == 0 {
			a := ax[0]
			if a < 0 {
				a += int64(len(x))
			}
			if a >= 0 && int(a) < len(x) {
				o := append(append(append([]int64{}, x[:a]...), ix...), x[a+1:]...)
				p.set(n, 0, o)
				if v, iv := p.val(n, 0), p.val(n, 1); a == 0 && len(x) == 1 && v != nil && iv != nil {
					g := make([]int64, len(iv))
					for i, q := range iv {
						if q < 0 || int(q) >= len(v) {
							return
						}
						g[i] = v[q]
					}
					p.setVal(n, 0, g)
				}
			}
		}
	case "OneHot":
		if ix, d := p.in(n, 0), p.val(n, 1); ix != nil && len(d) == 1 && attrInt(n, "axis") == -1 {
			p.set(n, 0, append(append([]int64{}, ix...), d[0]))
		}
	case "Range":
		s, l, d := p.val(n, 0), p.val(n, 1), p.val(n, 2)
		if len(s) == 1 && len(l) == 1 && len(d) == 1 && d[0] != 0 {
			cnt := (l[0] - s[0] + d[0] - 1) / d[0]
			if d[0] < 0 {
				cnt = (s[0] - l[0] - d[0] - 1) / -d[0]
			}
			cnt = max(cnt, 0)
			p.set(n, 0, []int64{cnt})
			if cnt <= maxValueElems {
				v := make([]int64, cnt)
				for i := range v {
					v[i] = s[0] + int64(i)*d[0]
				}
				p.setVal(n, 0, v)
			}
		}
	case "Unpack":
		x := p.in(n, 0)
		a := attrInt(n, "axis")
		if x != nil {
			if a < 0 {
				a += int64(len(x))
			}
			if a >= 0 && int(a) < len(x) {
				o := append(append([]int64{}, x[:a]...), x[a+1:]...)
				for i := range n.OutputTypes {
					p.set(n, i, o)
				}
			}
		}
	case "IdentityN":
		for i := range n.OutputTypes {
			p.set(n, i, p.in(n, i))
		}
	case "Merge", "RefMerge":
		for i := range n.Inputs {
			if sh := p.in(n, i); sh != nil {
				p.set(n, 0, sh)
				break
			}
		}
		p.set(n, 1, []int64{})
	case "Switch", "RefSwitch":
		p.set(n, 0, p.in(n, 0))
		p.set(n, 1, p.in(n, 0))
	}
}

// varShape returns the shape of the variable whose handle is n's input i.
func (p *pureInfer) varShape(n *Node, i int) []int64 {
	if i >= len(n.Inputs) {
		return nil
	}
	h := n.Inputs[i].Node
	for h.Op == "Identity" && len(h.Inputs) > 0 {
		h = h.Inputs[0].Node
	}
	if h.Op == "VarHandleOp" {
		if _, sh, ok := shapeAttr(h.Def.GetAttr()); ok {
			return sh
		}
	}
	return nil
}

// arith propagates the values of small integer tensors through element-wise arithmetic.
func (p *pureInfer) arith(n *Node) {
	if len(n.Inputs) != 2 {
		return
	}
	a, b := p.val(n, 0), p.val(n, 1)
	if a == nil || b == nil {
		return
	}
	if len(a) != len(b) && len(a) != 1 && len(b) != 1 {
		return
	}
	o := make([]int64, max(len(a), len(b)))
	for i := range o {
		x, y := a[min(i, len(a)-1)], b[min(i, len(b)-1)]
		switch n.Op {
		case "Add", "AddV2":
			o[i] = x + y
		case "Sub":
			o[i] = x - y
		case "Mul":
			o[i] = x * y
		case "FloorDiv", "Div", "TruncateDiv":
			if y == 0 {
				return
			}
			o[i] = x / y
		case "Maximum":
			o[i] = max(x, y)
		case "Minimum":
			o[i] = min(x, y)
		default:
			return
		}
	}
	if len(p.in(n, 0)) <= 1 && len(p.in(n, 1)) <= 1 {
		p.setVal(n, 0, o)
	}
}

func (p *pureInfer) conv(n *Node) {
	x := p.in(n, 0)
	if len(x) != 4 {
		return
	}
	nchw := attrStr(n, "data_format") == "NCHW"
	hi, wi, ci := 1, 2, 3
	if nchw {
		hi, wi, ci = 2, 3, 1
	}
	strides := attrInts(n, "strides")
	if len(strides) != 4 {
		return
	}
	var kh, kw, outC int64
	switch n.Op {
	case "MaxPool", "AvgPool":
		k := attrInts(n, "ksize")
		if len(k) != 4 {
			return
		}
		kh, kw, outC = k[hi], k[wi], x[ci]
	default:
		f := p.in(n, 1)
		if len(f) != 4 {
			return
		}
		kh, kw = f[0], f[1]
		outC = f[3]
		if n.Op == "DepthwiseConv2dNative" {
			outC = -1
			if f[2] >= 0 && f[3] >= 0 {
				outC = f[2] * f[3]
			}
		}
	}
	dil := attrInts(n, "dilations")
	dh, dw := int64(1), int64(1)
	if len(dil) == 4 {
		dh, dw = dil[hi], dil[wi]
	}
	pad := attrStr(n, "padding")
	outDim := func(in, k, s, d int64, before, after int64) int64 {
		if in < 0 || k < 0 || s <= 0 {
			return -1
		}
		ek := (k-1)*d + 1
		switch pad {
		case "SAME":
			return (in + s - 1) / s
		case "VALID":
			return (in - ek + s) / s
		case "EXPLICIT":
			return (in + before + after - ek + s) / s
		}
		return -1
	}
	var ph, pw [2]int64
	if pad == "EXPLICIT" {
		e := attrInts(n, "explicit_paddings")
		if len(e) != 8 {
			return
		}
		ph = [2]int64{e[2*hi], e[2*hi+1]}
		pw = [2]int64{e[2*wi], e[2*wi+1]}
	}
	o := make([]int64, 4)
	o[0] = x[0]
	o[hi] = outDim(x[hi], kh, strides[hi], dh, ph[0], ph[1])
	o[wi] = outDim(x[wi], kw, strides[wi], dw, pw[0], pw[1])
	o[ci] = outC
	p.set(n, 0, o)
}

func (p *pureInfer) concat(n *Node) {
	var ax []int64
	first, last := 0, len(n.Inputs)
	if n.Op == "ConcatV2" {
		ax = p.val(n, len(n.Inputs)-1)
		last--
	} else {
		ax = p.val(n, 0)
		first++
	}
	if len(ax) != 1 || last <= first {
		return
	}
	var o []int64
	var vals []int64
	valsOK := true
	for i := first; i < last; i++ {
		sh := p.in(n, i)
		if sh == nil {
			return
		}
		a := ax[0]
		if a < 0 {
			a += int64(len(sh))
		}
		if a < 0 || int(a) >= len(sh) {
			return
		}
		if o == nil {
			o = append([]int64{}, sh...)
		} else {
			if len(sh) != len(o) {
				return
			}
			if o[a] < 0 || sh[a] < 0 {
				o[a] = -1
			} else {
				o[a] += sh[a]
			}
			for j := range o {
				if int64(j) != a && o[j] < 0 {
					o[j] = sh[j]
				}
			}
		}
		v := p.val(n, i)
		if v == nil || len(sh) != 1 {
			valsOK = false
		}
		vals = append(vals, v...)
	}
	p.set(n, 0, o)
	if valsOK {
		p.setVal(n, 0, vals)
	}
}

func (p *pureInfer) pack(n *Node) {
	if len(n.Inputs) == 0 {
		return
	}
	sh := p.in(n, 0)
	for i := 1; i < len(n.Inputs) && sh != nil; i++ {
		sh = mergeShape(sh, p.in(n, i))
	}
	if sh == nil {
		return
	}
	a := attrInt(n, "axis")
	if a < 0 {
		a += int64(len(sh)) + 1
	}
	if a < 0 || int(a) > len(sh) {
		return
	}
	o := append(append(append([]int64{}, sh[:a]...), int64(len(n.Inputs))), sh[a:]...)
	p.set(n, 0, o)
	if len(sh) == 0 {
		v := make([]int64, len(n.Inputs))
		for i := range n.Inputs {
			x := p.val(n, i)
			if len(x) != 1 {
				return
			}
			v[i] = x[0]
		}
		p.setVal(n, 0, v)
	}
}

// stridedSlice handles StridedSlice for begin/end/strides of known values, without
// ellipsis and new-axis masks.
func (p *pureInfer) stridedSlice(n *Node) {
	x, b, e, s := p.in(n, 0), p.val(n, 1), p.val(n, 2), p.val(n, 3)
	if x == nil || b == nil || e == nil || s == nil || len(b) != len(e) || len(b) != len(s) || len(b) > len(x) {
		return
	}
	if attrInt(n, "ellipsis_mask") != 0 || attrInt(n, "new_axis_mask") != 0 {
		return
	}
	bm, em, sm := attrInt(n, "begin_mask"), attrInt(n, "end_mask"), attrInt(n, "shrink_axis_mask")
	var o []int64
	type rng struct{ lo, hi, st int64 }
	var ranges []rng
	for i := range x {
		if i >= len(b) {
			o = append(o, x[i])
			ranges = append(ranges, rng{0, x[i], 1})
			continue
		}
		d := x[i]
		st := s[i]
		if st == 0 {
			return
		}
		if sm&(1<<i) != 0 {
			ranges = append(ranges, rng{b[i], b[i] + 1, 0})
			continue
		}
		if d < 0 {
			o = append(o, -1)
			ranges = append(ranges, rng{})
			continue
		}
		clamp := func(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
		lo, hi := b[i], e[i]
		if st > 0 {
			if bm&(1<<i) != 0 {
				lo = 0
			} else if lo < 0 {
				lo += d
			}
			if em&(1<<i) != 0 {
				hi = d
			} else if hi < 0 {
				hi += d
			}
			lo, hi = clamp(lo, 0, d), clamp(hi, 0, d)
			o = append(o, max(0, (hi-lo+st-1)/st))
		} else {
			if bm&(1<<i) != 0 {
				lo = d - 1
			} else if lo < 0 {
				lo += d
			}
			if em&(1<<i) != 0 {
				hi = -1
			} else if hi < 0 {
				hi += d
			}
			lo, hi = clamp(lo, -1, d-1), clamp(hi, -1, d-1)
			o = append(o, max(0, (lo-hi-st-1)/-st))
		}
		ranges = append(ranges, rng{lo, hi, st})
	}
	if o == nil {
		o = []int64{}
	}
	p.set(n, 0, o)
	if v := p.val(n, 0); v != nil && len(x) == 1 && len(ranges) == 1 {
		r := ranges[0]
		if r.st == 0 {
			i := r.lo
			if i < 0 {
				i += int64(len(v))
			}
			if i >= 0 && int(i) < len(v) {
				p.setVal(n, 0, []int64{v[i]})
			}
			return
		}
		var vs []int64
		for i := r.lo; (r.st > 0 && i < r.hi) || (r.st < 0 && i > r.hi); i += r.st {
			vs = append(vs, v[i])
		}
		if vs == nil {
			vs = []int64{}
		}
		p.setVal(n, 0, vs)
	}
}

// broadcast returns the NumPy broadcast of two shapes (nil when a rank is unknown).
func broadcast(a, b []int64) []int64 {
	if a == nil || b == nil {
		return nil
	}
	if len(a) < len(b) {
		a, b = b, a
	}
	o := append([]int64{}, a...)
	off := len(a) - len(b)
	for i, d := range b {
		x := o[off+i]
		switch {
		case x == 1:
			o[off+i] = d
		case d == 1:
		case x < 0 && d >= 0:
			o[off+i] = d
		}
	}
	return o
}

func reduce(x, axes []int64, keep bool) []int64 {
	if x == nil || axes == nil {
		return nil
	}
	drop := make([]bool, len(x))
	for _, a := range axes {
		if a < 0 {
			a += int64(len(x))
		}
		if a < 0 || int(a) >= len(x) {
			return nil
		}
		drop[a] = true
	}
	o := []int64{}
	for i, d := range x {
		switch {
		case !drop[i]:
			o = append(o, d)
		case keep:
			o = append(o, 1)
		}
	}
	return o
}

func reshape(x, target []int64) []int64 {
	if target == nil {
		return nil
	}
	o := append([]int64{}, target...)
	neg := -1
	prod := int64(1)
	for i, d := range o {
		if d < 0 {
			if neg >= 0 {
				return nil
			}
			neg = i
			continue
		}
		prod *= d
	}
	if neg >= 0 {
		if !knownShape(x) || prod == 0 {
			o[neg] = -1
		} else {
			o[neg] = elems(x) / prod
		}
	}
	return o
}

func elems(sh []int64) int64 {
	e := int64(1)
	for _, d := range sh {
		e *= d
	}
	return e
}

// constInts returns the values of a small int32 or int64 constant.
func constInts(t *tpb.TensorProto, sh []int64) []int64 {
	dt := t.GetDtype()
	if dt != typb.DataType_DT_INT32 && dt != typb.DataType_DT_INT64 {
		return nil
	}
	n := elems(sh)
	if n > maxValueElems || n < 0 {
		return nil
	}
	var v []int64
	switch {
	case len(t.GetTensorContent()) > 0:
		c := t.GetTensorContent()
		w := 4
		if dt == typb.DataType_DT_INT64 {
			w = 8
		}
		if len(c) != int(n)*w {
			return nil
		}
		for i := 0; i < int(n); i++ {
			if w == 4 {
				v = append(v, int64(int32(binary.LittleEndian.Uint32(c[4*i:]))))
			} else {
				v = append(v, int64(binary.LittleEndian.Uint64(c[8*i:])))
			}
		}
	case dt == typb.DataType_DT_INT32 && len(t.GetIntVal()) > 0:
		for i := 0; i < int(n); i++ {
			v = append(v, int64(t.GetIntVal()[min(i, len(t.GetIntVal())-1)]))
		}
	case dt == typb.DataType_DT_INT64 && len(t.GetInt64Val()) > 0:
		for i := 0; i < int(n); i++ {
			v = append(v, t.GetInt64Val()[min(i, len(t.GetInt64Val())-1)])
		}
	case n == 0:
		v = []int64{}
	default:
		// All zeros (an empty value list).
		v = make([]int64, n)
	}
	return v
}

// sliceValues returns the values of the slice of a tensor of shape x holding v (row-major),
// starting at begin, of shape size.
func sliceValues(v, x, begin, size []int64) []int64 {
	if elems(x) != int64(len(v)) {
		return nil
	}
	out := []int64{}
	idx := make([]int64, len(x))
	total := elems(size)
	for k := int64(0); k < total; k++ {
		r := k
		for i := len(size) - 1; i >= 0; i-- {
			idx[i] = begin[i] + r%size[i]
			r /= size[i]
		}
		off := int64(0)
		for i := range x {
			if idx[i] < 0 || idx[i] >= x[i] {
				return nil
			}
			off = off*x[i] + idx[i]
		}
		out = append(out, v[off])
	}
	return out
}

// einsum infers an Einsum's output from its equation, without ellipses.
func (p *pureInfer) einsum(n *Node) {
	eq := attrStr(n, "equation")
	arrow := strings.Index(eq, "->")
	if arrow < 0 || strings.Contains(eq, ".") {
		return
	}
	ins := strings.Split(eq[:arrow], ",")
	if len(ins) != len(n.Inputs) {
		return
	}
	dims := map[rune]int64{}
	for i, spec := range ins {
		sh := p.in(n, i)
		if len(sh) != len(spec) {
			return
		}
		for j, c := range spec {
			if d, ok := dims[c]; !ok || d < 0 || d == 1 {
				dims[c] = sh[j]
			}
		}
	}
	o := []int64{}
	for _, c := range eq[arrow+2:] {
		d, ok := dims[c]
		if !ok {
			return
		}
		o = append(o, d)
	}
	p.set(n, 0, o)
}
