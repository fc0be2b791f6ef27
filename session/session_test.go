package session

import (
	"errors"
	"testing"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/profiling/fakegpu"
	"github.com/tfswap/tfswap/tfrun"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// These tests need no TensorFlow runtime and run with and without the build tag.

// TestConfigProto: the zero Config is TensorFlow's defaults with the memory optimizer off and
// no soft placement; TwoDevice is the emulation's; each field sets its proto field.
func TestConfigProto(t *testing.T) {
	off := func(p *ConfigProto) bool {
		return p.GetGraphOptions().GetRewriteOptions().GetMemoryOptimization() == cpb.RewriterConfig_NO_MEM_OPT
	}
	p := Config{}.Proto()
	if !off(p) || p.AllowSoftPlacement || p.DeviceCount != nil || p.GpuOptions != nil || p.IntraOpParallelismThreads != 0 {
		t.Errorf("zero Config: %v", p)
	}
	p = Config{TwoDevice: true}.Proto()
	if !off(p) || p.DeviceCount["CPU"] != 2 || p.IntraOpParallelismThreads != tfrun.IntraOpThreads || p.InterOpParallelismThreads != tfrun.InterOpThreads || !p.UsePerSessionThreads {
		t.Errorf("TwoDevice: %v", p)
	}
	p = Config{AllowGrowth: true, VisibleDevices: "1", GrapplerMemoryOptimizer: true, SoftPlacement: true, InterOpThreads: 3, IntraOpThreads: 4}.Proto()
	if off(p) || p.GraphOptions != nil || !p.GetGpuOptions().GetAllowGrowth() || p.GetGpuOptions().GetVisibleDeviceList() != "1" || !p.AllowSoftPlacement ||
		p.InterOpParallelismThreads != 3 || p.IntraOpParallelismThreads != 4 {
		t.Errorf("every field: %v", p)
	}
	if _, err := (Config{TwoDevice: true}).marshal(); err != nil {
		t.Error(err)
	}
}

// TestStepStatsOnConstructedGPU reads a GPU step constructed by profiling/fakegpu: the GPU's
// peak is its allocator's, the tracer's kernels and copies are counted, and the host is not
// a compute device.
func TestStepStatsOnConstructedGPU(t *testing.T) {
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fakegpu.Testdata() {
		g, err := c.Graph("..")
		if err != nil {
			t.Fatal(err)
		}
		step, err := fakegpu.Construct(g, p, fakegpu.Options{Fetch: []string{"train"}})
		if err != nil {
			t.Fatal(err)
		}
		st := NewStepStats(step.Metadata, false)
		peak, alloc, ok := profiling.GPUPeak(step.Metadata)
		if !ok || len(st.Devices) != 2 {
			t.Fatalf("%s: %d devices, GPU peak %v", c.File, len(st.Devices), ok)
		}
		host, gpu := st.Devices[0], st.Devices[1]
		if gpu.Device != fakegpu.GPUDevice || !gpu.Compute || gpu.Allocator != alloc || gpu.PeakBytes != peak || gpu.PeakBytes != step.Peak || gpu.Shared ||
			gpu.Kernels == 0 || gpu.CopiesToDevice != step.H2DCopies || gpu.CopiesToHost != step.D2HCopies || gpu.Nodes == 0 {
			t.Errorf("%s: GPU %+v; constructed peak %d, %d and %d copies", c.File, gpu, step.Peak, step.H2DCopies, step.D2HCopies)
		}
		if host.Device != fakegpu.HostDevice || host.Compute || host.Allocator == alloc {
			t.Errorf("%s: host %+v", c.File, host)
		}
	}
}

// TestWithoutRuntime: in a build without the tensorflow tag, Open and VisibleGPUs say that
// there is no runtime; with it they do not.
func TestWithoutRuntime(t *testing.T) {
	s, err := OpenGraphDef(nil, Config{TwoDevice: true})
	if haveRuntime {
		if err != nil {
			t.Fatalf("Open of an empty graph: %v", err)
		}
		s.Close()
		return
	}
	if !errors.Is(err, tfswap.ErrNoRuntime) {
		t.Errorf("Open: %v", err)
	}
	if _, err := VisibleGPUs(); !errors.Is(err, tfswap.ErrNoRuntime) {
		t.Errorf("VisibleGPUs: %v", err)
	}
}

// TestIsOutOfMemory recognises TensorFlow's out-of-memory failures and nothing else.
func TestIsOutOfMemory(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&Error{Op: "run", Code: 8, Message: "OOM when allocating tensor with shape[8,64]"}, true},
		{&Error{Op: "run", Code: 13, Message: "CUDNN_STATUS_ALLOC_FAILED"}, true},
		{&Error{Op: "run", Code: 3, Message: "You must feed a value for placeholder tensor 'input'"}, false},
		{errors.New("out of memory"), false},
	} {
		if got := IsOutOfMemory(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}
