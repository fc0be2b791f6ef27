package cost

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
)

const gpu0, cpu0 = "/device:GPU:0", "/device:CPU:0"

// spans returns each op's [start, end) by name.
func spans(r *Result) map[string][2]int64 {
	m := map[string][2]int64{}
	for _, o := range r.Timeline.Ops {
		m[o.Node.Name] = [2]int64{o.Start, o.End}
	}
	return m
}

func liveNames(d *DeviceResult) []string {
	var s []string
	for _, l := range d.Live {
		s = append(s, l.Name)
	}
	sort.Strings(s)
	return s
}

// chainGraph: x (fed) -> a = Neg(x) -> b = Neg(a) -> i = Identity(b) -> c = Mul(i, x);
// train = NoOp(^c). Every tensor is 256 float32 = 1 KiB.
func chainGraph(t *testing.T) *graphdef.Graph {
	b := newBuilder()
	v := []int64{256}
	b.op("x", "Placeholder", "", v)
	b.op("a", "Neg", "", v, "x")
	b.op("b", "Neg", "", v, "a")
	b.op("i", "Identity", "", v, "b")
	b.op("c", "Mul", "", v, "i", "x")
	b.op("train", "NoOp", "", nil, "^c")
	return b.graph(t)
}

func TestSimulateChain(t *testing.T) {
	g := chainGraph(t)
	r, err := Simulate(g, unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// With 1 byte/ns and 1 FLOP/ns: Neg reads and writes 1 KiB (2048 ns), Mul reads two and
	// writes one (3072 ns); Placeholder and Identity take the 1 ns floor, NoOp nothing.
	want := map[string][2]int64{
		"x": {0, 1}, "a": {1, 2049}, "b": {2049, 4097}, "i": {4097, 4098}, "c": {4098, 7170}, "train": {7170, 7170},
	}
	if got := spans(r); !reflect.DeepEqual(got, want) {
		t.Errorf("spans:\n got %v\nwant %v", got, want)
	}
	if r.StepTime != 7170 {
		t.Errorf("step time %d, want 7170", r.StepTime)
	}
	// b writes into a's buffer (its last reader), i shares it, and c writes into it again; x
	// is fed, so never reused: two buffers at most, from t=1.
	d := r.Device(gpu0)
	if d.PeakBytes != 2048 || d.PeakTime != 1 {
		t.Errorf("peak %d at %d, want 2048 at 1", d.PeakBytes, d.PeakTime)
	}
	if got := liveNames(d); !reflect.DeepEqual(got, []string{"a:0", "x:0"}) {
		t.Errorf("live at peak %v", got)
	}
	if d.Ops != 6 || d.BusyTime != 7170 || d.SwapInStall != 0 || d.IdleTime != 0 {
		t.Errorf("ops %d busy %d stall %d idle %d", d.Ops, d.BusyTime, d.SwapInStall, d.IdleTime)
	}
	// Memory at the end is back to zero.
	pts := r.Timeline.Memory[0]
	if last := pts[len(pts)-1]; last.Bytes != 0 || last.T != 7170 {
		t.Errorf("last memory point %+v", last)
	}
}

func TestSimulateChainGrapplerConventions(t *testing.T) {
	r, err := Simulate(chainGraph(t), unitProfile(), Options{Conventions: GrapplerConventions(), Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// Grappler's times on the unit profile's GPU (one SM of architecture 7 at 8 MHz: 1.024
	// GOP/s; 1 GB/s): Neg is 256 operations (250 ns) and 2 KiB moved (2048 ns), Mul 256
	// operations and 3 KiB; Placeholder and Identity take 1 ns, NoOp nothing.
	want := map[string][2]int64{
		"x": {0, 1}, "a": {1, 2299}, "b": {2299, 4597}, "i": {4597, 4598}, "c": {4598, 7920}, "train": {7920, 7920},
	}
	if got := spans(r); !reflect.DeepEqual(got, want) {
		t.Errorf("spans:\n got %v\nwant %v", got, want)
	}
	// Every op allocates its output and a tensor is freed 1 ns after its last reader ends:
	// when i starts (t=4597) x, a (b just ended), b and i are all counted.
	d := r.Device(gpu0)
	if d.PeakBytes != 4096 || d.PeakTime != 4597 {
		t.Errorf("peak %d at %d, want 4096 at 4597", d.PeakBytes, d.PeakTime)
	}
	if got := liveNames(d); !reflect.DeepEqual(got, []string{"a:0", "b:0", "i:0", "x:0"}) {
		t.Errorf("live at peak %v", got)
	}
	// With the times truncated to microseconds, a (last read by b, which ends at 4.597 us)
	// and c (from 4.598 us) fall in the same microsecond: all five tensors count there.
	if d.MicrosecondPeakBytes != 5120 || d.MicrosecondPeakTime != 4000 || d.MicrosecondLiveCount != 5 {
		t.Errorf("microsecond peak %d at %d (%d live), want 5120 at 4000 (5 live)", d.MicrosecondPeakBytes, d.MicrosecondPeakTime, d.MicrosecondLiveCount)
	}
	// tfswap's own accounting has no microsecond figure.
	own, err := Simulate(chainGraph(t), unitProfile(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if own.Device(gpu0).MicrosecondPeakBytes != 0 {
		t.Errorf("tfswap's accounting reports a microsecond peak of %d", own.Device(gpu0).MicrosecondPeakBytes)
	}
}

// swapGraph is tfswap's swap pattern by hand: f on the GPU is swapped out by a CPU Identity,
// swapped in by a CPU Identity gated by h2, and read back by c on the GPU.
func swapGraph(t *testing.T) *graphdef.Graph {
	b := newBuilder()
	v := []int64{256}
	b.op("x", "Placeholder", "", v)
	b.op("f", "Neg", "", v, "x")
	b.op("h1", "Neg", "", v, "f")
	b.op("h2", "Neg", "", v, "h1")
	b.op("so", "Identity", cpu0, v, "f")
	b.op("si", "Identity", cpu0, v, "so", "^h2")
	b.op("c", "Mul", "", v, "h2", "si")
	b.op("train", "NoOp", "", nil, "^c")
	return b.graph(t)
}

func TestSimulateSwap(t *testing.T) {
	r, err := Simulate(swapGraph(t), unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{
		"x": {0, 1}, "f": {1, 2049}, "h1": {2049, 4097}, "h2": {4097, 6145},
		// f's 1 KiB reaches the host at 3073; h2's control message is instant here.
		"so": {3073, 3074}, "si": {6145, 6146},
		// si's copy arrives at 6146 + 1024: the GPU waits 1025 ns for it.
		"c": {7170, 10242}, "train": {10242, 10242},
	}
	if got := spans(r); !reflect.DeepEqual(got, want) {
		t.Errorf("spans:\n got %v\nwant %v", got, want)
	}
	var xf []string
	for _, x := range r.Timeline.Xfers {
		xf = append(xf, fmt.Sprintf("%s %s %d-%d %dB", x.Tensor, x.Engine, x.Start, x.End, x.Bytes))
	}
	wantX := []string{"f:0 /device:GPU:0 D2H 2049-3073 1024B", "^h2 /device:GPU:0 D2H 6145-6145 0B", "si:0 /device:GPU:0 H2D 6146-7170 1024B"}
	if !reflect.DeepEqual(xf, wantX) {
		t.Errorf("transfers:\n got %q\nwant %q", xf, wantX)
	}
	gpu, cpu := r.Device(gpu0), r.Device(cpu0)
	if gpu.SwapInStall != 1025 || gpu.IdleTime != 0 {
		t.Errorf("GPU stall %d idle %d, want 1025 and 0", gpu.SwapInStall, gpu.IdleTime)
	}
	// x and f (t=1); f is freed when h1 ends, after its copy to the host has completed; the
	// swapped-in copy is allocated on the GPU when si's tensor is ready (t=6146).
	if gpu.PeakBytes != 2048 || gpu.PeakTime != 1 {
		t.Errorf("GPU peak %d at %d", gpu.PeakBytes, gpu.PeakTime)
	}
	mem := map[int64]int64{}
	for _, p := range r.Timeline.Memory[0] {
		mem[p.T] = p.Bytes
	}
	wantMem := map[int64]int64{0: 1024, 1: 2048, 2049: 2048, 4097: 1024, 6146: 2048, 10242: 0}
	if !reflect.DeepEqual(mem, wantMem) {
		t.Errorf("GPU memory %v, want %v", mem, wantMem)
	}
	// On the host: the received copy, shared by so and si, from 2049 until it is sent back.
	if cpu.PeakBytes != 1024 || cpu.PeakTime != 2049 || cpu.GPU {
		t.Errorf("host peak %d at %d", cpu.PeakBytes, cpu.PeakTime)
	}
	if r.D2H.Count != 1 || r.D2H.Bytes != 1024 || r.H2D.Count != 1 || r.H2D.Bytes != 1024 {
		t.Errorf("transfers %+v %+v", r.D2H, r.H2D)
	}
	if r.StepTime != 10242 || r.SwapInStall() != 1025 {
		t.Errorf("step %d stall %d", r.StepTime, r.SwapInStall())
	}
}

func TestSimulateSwapLatencyAndSimplex(t *testing.T) {
	p := unitProfile()
	p.TransferLatency = 100e-9
	r, err := Simulate(swapGraph(t), p, Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// Each transfer waits its 100 ns latency before its engine copies it.
	got := spans(r)
	if got["so"] != [2]int64{3173, 3174} || got["si"] != [2]int64{6245, 6246} || got["c"] != [2]int64{7370, 10442} {
		t.Errorf("spans %v", got)
	}
	// With one copy engine, transfers of both directions share a queue.
	p.TransferLatency = 0
	p.Duplex = false
	r, err = Simulate(swapGraph(t), p, Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	engines := map[string]bool{}
	for _, x := range r.Timeline.Xfers {
		engines[x.Engine] = true
	}
	if !reflect.DeepEqual(engines, map[string]bool{"/device:GPU:0 copy": true}) {
		t.Errorf("engines %v", engines)
	}
}

func TestSimulateInstantTransfers(t *testing.T) {
	c := Conventions{InstantTransfers: true}
	r, err := Simulate(swapGraph(t), unitProfile(), Options{Timeline: true, Conventions: c})
	if err != nil {
		t.Fatal(err)
	}
	got := spans(r)
	if got["so"] != [2]int64{2049, 2050} || got["c"] != [2]int64{6146, 9218} || r.SwapInStall() != 1 {
		t.Errorf("spans %v stall %d", got, r.SwapInStall())
	}
}

// varGraph: a variable read and updated, a constant, and a large unrelated branch.
func varGraph(t *testing.T) *graphdef.Graph {
	b := newBuilder()
	b.variable("w", "", []int64{250}) // 1000 bytes
	b.op("lr", "Const", "", []int64{})
	b.op("y", "Mul", "", []int64{250}, "w/read", "w/read")
	b.op("upd", "ResourceApplyGradientDescent", "", nil, "w", "lr", "y")
	b.op("big", "Placeholder", "", []int64{100000})
	b.op("bigneg", "Neg", "", []int64{100000}, "big")
	b.op("train", "NoOp", "", nil, "^upd")
	return b.graph(t)
}

func TestSimulateVariablesAndFetch(t *testing.T) {
	g := varGraph(t)
	r, err := Simulate(g, unitProfile(), Options{Fetch: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Device(gpu0)
	// The variable (1000 B) and the constant (4 B) are resident; the read shares the
	// variable's buffer; y is the only activation.
	if d.ResidentBytes != 1004 || d.PeakBytes != 2004 {
		t.Errorf("resident %d peak %d, want 1004 and 2004", d.ResidentBytes, d.PeakBytes)
	}
	if r.Simulated != 6 {
		t.Errorf("simulated %d nodes, want 6 (big and bigneg are not in train's fan-in)", r.Simulated)
	}
	kinds := map[string]string{}
	for _, l := range d.Live {
		kinds[l.Name] = l.Kind
	}
	if !reflect.DeepEqual(kinds, map[string]string{"w": "variable", "lr": "constant", "y:0": "activation"}) {
		t.Errorf("live %v", kinds)
	}
	// Grappler: no resident buffers; the read is a 1000-byte tensor, the handle 0 bytes.
	r, err = Simulate(g, unitProfile(), Options{Fetch: []string{"train"}, Conventions: GrapplerConventions()})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Device(gpu0); d.ResidentBytes != 0 || d.PeakBytes != 2004 {
		t.Errorf("grappler: resident %d peak %d", d.ResidentBytes, d.PeakBytes)
	}
	// Everything: the unrelated branch dominates.
	r, err = Simulate(g, unitProfile(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Device(gpu0); d.PeakBytes != 1004+800000 || r.Simulated != 8 {
		t.Errorf("all nodes: peak %d, %d nodes", d.PeakBytes, r.Simulated)
	}
	if _, err := Simulate(g, unitProfile(), Options{Fetch: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown fetch: %v", err)
	}
}

func TestSimulateMeasured(t *testing.T) {
	m, err := ParseMeasured([]byte(`{"format": "tfswap-op-profile", "version": 1,
		"device": {"name": "/job:localhost/replica:0/task:0/device:GPU:0", "profile": "unit"},
		"iterations": 3,
		"nodes": [{"name": "a", "op": "Neg", "device": "/job:localhost/replica:0/task:0/device:GPU:0", "compute_ns": 500},
		          {"name": "c", "device": "/device:CPU:0", "compute_ns": 7}]}`), "m.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(chainGraph(t), unitProfile(), Options{Measured: m, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// a's measured 500 ns replaces its 2048; c was measured on a CPU, so its estimate stays.
	got := spans(r)
	if got["a"] != [2]int64{1, 501} || got["c"][1]-got["c"][0] != 3072 || r.MeasuredNodes != 1 {
		t.Errorf("spans %v, measured %d", got, r.MeasuredNodes)
	}
}

func TestSimulateBatchScale(t *testing.T) {
	b := newBuilder()
	b.op("input", "Placeholder", "", []int64{8, 4})
	b.node("labels", "Placeholder", "", [][]int64{{8}}, map[string]*apb.AttrValue{"dtype": tAttr(f32)})
	b.variable("w", "", []int64{4, 8})
	b.op("y", "MatMul", "", []int64{8, 8}, "input", "w/read")
	b.op("dy", "Sub", "", []int64{8, 8}, "y", "labels")
	b.node("dw", "MatMul", "", [][]int64{{4, 8}}, map[string]*apb.AttrValue{"transpose_a": bAttr(true)}, "input", "dy")
	b.op("db", "BiasAddGrad", "", []int64{8}, "dy")
	b.op("upd", "ResourceApplyGradientDescent", "", nil, "w", "db", "dw")
	b.op("train", "NoOp", "", nil, "^upd")
	g := b.graph(t)
	s, err := NewShapes(g, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{
		"input": {32, 4}, "labels": {32}, "y": {32, 8}, "dy": {32, 8},
		// weight and bias gradients sum over the batch (db has the batch's size, 8, but is a
		// BiasAddGrad output)
		"dw": {4, 8}, "db": {8}, "w/read": {4, 8},
	}
	for name, sh := range want {
		if got := s.Out(g.Node(name), 0); !reflect.DeepEqual(got, sh) {
			t.Errorf("%s: %v, want %v", name, got, sh)
		}
	}
	if s.Batch != 8 || s.Scaled != 4 || !reflect.DeepEqual(s.BatchInputs, []string{"input", "labels"}) {
		t.Errorf("batch %d scaled %d inputs %v", s.Batch, s.Scaled, s.BatchInputs)
	}
	// The original shapes are left alone.
	if got := g.Node("y").OutputShapes[0]; !reflect.DeepEqual(got, []int64{8, 8}) {
		t.Errorf("graph changed: %v", got)
	}
	if _, err := NewShapes(g, 0); err == nil {
		t.Error("scale 0 accepted")
	}
}

func TestSimulateDeterministic(t *testing.T) {
	g := swapGraph(t)
	a, err := Simulate(g, unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		b, err := Simulate(g, unitProfile(), Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ReportOf(a), ReportOf(b)) || !reflect.DeepEqual(a.Timeline.Xfers, b.Timeline.Xfers) {
			t.Fatal("two simulations of the same graph differ")
		}
	}
}

// TestSimulateLargeGraph runs a 100,000-node graph: ten thousand parallel chains of ten ops.
func TestSimulateLargeGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("large graph")
	}
	b := newBuilder()
	b.op("x", "Placeholder", "", []int64{64})
	var ends []string
	for c := 0; c < 9999; c++ {
		prev := "x"
		for k := 0; k < 10; k++ {
			name := fmt.Sprintf("c%d/n%d", c, k)
			b.op(name, "Relu", "", []int64{64}, prev)
			prev = name
		}
		ends = append(ends, "^"+prev)
	}
	b.op("train", "NoOp", "", nil, ends...)
	g := b.graph(t)
	if len(g.Nodes) != 99992 {
		t.Fatalf("%d nodes", len(g.Nodes))
	}
	p, _ := LookupProfile("v100-16gb")
	r, err := Simulate(g, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Simulated != len(g.Nodes) || r.Compute().Ops != len(g.Nodes) {
		t.Errorf("simulated %d, ran %d", r.Simulated, r.Compute().Ops)
	}
}

func TestSimulateSwapGrapplerConventions(t *testing.T) {
	r, err := Simulate(swapGraph(t), unitProfile(), Options{Timeline: true, Conventions: GrapplerConventions()})
	if err != nil {
		t.Fatal(err)
	}
	// Each transfer is a 1 ns _Send on the channel and a 1 ns _Recv on the receiving device:
	// f's copy reaches the host at 2301. h2's control edge is no transfer (the
	// VirtualScheduler treats a control input from another device as a local edge): si runs
	// when h2 ends, at 6895; its copy is received on the GPU at 6897-6898, and c runs after it.
	got := spans(r)
	want := map[string][2]int64{
		"x": {0, 1}, "f": {1, 2299}, "h1": {2299, 4597}, "h2": {4597, 6895},
		"so": {2301, 2302}, "si": {6895, 6896}, "c": {6898, 10220}, "train": {10220, 10220},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spans:\n got %v\nwant %v", got, want)
	}
	// GPU: when h1 starts, x (freed 1 ns after f ends), f (kept until its host consumer and
	// h1 have ended) and h1. Host: the received copy of f while so starts, and so's output.
	gpu, cpu := r.Device(gpu0), r.Device(cpu0)
	if gpu.PeakBytes != 3072 || gpu.PeakTime != 2299 {
		t.Errorf("GPU peak %d at %d, want 3072 at 2299", gpu.PeakBytes, gpu.PeakTime)
	}
	if cpu.PeakBytes != 2048 || cpu.PeakTime != 2301 {
		t.Errorf("host peak %d at %d, want 2048 at 2301", cpu.PeakBytes, cpu.PeakTime)
	}
	if got := liveNames(cpu); !reflect.DeepEqual(got, []string{"f:0", "so:0"}) {
		t.Errorf("host live %v", got)
	}
	// In microseconds: h1 (read by h2 until 6.895 us), h2, the received copy of si
	// (6.897 us) and c (6.898 us) share the sixth microsecond on the GPU.
	if gpu.MicrosecondPeakBytes != 4096 || gpu.MicrosecondPeakTime != 6000 {
		t.Errorf("GPU microsecond peak %d at %d, want 4096 at 6000", gpu.MicrosecondPeakBytes, gpu.MicrosecondPeakTime)
	}
	if cpu.MicrosecondPeakBytes != 2048 || cpu.MicrosecondPeakTime != 2000 {
		t.Errorf("host microsecond peak %d at %d, want 2048 at 2000", cpu.MicrosecondPeakBytes, cpu.MicrosecondPeakTime)
	}
}

// TestSimulateHostCopyBesideKernel: a swap-in's host Identity that becomes ready while the
// host runs a kernel (an optimizer update, here a Neg of 4 KiB taking 8192 ns) starts at
// once, beside it, as TensorFlow runs inexpensive kernels inline: the copy is not queued
// behind the update, and the GPU's consumer waits only for the link. Grappler's conventions
// keep one op at a time on the host.
func TestSimulateHostCopyBesideKernel(t *testing.T) {
	b := newBuilder()
	v := []int64{256}
	b.op("x", "Placeholder", "", v)
	b.op("f", "Neg", "", v, "x")
	b.op("h1", "Neg", "", v, "f")
	b.op("h2", "Neg", "", v, "h1")
	b.op("so", "Identity", cpu0, v, "f")
	// The host's kernel (8 KiB written, 9 KiB moved), ready when so ends (3074).
	b.op("upd", "Neg", cpu0, []int64{2048}, "so")
	b.op("si", "Identity", cpu0, v, "so", "^h2")
	b.op("c", "Mul", "", v, "h2", "si")
	b.op("train", "NoOp", "", nil, "^c", "^upd")
	g := b.graph(t)
	r, err := Simulate(g, unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	got := spans(r)
	// si is ready when h2 ends (6145) and runs then, while upd still runs; its 1 KiB
	// arrives at 6146 + 1024 and c starts at 7170, as in TestSimulateSwap.
	if got["si"] != [2]int64{6145, 6146} || got["c"][0] != 7170 {
		t.Errorf("si %v, c %v: want si at 6145 beside upd %v and c at 7170", got["si"], got["c"], got["upd"])
	}
	if got["upd"][0] >= 6145 || got["upd"][1] <= 6146 {
		t.Fatalf("upd %v does not run across si's start: the test checks nothing", got["upd"])
	}
	// Under Grappler's conventions the host runs one op at a time: si waits for upd.
	rg, err := Simulate(g, unitProfile(), Options{Timeline: true, Conventions: GrapplerConventions()})
	if err != nil {
		t.Fatal(err)
	}
	if sg := spans(rg); sg["si"][0] < sg["upd"][1] {
		t.Errorf("Grappler conventions: si %v starts before upd %v ends", sg["si"], sg["upd"])
	}
}
