package profiling

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/tfrun"
	adpb "github.com/wamuir/graft/tensorflow/core/framework/allocation_description_go_proto"
	sspb "github.com/wamuir/graft/tensorflow/core/framework/step_stats_go_proto"
	tdpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_description_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// tinyGraph: x = Placeholder float32 (?, 4); w = Const (4, 2); y = MatMul(x, w);
// r = Relu(y); train = NoOp(^r).
const tinyGraph = `
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: -1 } dim { size: 4 } } } }
  attr { key: "_output_shapes" value { list { shape { dim { size: -1 } dim { size: 4 } } } } } }
node { name: "w" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 4 } dim { size: 2 } } float_val: 0.5 } } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 4 } dim { size: 2 } } } } } }
node { name: "y" op: "MatMul" input: "x" input: "w" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: -1 } dim { size: 2 } } } } } }
node { name: "r" op: "Relu" input: "y" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: -1 } dim { size: 2 } } } } } }
node { name: "unused" op: "Relu" input: "y" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "train" op: "NoOp" input: "^r" }
`

func tiny(t *testing.T) *graphdef.Graph {
	t.Helper()
	m, err := graphdef.Parse([]byte(tinyGraph), graphdef.FormatPBTXT, "tiny.pbtxt")
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// entry builds an executor step-stats entry starting at start ns with a kernel from
// start+opStart to start+opEnd.
func entry(name string, start, opStart, opEnd int64, outs ...*sspb.NodeOutput) *sspb.NodeExecStats {
	return &sspb.NodeExecStats{NodeName: name, AllStartNanos: start, OpStartRelNanos: opStart, OpEndRelNanos: opEnd, AllEndRelNanos: opEnd + 10, Output: outs}
}

func output(slot int32, dt tpb.DataType, requested int64, dims ...int64) *sspb.NodeOutput {
	sh := &tspb.TensorShapeProto{}
	for _, d := range dims {
		sh.Dim = append(sh.Dim, &tspb.TensorShapeProto_Dim{Size: d})
	}
	return &sspb.NodeOutput{Slot: slot, TensorDescription: &tdpb.TensorDescription{Dtype: dt, Shape: sh,
		AllocationDescription: &adpb.AllocationDescription{RequestedBytes: requested}}}
}

const (
	cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0"
	gpu0 = "/job:localhost/replica:0/task:0/device:GPU:0"
)

func TestCollectorCPU(t *testing.T) {
	g := tiny(t)
	c := NewCollector(g)
	for i, k := range []int64{1, 3, 2} {
		md := &RunMetadata{StepStats: &sspb.StepStats{DevStats: []*sspb.DeviceStepStats{{
			Device: cpu0,
			NodeStats: []*sspb.NodeExecStats{
				entry("_SOURCE", 1000, 0, 5),
				entry("_arg_x_0_0", 1000, 0, 5),
				entry("w", 1010, 2, 2+100*k, output(0, tpb.DataType_DT_FLOAT, 32, 4, 2)),
				entry("y", 1200, 5, 5+1000*k, output(0, tpb.DataType_DT_FLOAT, 64, 8, 2)),
				entry("r", 3000+int64(i), 1, 1+500, output(0, tpb.DataType_DT_FLOAT, 64, 8, 2)),
				entry("train", 4000, 1, 2),
			},
		}}}}
		if err := c.Add(md, time.Duration(k)*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	r := c.Result()
	if len(r.Nodes) != 4 {
		t.Fatalf("%d nodes, want w, y, r, train", len(r.Nodes))
	}
	want := map[string][3]int64{"w": {200, 100, 300}, "y": {2000, 1000, 3000}, "r": {500, 500, 500}, "train": {1, 1, 1}}
	for _, st := range r.Nodes {
		if w := want[st.Node.Name]; st.Median != w[0] || st.Min != w[1] || st.Max != w[2] || st.Device != cpu0 {
			t.Errorf("%s: median %d min %d max %d on %s, want %v", st.Node.Name, st.Median, st.Min, st.Max, st.Device, w)
		}
	}
	if r.ComputeDevice != cpu0 || strings.Join(r.RuntimeOnly, ",") != "_SOURCE,_arg_x_0_0" || r.GPUKernels {
		t.Errorf("device %s, runtime-only %v, gpu %v", r.ComputeDevice, r.RuntimeOnly, r.GPUKernels)
	}
	if u := r.Unstable(); len(u) != 2 || u[0].Node.Name != "y" || u[1].Node.Name != "w" {
		t.Errorf("unstable %v", u)
	}
	m := r.Measured(Info{Graph: "tiny.pbtxt", TensorFlowVersion: "2.18.0"})
	if y := byName(m.Nodes, "y"); y == nil || *y.ComputeNS != 2000 || len(y.OutputBytes) != 1 || y.OutputBytes[0] != 64 {
		t.Errorf("y entry %+v", y)
	}
	if tr := byName(m.Nodes, "train"); tr == nil || len(tr.OutputBytes) != 0 {
		t.Errorf("train entry %+v", tr)
	}
	if byName(m.Nodes, "unused") != nil || byName(m.Nodes, "x") != nil {
		t.Errorf("nodes that did not run are in the profile")
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseMeasured(data); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	r.WriteSummary(&buf, 2)
	for _, s := range []string{"median 2ms, min 1ms, max 3ms", "slowest ops", "y ", "2 of 4 ops vary by more than 20%"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, buf.String())
		}
	}
}

// TestCollectorGPU checks that a GPU node's time is the sum of its kernels on the device
// tracer's stream:all track (named "node:Op"), not the executor's launch time, and that the
// per-stream tracks are not counted again.
func TestCollectorGPU(t *testing.T) {
	g := tiny(t)
	c := NewCollector(g)
	kernel := func(name string, start, dur int64) *sspb.NodeExecStats {
		return &sspb.NodeExecStats{NodeName: name, AllStartNanos: start, AllEndRelNanos: dur, OpEndRelNanos: dur}
	}
	md := &RunMetadata{StepStats: &sspb.StepStats{DevStats: []*sspb.DeviceStepStats{
		{Device: gpu0, NodeStats: []*sspb.NodeExecStats{entry("y", 100, 0, 7), entry("r", 200, 0, 6), entry("train", 300, 0, 1)}},
		{Device: gpu0 + "/stream:all", NodeStats: []*sspb.NodeExecStats{kernel("y:MatMul", 150, 4000), kernel("y:MatMul", 4200, 1000), kernel("r:Relu", 5300, 300)}},
		{Device: gpu0 + "/stream:7", NodeStats: []*sspb.NodeExecStats{kernel("y:MatMul", 150, 4000)}},
		{Device: gpu0 + "/memcpy", NodeStats: []*sspb.NodeExecStats{kernel("edge_1_y", 150, 9999)}},
		{Device: cpu0, NodeStats: []*sspb.NodeExecStats{entry("w", 50, 0, 20)}},
	}}}
	if err := c.Add(md, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	r := c.Result()
	got := map[string]int64{}
	for _, st := range r.Nodes {
		got[st.Node.Name] = st.Median
	}
	if got["y"] != 5000 || got["r"] != 300 || got["train"] != 1 || got["w"] != 20 || !r.GPUKernels || r.ComputeDevice != gpu0 {
		t.Errorf("times %v, gpu kernels %v, device %s", got, r.GPUKernels, r.ComputeDevice)
	}
	if err := c.Add(&RunMetadata{}, 0); err == nil {
		t.Error("a step without step stats was accepted")
	}
}

func TestStepPeaks(t *testing.T) {
	mem := func(alloc string, recs ...int64) *sspb.AllocatorMemoryUsed {
		m := &sspb.AllocatorMemoryUsed{AllocatorName: alloc}
		for i := 0; i < len(recs); i += 2 {
			m.AllocationRecords = append(m.AllocationRecords, &sspb.AllocationRecord{AllocMicros: recs[i], AllocBytes: recs[i+1]})
		}
		return m
	}
	md := &RunMetadata{StepStats: &sspb.StepStats{DevStats: []*sspb.DeviceStepStats{{Device: gpu0, NodeStats: []*sspb.NodeExecStats{
		{NodeName: "a", Memory: []*sspb.AllocatorMemoryUsed{mem("GPU_0_bfc", 1, 100, 5, -100)}},
		{NodeName: "b", Memory: []*sspb.AllocatorMemoryUsed{mem("GPU_0_bfc", 3, 50, 5, 70, 9, -120)}},
		{NodeName: "c", Memory: []*sspb.AllocatorMemoryUsed{mem("cpu", 2, 8)}},
	}}}}}
	// 1: 100; 3: 150; 5: +70 before -100 (equal times: allocations first) = 220; then 120.
	if p := StepPeaks(md); p["GPU_0_bfc"] != 220 || p["cpu"] != 8 {
		t.Errorf("peaks %v", p)
	}
}

func TestFeeds(t *testing.T) {
	g := tiny(t)
	mark, err := FanIn(g, []string{"train"})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := Placeholders(g, mark)
	if err != nil || len(ps) != 1 || ps[0].Describe() != "float32(?, 4)" {
		t.Fatalf("placeholders %v, %v", ps, err)
	}
	// Unknown batch dimension: no random feed.
	if _, err := RandomFeeds(ps, nil, DefaultSeed); err == nil || !strings.Contains(err.Error(), `placeholder "x" (float32(?, 4)) has no feed`) {
		t.Errorf("missing feed: %v", err)
	}
	good := tfrun.Float32Tensor([]int64{3, 4}, make([]float32, 12)...)
	if err := CheckFeed(g, "x:0", good, "x.npy"); err != nil {
		t.Errorf("good feed: %v", err)
	}
	if err := CheckFeed(g, "x:0", tfrun.Float32Tensor([]int64{3, 5}, make([]float32, 15)...), "x.npy"); err == nil ||
		!strings.Contains(err.Error(), `node "x" (Placeholder) takes shape (?, 4), x.npy holds float32(3, 5)`) {
		t.Errorf("wrong shape: %v", err)
	}
	if err := CheckFeed(g, "x", tfrun.Int32Tensor([]int64{3, 4}, make([]int32, 12)...), "x.npy"); err == nil ||
		!strings.Contains(err.Error(), `node "x" (Placeholder) takes float32(?, 4), x.npy holds int32(3, 4)`) {
		t.Errorf("wrong dtype: %v", err)
	}
	if err := CheckFeed(g, "nope:0", good, "x.npy"); err == nil || !strings.Contains(err.Error(), `no node "nope"`) {
		t.Errorf("unknown node: %v", err)
	}
	// Fully known shape: deterministic random data.
	ps[0].Shape = []int64{2, 4}
	a, err := RandomFeeds(ps, nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomFeeds(ps, nil, 7)
	c, _ := RandomFeeds(ps, nil, 8)
	if !a["x:0"].Equal(b["x:0"]) || a["x:0"].Equal(c["x:0"]) || a["x:0"].String() != "float32(2, 4)" {
		t.Errorf("random feeds: %v %v %v", a["x:0"], b["x:0"], c["x:0"])
	}
	v, _ := a["x:0"].Float64s()
	for _, x := range v {
		if x < 0 || x >= 1 {
			t.Errorf("random float %v outside [0, 1)", x)
		}
	}
	if f, err := ParseFeedFlag("input=a=b.npy"); err != nil || f.Tensor != "input" || f.Path != "a=b.npy" {
		t.Errorf("ParseFeedFlag: %+v %v", f, err)
	}
	for _, bad := range []string{"input", "=x.npy", "input="} {
		if _, err := ParseFeedFlag(bad); err == nil {
			t.Errorf("ParseFeedFlag(%q) accepted", bad)
		}
	}
}

func TestStepTargets(t *testing.T) {
	g := tiny(t)
	if tg, f, err := StepTargets(g, nil, nil); err != nil || len(tg) != 1 || tg[0] != "train" || f != nil {
		t.Errorf("default: %v %v %v", tg, f, err)
	}
	if _, _, err := StepTargets(g, []string{"nope"}, nil); err == nil || !strings.Contains(err.Error(), `target "nope"`) {
		t.Errorf("unknown target: %v", err)
	}
	if _, _, err := StepTargets(g, nil, []string{"r:3"}); err == nil || !strings.Contains(err.Error(), "1 output(s)") {
		t.Errorf("bad fetch: %v", err)
	}
	if op, err := InitOp(g, ""); op != "" || err != nil {
		t.Errorf("no init: %q %v", op, err)
	}
	if _, err := InitOp(g, "init"); err == nil {
		t.Errorf("missing init accepted")
	}
}

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := NewProgress(&buf, false)
	p.now = func() time.Time { return now }
	p.Start("measured", 20)
	for i := 1; i <= 20; i++ {
		now = now.Add(100 * time.Millisecond)
		p.Step(i)
	}
	p.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 10 || lines[0] != "measured: 2/20 steps, elapsed 0.2s, ETA 1.8s" || lines[9] != "measured: 20/20 steps, elapsed 2.0s, ETA 0.0s" {
		t.Errorf("plain progress:\n%s", buf.String())
	}
	buf.Reset()
	p = NewProgress(&buf, true)
	p.now = func() time.Time { return now }
	p.Start("warm-up", 4)
	now = now.Add(time.Second)
	p.Step(1)
	p.Done()
	if s := buf.String(); !strings.Contains(s, "\rwarm-up   [=======>                      ] 1/4  elapsed 1.0s  ETA 3.0s") || !strings.HasSuffix(s, "\n") {
		t.Errorf("terminal progress: %q", s)
	}
}
