package tfrun

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	sspb "github.com/wamuir/graft/tensorflow/core/framework/step_stats_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// These tests build by hand what TensorFlow produces for one swap (p -> swap_out on the
// host, swap_in on the host gated by trig, consumer c on the device), as partition graphs
// and step stats, and check the checkers on it without a runtime.

const (
	fullCPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
	fullCPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
)

func xferAttrs(tensor, from, to string) map[string]*apb.AttrValue {
	s := func(v string) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(v)}} }
	return map[string]*apb.AttrValue{"tensor_name": s(tensor), "send_device": s(from), "recv_device": s(to)}
}

// oneSwap returns the swap, the run graph and the run metadata of one swap.
// times gives each node's [start, opEnd] in microseconds.
func oneSwap(times map[string][2]int64) ([]Swap, RunSpec, *cpb.RunMetadata) {
	const out, in = "tfswap/p_0/swap_out", "tfswap/p_0/swap_in_0"
	res := []Swap{{
		Tensor: "p:0", Producer: "p", Host: "/device:CPU:0", SwapOut: out,
		SwapIns: []SwapIn{{Node: in, Device: "/device:CPU:0", Trigger: "trig", Consumers: []string{"c"}}},
	}}
	run := RunSpec{Graph: &gpb.GraphDef{Node: []*npb.NodeDef{
		{Name: "p", Op: "Relu"},
		{Name: "trig", Op: "MatMul", Input: []string{"p"}},
		{Name: out, Op: "Identity", Input: []string{"p"}},
		{Name: in, Op: "Identity", Input: []string{out, "^trig"}},
		{Name: "c", Op: "ReluGrad", Input: []string{"trig", in}},
		{Name: "probe", Op: "Identity", Input: []string{in}},
	}}, Fetches: []string{"c:0"}, Targets: []string{"probe"}}
	dev := &gpb.GraphDef{Node: []*npb.NodeDef{
		{Name: "p", Op: "Relu", Device: fullCPU1},
		{Name: "p/_0", Op: "_Send", Input: []string{"p"}, Device: fullCPU1, Attr: xferAttrs("edge_1_p", fullCPU1, fullCPU0)},
		{Name: "trig", Op: "MatMul", Input: []string{"p"}, Device: fullCPU1},
		{Name: "trig/ctrl/_1", Op: "Const", Input: []string{"^trig"}, Device: fullCPU1},
		{Name: "trig/_2", Op: "_Send", Input: []string{"trig/ctrl/_1"}, Device: fullCPU1, Attr: xferAttrs("edge_2_trig", fullCPU1, fullCPU0)},
		{Name: in + "/_5", Op: "_Recv", Device: fullCPU1, Attr: xferAttrs("edge_3_in", fullCPU0, fullCPU1)},
		{Name: "c", Op: "ReluGrad", Input: []string{"trig", in + "/_5"}, Device: fullCPU1},
		{Name: "probe", Op: "Identity", Input: []string{in + "/_5"}, Device: fullCPU1},
	}}
	host := &gpb.GraphDef{Node: []*npb.NodeDef{
		{Name: "p/_3", Op: "_Recv", Device: fullCPU0, Attr: xferAttrs("edge_1_p", fullCPU1, fullCPU0)},
		{Name: out, Op: "Identity", Input: []string{"p/_3"}, Device: fullCPU0},
		{Name: "trig/_4", Op: "_Recv", Device: fullCPU0, Attr: xferAttrs("edge_2_trig", fullCPU1, fullCPU0)},
		{Name: "trig/_6", Op: "Identity", Input: []string{"trig/_4"}, Device: fullCPU0},
		{Name: in, Op: "Identity", Input: []string{out, "^trig/_6"}, Device: fullCPU0},
		{Name: in + "/_7", Op: "_Send", Input: []string{in}, Device: fullCPU0, Attr: xferAttrs("edge_3_in", fullCPU0, fullCPU1)},
	}}
	stats := func(device string, nodes ...string) *sspb.DeviceStepStats {
		d := &sspb.DeviceStepStats{Device: device}
		for _, n := range nodes {
			tm := times[n]
			d.NodeStats = append(d.NodeStats, &sspb.NodeExecStats{NodeName: n, AllStartNanos: tm[0] * 1000,
				OpStartRelNanos: 0, OpEndRelNanos: (tm[1] - tm[0]) * 1000, AllEndRelNanos: (tm[1] - tm[0] + 1) * 1000})
		}
		return d
	}
	md := &cpb.RunMetadata{
		PartitionGraphs: []*gpb.GraphDef{dev, host},
		StepStats: &sspb.StepStats{DevStats: []*sspb.DeviceStepStats{
			stats(fullCPU1, "p", "trig", "c", "probe"),
			stats(fullCPU0, out, "trig/_6", in),
		}},
	}
	return res, run, md
}

func goodTimes() map[string][2]int64 {
	return map[string][2]int64{
		"p": {0, 10}, "tfswap/p_0/swap_out": {12, 13}, "trig": {20, 30}, "trig/_6": {31, 32},
		"tfswap/p_0/swap_in_0": {33, 34}, "probe": {36, 37}, "c": {36, 40},
	}
}

func TestCheckSwapPartitions(t *testing.T) {
	res, run, md := oneSwap(goodTimes())
	tr := NewTrace(md)
	problems, notes := CheckSwapPartitions(tr, res, run)
	if len(problems) != 0 || len(notes) != 0 {
		t.Fatalf("problems %q, notes %q", problems, notes)
	}
	if g := tr.ControlGates("tfswap/p_0/swap_in_0"); len(g) != 1 || g[0] != "trig" {
		t.Errorf("ControlGates = %v, want [trig]", g)
	}
	if o, ok := tr.OriginOf("tfswap/p_0/swap_in_0/_5"); !ok || o.Name != "tfswap/p_0/swap_in_0" {
		t.Errorf("OriginOf = %v %v", o.Name, ok)
	}

	// Grappler removed the swap-in: a problem.
	md.PartitionGraphs[1].Node = md.PartitionGraphs[1].Node[:4]
	problems, _ = CheckSwapPartitions(NewTrace(md), res, run)
	if len(problems) == 0 || !strings.Contains(problems[0], "swap-in tfswap/p_0/swap_in_0 of p:0 is not in the partition graphs") {
		t.Errorf("problems %q", problems)
	}

	// The same swap-in placed on the producer's device: nothing would be gated on the host.
	res2, run2, md2 := oneSwap(goodTimes())
	md2.PartitionGraphs[1].Node[1].Device = fullCPU1
	problems, _ = CheckSwapPartitions(NewTrace(md2), res2, run2)
	if len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), "runs on "+fullCPU1+", not on the host") {
		t.Errorf("problems %q", problems)
	}

	// A run that does not need the swap: only a note.
	res3, run3, md3 := oneSwap(goodTimes())
	run3.Fetches, run3.Targets = []string{"trig:0"}, nil
	problems, notes = CheckSwapPartitions(NewTrace(md3), res3, run3)
	if len(problems) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "pruned") {
		t.Errorf("problems %q, notes %q", problems, notes)
	}
}

func TestCheckSwapOrder(t *testing.T) {
	probes := map[string]string{"tfswap/p_0/swap_in_0": "probe"}
	res, run, md := oneSwap(goodTimes())
	vs, notes, err := CheckSwapOrder(NewTrace(md), res, probes, "/device:CPU:1", run)
	if err != nil || len(vs) != 0 || len(notes) != 0 {
		t.Fatalf("violations %v, notes %v, err %v", vs, notes, err)
	}

	// The copy arrives before the trigger finished, as with a gate on the device, and the
	// swap-out ends after the trigger started.
	tm := goodTimes()
	tm["probe"] = [2]int64{15, 16}
	tm["tfswap/p_0/swap_out"] = [2]int64{12, 25}
	tm["tfswap/p_0/swap_in_0"] = [2]int64{26, 27}
	res, run, md = oneSwap(tm)
	vs, _, err = CheckSwapOrder(NewTrace(md), res, probes, "/device:CPU:1", run)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, v := range vs {
		got[v.Check] = true
		if v.Gating() != (v.Check != CheckD2H) {
			t.Errorf("Gating of %s", v.Check)
		}
	}
	if len(vs) != 3 || !got[CheckD2H] || !got[CheckH2DSend] || !got[CheckH2DRecv] {
		t.Fatalf("violations %v", vs)
	}
	if !strings.Contains(vs[2].String(), "had arrived on /device:CPU:1 by 15.0us (probe probe), before trigger trig finished at 30.0us") {
		t.Errorf("message %q", vs[2].String())
	}

	delete(probes, "tfswap/p_0/swap_in_0")
	if _, _, err := CheckSwapOrder(NewTrace(md), res, probes, "/device:CPU:1", run); err == nil {
		t.Error("no error for a swap-in without a probe")
	}
}

func TestRunSpecNeeded(t *testing.T) {
	run := RunSpec{Graph: &gpb.GraphDef{Node: []*npb.NodeDef{
		{Name: "x", Op: "Placeholder"},
		{Name: "a", Op: "Neg", Input: []string{"x"}},
		{Name: "b", Op: "Neg", Input: []string{"a"}},
		{Name: "c", Op: "NoOp", Input: []string{"^b"}},
		{Name: "d", Op: "Neg", Input: []string{"x"}},
	}}, Feeds: []string{"a:0"}, Targets: []string{"c"}}
	need := run.needed()
	for name, want := range map[string]bool{"c": true, "b": true, "a": true, "x": false, "d": false} {
		if need[name] != want {
			t.Errorf("needed[%s] = %v, want %v", name, need[name], want)
		}
	}
	if !run.isFed("a") || run.isFed("b") {
		t.Error("isFed")
	}
}

func TestForwards(t *testing.T) {
	g := &gpb.GraphDef{Node: []*npb.NodeDef{
		{Name: "r", Op: "ReluGrad"},
		{Name: "i1", Op: "Identity", Input: []string{"r", "^g"}},
		{Name: "i2", Op: "Identity", Input: []string{"i1"}},
		{Name: "n", Op: "Neg", Input: []string{"i2"}},
	}}
	if !forwards(g, "i2:0", "r:0") || !forwards(g, "i1", "r") || forwards(g, "n:0", "r:0") || forwards(g, "i2:0", "r:1") {
		t.Error("forwards")
	}
}

func TestPlaceAllAndProbes(t *testing.T) {
	f32 := map[string]*apb.AttrValue{"T": {Value: &apb.AttrValue_Type{Type: tpb.DataType_DT_FLOAT}}}
	orig := &npb.NodeDef{Name: "p", Op: "Relu", Attr: f32}
	m := graphdef.NewModel(&gpb.GraphDef{Node: []*npb.NodeDef{
		orig,
		{Name: "tfswap/p_0/swap_out", Op: "Identity", Input: []string{"p"}, Attr: f32},
		{Name: "tfswap/p_0/swap_in_0", Op: "Identity", Input: []string{"tfswap/p_0/swap_out"}, Attr: f32},
		{Name: "tfswap/p_0/swap_in_1", Op: "Identity", Input: []string{"tfswap/p_0/swap_out"}, Attr: f32},
	}})
	placed := PlaceAll(m, "/device:CPU:1")
	if orig.GetDevice() != "" || placed.Graph.Node[0].GetDevice() != "/device:CPU:1" {
		t.Fatal("PlaceAll mutated the input or did not place")
	}
	res := []Swap{{Tensor: "p:0", Producer: "p", Host: "/device:CPU:0", SwapOut: "tfswap/p_0/swap_out",
		SwapIns: []SwapIn{
			{Node: "tfswap/p_0/swap_in_0", Device: "/device:CPU:0"},
			{Node: "tfswap/p_0/swap_in_1", Device: "/device:CPU:1"},
		}}}
	probed, probes, err := AddProbes(m, res, "/device:CPU:1")
	if err != nil {
		t.Fatal(err)
	}
	if len(probed.Graph.Node) != 6 || len(m.Graph.Node) != 4 {
		t.Fatalf("%d nodes after AddProbes (input has %d)", len(probed.Graph.Node), len(m.Graph.Node))
	}
	p0, p1 := probed.Graph.Node[4], probed.Graph.Node[5]
	if probes["tfswap/p_0/swap_in_0"] != p0.Name || p0.Input[0] != "tfswap/p_0/swap_in_0" || p0.Device != "/device:CPU:1" {
		t.Errorf("probe of the host swap-in: %v", p0)
	}
	if probes["tfswap/p_0/swap_in_1"] != p1.Name || p1.Input[0] != "tfswap/p_0/swap_out" || !p1.Attr[doNotRemoveAttr].GetB() {
		t.Errorf("probe of the device swap-in: %v", p1)
	}
	if names := ProbeNames(probes); len(names) != 2 {
		t.Errorf("ProbeNames %v", names)
	}
}
