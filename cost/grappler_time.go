package cost

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// This file times ops the way Grappler's VirtualCluster does (Conventions.GrapplerTimes), so
// that the simulator reproduces the VirtualScheduler's trace to the nanosecond and with it
// GraphMemory's peaks, the microsecond one above all, whose value depends on the absolute
// times of the ops. The rules are those of TensorFlow 2.18's OpLevelCostEstimator
// (tensorflow/core/grappler/costs/op_level_cost_estimator.cc and .h): every op's time is
// ceil(operations / device GOP/s) + ceil(bytes read and written / device GB/s) nanoseconds
// (compute_memory_overlap_ is false and the intermediate-memory bandwidths are infinite);
// "minimum cost" ops (Identity, Reshape, Placeholder, _Send, _Recv, Const, VarHandleOp,
// ReadVariableOp, Shape, ...) take kMinComputeTime, 1 ns, and NoOp none; an op whose
// estimator fails (a convolution with a zero dimension, a Softmax of unknown rank, ...)
// takes 0 ns (Costs::ZeroCosts). Operation counts and bytes come from the ops' shapes, with
// unknown dimensions counted as 1 (MaybeGetMinimumShape). The device is the one
// tools/vcluster/vcluster.py builds from the profile (grapplerDevice). TestGrapplerTimes
// (vcluster_test.go) checks these times op by op against the VirtualCluster's own trace.

// grapplerDevice is the throughput OpLevelCostEstimator::GetDeviceInfo derives from a
// device's DeviceProperties.
type grapplerDevice struct {
	gigaops, gbPerSec float64
}

// grapplerCoresPerSM is GetDeviceInfo's cores-per-multiprocessor table, by the architecture
// string (compared as a string, as Grappler does).
func grapplerCoresPerSM(arch string) int64 {
	switch {
	case arch < "3":
		return 32
	case arch < "4":
		return 192
	case arch < "6":
		return 128
	}
	return 64
}

// GrapplerGPUProperties returns the DeviceProperties figures tools/vcluster/vcluster.py gives
// Grappler's GPU for profile p: the number of SMs, the frequency in MHz chosen so that
// SMs x cores per SM x frequency x 2 is the profile's FP32 rate, the architecture (the
// compute capability's major number) and the memory bandwidth in KB/s. A profile without
// SMs or compute capability is taken as one SM of architecture 7.
func GrapplerGPUProperties(p *Profile) (sms int64, freqMHz int64, arch string, bandwidthKBps int64) {
	sms = int64(p.SMs)
	arch = "7"
	if cc := p.ComputeCapability; cc != "" {
		arch, _, _ = strings.Cut(cc, ".")
	}
	if sms <= 0 {
		sms = 1
	}
	cores := grapplerCoresPerSM(arch)
	freqMHz = int64(math.RoundToEven(p.FP32 / float64(sms*cores*2) / 1e6))
	bandwidthKBps = int64(math.RoundToEven(p.MemBandwidth / 1e3))
	return
}

// grapplerGPU returns the throughput Grappler gives the GPU of profile p.
func grapplerGPU(p *Profile) grapplerDevice {
	sms, freq, arch, bw := GrapplerGPUProperties(p)
	d := grapplerDevice{
		gigaops:  float64(sms*freq) * 1e-3 * float64(grapplerCoresPerSM(arch)) * 2,
		gbPerSec: float64(bw) / 1e6,
	}
	if bw <= 0 {
		d.gbPerSec = 100
	}
	return d
}

// grapplerCPU returns the throughput Grappler gives the host of profile p: one core at
// the profile's host FLOP/s in MHz, and its host memory bandwidth.
func grapplerCPU(p *Profile) grapplerDevice {
	freq := int64(math.RoundToEven(p.HostFLOPS / 1e6))
	bw := int64(math.RoundToEven(p.HostMemBandwidth / 1e3))
	d := grapplerDevice{gigaops: float64(freq) * 1e-3, gbPerSec: float64(bw) / 1e6}
	if d.gigaops <= 0 {
		d.gigaops = 1
	}
	if bw <= 0 {
		d.gbPerSec = 32
	}
	return d
}

// gTensor is a tensor as OpLevelCostEstimator sees it (OpInfo::TensorProperties): a dtype,
// a shape (nil: unknown rank; -1: an unknown dimension) and, for constant int vectors, the
// value.
type gTensor struct {
	dt    graphdef.DataType
	shape []int64
	value []int64
	hasV  bool
}

// gOp is an OpInfo: the op, its node (for attrs), and its data inputs and outputs.
type gOp struct {
	op  string
	n   *graphdef.Node
	in  []gTensor
	out []gTensor
}

// gCosts is a NodeCosts.
type gCosts struct {
	minimum      bool
	ops          int64
	in, out      []int64
	internalRead int64
	failed       bool // the estimator returned an error: Costs::ZeroCosts
	noop         bool
}

// grapplerEigenCost are the per-element operation counts OpLevelCostEstimator's
// elementwise_ops_ table gives (Eigen's functor_traits<...>::Cost in TensorFlow 2.18's
// build), measured from the VirtualCluster by tools/vcluster/cwise_costs.py, which
// TestGrapplerEigenCosts runs to check this table.
var grapplerEigenCost = map[string]int64{
	"Acos": 5, "All": 1, "ArgMax": 1, "Asin": 5, "Atan": 5, "Atan2": 19, "Cast": 1, "Ceil": 1,
	"Cos": 5, "Dequantize": 1, "Erf": 1, "Erfc": 1, "Exp": 34, "Expm1": 34, "Floor": 1,
	"Inv": 4, "InvGrad": 1, "Lgamma": 1, "Log": 50, "Log1p": 50, "Max": 1, "Min": 1, "Neg": 1,
	"Prod": 1, "QuantizeAndDequantizeV2": 5, "QuantizeAndDequantizeV4": 5,
	"QuantizedSigmoid": 40, "QuantizeV2": 4, "Reciprocal": 4, "Relu": 1, "Relu6": 1, "Rint": 1,
	"Round": 1, "Rsqrt": 5, "Sigmoid": 40, "Sign": 3, "Sin": 5, "Sqrt": 8, "Square": 1,
	"Sum": 1, "Tan": 5, "Tanh": 36, "TopKV2": 1,
	"Add": 1, "AddV2": 1, "ApproximateEqual": 1, "BiasAdd": 1, "QuantizedBiasAdd": 1,
	"Div": 14, "Equal": 1, "FloorDiv": 14, "FloorMod": 8, "Greater": 1, "GreaterEqual": 1,
	"Less": 1, "LessEqual": 1, "LogicalAnd": 1, "LogicalNot": 1, "LogicalOr": 1, "Maximum": 1,
	"Minimum": 1, "Mod": 8, "Mul": 1, "NotEqual": 1, "QuantizedAdd": 1, "QuantizedMul": 1,
	"RealDiv": 14, "ReluGrad": 1, "Select": 1, "SelectV2": 1, "SquaredDifference": 2,
	"Sub": 1, "TruncateDiv": 14, "TruncateMod": 8, "Where": 1,
}

// Eigen costs the op-specific estimators use (the same build; see grapplerEigenCost).
const (
	eigenExp     = 34
	eigenInverse = 4
	eigenRsqrt   = 5
)

// grapplerOpKind says which OpLevelCostEstimator method times an op.
var grapplerOpKind = map[string]string{
	"Conv2D": "conv", "DepthwiseConv2dNative": "conv",
	"Conv2DBackpropFilter": "convfilter", "DepthwiseConv2dNativeBackpropFilter": "convfilter",
	"Conv2DBackpropInput": "convinput", "DepthwiseConv2dNativeBackpropInput": "convinput",
	"MatMul": "matmul", "SparseMatMul": "matmul", "QuantizedMatMul": "matmul", "QuantizedMatMulV2": "matmul",
	"BatchMatMul": "batchmatmul", "BatchMatMulV2": "batchmatmul",
	"XlaEinsum": "einsum", "Einsum": "einsum",
	"NoOp": "noop", "GuaranteeConst": "noop",
	"Gather": "gather", "GatherNd": "gather", "GatherV2": "gather", "Slice": "gather", "StridedSlice": "gather",
	"ScatterAdd": "scatter", "ScatterDiv": "scatter", "ScatterMax": "scatter", "ScatterMin": "scatter",
	"ScatterMul": "scatter", "ScatterSub": "scatter", "ScatterUpdate": "scatter",
	// Identity-like ops; the table spells Bitcast "BitCast", so Bitcast itself is unknown.
	"Placeholder": "min", "Identity": "min", "IdentityN": "min", "RefIdentity": "min",
	"StopGradient": "min", "PreventGradient": "min", "Reshape": "min", "_Recv": "min", "_Send": "min",
	"Switch": "min", "Merge": "min", "Enter": "min", "Exit": "min", "NextIteration": "min", "BitCast": "min",
	"ConcatV2": "memory", "DataFormatVecPermute": "memory", "DepthToSpace": "memory", "ExpandDims": "memory",
	"Fill": "memory", "OneHot": "memory", "Pack": "memory", "Range": "memory", "SpaceToDepth": "memory",
	"Split": "memory", "Squeeze": "memory", "Transpose": "memory", "Tile": "memory", "Unpack": "memory",
	"Rank": "min", "Shape": "min", "ShapeN": "min", "Size": "min",
	"MaxPool": "maxpool", "MaxPoolGrad": "maxpoolgrad", "AvgPool": "avgpool", "AvgPoolGrad": "avgpoolgrad",
	"FusedBatchNorm": "batchnorm", "FusedBatchNormGrad": "batchnormgrad", "Softmax": "softmax",
	"ResizeBilinear":   "resizebilinear",
	"AssignVariableOp": "assign", "AssignAddVariableOp": "assign", "AssignSubVariableOp": "assign",
	"AddN": "nary",
	// persistent_ops_.
	"Const": "min", "Variable": "min", "VariableV2": "min", "AutoReloadVariable": "min",
	"VarHandleOp": "min", "ReadVariableOp": "min", "_VarHandlesOp": "min", "_ReadVariablesOp": "min",
}

// grapplerUnmodelled lists ops OpLevelCostEstimator has a rule for that this file does not
// reproduce; they are timed as unknown ops (bytes only) and counted in
// Result.GrapplerUnmodelled.
var grapplerUnmodelled = map[string]bool{
	"FusedConv2DBiasActivation": true, "SparseTensorDenseMatMul": true, "CropAndResize": true,
}

// grapplerTypeSize is DataTypeSize(BaseType(dt)): 0 for strings, handles and unknown types.
func grapplerTypeSize(dt graphdef.DataType) int64 {
	if b, ok := graphdef.ElementBytes(dt); ok {
		return b
	}
	return 0
}

// minimumShape is MaybeGetMinimumShape: shape padded or cut to rank dimensions, unknown ones
// (and all of a scalar's or an unknown rank's) counted as 1.
func minimumShape(shape []int64, rank int) []int64 {
	out := make([]int64, rank)
	for i := range out {
		out[i] = 1
	}
	for i := 0; i < rank && i < len(shape); i++ {
		if shape[i] >= 0 {
			out[i] = shape[i]
		}
	}
	return out
}

// elementCount is CalculateTensorElementCount (overflow gives -1).
func (t gTensor) elementCount() int64 {
	n := int64(1)
	for _, d := range minimumShape(t.shape, max(1, len(t.shape))) {
		p, ok := mulNoOverflow(n, d)
		if !ok {
			return -1
		}
		n = p
	}
	return n
}

// size is CalculateTensorSize.
func (t gTensor) size() int64 {
	c := t.elementCount()
	p, ok := mulNoOverflow(c, grapplerTypeSize(t.dt))
	if !ok {
		return -1
	}
	return p
}

// mulNoOverflow is TensorFlow's MultiplyWithoutOverflow: false for a negative operand or an
// overflow.
func mulNoOverflow(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return -1, false
	}
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > math.MaxInt64/b {
		return -1, false
	}
	return a * b, true
}

func (o *gOp) inputSizes() []int64 {
	out := make([]int64, len(o.in))
	for i, t := range o.in {
		out[i] = t.size()
	}
	return out
}

func (o *gOp) outputSizes() []int64 {
	out := make([]int64, len(o.out))
	for i, t := range o.out {
		out[i] = t.size()
	}
	return out
}

// outputSize is CalculateOutputSize: the sum of the outputs' sizes (-1 on overflow).
func (o *gOp) outputSize() int64 {
	var s int64
	for _, t := range o.out {
		b := t.size()
		if b < 0 {
			return -1
		}
		s += b
	}
	return s
}

func sum64(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}

// defaults is PredictDefaultNodeCosts.
func (o *gOp) defaults(ops int64) gCosts {
	return gCosts{ops: ops, in: o.inputSizes(), out: o.outputSizes()}
}

func (o *gOp) attrString(name, def string) string { return attrString(o.n, name, def) }

func (o *gOp) attrBool(name string) bool { return attrBool(o.n, name) }

// fourInts is GetStrides/GetKernelSize: the attr's 4 values, else all 1.
func (o *gOp) fourInts(name string) []int64 {
	v := attrInts(o.n, name)
	if len(v) != 4 {
		return []int64{1, 1, 1, 1}
	}
	return v
}

func (o *gOp) valid() bool { return o.attrString("padding", "") == "VALID" }

func outputDim(in, filter, stride int64, valid bool) int64 {
	if valid {
		return (in - filter + stride) / stride
	}
	return (in + stride - 1) / stride
}

// convDims is ConvolutionDimensions.
type convDims struct {
	batch, ix, iy, iz, kx, ky, kz, oz, ox, oy, sx, sy int64
}

// convolutionDims is ConvolutionDimensionsFromInputs.
func (o *gOp) convolutionDims(image, filter []int64) convDims {
	var x, y, major, minor = 2, 1, 3, -1
	switch o.attrString("data_format", "NHWC") {
	case "NCHW":
		major, y, x = 1, 2, 3
	case "NCHW_VECT_C":
		minor, y, x, major = 1, 2, 3, 4
	}
	var fx, fy, inMajor, outCh, inMinor = 1, 0, 2, 3, -1
	switch o.attrString("filter_format", "HWIO") {
	case "HWIO":
	case "OIHW_VECT_I":
		outCh, inMinor, fy, fx, inMajor = 0, 1, 2, 3, 4
	default:
		outCh, inMajor, fy, fx = 0, 1, 2, 3
	}
	ir, fr := 4, 4
	if minor >= 0 {
		ir = 5
	}
	if inMinor >= 0 {
		fr = 5
	}
	is, fs := minimumShape(image, ir), minimumShape(filter, fr)
	d := convDims{batch: is[0], ix: is[x], iy: is[y], iz: is[major], kx: fs[fx], ky: fs[fy], kz: fs[inMajor], oz: fs[outCh]}
	if minor >= 0 {
		d.iz = is[minor] * is[major]
	}
	if inMinor >= 0 {
		d.kz = fs[inMajor] * fs[inMinor]
	}
	st := o.fourInts("strides")
	d.sx, d.sy = st[x], st[y]
	d.ox = outputDim(d.ix, d.kx, d.sx, o.valid())
	d.oy = outputDim(d.iy, d.ky, d.sy, o.valid())
	if !(d.iz != 1 && d.kz != 1) {
		d.iz = max(d.iz, d.kz)
		d.kz = d.iz
	}
	return d
}

// convOps counts a convolution's operations from its forward dimensions.
func (o *gOp) convOps(d convDims, forward string) int64 {
	ops := d.batch * d.ox * d.oy * d.kx * d.ky
	if o.op == forward {
		ops *= d.kz * d.oz
	} else {
		ops *= d.oz * d.iz
	}
	return ops * 2
}

// shapeFromValueOr returns the shape an int vector input holds (GetTensorShapeProtoFromTensorProto),
// or def when the input has no value.
func shapeFromValueOr(t gTensor, def []int64) []int64 {
	if t.hasV {
		return t.value
	}
	return def
}

func (o *gOp) hasZeroDim() bool {
	for _, t := range o.in {
		for _, d := range t.shape {
			if d == 0 {
				return true
			}
		}
	}
	return false
}

// matmulOps is CountMatMulOperations.
func matmulOps(a, b []int64, ta, tb bool) int64 {
	as, bs := minimumShape(a, 2), minimumShape(b, 2)
	m, k := float64(as[0]), float64(as[1])
	if ta {
		m, k = k, m
	}
	kb, n := float64(bs[0]), float64(bs[1])
	if tb {
		kb, n = n, kb
	}
	if kb != 1 && k != 1 && kb != k {
		return 0
	}
	k = math.Max(k, kb)
	return int64(m * n * k * 2)
}

// batchMatmulOps is CountBatchMatMulOperations; ta and tb transpose the matrices.
func batchMatmulOps(a, b []int64, ta, tb bool) int64 {
	as := minimumShape(a, max(2, len(a)))
	bs := minimumShape(b, max(2, len(b)))
	big, small := as, bs
	if len(bs) > len(as) {
		big, small = bs, as
	}
	num := int32(1)
	for bi, si := 0, len(small)-len(big); bi < len(big)-2; bi, si = bi+1, si+1 {
		bd, sd := int32(big[bi]), int32(1)
		if si >= 0 {
			sd = int32(small[si])
		}
		num *= max(bd, sd)
	}
	return int64(float64(int64(num) * matmulOps(as[len(as)-2:], bs[len(bs)-2:], ta, tb)))
}

// einsum is PredictEinsum: the equivalent BatchMatMul's costs, or an unknown op's.
func (o *gOp) einsum() gCosts {
	eq := o.attrString("equation", "")
	parts := strings.Split(eq, "->")
	if len(o.in) != 2 || len(parts) != 2 {
		return o.defaults(0)
	}
	ins := strings.Split(parts[0], ",")
	if len(ins) < 2 {
		return o.defaults(0)
	}
	as, bs, rhs := ins[0], ins[1], parts[1]
	if strings.Contains(as, "...") || strings.Contains(bs, "...") {
		return o.defaults(0)
	}
	ash := minimumShape(o.in[0].shape, max(2, len(o.in[0].shape)))
	bsh := minimumShape(o.in[1].shape, max(2, len(o.in[1].shape)))
	if len(as) != len(ash) || len(bs) != len(bsh) {
		return o.defaults(0)
	}
	repeated := func(s string) bool {
		for i := 0; i+1 < len(s); i++ {
			if strings.IndexByte(s[i+1:], s[i]) >= 0 {
				return true
			}
		}
		return false
	}
	if repeated(as) || repeated(bs) || repeated(rhs) {
		return o.defaults(0)
	}
	m, n, k := int64(1), int64(1), int64(1)
	var batch []int64
	for i := 0; i < len(as); i++ {
		c := as[i]
		inB, inR := strings.IndexByte(bs, c) >= 0, strings.IndexByte(rhs, c) >= 0
		switch {
		case !inB && !inR:
			return o.defaults(0)
		case !inB:
			m *= ash[i]
		case !inR:
			k *= ash[i]
		default:
			batch = append(batch, ash[i])
		}
	}
	for i := 0; i < len(bs); i++ {
		c := bs[i]
		if strings.IndexByte(as, c) < 0 {
			if strings.IndexByte(rhs, c) < 0 {
				return o.defaults(0)
			}
			n *= bsh[i]
		}
	}
	a := gTensor{dt: o.in[0].dt, shape: append(append([]int64(nil), batch...), m, k)}
	b := gTensor{dt: o.in[1].dt, shape: append(append([]int64(nil), batch...), k, n)}
	bm := &gOp{op: "BatchMatMul", in: []gTensor{a, b}, out: o.out}
	return bm.defaults(batchMatmulOps(a.shape, b.shape, false, false))
}

// poolDims is OpDimensionsFromInputs; ok is false for a zero stride.
func (o *gOp) poolDims(image []int64) (convDims, bool) {
	is := minimumShape(image, 4)
	x, y, c := 2, 1, 3
	if o.attrString("data_format", "NHWC") == "NCHW" {
		c, y, x = 1, 2, 3
	}
	d := convDims{batch: is[0], ix: is[x], iy: is[y], iz: is[c]}
	ks := o.fourInts("ksize")
	d.kx, d.ky, d.kz = ks[x], ks[y], d.iz
	st := o.fourInts("strides")
	d.sx, d.sy = st[x], st[y]
	if d.sx == 0 || d.sy == 0 {
		return d, false
	}
	d.ox = outputDim(d.ix, d.kx, d.sx, o.valid())
	d.oy = outputDim(d.iy, d.ky, d.sy, o.valid())
	d.oz = d.iz
	return d, true
}

// poolInput is the bytes a pooling op reads of its input.
func (o *gOp) poolInput(d convDims) int64 {
	if d.ky >= d.sy {
		return o.in[0].size()
	}
	return grapplerTypeSize(o.in[0].dt) * d.batch * d.ix * d.ky * d.oy * d.iz
}

// cwiseOutputCount is CwiseOutputElementCount.
func (o *gOp) cwiseOutputCount() int64 {
	rank := 1
	for _, t := range o.in {
		rank = max(rank, len(t.shape))
	}
	out := make([]int64, rank)
	for _, t := range o.in {
		for i := len(t.shape) - 1; i >= 0; i-- {
			j := i + rank - len(t.shape)
			out[j] = max(out[j], t.shape[i])
		}
	}
	c := int64(1)
	for _, d := range out {
		c *= d
	}
	return c
}

// largestCount is the largest element count of the inputs, the first output's and the
// broadcast output's (PredictCwiseOp and PredictNaryOp).
func (o *gOp) largestCount() int64 {
	c := int64(0)
	for _, t := range o.in {
		c = max(c, t.elementCount())
	}
	if len(o.out) > 0 {
		c = max(c, o.out[0].elementCount())
	}
	if len(o.in) >= 2 {
		c = max(c, o.cwiseOutputCount())
	}
	return c
}

// predict is OpLevelCostEstimator::PredictNodeCosts.
func (o *gOp) predict() gCosts {
	kind, ok := grapplerOpKind[o.op]
	if !ok {
		if c, ok := grapplerEigenCost[o.op]; ok {
			return o.defaults(o.largestCount() * c)
		}
		return o.defaults(0)
	}
	switch kind {
	case "noop":
		return gCosts{noop: true}
	case "min":
		return gCosts{minimum: true}
	case "memory":
		return o.defaults(0)
	case "conv", "convinput", "convfilter":
		if o.hasZeroDim() {
			return gCosts{failed: true}
		}
		if len(o.in) < 2 && kind != "convfilter" || len(o.in) < 1 {
			return o.defaults(0)
		}
		var d convDims
		forward := "Conv2D"
		switch kind {
		case "conv":
			d = o.convolutionDims(o.in[0].shape, o.in[1].shape)
		case "convinput":
			forward = "Conv2DBackpropInput"
			def := []int64{1, 1, 1, 1}
			if len(o.out) == 1 {
				def = o.out[0].shape
			}
			d = o.convolutionDims(shapeFromValueOr(o.in[0], def), o.in[1].shape)
		case "convfilter":
			forward = "Conv2DBackpropFilter"
			def := []int64{1, 1, 1, 1}
			if len(o.out) == 1 {
				def = o.out[0].shape
			}
			var fv gTensor
			if len(o.in) >= 2 {
				fv = o.in[1]
			}
			d = o.convolutionDims(o.in[0].shape, shapeFromValueOr(fv, def))
		}
		return o.defaults(o.convOps(d, forward))
	case "matmul":
		if len(o.in) < 2 {
			return o.defaults(0)
		}
		return o.defaults(matmulOps(o.in[0].shape, o.in[1].shape, o.attrBool("transpose_a"), o.attrBool("transpose_b")))
	case "batchmatmul":
		if len(o.in) != 2 {
			return o.defaults(0)
		}
		// adj_x and adj_y, where the node has them, take precedence over transpose_a/b.
		ta, tb := o.attrBool("transpose_a"), o.attrBool("transpose_b")
		if attr(o.n, "adj_x") != nil {
			ta = o.attrBool("adj_x")
		}
		if attr(o.n, "adj_y") != nil {
			tb = o.attrBool("adj_y")
		}
		return o.defaults(batchMatmulOps(o.in[0].shape, o.in[1].shape, ta, tb))
	case "einsum":
		if o.n == nil || attr(o.n, "equation") == nil {
			return gCosts{failed: true}
		}
		return o.einsum()
	case "gather":
		need := 2
		if o.op == "Slice" {
			need = 3
		}
		if len(o.out) == 0 || len(o.in) < need {
			return gCosts{failed: true}
		}
		end := 2
		switch o.op {
		case "Slice":
			end = 3
		case "StridedSlice":
			end = 4
		}
		outSize := o.outputSize()
		c := gCosts{ops: o.out[0].elementCount(), out: []int64{outSize}, in: []int64{outSize}}
		for i := 1; i < end && i < len(o.in); i++ {
			c.in = append(c.in, o.in[i].elementCount())
		}
		return c
	case "scatter":
		if len(o.in) < 3 || len(o.out) < 1 {
			return gCosts{failed: true}
		}
		idx := o.in[1].elementCount()
		per := int64(1)
		ref := minimumShape(o.in[0].shape, len(o.in[0].shape))
		for i := 1; i < len(ref); i++ {
			per *= ref[i]
		}
		ops := idx * per
		return gCosts{ops: ops, in: []int64{ops * grapplerTypeSize(o.in[0].dt), o.in[1].size(), o.in[2].size()},
			out: []int64{ops * grapplerTypeSize(o.out[0].dt)}}
	case "maxpool", "avgpool":
		if len(o.in) < 1 {
			return gCosts{failed: true}
		}
		d, ok := o.poolDims(o.in[0].shape)
		if !ok {
			return gCosts{failed: true}
		}
		var ops int64
		if kind == "maxpool" {
			per := d.kx*d.ky - 1
			if d.kx*d.ky == 1 {
				per = 1
			}
			ops = d.batch * d.ox * d.oy * d.oz * int64(int32(per))
		} else {
			ops = d.batch * d.ox * d.oy * d.oz * d.kx * d.ky
		}
		return gCosts{ops: ops, in: []int64{o.poolInput(d)}, out: []int64{o.outputSize()}}
	case "maxpoolgrad":
		if len(o.in) < 3 {
			return gCosts{failed: true}
		}
		d, ok := o.poolDims(o.in[0].shape)
		if !ok {
			return gCosts{failed: true}
		}
		var ops int64
		switch {
		case d.kx == 1 && d.ky == 1:
			ops = d.batch * d.ix * d.iy * d.iz
		case d.kx <= d.sx && d.ky <= d.sy:
			ops = d.batch * d.iz * (d.ox*d.oy*(d.kx*d.ky-1) + d.ix*d.iy)
		default:
			ops = d.batch * d.iz * (d.ox*d.oy*(d.kx*d.ky-1) + d.ix*d.iy*2)
		}
		x := o.in[0].size()
		return gCosts{ops: ops, in: []int64{x, 0, o.in[2].size()}, out: []int64{x}}
	case "avgpoolgrad":
		xs := []int64{1, 1, 1, 1}
		switch {
		case len(o.in) >= 1 && o.in[0].hasV:
			xs = o.in[0].value
		case len(o.out) > 0:
			xs = o.out[0].shape
		}
		d, ok := o.poolDims(xs)
		if !ok {
			return gCosts{failed: true}
		}
		var ops int64
		if d.kx <= d.sx && d.ky <= d.sy {
			ops = d.batch * d.iz * (d.ix*d.iy + d.ox*d.oy)
		} else {
			ops = d.batch * d.iz * (d.ix*d.iy + d.ox*d.oy*(d.kx*d.ky+1))
		}
		return o.defaults(ops)
	case "batchnorm":
		if len(o.in) < 2 {
			return gCosts{failed: true}
		}
		d, ok := o.poolDims(o.in[0].shape)
		if !ok {
			return gCosts{failed: true}
		}
		nhwc, c := o.in[0].size(), o.in[1].size()
		if o.attrBool("is_training") {
			return gCosts{ops: d.iz * (d.batch*d.ix*d.iy*4 + 6 + eigenRsqrt), in: []int64{nhwc, c, c},
				out: []int64{nhwc, c, c, c, c}, internalRead: nhwc}
		}
		return gCosts{ops: d.batch * d.ix * d.iy * d.iz * 2, in: []int64{nhwc, c, c, c, c}, out: []int64{nhwc}}
	case "batchnormgrad":
		if len(o.in) < 3 {
			return gCosts{failed: true}
		}
		d, ok := o.poolDims(o.in[1].shape)
		if !ok {
			return gCosts{failed: true}
		}
		nhwc, c := o.in[1].size(), o.in[2].size()
		return gCosts{ops: d.iz * (d.batch*d.ix*d.iy*11 + 5 + eigenRsqrt), in: []int64{nhwc, nhwc, c, c},
			out: []int64{nhwc, c, c}, internalRead: nhwc}
	case "softmax":
		if len(o.in) < 1 || len(o.in[0].shape) == 0 {
			return gCosts{failed: true}
		}
		ops := (eigenExp+1+1)*o.in[0].elementCount() + eigenInverse*o.in[0].shape[0]
		return o.defaults(ops)
	case "resizebilinear":
		if len(o.out) == 0 || len(o.in) == 0 || attr(o.n, "half_pixel_centers") == nil {
			return o.defaults(0)
		}
		os := minimumShape(o.out[0].shape, 4)
		interp := int64(8)
		if o.attrBool("half_pixel_centers") {
			interp += 4
		} else {
			interp += 2
		}
		return o.defaults(interp*(os[1]+os[2]) + 9*o.out[0].elementCount())
	case "assign":
		if len(o.in) != 2 {
			return gCosts{failed: true}
		}
		ops := int64(0)
		if o.op != "AssignVariableOp" {
			ops = o.in[1].elementCount()
		}
		return gCosts{ops: ops, in: []int64{sum64(o.inputSizes())}, out: []int64{0}}
	case "nary":
		return o.defaults(o.largestCount() * int64(len(o.in)-1))
	}
	return o.defaults(0)
}

// time is PredictCosts' execution time for c on device d (PredictOpCountBasedCost).
func (c gCosts) time(d grapplerDevice) int64 {
	switch {
	case c.failed, c.noop:
		return 0
	case c.minimum:
		return 1
	}
	read := float64(sum64(c.in) + c.internalRead)
	write := float64(sum64(c.out))
	compute := int64(math.Ceil(float64(c.ops) / d.gigaops))
	memory := int64(math.Ceil((read + write) / d.gbPerSec))
	return compute + memory
}

// constIntVector returns the values of a Const node holding a 1-D integer tensor.
func constIntVector(n *graphdef.Node) ([]int64, bool) {
	if n.Op != "Const" {
		return nil, false
	}
	tp := attr(n, "value").GetTensor()
	if tp == nil || len(tp.GetTensorShape().GetDim()) != 1 {
		return nil, false
	}
	size := tp.GetTensorShape().GetDim()[0].GetSize()
	if size < 0 || size > 64 {
		return nil, false
	}
	var vals []int64
	switch tp.GetDtype() {
	case tpb.DataType_DT_INT32:
		if c := tp.GetTensorContent(); len(c) > 0 {
			if int64(len(c)) != 4*size {
				return nil, false
			}
			for i := int64(0); i < size; i++ {
				vals = append(vals, int64(int32(binary.LittleEndian.Uint32(c[4*i:]))))
			}
		} else {
			for _, v := range tp.GetIntVal() {
				vals = append(vals, int64(v))
			}
		}
	case tpb.DataType_DT_INT64:
		if c := tp.GetTensorContent(); len(c) > 0 {
			if int64(len(c)) != 8*size {
				return nil, false
			}
			for i := int64(0); i < size; i++ {
				vals = append(vals, int64(binary.LittleEndian.Uint64(c[8*i:])))
			}
		} else {
			vals = append(vals, tp.GetInt64Val()...)
		}
	default:
		return nil, false
	}
	if int64(len(vals)) > size || (len(vals) == 0 && size > 0) {
		return nil, false
	}
	for int64(len(vals)) < size {
		vals = append(vals, vals[len(vals)-1]) // a short list repeats its last value
	}
	return vals, true
}

// grapplerTensor returns tensor (n, port) as OpLevelCostEstimator sees it under shapes s.
func grapplerTensor(s *Shapes, n *graphdef.Node, port int) gTensor {
	t := gTensor{shape: s.Out(n, port)}
	if port < len(n.OutputTypes) {
		t.dt = n.OutputTypes[port]
	}
	if port == 0 {
		if v, ok := constIntVector(n); ok {
			t.value, t.hasV = v, true
		}
	}
	return t
}

// GrapplerOpTime returns the time in nanoseconds Grappler's OpLevelCostEstimator gives node
// n with shapes s on the GPU of profile p (gpu) or on its host; unmodelled says whether n is
// an op whose Grappler rule this package does not reproduce (timed as an unknown op).
func GrapplerOpTime(n *graphdef.Node, s *Shapes, p *Profile, gpu bool) (ns int64, unmodelled bool) {
	// The inputs and outputs share one array: on the stack for an op of a few, or allocated
	// at its size. Every node of a simulation by Grappler's accounting is timed here: the
	// default rewrite of a million-node graph allocated 0.45 GB of these arrays.
	var onStack [6]gTensor
	var ts []gTensor
	if k := len(n.Inputs) + len(n.OutputTypes); k <= len(onStack) {
		ts = onStack[:k]
	} else {
		ts = make([]gTensor, k)
	}
	for i, t := range n.Inputs {
		ts[i] = grapplerTensor(s, t.Node, t.Port)
	}
	for port := range n.OutputTypes {
		ts[len(n.Inputs)+port] = grapplerTensor(s, n, port)
	}
	o := &gOp{op: n.Op, n: n, in: ts[:len(n.Inputs):len(n.Inputs)], out: ts[len(n.Inputs):]}
	d := grapplerCPU(p)
	if gpu {
		d = grapplerGPU(p)
	}
	return o.predict().time(d), grapplerUnmodelled[n.Op]
}
