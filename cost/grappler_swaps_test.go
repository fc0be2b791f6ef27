package cost

import (
	"reflect"
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// grapplerSwapGraph is swapGraph as Grappler's memory optimizer writes it: the swap pair is
// _CopyFromGpuToHost / _CopyFromHostToGpu on the consumer's (GPU) device, without
// _output_shapes, the trigger on the swap-in.
func grapplerSwapGraph(t *testing.T, device string) *builder {
	b := newBuilder()
	v := []int64{256}
	b.op("x", "Placeholder", device, v)
	b.op("f", "Neg", device, v, "x")
	b.op("h1", "Neg", device, v, "f")
	b.op("h2", "Neg", device, v, "h1")
	so := b.op("swap_out_c_1", "_CopyFromGpuToHost", device, v, "f")
	si := b.op("swap_in_c_1", "_CopyFromHostToGpu", device, v, "swap_out_c_1", "^h2")
	for _, n := range []*npb.NodeDef{so, si} {
		delete(n.Attr, "_output_shapes")
		n.Attr["_class"] = &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{S: [][]byte{[]byte("loc@c_1")}}}}
	}
	b.op("c", "Mul", device, v, "h2", "swap_in_c_1")
	b.op("train", "NoOp", device, nil, "^c")
	return b
}

func TestGrapplerSwapsSimulateAsHostTransfers(t *testing.T) {
	b := grapplerSwapGraph(t, "")
	if !HasGrapplerSwaps(b.g) {
		t.Fatal("HasGrapplerSwaps: false")
	}
	got, err := Simulate(b.graph(t), unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Simulate(swapGraph(t), unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// The same step as tfswap's own swap pair with its host-side gate: the copy out when f
	// is ready, the copy in only after the trigger h2, and f's buffer off the GPU between.
	rename := map[string]string{"swap_out_c_1": "so", "swap_in_c_1": "si"}
	gs := map[string][2]int64{}
	for k, v := range spans(got) {
		if r, ok := rename[k]; ok {
			k = r
		}
		gs[k] = v
	}
	if ws := spans(want); !reflect.DeepEqual(gs, ws) {
		t.Errorf("spans:\n got %v\nwant %v", gs, ws)
	}
	for _, dev := range []string{gpu0, cpu0} {
		g, w := got.Device(dev), want.Device(dev)
		if g == nil || w == nil {
			t.Fatalf("%s: got %v want %v", dev, g, w)
		}
		if g.PeakBytes != w.PeakBytes || g.PeakTime != w.PeakTime || g.SwapInStall != w.SwapInStall {
			t.Errorf("%s: peak %d at %d, stall %d; want %d at %d, stall %d", dev, g.PeakBytes, g.PeakTime, g.SwapInStall, w.PeakBytes, w.PeakTime, w.SwapInStall)
		}
	}
	if got.D2H != want.D2H || got.H2D != want.H2D || got.StepTime != want.StepTime {
		t.Errorf("transfers %+v %+v step %d; want %+v %+v step %d", got.D2H, got.H2D, got.StepTime, want.D2H, want.H2D, want.StepTime)
	}
	if got.UnknownOps["_CopyFromGpuToHost"]+got.UnknownOps["_CopyFromHostToGpu"] != 0 || got.UnsizedTensors != 0 {
		t.Errorf("swap kernels not understood: unknown %v, unsized %d", got.UnknownOps, got.UnsizedTensors)
	}
}

func TestLowerGrapplerSwapsKeepsTheTask(t *testing.T) {
	const gpu = "/job:worker/replica:0/task:3/device:GPU:1"
	b := grapplerSwapGraph(t, gpu)
	def, n := LowerGrapplerSwaps(b.g)
	if n != 2 {
		t.Fatalf("lowered %d nodes, want 2", n)
	}
	if !HasGrapplerSwaps(b.g) || HasGrapplerSwaps(def) {
		t.Error("the input was modified, or the output still has swap kernels")
	}
	for _, nd := range def.GetNode() {
		switch nd.GetName() {
		case "swap_out_c_1", "swap_in_c_1":
			if nd.GetOp() != "Identity" || nd.GetDevice() != "/job:worker/replica:0/task:3/device:CPU:0" {
				t.Errorf("%s: %s on %s", nd.GetName(), nd.GetOp(), nd.GetDevice())
			}
			if sh := nd.GetAttr()["_output_shapes"].GetList().GetShape(); len(sh) != 1 || len(sh[0].GetDim()) != 1 || sh[0].GetDim()[0].GetSize() != 256 {
				t.Errorf("%s: _output_shapes %v", nd.GetName(), sh)
			}
			if _, ok := nd.GetAttr()["_class"]; ok {
				t.Errorf("%s: still colocated", nd.GetName())
			}
		}
	}
	if same, n := LowerGrapplerSwaps(def); n != 0 || same != def {
		t.Error("a graph without swap kernels is not returned as is")
	}
}

// TestGrapplerSwapsLoweredWithSetupCache: a simulation with a set-up cache leaves out the
// lowering of Grappler's swap kernels only for the graph the cache's facts are about (the last
// simulation's lowered graph); a graph with the kernels, simulated again with the same cache
// and by the other accounting, is lowered each time and simulated as without a cache.
func TestGrapplerSwapsLoweredWithSetupCache(t *testing.T) {
	g := grapplerSwapGraph(t, "").graph(t)
	p := unitProfile()
	c := NewSetupCache(g, p)
	for i, conv := range []Conventions{{}, GrapplerConventions(), {}, GrapplerConventions()} {
		want, err := Simulate(g, p, Options{Timeline: true, Conventions: conv})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Simulate(g, p, Options{Timeline: true, Conventions: conv, Setup: c})
		if err != nil {
			t.Fatal(err)
		}
		if c.lastLowered(g) {
			t.Fatalf("run %d: the cache's facts are about the graph with swap kernels", i)
		}
		if !reflect.DeepEqual(spans(got), spans(want)) || got.StepTime != want.StepTime || got.Device(cpu0) == nil || got.Device(cpu0).PeakBytes != want.Device(cpu0).PeakBytes {
			t.Errorf("run %d: with the cache %v (step %d), without %v (step %d)", i, spans(got), got.StepTime, spans(want), want.StepTime)
		}
	}
}
