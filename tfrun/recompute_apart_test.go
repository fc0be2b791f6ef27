//go:build tensorflow

package tfrun

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"math/rand"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// TestRecomputeApartInRuntime: a plan whose recomputations run apart (every target made by
// its own chain just before its reads, rewrite.RecomputeApart) runs in TensorFlow with the
// same values as the original graph. The graph is a chain of eight ReLUs over 2 MiB and the
// ReLU gradients that read them in reverse order; at a 5 MiB budget over a 200 MiB/s link
// only the plan with chains apart fits (rewrite's TestAutoRecomputesApart), and it runs the
// same ReLUs again in several chains. Every gradient is compared bit for bit in the two-device
// emulation, and every recomputed copy must be in the partition graphs (no
// common-subexpression elimination merged the chains' copies of one op).
func TestRecomputeApartInRuntime(t *testing.T) {
	const n, size = 8, 512 << 10 // float32 elements: 2 MiB a tensor
	dev := computeDevice
	// The planner reads the tensors' sizes from _output_shapes, as a graph exported with
	// add_shapes=True has them.
	shapes := &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{Shape: []*tspb.TensorShapeProto{shapeAttr(size).GetShape()}}}}
	f32 := attrMap{"T": typeAttr(tpb.DataType_DT_FLOAT), "_output_shapes": shapes}
	nodes := []*npb.NodeDef{node("x", "Placeholder", dev, nil, attrMap{"dtype": typeAttr(tpb.DataType_DT_FLOAT), "shape": shapeAttr(size), "_output_shapes": shapes})}
	prev := "x"
	for i := 1; i <= n; i++ {
		prev = fmt.Sprintf("f%d", i)
		nodes = append(nodes, node(prev, "Relu", dev, []string{nodes[len(nodes)-1].Name}, f32))
	}
	nodes = append(nodes, node("loss_grad", "Relu", dev, []string{prev}, f32))
	grad := "loss_grad"
	var fetches []string
	for i := n; i >= 1; i-- {
		g := fmt.Sprintf("g%d", i)
		nodes = append(nodes, node(g, "ReluGrad", dev, []string{grad, fmt.Sprintf("f%d", i)}, f32))
		grad = g
		fetches = append(fetches, g+":0")
	}
	nodes = append(nodes, node("train", "NoOp", dev, []string{"^" + grad}, nil))
	gd := marshalGraph(t, nodes...)
	m, err := graphdef.Parse(gd, graphdef.FormatPB, "relu_chain.pb")
	if err != nil {
		t.Fatal(err)
	}
	prof := &cost.Profile{Name: "slowlink", MemoryBytes: 1 << 30, FP32: 1e12, FP16: 1e12, MemBandwidth: 4 << 30,
		D2H: 200 << 20, H2D: 200 << 20, Duplex: true, TransferLatency: 1e-6, HostFLOPS: 1e12, HostMemBandwidth: 50e9}
	p, err := plan.RewriteWithPlanner(m, rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice},
		plan.PlanOptions{Strategy: "auto", Profile: prof, Budget: 5 << 20, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	copies := map[string]int{}
	for _, rc := range p.Recomputes {
		if len(rc.Also) > 0 {
			t.Errorf("the chain of %s serves %d other targets: not a plan with chains apart", rc.Tensor, len(rc.Also))
		}
		for _, op := range rc.Ops {
			copies[op]++
		}
	}
	again := 0
	for _, c := range copies {
		if c > 1 {
			again++
		}
	}
	t.Logf("plan %s: %d swaps, %d recomputations, %d ops run again in more than one chain; predicted peak %d of %d",
		p.Eval.Strategy, len(p.Swaps), len(p.Recomputes), again, p.Eval.Devices[0].Peak, p.Budget)
	if len(p.Recomputes) < 2 || again == 0 {
		t.Fatalf("the plan has %d recomputations and runs no op in two chains: the test needs chains apart", len(p.Recomputes))
	}

	rng := rand.New(rand.NewSource(1))
	xs := make([]float32, size)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	feeds := map[string]*Tensor{"x:0": Float32Tensor([]int64{size}, xs...)}
	cfg := TwoDeviceConfigBytes()
	run := func(graph []byte) []*Tensor {
		out, _, err := newSession(t, graph, cfg).Run(feeds, fetches, []string{"train"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want, got := run(gd), run(marshalModel(t, p.Model))
	for i := range fetches {
		if !want[i].Equal(got[i]) {
			t.Errorf("%s differs after the rewrite", fetches[i])
		}
	}

	// Every copy ran: traced, it is in the partition graphs.
	var md *RunMetadata
	s := newSession(t, marshalModel(t, p.Model), cfg)
	if _, md, err = s.Run(feeds, fetches, []string{"train"}, TraceOptions()); err != nil {
		t.Fatal(err)
	}
	tr := NewTrace(md)
	for _, rc := range p.Recomputes {
		for _, cp := range rc.Copies {
			if _, ok := tr.Node(cp); !ok {
				t.Errorf("recomputation of %s: copy %s is not in the partition graphs (merged or removed)", rc.Tensor, cp)
			}
		}
	}
}
