package cost

import (
	"math"
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// opCase is one op with placeholder inputs of the given shapes and hand-computed FLOPs.
type opCase struct {
	name   string
	op     string
	inputs [][]int64
	out    [][]int64
	attrs  map[string]*apb.AttrValue
	flops  float64
	bytes  float64 // 0: not checked
	kind   OpKind
	rule   string
	prec   Precision
	ws     int64
}

func opCases() []opCase {
	nhwc := map[string]*apb.AttrValue{"strides": intsAttr(1, 1, 1, 1), "padding": sAttr("SAME"), "data_format": sAttr("NHWC")}
	s2 := map[string]*apb.AttrValue{"strides": intsAttr(1, 2, 2, 1), "padding": sAttr("SAME")}
	return []opCase{
		// 2 x N x Ho x Wo x Cout x Kh x Kw x Cin = 2*8*32*32*16*3*3*3
		{name: "conv2d", op: "Conv2D", inputs: [][]int64{{8, 32, 32, 3}, {3, 3, 3, 16}}, out: [][]int64{{8, 32, 32, 16}}, attrs: nhwc,
			flops: 7077888, bytes: 4 * (8*32*32*3 + 3*3*3*16 + 8*32*32*16), rule: "conv", prec: PrecTF32, ws: 4 * 3 * 3 * 3 * 16},
		// NCHW: output [N, C, H, W] = [2, 4, 5, 5], filter 1x1x3x4: 2*2*5*5*4*1*1*3
		{name: "conv2d-nchw", op: "Conv2D", inputs: [][]int64{{2, 3, 5, 5}, {1, 1, 3, 4}}, out: [][]int64{{2, 4, 5, 5}},
			attrs: map[string]*apb.AttrValue{"strides": intsAttr(1, 1, 1, 1), "padding": sAttr("VALID"), "data_format": sAttr("NCHW")},
			flops: 1200, rule: "conv", prec: PrecTF32, ws: 4 * 12},
		// (input_sizes, filter [3,3,16,32], dy [8,16,16,32]): 2*8*16*16*32*3*3*16
		{name: "conv2d-backprop-input", op: "Conv2DBackpropInput", inputs: [][]int64{{4}, {3, 3, 16, 32}, {8, 16, 16, 32}}, out: [][]int64{{8, 32, 32, 16}}, attrs: s2,
			flops: 18874368, rule: "conv", prec: PrecTF32, ws: 4 * 3 * 3 * 16 * 32},
		// (x [8,32,32,16], filter_sizes, dy [8,16,16,32]) -> filter [3,3,16,32]: the same product
		{name: "conv2d-backprop-filter", op: "Conv2DBackpropFilter", inputs: [][]int64{{8, 32, 32, 16}, {4}, {8, 16, 16, 32}}, out: [][]int64{{3, 3, 16, 32}}, attrs: s2,
			flops: 18874368, rule: "conv", prec: PrecTF32, ws: 4 * 3 * 3 * 16 * 32},
		// depthwise: 2 x N x Ho x Wo x (Cin x multiplier) x Kh x Kw = 2*1*10*10*16*9
		{name: "depthwise", op: "DepthwiseConv2dNative", inputs: [][]int64{{1, 10, 10, 8}, {3, 3, 8, 2}}, out: [][]int64{{1, 10, 10, 16}}, attrs: nhwc,
			flops: 28800, rule: "depthwise-conv", prec: PrecTF32},
		// 2 x M x N x K = 2*32*128*64
		{name: "matmul", op: "MatMul", inputs: [][]int64{{32, 64}, {64, 128}}, out: [][]int64{{32, 128}},
			flops: 524288, bytes: 4 * (32*64 + 64*128 + 32*128), rule: "matmul", prec: PrecTF32},
		{name: "matmul-transposed", op: "MatMul", inputs: [][]int64{{64, 32}, {128, 64}}, out: [][]int64{{32, 128}},
			attrs: map[string]*apb.AttrValue{"transpose_a": bAttr(true), "transpose_b": bAttr(true)}, flops: 524288, rule: "matmul", prec: PrecTF32},
		{name: "matmul-half", op: "MatMul", inputs: [][]int64{{32, 64}, {64, 128}}, out: [][]int64{{32, 128}},
			attrs: map[string]*apb.AttrValue{"T": tAttr(tpb.DataType_DT_HALF)}, flops: 524288, rule: "matmul", prec: PrecFP16},
		// batch dims [2,1] and [3] broadcast to [2,3]: 2 * 6 * M4 * N6 * K5
		{name: "batch-matmul-broadcast", op: "BatchMatMulV2", inputs: [][]int64{{2, 1, 4, 5}, {3, 5, 6}}, out: [][]int64{{2, 3, 4, 6}},
			flops: 1440, rule: "batch-matmul", prec: PrecTF32},
		{name: "batch-matmul-adjoint", op: "BatchMatMulV3", inputs: [][]int64{{7, 5, 4}, {7, 6, 5}}, out: [][]int64{{7, 4, 6}},
			attrs: map[string]*apb.AttrValue{"adj_x": bAttr(true), "adj_y": bAttr(true)}, flops: 2 * 7 * 4 * 6 * 5, rule: "batch-matmul", prec: PrecTF32},
		// every distinct label once: 2 * b2 * i3 * j4 * k5
		{name: "einsum", op: "Einsum", inputs: [][]int64{{2, 3, 4}, {2, 4, 5}}, out: [][]int64{{2, 3, 5}},
			attrs: map[string]*apb.AttrValue{"equation": sAttr("bij,bjk->bik"), "N": iAttr(2)}, flops: 240, rule: "einsum", prec: PrecTF32},
		{name: "einsum-ellipsis", op: "Einsum", inputs: [][]int64{{7, 3, 4}, {7, 4, 5}}, out: [][]int64{{7, 3, 5}},
			attrs: map[string]*apb.AttrValue{"equation": sAttr("...ij,...jk->...ik"), "N": iAttr(2)}, flops: 840, rule: "einsum", prec: PrecTF32},
		{name: "einsum-transpose", op: "Einsum", inputs: [][]int64{{3, 4}}, out: [][]int64{{4, 3}},
			attrs: map[string]*apb.AttrValue{"equation": sAttr("ij->ji"), "N": iAttr(1)}, flops: 0, bytes: 96, rule: "einsum"},
		// output elements x window: 8*16*16*16 * 2*2
		{name: "maxpool", op: "MaxPool", inputs: [][]int64{{8, 32, 32, 16}}, out: [][]int64{{8, 16, 16, 16}},
			attrs: map[string]*apb.AttrValue{"ksize": intsAttr(1, 2, 2, 1), "strides": intsAttr(1, 2, 2, 1), "padding": sAttr("VALID")}, flops: 131072, rule: "pool"},
		// gradient elements x window + a pass over the original input: 32768*4 + 131072
		{name: "maxpool-grad", op: "MaxPoolGrad", inputs: [][]int64{{8, 32, 32, 16}, {8, 16, 16, 16}, {8, 16, 16, 16}}, out: [][]int64{{8, 32, 32, 16}},
			attrs: map[string]*apb.AttrValue{"ksize": intsAttr(1, 2, 2, 1), "strides": intsAttr(1, 2, 2, 1), "padding": sAttr("VALID")}, flops: 262144, rule: "pool-grad"},
		{name: "avgpool-grad", op: "AvgPoolGrad", inputs: [][]int64{{4}, {8, 16, 16, 16}}, out: [][]int64{{8, 32, 32, 16}},
			attrs: map[string]*apb.AttrValue{"ksize": intsAttr(1, 3, 3, 1), "strides": intsAttr(1, 2, 2, 1), "padding": sAttr("SAME")}, flops: 294912, rule: "pool-grad"},
		// training batch norm: 8 FLOPs per element of x
		{name: "batchnorm", op: "FusedBatchNormV3", inputs: [][]int64{{8, 32, 32, 16}, {16}, {16}, {0}, {0}},
			out: [][]int64{{8, 32, 32, 16}, {16}, {16}, {16}, {16}, nil}, flops: 1048576, rule: "batchnorm"},
		{name: "batchnorm-inference", op: "FusedBatchNormV3", inputs: [][]int64{{8, 32, 32, 16}, {16}, {16}, {16}, {16}},
			out: [][]int64{{8, 32, 32, 16}, {16}, {16}, {16}, {16}, nil}, attrs: map[string]*apb.AttrValue{"is_training": bAttr(false)}, flops: 524288, rule: "batchnorm"},
		{name: "batchnorm-grad", op: "FusedBatchNormGradV3", inputs: [][]int64{{8, 32, 32, 16}, {8, 32, 32, 16}, {16}, {16}, {16}, {16}},
			out: [][]int64{{8, 32, 32, 16}, {16}, {16}, {0}, {0}}, flops: 12 * 131072, rule: "batchnorm-grad"},
		{name: "relu", op: "Relu", inputs: [][]int64{{100}}, out: [][]int64{{100}}, flops: 100, bytes: 800, rule: "elementwise"},
		{name: "tanh", op: "Tanh", inputs: [][]int64{{100}}, out: [][]int64{{100}}, flops: 800, rule: "elementwise"},
		{name: "broadcast-add", op: "AddV2", inputs: [][]int64{{8, 1}, {1, 5}}, out: [][]int64{{8, 5}}, flops: 40, bytes: 4 * (8 + 5 + 40), rule: "elementwise"},
		{name: "addn", op: "AddN", inputs: [][]int64{{10}, {10}, {10}}, out: [][]int64{{10}}, flops: 20, rule: "elementwise"},
		{name: "sum", op: "Sum", inputs: [][]int64{{4, 5}, {1}}, out: [][]int64{{4}}, attrs: map[string]*apb.AttrValue{"Tidx": tAttr(tpb.DataType_DT_INT32)}, flops: 20, rule: "reduction"},
		{name: "bias-add-grad", op: "BiasAddGrad", inputs: [][]int64{{8, 16}}, out: [][]int64{{16}}, flops: 128, rule: "reduction"},
		{name: "softmax", op: "Softmax", inputs: [][]int64{{32, 10}}, out: [][]int64{{32, 10}}, flops: 1600, rule: "softmax"},
		{name: "sparse-xent", op: "SparseSoftmaxCrossEntropyWithLogits", inputs: [][]int64{{32, 10}, {32}}, out: [][]int64{{32}, {32, 10}},
			attrs: map[string]*apb.AttrValue{"Tlabels": tAttr(tpb.DataType_DT_INT32)}, flops: 6 * 320, rule: "softmax-xent"},
		// reads only the gathered rows: 2 x output + indices
		{name: "gather", op: "GatherV2", inputs: [][]int64{{1000, 64}, {32}, {}}, out: [][]int64{{32, 64}},
			attrs: map[string]*apb.AttrValue{"Tparams": tAttr(f32), "Tindices": tAttr(tpb.DataType_DT_INT32), "Taxis": tAttr(tpb.DataType_DT_INT32)},
			flops: 0, bytes: 2*32*64*4 + 32*4, rule: "gather"},
		// gate product 2 x B x (I + H) x 4H + 20 x B x H = 2*4*24*64 + 20*4*16
		{name: "lstm-block-cell", op: "LSTMBlockCell", inputs: [][]int64{{4, 8}, {4, 16}, {4, 16}, {24, 64}, {16}, {16}, {16}, {64}},
			out: [][]int64{{4, 16}, {4, 16}, {4, 16}, {4, 16}, {4, 16}, {4, 16}, {4, 16}}, flops: 2*4*24*64 + 20*4*16, rule: "rnn", prec: PrecTF32},
		// T steps of the gate product, both gradient products, plus 30 x B x H elementwise
		{name: "block-lstm-grad", op: "BlockLSTMGradV2", inputs: [][]int64{{}, {10, 4, 8}, {4, 16}, {4, 16}, {24, 64}},
			out: [][]int64{{10, 4, 8}}, flops: 10 * (2*2*4*24*64 + 30*4*16), rule: "rnn", prec: PrecTF32},
		// optimizer: grad of 100 elements; Momentum reads var, accum, grad and writes var, accum
		{name: "momentum", op: "ResourceApplyMomentum", inputs: [][]int64{{}, {}, {}, {100}, {}}, out: nil, flops: 400, bytes: 2000, rule: "apply"},
		{name: "adam", op: "ResourceApplyAdam", inputs: [][]int64{{}, {}, {}, {}, {}, {}, {}, {}, {}, {100}}, out: nil, flops: 1200, bytes: 2800, rule: "apply"},
		{name: "identity", op: "Identity", inputs: [][]int64{{100}}, out: [][]int64{{100}}, kind: KindNoKernel, rule: "no-kernel"},
		{name: "noop", op: "NoOp", out: nil, kind: KindNoKernel, rule: "noop"},
		{name: "unknown-op", op: "MatrixSolve", inputs: [][]int64{{4, 4}, {4, 1}}, out: [][]int64{{4, 1}}, kind: KindUnknown, bytes: 4 * (16 + 4 + 4), rule: "unknown"},
		{name: "unknown-shape", op: "MatMul", inputs: [][]int64{{-1, 64}, {64, 128}}, out: [][]int64{{-1, 128}}, kind: KindUnknown, rule: "matmul"},
	}
}

func TestEstimateOp(t *testing.T) {
	for _, tc := range opCases() {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			var ins []string
			for i, sh := range tc.inputs {
				name := "in" + string(rune('0'+i))
				if sh != nil && len(sh) == 0 && (tc.op == "ResourceApplyMomentum" || tc.op == "ResourceApplyAdam") && i == 0 {
					b.node(name, "VarHandleOp", "", [][]int64{{}}, map[string]*apb.AttrValue{"shape": shapeAttr([]int64{100})})
				} else {
					b.node(name, "Placeholder", "", [][]int64{sh}, nil)
				}
				ins = append(ins, name)
			}
			attrs := map[string]*apb.AttrValue{}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			b.node("x", tc.op, "", tc.out, attrs, ins...)
			g := b.graph(t)
			s, err := NewShapes(g, 1)
			if err != nil {
				t.Fatal(err)
			}
			e := EstimateOp(g.Node("x"), s)
			if e.Kind != tc.kind || e.Rule != tc.rule {
				t.Fatalf("kind %v rule %q, want %v %q", e.Kind, e.Rule, tc.kind, tc.rule)
			}
			if math.Abs(e.FLOPs-tc.flops) > 1e-9*math.Max(1, tc.flops) {
				t.Errorf("FLOPs = %v, want %v", e.FLOPs, tc.flops)
			}
			if tc.bytes != 0 && e.Bytes != tc.bytes {
				t.Errorf("bytes = %v, want %v", e.Bytes, tc.bytes)
			}
			if e.Precision != tc.prec {
				t.Errorf("precision = %v, want %v", e.Precision, tc.prec)
			}
			if e.Workspace != tc.ws {
				t.Errorf("workspace = %d, want %d", e.Workspace, tc.ws)
			}
		})
	}
}

func TestOpTime(t *testing.T) {
	p := &Profile{Name: "t", MemoryBytes: 1, FP32: 1e12, TF32: 8e12, FP16: 16e12, MemBandwidth: 1e11,
		D2H: 1, H2D: 1, LaunchLatency: 5e-6, HostFLOPS: 1e11, HostMemBandwidth: 1e10}
	cases := []struct {
		name   string
		e      OpEstimate
		host   bool
		tf32   bool
		wantNS int64
	}{
		// compute-bound: 8e9 FLOPs / 1e12 = 8 ms, + 5 us
		{"fp32 compute", OpEstimate{FLOPs: 8e9, Bytes: 1e6, Precision: PrecTF32}, false, false, 8_005_000},
		{"tf32 compute", OpEstimate{FLOPs: 8e9, Bytes: 1e6, Precision: PrecTF32}, false, true, 1_005_000},
		{"fp16 compute", OpEstimate{FLOPs: 8e9, Bytes: 1e6, Precision: PrecFP16}, false, true, 505_000},
		// memory-bound: 1e9 bytes / 1e11 = 10 ms
		{"memory bound", OpEstimate{FLOPs: 1e6, Bytes: 1e9}, false, true, 10_005_000},
		{"unknown op: bytes only", OpEstimate{Bytes: 1e5, Kind: KindUnknown}, false, true, 6_000},
		{"host op, no launch latency", OpEstimate{FLOPs: 1e6, Bytes: 1e6}, true, true, 100_000},
		{"no kernel", OpEstimate{Kind: KindNoKernel, Rule: "no-kernel"}, false, true, MinOpTime},
		{"noop", OpEstimate{Kind: KindNoKernel, Rule: "noop"}, false, true, 0},
	}
	for _, tc := range cases {
		if got := OpTime(tc.e, p, tc.host, tc.tf32); got != tc.wantNS {
			t.Errorf("%s: %d ns, want %d", tc.name, got, tc.wantNS)
		}
	}
}
