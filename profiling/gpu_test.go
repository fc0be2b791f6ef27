package profiling

import (
	"slices"
	"testing"
	"time"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling/fakegpu"
	sspb "github.com/wamuir/graft/tensorflow/core/framework/step_stats_go_proto"
	"google.golang.org/protobuf/proto"
)

// root is the repository's root, from this package.
const root = ".."

// gpuCase loads one of the constructed GPU steps kept in profiling/fakegpu/testdata (see its
// README: constructed from TensorFlow's step-stats format, not recorded on a GPU), its graph,
// and what fakegpu says it wrote into it.
func gpuCase(t *testing.T, c fakegpu.Case) (*graphdef.Graph, *RunMetadata, *fakegpu.Step) {
	t.Helper()
	g, err := c.Graph(root)
	if err != nil {
		t.Fatal(err)
	}
	md, err := fakegpu.LoadMetadata(c.Path(root))
	if err != nil {
		t.Fatal(err)
	}
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	want, err := fakegpu.Construct(g, p, fakegpu.Options{Fetch: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	return g, md, want
}

// TestCollectorOnGPUStep profiles the constructed GPU steps: a node's time is the summed
// duration of its kernels on stream:all (not the executor's launch, not stream:7 counted
// again, not the copies), the compute device is the GPU, and the tracer's tracks (copies,
// cuStreamSynchronize) are neither devices nor runtime nodes.
func TestCollectorOnGPUStep(t *testing.T) {
	for _, c := range fakegpu.Testdata() {
		g, md, want := gpuCase(t, c)
		col := NewCollector(g)
		if err := col.Add(md, 3*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		res := col.Result()
		if !res.GPUKernels || res.ComputeDevice != fakegpu.GPUDevice {
			t.Fatalf("%s: GPU kernels %v, compute device %q", c.File, res.GPUKernels, res.ComputeDevice)
		}
		checked := 0
		for _, st := range res.Nodes {
			k, ran := want.KernelNS[st.Node.Name]
			if !ran {
				continue
			}
			checked++
			if st.Median != k || st.Device != fakegpu.GPUDevice {
				t.Errorf("%s: %s: %d ns on %s, want its kernels' %d ns on the GPU", c.File, st.Node.Name, st.Median, st.Device, k)
			}
		}
		if checked != len(want.KernelNS) || checked < 20 {
			t.Errorf("%s: %d nodes with kernels profiled, %d constructed", c.File, checked, len(want.KernelNS))
		}
		for _, bad := range []string{"cuStreamSynchronize", "MemcpyH2D", "MemcpyD2H"} {
			if slices.Contains(res.RuntimeOnly, bad) {
				t.Errorf("%s: tracer entry %q counted as a runtime node", c.File, bad)
			}
		}
		if !slices.Contains(res.RuntimeOnly, "_arg_input_0_0") || !slices.Contains(res.RuntimeOnly, "_SOURCE") {
			t.Errorf("%s: runtime nodes %v", c.File, res.RuntimeOnly)
		}
		if len(res.Steps) != 1 || res.Steps[0].Span <= 0 || res.Steps[0].Span > time.Duration(want.StepNS)+time.Millisecond {
			t.Errorf("%s: step span %v, simulated step %d ns", c.File, res.Steps, want.StepNS)
		}
		prof := res.Measured(Info{Graph: c.File, TensorFlowVersion: "2.18.0"})
		if prof.Device.Name != fakegpu.GPUDevice {
			t.Errorf("%s: profile's device %q", c.File, prof.Device.Name)
		}
	}
}

// TestCollectorGPUStreamsWithoutStreamAll drops stream:all: the per-stream kernel tracks
// give the same times, and a copy whose tracer name is a node's "name:Op" (the tracer names
// a copy after the op that issued it) adds nothing to that node's time.
func TestCollectorGPUStreamsWithoutStreamAll(t *testing.T) {
	c := fakegpu.Testdata()[1]
	g, md, want := gpuCase(t, c)
	md = proto.Clone(md).(*RunMetadata)
	var kept []*sspb.DeviceStepStats
	var victim string
	for _, d := range md.GetStepStats().GetDevStats() {
		switch d.GetDevice() {
		case "/device:GPU:0/stream:all":
			continue
		case "/device:GPU:0/stream:14<MemcpyD2H>", "/device:GPU:0/memcpy":
			for name := range want.KernelNS {
				if victim == "" || name < victim {
					victim = name
				}
			}
			for _, ns := range d.GetNodeStats() {
				ns.NodeName = victim + ":" + g.Node(victim).Op
			}
		}
		kept = append(kept, d)
	}
	md.StepStats.DevStats = kept
	col := NewCollector(g)
	if err := col.Add(md, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res := col.Result()
	if !res.GPUKernels {
		t.Fatal("no kernels read from stream:7")
	}
	n := 0
	for _, st := range res.Nodes {
		if k, ok := want.KernelNS[st.Node.Name]; ok {
			n++
			if st.Median != k {
				t.Errorf("%s: %d ns, want %d (copies renamed after %s)", st.Node.Name, st.Median, k, victim)
			}
		}
	}
	if n != len(want.KernelNS) {
		t.Errorf("%d of %d kernel nodes profiled", n, len(want.KernelNS))
	}
}

// TestGPUPeakOnGPUStep reads the GPU allocator's peak of the constructed steps: the largest
// allocator_bytes_in_use of GPU_0_bfc (the variables included), the step's own allocations
// replayed, and the swapped step lower than the unswapped one. The host's pinned allocator
// never counts as a GPU's.
func TestGPUPeakOnGPUStep(t *testing.T) {
	var peaks []int64
	for _, c := range fakegpu.Testdata() {
		_, md, want := gpuCase(t, c)
		peak, alloc, ok := GPUPeak(md)
		if !ok || alloc != fakegpu.GPUAllocator || peak != want.Peak {
			t.Errorf("%s: GPU peak %d on %q (%v), constructed %d", c.File, peak, alloc, ok, want.Peak)
		}
		if sp := StepPeaks(md)[fakegpu.GPUAllocator]; sp != want.StepPeak || sp >= peak {
			t.Errorf("%s: step peak %d, constructed %d (allocator peak %d)", c.File, sp, want.StepPeak, peak)
		}
		peaks = append(peaks, peak)
		tr := GPUTraces(md)["/device:GPU:0"]
		if tr == nil || tr.Kernels != len(want.KernelNS) || tr.H2D != want.H2DCopies || tr.D2H != want.D2HCopies ||
			tr.H2DNS != want.H2DNS || tr.D2HNS != want.D2HNS {
			t.Errorf("%s: tracer summary %+v, constructed %d kernels, %d/%d copies (%d/%d ns)", c.File, tr, len(want.KernelNS), want.H2DCopies, want.D2HCopies, want.H2DNS, want.D2HNS)
		}
		var sum int64
		for _, k := range want.KernelNS {
			sum += k
		}
		if tr != nil && tr.KernelNS != sum {
			t.Errorf("%s: kernel time %d, constructed %d", c.File, tr.KernelNS, sum)
		}
	}
	if peaks[1] >= peaks[0] {
		t.Errorf("swapped peak %d not below the unswapped %d", peaks[1], peaks[0])
	}
	// A pinned host allocator larger than the GPU's is not a GPU's.
	_, md, want := gpuCase(t, fakegpu.Testdata()[0])
	md = proto.Clone(md).(*RunMetadata)
	host := md.GetStepStats().GetDevStats()[1]
	host.NodeStats = append(host.NodeStats, &sspb.NodeExecStats{NodeName: "pinned", Memory: []*sspb.AllocatorMemoryUsed{
		{AllocatorName: "gpu_host_bfc", AllocatorBytesInUse: 10 * want.Peak}}})
	if peak, alloc, ok := GPUPeak(md); !ok || peak != want.Peak || alloc != fakegpu.GPUAllocator {
		t.Errorf("with the host allocator: %d on %q", peak, alloc)
	}
	// The two-device emulation has no GPU allocator.
	emu := &RunMetadata{StepStats: &sspb.StepStats{DevStats: []*sspb.DeviceStepStats{{Device: "/job:localhost/replica:0/task:0/device:CPU:1",
		NodeStats: []*sspb.NodeExecStats{{NodeName: "y", Memory: []*sspb.AllocatorMemoryUsed{{AllocatorName: "cpu", AllocatorBytesInUse: 100}}}}}}}}
	if _, _, ok := GPUPeak(emu); ok {
		t.Error("the emulation's cpu allocator counted as a GPU's")
	}
	if len(GPUTraces(emu)) != 0 {
		t.Error("the emulation has no tracer tracks")
	}
}
