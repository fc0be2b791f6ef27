package cost

import (
	"math"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// OpKind says how an op's cost was estimated.
type OpKind int

const (
	// KindKernel: an analytical rule for the op (FLOPs and bytes from its shapes).
	KindKernel OpKind = iota
	// KindNoKernel: the op launches no device kernel (NoOp, Identity, Reshape, Const,
	// VarHandleOp, ReadVariableOp, shape ops, ...); it takes no device time.
	KindNoKernel
	// KindUnknown: no rule for the op, or its shapes are unknown; only the bytes term counts.
	KindUnknown
)

// String returns the kind's name: "kernel", "no-kernel" or "unknown".
func (k OpKind) String() string {
	switch k {
	case KindKernel:
		return "kernel"
	case KindNoKernel:
		return "no-kernel"
	}
	return "unknown"
}

// Precision says which peak throughput an op's FLOPs run at.
type Precision int

const (
	// PrecFP32 is the plain FP32 rate (elementwise ops, reductions, ...).
	PrecFP32 Precision = iota
	// PrecTF32 is a float32 matrix product or convolution, which TensorFlow runs on TF32
	// tensor cores where the GPU has them (the default since TensorFlow 2.4).
	PrecTF32
	// PrecFP16 is a half-precision (or bfloat16) matrix product or convolution.
	PrecFP16
)

// OpEstimate is the analytical estimate of one op's work.
type OpEstimate struct {
	// FLOPs are the floating-point operations (a multiply-add counts 2).
	FLOPs float64
	// Bytes are the bytes read and written in device memory.
	Bytes float64
	// Workspace is temporary device memory the kernel allocates while it runs.
	Workspace int64
	Precision Precision
	Kind      OpKind
	// Rule names the rule used ("conv2d", "elementwise", ...), for reports and tests.
	Rule string
}

// noKernelOps launch no device kernel: they run in the executor on the host, forward a
// buffer, or return a tensor that already exists.
var noKernelOps = map[string]bool{
	"NoOp": true, "Identity": true, "IdentityN": true, "StopGradient": true, "PreventGradient": true,
	"Reshape": true, "Squeeze": true, "ExpandDims": true, "Shape": true, "ShapeN": true,
	"Size": true, "Rank": true, "Const": true, "HostConst": true, "VarHandleOp": true,
	"ReadVariableOp": true, "Placeholder": true, "PlaceholderWithDefault": true,
	"ControlTrigger": true, "VarIsInitializedOp": true, "EnsureShape": true, "_Arg": true,
	"_Retval": true, "BroadcastGradientArgs": true, "ConcatOffset": true, "Variable": true,
	"VariableV2": true, "DestroyResourceOp": true, "Enter": true, "Exit": true,
	"Switch": true, "Merge": true, "NextIteration": true, "LoopCond": true,
	"RefEnter": true, "RefExit": true, "RefSwitch": true, "RefMerge": true,
	"RefNextIteration": true, "RefIdentity": true, "Bitcast": true, "CheckNumerics": false,
}

// aliasOps produce an output that shares its input's buffer (no allocation): output port i
// aliases data input aliasInput[op](i). A Merge shares the buffer of the input that arrives,
// known only while simulating (sim.mergedInput).
var aliasOps = map[string]bool{
	"Identity": true, "IdentityN": true, "StopGradient": true, "PreventGradient": true,
	"Reshape": true, "Squeeze": true, "ExpandDims": true, "EnsureShape": true,
	"RefIdentity": true, "Bitcast": true, "CheckNumerics": true, "Snapshot": false,
	"Enter": true, "Exit": true, "Switch": true, "NextIteration": true,
}

// aliasInput returns which data input output port of an alias op shares, or -1.
func aliasInput(op string, port int) int {
	if !aliasOps[op] {
		return -1
	}
	switch op {
	case "IdentityN":
		return port
	case "Switch":
		return 0
	}
	if port != 0 {
		return -1
	}
	return 0
}

// flopsPerElement of elementwise ops; ops missing here but listed in elementwiseOps cost 1.
var flopsPerElement = map[string]float64{
	"Exp": 8, "Expm1": 8, "Log": 8, "Log1p": 8, "Tanh": 8, "Sigmoid": 8, "Softplus": 8,
	"SoftplusGrad": 8, "Erf": 8, "Erfc": 8, "Sin": 8, "Cos": 8, "Pow": 8, "Elu": 8, "Selu": 8,
	"Softsign": 4, "TanhGrad": 2, "SigmoidGrad": 3, "SquaredDifference": 2, "RealDiv": 4,
	"Div": 4, "DivNoNan": 4, "FloorDiv": 4, "FloorMod": 4, "TruncateDiv": 4, "Sqrt": 4,
	"Rsqrt": 4, "SqrtGrad": 4, "RsqrtGrad": 4, "Reciprocal": 4, "ReciprocalGrad": 4,
	"Inv": 4, "ClipByValue": 2, "Gelu": 16, "GeluGrad": 24,
	"RandomUniform": 10, "RandomStandardNormal": 16, "TruncatedNormal": 24, "RandomUniformInt": 10,
	"StatelessRandomUniformV2": 10, "StatelessRandomNormalV2": 16, "StatelessTruncatedNormalV2": 24,
}

// elementwiseOps compute each output element from the corresponding (broadcast) input
// elements. Those marked true may write their output into an input's buffer when they are
// that buffer's last reader (TensorFlow's forward_input_or_allocate_output).
var elementwiseOps = map[string]bool{
	"Add": true, "AddV2": true, "Sub": true, "Mul": true, "Neg": true, "Abs": true,
	"Maximum": true, "Minimum": true, "Relu": true, "Relu6": true, "ReluGrad": true,
	"Relu6Grad": true, "Square": true, "SquaredDifference": true, "Sign": true, "Floor": true,
	"Ceil": true, "Round": true, "Rint": true, "LeakyRelu": true, "LeakyReluGrad": true,
	"Elu": true, "EluGrad": true, "Selu": true, "SeluGrad": true, "Softsign": true,
	"SoftsignGrad": true, "RealDiv": true, "Div": true, "DivNoNan": true, "FloorDiv": true,
	"FloorMod": true, "TruncateDiv": true, "Sqrt": true, "Rsqrt": true, "SqrtGrad": true,
	"RsqrtGrad": true, "Reciprocal": true, "ReciprocalGrad": true, "Inv": true, "Exp": true,
	"Expm1": true, "Log": true, "Log1p": true, "Tanh": true, "Sigmoid": true, "TanhGrad": true,
	"SigmoidGrad": true, "Softplus": true, "SoftplusGrad": true, "Erf": true, "Erfc": true,
	"Sin": true, "Cos": true, "Pow": true, "BiasAdd": true, "ClipByValue": true, "Gelu": true,
	"GeluGrad": true, "Xlogy": true, "Xdivy": true, "MulNoNan": true,
	// No forwarding: the output's dtype or shape differs from the inputs, or TensorFlow's
	// kernel always allocates.
	"Cast": false, "Equal": false, "NotEqual": false, "Less": false, "LessEqual": false,
	"Greater": false, "GreaterEqual": false, "LogicalAnd": false, "LogicalOr": false,
	"LogicalNot": false, "Select": false, "SelectV2": false, "IsFinite": false, "IsNan": false,
	"Snapshot": false, "ZerosLike": false, "OnesLike": false, "Fill": false,
	"RandomUniform": false, "RandomStandardNormal": false, "TruncatedNormal": false,
	"RandomUniformInt": false, "StatelessRandomUniformV2": false,
	"StatelessRandomNormalV2": false, "StatelessTruncatedNormalV2": false, "AddN": true,
	"L2Loss": false,
}

// forwardsInput0Ops are the other ops whose kernels write output 0 into input 0's buffer
// when they are that buffer's last reader: FusedBatchNorm, V2 and V3 (y over x:
// FusedBatchNormOpBase calls forward_input_or_allocate_output({0}, 0, ...) in
// tensorflow/core/kernels/fused_batch_norm_op.cc). Their gradients do not: FusedBatchNormGrad*
// allocates x_backprop (allocate_output), so it holds y_backprop, x and x_backprop at once.
var forwardsInput0Ops = map[string]bool{"FusedBatchNorm": true, "FusedBatchNormV2": true, "FusedBatchNormV3": true}

// copyOps move or rearrange data without arithmetic: bytes only.
var copyOps = map[string]bool{
	"Split": true, "SplitV": true, "Unpack": true, "Pack": true, "ConcatV2": true, "Concat": true,
	"Slice": true, "StridedSlice": true, "StridedSliceGrad": true, "Transpose": true,
	"ConjugateTranspose": true, "Pad": true, "PadV2": true, "MirrorPad": true, "Tile": true,
	"BroadcastTo": true, "ReverseV2": true, "DepthToSpace": true, "SpaceToDepth": true,
	"OneHot": true, "Range": true, "TensorScatterUpdate": true, "Roll": true, "Where": true,
	"ZerosLike": true, "OnesLike": true, "Fill": true, "Snapshot": true, "InvertPermutation": true,
}

// reductionOps read every input element once.
var reductionOps = map[string]float64{
	"Sum": 1, "Mean": 1, "Max": 1, "Min": 1, "Prod": 1, "All": 1, "Any": 1, "ArgMax": 1,
	"ArgMin": 1, "EuclideanNorm": 2, "BiasAddGrad": 1, "L2Loss": 2,
}

// applyOps are optimizer updates and variable assignments: n-element arrays (n = the size of
// the input at index grad) read and written in place. accesses counts the n-element arrays
// read plus written, flops the operations per element.
type applyRule struct {
	grad     int
	accesses float64
	flops    float64
}

var applyOps = map[string]applyRule{
	"ApplyGradientDescent": {2, 3, 2}, "ResourceApplyGradientDescent": {2, 3, 2},
	"ApplyMomentum": {3, 5, 4}, "ResourceApplyMomentum": {3, 5, 4},
	"ApplyKerasMomentum": {3, 5, 4}, "ResourceApplyKerasMomentum": {3, 5, 4},
	"ApplyAdam": {9, 7, 12}, "ResourceApplyAdam": {9, 7, 12},
	"ResourceApplyAdamWithAmsgrad": {10, 9, 14},
	"ApplyAdaMax":                  {8, 7, 10}, "ResourceApplyAdaMax": {8, 7, 10},
	"ApplyRMSProp": {7, 7, 10}, "ResourceApplyRMSProp": {7, 7, 10},
	"ApplyCenteredRMSProp": {8, 9, 14}, "ResourceApplyCenteredRMSProp": {8, 9, 14},
	"ApplyAdagrad": {3, 5, 5}, "ResourceApplyAdagrad": {3, 5, 5},
	"ApplyAdagradV2": {4, 5, 5}, "ResourceApplyAdagradV2": {4, 5, 5},
	"ApplyAdadelta": {6, 7, 12}, "ResourceApplyAdadelta": {6, 7, 12},
	"AssignVariableOp": {1, 2, 0}, "AssignAddVariableOp": {1, 3, 1}, "AssignSubVariableOp": {1, 3, 1},
	"Assign": {1, 2, 0}, "AssignAdd": {1, 3, 1}, "AssignSub": {1, 3, 1},
}

// EstimateOp estimates node n's work from its shapes (s) and attrs.
func EstimateOp(n *graphdef.Node, s *Shapes) OpEstimate {
	op := n.Op
	if op == "NoOp" {
		return OpEstimate{Kind: KindNoKernel, Rule: "noop"}
	}
	if noKernelOps[op] {
		return OpEstimate{Kind: KindNoKernel, Rule: "no-kernel"}
	}
	io := ioBytes(n, s)
	e := OpEstimate{Kind: KindKernel, Bytes: io.total}
	switch {
	case op == "Conv2D" || op == "_FusedConv2D" || op == "Conv3D" || op == "DepthwiseConv2dNative":
		return convEstimate(n, s, e, s.In(n, 0), s.In(n, 1), s.Out(n, 0), op)
	case op == "Conv2DBackpropInput" || op == "Conv3DBackpropInputV2" || op == "DepthwiseConv2dNativeBackpropInput":
		// (input_sizes, filter, out_backprop): the work of the forward convolution.
		return convEstimate(n, s, e, s.Out(n, 0), s.In(n, 1), s.In(n, 2), op)
	case op == "Conv2DBackpropFilter" || op == "Conv3DBackpropFilterV2" || op == "DepthwiseConv2dNativeBackpropFilter":
		// (input, filter_sizes, out_backprop): the filter is the output.
		return convEstimate(n, s, e, s.In(n, 0), s.Out(n, 0), s.In(n, 2), op)
	case op == "MatMul" || op == "_FusedMatMul":
		return matmulEstimate(n, s, e)
	case op == "BatchMatMul" || op == "BatchMatMulV2" || op == "BatchMatMulV3":
		return batchMatmulEstimate(n, s, e)
	case op == "Einsum":
		return einsumEstimate(n, s, e)
	case op == "MaxPool" || op == "AvgPool" || op == "MaxPool3D" || op == "AvgPool3D":
		return poolEstimate(n, e, s.Out(n, 0), "pool")
	case op == "MaxPoolGrad" || op == "MaxPool3DGrad":
		// (orig_input, orig_output, grad): scan each window of the original input again.
		e = poolEstimate(n, e, s.In(n, 2), "pool-grad")
		if x := Elements(s.In(n, 0)); e.Kind == KindKernel && x > 0 {
			e.FLOPs += float64(x)
		}
		return e
	case op == "AvgPoolGrad" || op == "AvgPool3DGrad":
		return poolEstimate(n, e, s.In(n, 1), "pool-grad")
	case isFusedBatchNorm(op):
		x := Elements(s.In(n, 0))
		if x < 0 {
			return unknown(e, "batchnorm")
		}
		e.Rule = "batchnorm"
		if attr(n, "is_training") == nil || attrBool(n, "is_training") {
			// Training: a pass for the batch statistics, then normalise.
			e.FLOPs = 8 * float64(x)
			e.Bytes += io.in[0]
		} else {
			e.FLOPs = 4 * float64(x)
		}
		return e
	case op == "FusedBatchNormGrad" || op == "FusedBatchNormGradV2" || op == "FusedBatchNormGradV3":
		x := Elements(s.In(n, 0))
		if x < 0 {
			return unknown(e, "batchnorm-grad")
		}
		e.Rule, e.FLOPs = "batchnorm-grad", 12*float64(x)
		return e
	case op == "Softmax" || op == "LogSoftmax":
		return perElement(e, s.In(n, 0), 5, "softmax")
	case op == "SparseSoftmaxCrossEntropyWithLogits":
		return perElement(e, s.In(n, 0), 6, "softmax-xent")
	case op == "SoftmaxCrossEntropyWithLogits":
		return perElement(e, s.In(n, 0), 7, "softmax-xent")
	case op == "GatherV2" || op == "Gather" || op == "ResourceGather" || op == "GatherNd" || op == "ResourceGatherNd":
		// Reads the gathered rows, not the whole table.
		out, ok := io.outputs(n, s)
		if !ok {
			return unknown(e, "gather")
		}
		e.Rule, e.Bytes = "gather", 2*out+io.in[len(io.in)-1]
		if op == "GatherV2" && len(io.in) == 3 {
			e.Bytes = 2*out + io.in[1]
		}
		return e
	case op == "UnsortedSegmentSum" || op == "SegmentSum" || op == "UnsortedSegmentMax" || op == "ScatterNd":
		d := Elements(s.In(n, 0))
		if op == "ScatterNd" {
			d = Elements(s.In(n, 1))
		}
		if d < 0 {
			return unknown(e, "scatter")
		}
		e.Rule, e.FLOPs = "scatter", float64(d)
		return e
	case op == "ResourceScatterAdd" || op == "ResourceScatterSub" || op == "ResourceScatterUpdate" ||
		op == "ScatterAdd" || op == "ScatterSub" || op == "ScatterUpdate":
		// (var, indices, updates): read-modify-write of the updated rows.
		u := Elements(s.In(n, 2))
		if u < 0 || len(io.in) < 3 {
			return unknown(e, "scatter")
		}
		e.Rule, e.FLOPs = "scatter", float64(u)
		e.Bytes = 3*io.in[2] + io.in[1]
		return e
	case op == "LSTMBlockCell" || op == "LSTMBlockCellGrad" || op == "BlockLSTM" || op == "BlockLSTMV2" ||
		op == "BlockLSTMGrad" || op == "BlockLSTMGradV2" || op == "GRUBlockCell" || op == "GRUBlockCellGrad":
		return lstmEstimate(n, s, e)
	case strings.HasPrefix(op, "CudnnRNN"):
		return cudnnRNNEstimate(n, s, e)
	case op == "AddN":
		out := Elements(s.Out(n, 0))
		if out < 0 {
			return unknown(e, "elementwise")
		}
		e.Rule, e.FLOPs = "elementwise", float64(out)*float64(len(n.Inputs)-1)
		return e
	}
	if r, ok := applyOps[op]; ok {
		sz, known := s.Bytes(tensorAt(n, r.grad))
		el := Elements(s.In(n, r.grad))
		if !known || el < 0 {
			return unknown(e, "apply")
		}
		e.Rule, e.FLOPs, e.Bytes = "apply", r.flops*float64(el), r.accesses*float64(sz)
		return e
	}
	if f, ok := reductionOps[op]; ok {
		return perElement(e, s.In(n, 0), f, "reduction")
	}
	if _, ok := elementwiseOps[op]; ok {
		out := Elements(s.Out(n, 0))
		if out < 0 {
			return unknown(e, "elementwise")
		}
		f, ok := flopsPerElement[op]
		if !ok {
			f = 1
		}
		if copyOps[op] {
			f = 0
		}
		e.Rule, e.FLOPs = "elementwise", f*float64(out)
		return e
	}
	if copyOps[op] {
		if !io.known {
			return unknown(e, "copy")
		}
		e.Rule = "copy"
		return e
	}
	return unknown(e, "unknown")
}

// unknown marks an estimate as having no rule: only its bytes term counts.
func unknown(e OpEstimate, rule string) OpEstimate {
	e.Kind, e.FLOPs, e.Rule = KindUnknown, 0, rule
	return e
}

func perElement(e OpEstimate, sh []int64, f float64, rule string) OpEstimate {
	x := Elements(sh)
	if x < 0 {
		return unknown(e, rule)
	}
	e.Rule, e.FLOPs = rule, f*float64(x)
	return e
}

func tensorAt(n *graphdef.Node, i int) graphdef.Tensor {
	if i < len(n.Inputs) {
		return n.Inputs[i]
	}
	return graphdef.Tensor{Node: n, Port: -1}
}

// ioSizes are the known sizes of an op's data inputs and outputs.
type ioSizes struct {
	in    []float64
	total float64
	known bool // every non-handle input and output is of known size
}

func ioBytes(n *graphdef.Node, s *Shapes) ioSizes {
	r := ioSizes{in: make([]float64, len(n.Inputs)), known: true}
	for i, t := range n.Inputs {
		if dt, ok := t.DataType(); ok && (graphdef.IsHandle(dt) || graphdef.IsRef(dt)) {
			continue
		}
		if b, ok := s.Bytes(t); ok {
			r.in[i] = float64(b)
			r.total += float64(b)
		} else {
			r.known = false
		}
	}
	for port := range n.OutputTypes {
		t := graphdef.Tensor{Node: n, Port: port}
		if dt, _ := t.DataType(); graphdef.IsHandle(dt) || graphdef.IsRef(dt) {
			continue
		}
		if b, ok := s.Bytes(t); ok {
			r.total += float64(b)
		} else {
			r.known = false
		}
	}
	return r
}

func (r ioSizes) outputs(n *graphdef.Node, s *Shapes) (float64, bool) {
	var sum float64
	for port := range n.OutputTypes {
		b, ok := s.Bytes(graphdef.Tensor{Node: n, Port: port})
		if !ok {
			return 0, false
		}
		sum += float64(b)
	}
	return sum, true
}

// matPrecision returns the precision a matrix product or convolution of n runs at.
func matPrecision(n *graphdef.Node) Precision {
	dt, ok := attrType(n, "T")
	if !ok && len(n.OutputTypes) > 0 {
		dt, ok = n.OutputTypes[0], true
	}
	switch graphdef.BaseType(dt) {
	case tpb.DataType_DT_HALF, tpb.DataType_DT_BFLOAT16:
		return PrecFP16
	case tpb.DataType_DT_FLOAT:
		return PrecTF32
	}
	return PrecFP32
}

// spatial returns (batch, spatial dims, channels) of a 4-D or 5-D activation in data format
// df ("NHWC", "NCHW", "NDHWC", "NCDHW").
func spatial(sh []int64, df string) (batch int64, sp []int64, ch int64, ok bool) {
	if len(sh) < 4 || Elements(sh) < 0 {
		return 0, nil, 0, false
	}
	if strings.HasPrefix(df, "NC") {
		return sh[0], sh[2:], sh[1], true
	}
	return sh[0], sh[1 : len(sh)-1], sh[len(sh)-1], true
}

// convEstimate: 2 x N x (output spatial) x C_out x (kernel spatial) x C_in per group, for the
// forward convolution and both backprops alike (each is one such product).
func convEstimate(n *graphdef.Node, s *Shapes, e OpEstimate, input, filter, output []int64, op string) OpEstimate {
	df := attrString(n, "data_format", "")
	if df == "" {
		df = "NHWC"
		if len(output) == 5 {
			df = "NDHWC"
		}
	}
	batch, osp, _, ok := spatial(output, df)
	if !ok || Elements(filter) < 0 || len(filter) != len(output) {
		return unknown(e, "conv")
	}
	k := len(filter) - 2 // filter is [spatial..., in, out]
	flops := 2 * float64(batch)
	for _, d := range osp {
		flops *= float64(d)
	}
	for _, d := range filter[:k] {
		flops *= float64(d)
	}
	// Conv: C_in(per group) x C_out; depthwise: C_in x multiplier.
	flops *= float64(filter[k]) * float64(filter[k+1])
	e.FLOPs, e.Precision, e.Rule = flops, matPrecision(n), "conv"
	if strings.HasPrefix(op, "Depthwise") {
		e.Rule = "depthwise-conv"
		return e
	}
	// TensorFlow's cuDNN path keeps the filter in cuDNN's layout in a temporary buffer
	// (conv_ops: TransformFilter into an allocate_temp tensor).
	if el, ok := graphdef.ElementBytes(n.OutputTypes[0]); ok {
		e.Workspace = Elements(filter) * el
	}
	_ = input
	return e
}

func matmulEstimate(n *graphdef.Node, s *Shapes, e OpEstimate) OpEstimate {
	a, b := s.In(n, 0), s.In(n, 1)
	if len(a) != 2 || len(b) != 2 || Elements(a) < 0 || Elements(b) < 0 {
		return unknown(e, "matmul")
	}
	m, k := a[0], a[1]
	if attrBool(n, "transpose_a") {
		m, k = a[1], a[0]
	}
	nn := b[1]
	if attrBool(n, "transpose_b") {
		nn = b[0]
	}
	e.FLOPs, e.Precision, e.Rule = 2*float64(m)*float64(nn)*float64(k), matPrecision(n), "matmul"
	return e
}

func batchMatmulEstimate(n *graphdef.Node, s *Shapes, e OpEstimate) OpEstimate {
	x, y := s.In(n, 0), s.In(n, 1)
	if len(x) < 2 || len(y) < 2 || Elements(x) < 0 || Elements(y) < 0 {
		return unknown(e, "batch-matmul")
	}
	m, k := x[len(x)-2], x[len(x)-1]
	if attrBool(n, "adj_x") {
		m, k = k, m
	}
	nn := y[len(y)-1]
	if attrBool(n, "adj_y") {
		nn = y[len(y)-2]
	}
	// Broadcast the batch dimensions.
	bx, by := x[:len(x)-2], y[:len(y)-2]
	batch := 1.0
	for i := 0; i < max(len(bx), len(by)); i++ {
		d := int64(1)
		if j := len(bx) - 1 - i; j >= 0 {
			d = bx[j]
		}
		if j := len(by) - 1 - i; j >= 0 && by[j] > d {
			d = by[j]
		}
		batch *= float64(d)
	}
	e.FLOPs, e.Precision, e.Rule = 2*batch*float64(m)*float64(nn)*float64(k), matPrecision(n), "batch-matmul"
	return e
}

// einsumEstimate handles two-operand Einsum equations: 2 x the product of the sizes of every
// distinct label (batch, free and contracted dimensions alike). Ellipses are expanded to the
// operands' leading dimensions. One-operand equations (transposes, reductions) cost their
// bytes.
func einsumEstimate(n *graphdef.Node, s *Shapes, e OpEstimate) OpEstimate {
	eq := strings.ReplaceAll(attrString(n, "equation", ""), " ", "")
	lhs, _, ok := strings.Cut(eq, "->")
	if !ok {
		return unknown(e, "einsum")
	}
	ops := strings.Split(lhs, ",")
	if len(ops) != len(n.Inputs) || len(ops) == 0 || len(ops) > 2 {
		return unknown(e, "einsum")
	}
	if len(ops) == 1 {
		e.Rule = "einsum"
		return e
	}
	sizes := map[rune]int64{}
	for i, sub := range ops {
		sh := s.In(n, i)
		if Elements(sh) < 0 {
			return unknown(e, "einsum")
		}
		labels := []rune(sub)
		if pre, post, found := strings.Cut(sub, "..."); found {
			nEll := len(sh) - len([]rune(pre)) - len([]rune(post))
			if nEll < 0 {
				return unknown(e, "einsum")
			}
			labels = []rune(pre)
			for j := 0; j < nEll; j++ {
				// Ellipsis dimensions are aligned from the right, as broadcasting does.
				labels = append(labels, rune(0x10000+maxEllipsis-nEll+j))
			}
			labels = append(labels, []rune(post)...)
		}
		if len(labels) != len(sh) {
			return unknown(e, "einsum")
		}
		for j, l := range labels {
			if sh[j] > sizes[l] {
				sizes[l] = sh[j]
			}
		}
	}
	flops := 2.0
	for _, d := range sizes {
		flops *= float64(d)
	}
	e.FLOPs, e.Precision, e.Rule = flops, matPrecision(n), "einsum"
	return e
}

const maxEllipsis = 64

// poolEstimate: one operation per output (or gradient) element per window element.
func poolEstimate(n *graphdef.Node, e OpEstimate, out []int64, rule string) OpEstimate {
	el := Elements(out)
	ks := attrInts(n, "ksize")
	if el < 0 || len(ks) < 4 {
		return unknown(e, rule)
	}
	win := 1.0
	for _, k := range ks {
		win *= float64(k)
	}
	e.Rule, e.FLOPs = rule, float64(el)*win
	return e
}

// lstmEstimate covers TensorFlow's fused LSTM/GRU block ops: the gate matrix product
// 2 x B x (I + H) x G x H (G = 4 gates for LSTM, 3 for GRU) per time step, plus about 20
// elementwise operations per hidden unit; the gradients do the gate products twice (input
// and weight gradients) where the op computes them (BlockLSTMGrad) and only the elementwise
// part where it does not (LSTMBlockCellGrad).
func lstmEstimate(n *graphdef.Node, s *Shapes, e OpEstimate) OpEstimate {
	op := n.Op
	xi, hi := 0, 2 // LSTMBlockCell(x, cs_prev, h_prev, w, ...)
	gates := 4.0
	steps := 1.0
	switch op {
	case "BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2":
		xi, hi = 1, 3 // (seq_len_max, x [T, B, I], cs_prev, h_prev, w, ...)
	case "GRUBlockCell", "GRUBlockCellGrad":
		xi, hi, gates = 0, 1, 3 // (x, h_prev, w_ru, w_c, ...)
	}
	x, h := s.In(n, xi), s.In(n, hi)
	if Elements(x) < 0 || len(h) != 2 {
		return unknown(e, "rnn")
	}
	if len(x) == 3 {
		steps = float64(x[0])
		x = x[1:]
	}
	if len(x) != 2 {
		return unknown(e, "rnn")
	}
	b, in, hid := float64(x[0]), float64(x[1]), float64(h[1])
	mat := 2 * b * (in + hid) * gates * hid
	elt := 20 * b * hid
	switch op {
	case "LSTMBlockCellGrad", "GRUBlockCellGrad":
		mat, elt = 0, 30*b*hid
	case "BlockLSTMGrad", "BlockLSTMGradV2":
		mat, elt = 2*mat, 30*b*hid
	}
	e.FLOPs, e.Precision, e.Rule = steps*(mat+elt), matPrecision(n), "rnn"
	return e
}

// cudnnRNNEstimate covers CudnnRNN{,V2,V3} and their backprops (input [T, B, I] time-major
// by default, input_h [layers x directions, B, H]): per layer, direction and step the gate
// product 2 x B x (I_layer + H) x G x H; backprop twice that.
func cudnnRNNEstimate(n *graphdef.Node, s *Shapes, e OpEstimate) OpEstimate {
	x, h := s.In(n, 0), s.In(n, 1)
	if len(x) != 3 || len(h) != 3 || Elements(x) < 0 || Elements(h) < 0 {
		return unknown(e, "rnn")
	}
	t, b, in := float64(x[0]), float64(x[1]), float64(x[2])
	if attr(n, "time_major") != nil && !attrBool(n, "time_major") {
		b, t = t, b
	}
	dirs := 1.0
	if attrString(n, "direction", "unidirectional") == "bidirectional" {
		dirs = 2
	}
	layers := float64(h[0]) / dirs
	hid := float64(h[2])
	gates := map[string]float64{"lstm": 4, "gru": 3, "rnn_relu": 1, "rnn_tanh": 1}[attrString(n, "rnn_mode", "lstm")]
	if gates == 0 {
		gates = 4
	}
	flops := 0.0
	for l := 0.0; l < layers; l++ {
		li := in
		if l > 0 {
			li = dirs * hid
		}
		flops += dirs * t * 2 * b * (li + hid) * gates * hid
	}
	if strings.Contains(n.Op, "Backprop") {
		flops *= 2
	}
	e.FLOPs, e.Precision, e.Rule = flops, matPrecision(n), "rnn"
	return e
}

// MinOpTime is the least time an op other than NoOp takes (ns): its successors become
// ready strictly after it starts, so that the ready order does not depend on how ties
// between zero-length ops are broken. Grappler's OpLevelCostEstimator has the same floor
// (kMinComputeTime) and likewise gives NoOp no time at all.
const MinOpTime = 1

// OpTime returns how long an op with estimate e takes, in nanoseconds: max(FLOPs / peak,
// bytes / memory bandwidth) + launch latency on a GPU; on the host the host figures and no
// launch latency. NoOp takes no time, other ops without a kernel MinOpTime. tf32 says
// whether float32 matrix products may use TF32 tensor cores.
func OpTime(e OpEstimate, p *Profile, onHost, tf32 bool) int64 {
	if e.Rule == "noop" {
		return 0
	}
	if e.Kind == KindNoKernel {
		return MinOpTime
	}
	if onHost {
		t := math.Max(e.FLOPs/p.HostFLOPS, e.Bytes/p.HostMemBandwidth)
		return max(MinOpTime, ceilNS(t))
	}
	peak := p.FP32
	switch e.Precision {
	case PrecTF32:
		if tf32 && p.TF32 > 0 {
			peak = p.TF32
		}
	case PrecFP16:
		peak = p.FP16
	}
	t := math.Max(e.FLOPs/peak, e.Bytes/p.MemBandwidth) + p.LaunchLatency
	return max(MinOpTime, ceilNS(t))
}

// MaxDuration bounds every duration the cost model computes: 2^53 ns, about 104 days. An
// absurd estimate (a tensor near graphdef.MaxTensorBytes on a slow link, a profile with a
// tiny bandwidth) saturates there instead of wrapping around when converted to int64.
const MaxDuration int64 = 1 << 53

// ceilNS converts seconds to whole nanoseconds, rounding up, saturated at MaxDuration.
func ceilNS(seconds float64) int64 {
	ns := math.Ceil(seconds*1e9 - 1e-6)
	if !(ns < float64(MaxDuration)) {
		return MaxDuration
	}
	return int64(ns)
}
