package plan

import (
	"bytes"
	"flag"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

var update = flag.Bool("update", false, "rewrite the .golden files")

// builder builds small GraphDefs for tests (testgraph.Builder), b.g being the graph.
type builder struct {
	*testgraph.Builder
	g *gpb.GraphDef
}

func newBuilder() *builder {
	b := testgraph.NewBuilder()
	return &builder{Builder: b, g: b.Graph}
}

// op adds a node (testgraph.Builder.Op).
func (b *builder) op(name, op, device string, shape []int64, inputs ...string) *npb.NodeDef {
	return b.Op(name, op, device, shape, inputs...)
}

var act = []int64{64, 256} // 64 KiB of float32

// chainGraph is a forward chain f1..fn of Relus and its backward chain, in which g_i reads
// f_i: the classic pattern of activations kept for the backward pass.
func chainGraph(n int, device string) *gpb.GraphDef {
	b := newBuilder()
	b.op("x", "Placeholder", device, act)
	prev := "x"
	for i := 1; i <= n; i++ {
		prev = b.op(fmt.Sprintf("f%d", i), "Relu", device, act, prev).Name
	}
	grad := b.op("loss_grad", "Relu", device, act, prev).Name
	for i := n; i >= 1; i-- {
		grad = b.op(fmt.Sprintf("g%d", i), "ReluGrad", device, act, grad, fmt.Sprintf("f%d", i)).Name
	}
	b.op("train", "NoOp", device, nil, "^"+grad)
	return b.g
}

type goldenCase struct {
	name  string
	graph func() *gpb.GraphDef
	opts  rewrite.Options
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{"chain", func() *gpb.GraphDef { return chainGraph(6, "") }, rewrite.Options{SwapoutThreshold: 4, SwapinAhead: 1}},
		{"chain_ahead3", func() *gpb.GraphDef { return chainGraph(6, "/device:GPU:0") }, rewrite.Options{SwapoutThreshold: 4, SwapinAhead: 3}},
		{"chain_gate_device", func() *gpb.GraphDef { return chainGraph(4, "/device:CPU:1") }, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, ComputeDevice: "/device:CPU:1", Gate: rewrite.GateDevice}},
		{"chain_cpu_compute", func() *gpb.GraphDef { return chainGraph(4, "/device:CPU:1") }, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, ComputeDevice: "/device:CPU:1"}},
		{"chain_not_compute", func() *gpb.GraphDef { return chainGraph(4, "/device:CPU:0") }, rewrite.Options{SwapoutThreshold: 3}},
		{"groupby", groupByGraph, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, SwapinGroupBy: 3}},
		{"groupby_none", groupByGraph, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, SwapinGroupBy: -1}},
		{"towers", towersGraph, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1}},
		{"mirrored", func() *gpb.GraphDef { return mirroredGraph(mirroredDevices, act) }, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1, ComputeDevice: "/device:CPU:1,/device:CPU:2"}},
		{"exclusions", exclusionsGraph, rewrite.Options{SwapoutThreshold: 2, SwapinAhead: 1, ExcludeScopes: []string{"skipme"}, ExcludeOps: []string{"Tanh"}}},
		{"conditional_merge_trigger", condGraph, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 1}},
		{"conditional_trigger", condGraph, rewrite.Options{SwapoutThreshold: 3, SwapinAhead: 5}},
	}
}

// groupByGraph: t is read at distances 3, 4, 7 and 12.
func groupByGraph() *gpb.GraphDef {
	b := newBuilder()
	b.op("x", "Placeholder", "", act)
	b.op("t", "Relu", "", act, "x")
	prev := "t"
	for i := 1; i <= 12; i++ {
		prev = b.op(fmt.Sprintf("s%d", i), "Relu", "", act, prev).Name
	}
	for i, d := range []int{3, 4, 7, 12} {
		// c_i sits at level 1+d: it reads s_{d-1} (level d) and t.
		b.op(fmt.Sprintf("c%d", i), "AddV2", "", act, fmt.Sprintf("s%d", d-1), "t")
	}
	return b.g
}

// towersGraph: the chain on two GPUs of two tasks; each tower's tensors go to its own task's CPU.
func towersGraph() *gpb.GraphDef {
	g := chainGraph(4, "/job:worker/replica:0/task:0/device:GPU:0")
	g2 := chainGraph(4, "/job:worker/replica:0/task:1/device:GPU:1")
	for _, n := range g2.Node {
		n.Name = "tower1/" + n.Name
		for i, in := range n.Input {
			if strings.HasPrefix(in, "^") {
				n.Input[i] = "^tower1/" + in[1:]
			} else {
				n.Input[i] = "tower1/" + in
			}
		}
	}
	g.Node = append(g.Node, g2.Node...)
	return g
}

// exclusionsGraph holds tensors that must not be swapped: a constant, a ref variable, a
// tensor inside a while loop, an excluded scope and op, a small tensor, an unknown shape;
// and keep, which is swapped.
func exclusionsGraph() *gpb.GraphDef {
	b := newBuilder()
	b.op("x", "Placeholder", "", act)
	b.op("k", "Const", "", act)
	v := b.op("v", "VariableV2", "", act)
	v.Attr["_output_shapes"] = testgraph.ShapeAttr(act)
	b.op("v/read", "Identity", "", act, "v")
	b.op("skipme/a", "Relu", "", act, "x")
	b.op("tanh", "Tanh", "", act, "x")
	b.op("small", "Relu", "", []int64{4}, "x")
	b.op("unknown", "Relu", "", []int64{-1, 256}, "x")
	b.op("keep", "Relu", "", act, "x")
	b.op("loop/enter", "Enter", "", act, "x")
	b.op("loop/body", "Relu", "", act, "loop/enter")
	b.op("loop/exit", "Exit", "", act, "loop/body")
	// The chain descends from keep, so that its ops may trigger keep's swap-in.
	prev := "keep"
	for i := 1; i <= 4; i++ {
		prev = b.op(fmt.Sprintf("s%d", i), "Relu", "", act, prev).Name
	}
	b.op("late_loop", "AddV2", "", act, prev, "loop/body")
	// Pack, not AddN: a sum of many terms keeps its inputs (ConsumerExclusion).
	b.op("late", "Pack", "", act, prev, "k", "v/read", "skipme/a", "tanh", "small", "unknown", "keep", "loop/exit")
	return b.g
}

// condGraph: the consumer's critical path runs through a conditional branch, so the
// trigger must be found outside it.
func condGraph() *gpb.GraphDef {
	b := newBuilder()
	b.op("x", "Placeholder", "", act)
	b.op("pred", "Placeholder", "", []int64{}).Attr["dtype"] = testgraph.TypeAttr(tpb.DataType_DT_BOOL)
	b.op("t", "Relu", "", act, "x")
	b.op("a1", "Relu", "", act, "t")
	b.op("a2", "Relu", "", act, "a1")
	b.op("sw", "Switch", "", act, "a2", "pred")
	b.op("br1", "Relu", "", act, "sw:1")
	b.op("br2", "Relu", "", act, "br1")
	b.op("m", "Merge", "", act, "br2", "sw")
	b.op("c", "AddV2", "", act, "m", "t")
	return b.g
}

// describe renders a result as the golden text: swaps, skipped tensors, and every node of
// the rewritten graph with its device and inputs.
func describe(res *rewrite.Result) string {
	var w strings.Builder
	for _, s := range res.Swaps {
		fmt.Fprintf(&w, "swap %s %s %s %d bytes to %s via %s\n", s.Tensor, s.DType, graphdef.FormatShape(s.Shape), s.Bytes, s.Host, s.SwapOut)
		for _, si := range s.SwapIns {
			fmt.Fprintf(&w, "  swap-in %s on %s trigger %s (gate %s) distance %d consumers %s\n", si.Node, si.Device, si.Trigger, si.Gate, si.Distance, strings.Join(si.Consumers, ","))
		}
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(&w, "skipped %s: %s\n", s.Tensor, s.Reason)
	}
	w.WriteString("nodes:\n")
	for _, n := range res.Model.Graph.Node {
		fmt.Fprintf(&w, "  %s = %s(%s) @%q\n", n.Name, n.Op, strings.Join(n.Input, ", "), n.Device)
	}
	return w.String()
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			m := graphdef.NewModel(tc.graph())
			m.Source = tc.name
			res, err := Rewrite(m, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			g, err := graphdef.NewGraph(m.Graph, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := rewrite.Verify(g, res, tc.opts.Gate); err != nil {
				t.Fatal(err)
			}
			got := describe(res)
			testgraph.Golden(t, filepath.Join("testdata", tc.name+".golden"), got, *update)
		})
	}
}

func TestFixturesRewrite(t *testing.T) {
	for _, name := range []string{"mlp", "cnn", "resnet", "lstm"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("../../testmodels/fixtures", name+".pb")
			m, g := testgraph.Load(t, path)
			res, err := Rewrite(m, rewrite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := rewrite.Verify(g, res, rewrite.GateHost); err != nil {
				t.Fatal(err)
			}
			if name == "resnet" && len(res.Swaps) < 10 {
				t.Errorf("resnet: only %d tensors swapped", len(res.Swaps))
			}
			a, err := res.Model.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			res2, err := Rewrite(m, rewrite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := res2.Model.Marshal()
			if !bytes.Equal(a, b) {
				t.Error("two rewrites of the same graph differ")
			}
			orig, _ := os.ReadFile(path)
			if unchanged, _ := m.Marshal(); !bytes.Equal(unchanged, orig) {
				t.Error("rewriting changed the input model")
			}
			// The rewritten graph is refused.
			back, err := graphdef.Parse(a, graphdef.FormatPB, "rewritten.pb")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Rewrite(back, rewrite.Options{}); len(res.Swaps) > 0 && (err == nil || !strings.Contains(err.Error(), "already rewritten by tfswap")) {
				t.Errorf("rewriting a rewritten graph: %v", err)
			}
		})
	}
}

func TestOptionErrors(t *testing.T) {
	m := graphdef.NewModel(chainGraph(3, ""))
	for _, o := range []rewrite.Options{
		{SwapoutThreshold: -3}, {SwapinAhead: -1}, {SwapinGroupBy: -5}, {MinTensorBytes: -7},
		{ComputeDevice: "gpu0"}, {HostDevice: "/nonsense"}, {Gate: rewrite.Gate(9)},
	} {
		if _, err := Rewrite(m, o); err == nil {
			t.Errorf("Rewrite with %+v did not fail", o)
		}
	}
}

// reluForward adds a forward chain of n Relus f1..fn reading the node "x" (already added)
// and the loss gradient loss_grad reading fn, and returns loss_grad's name: the start of the
// hand-built training chains whose backward pass the tests then add.
func (b *builder) reluForward(n int) string {
	prev := "x"
	for i := 1; i <= n; i++ {
		prev = b.op(fmt.Sprintf("f%d", i), "Relu", "", big, prev).Name
	}
	return b.op("loss_grad", "Relu", "", big, prev).Name
}
