package session

import (
	"github.com/tfswap/tfswap/tfrun"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// ConfigProto is TensorFlow's session configuration proto.
type ConfigProto = cpb.ConfigProto

// RunMetadata is TensorFlow's record of a traced step: step stats and partition graphs.
type RunMetadata = cpb.RunMetadata

// Config says how a session is configured. The zero Config is for a machine with GPUs:
// TensorFlow's defaults, with Grappler's memory optimizer off and no soft placement.
type Config struct {
	// TwoDevice selects the two-device CPU emulation for machines without a GPU: two CPU
	// devices, /device:CPU:0 the host and /device:CPU:1 standing for the GPU (place the
	// graph there, tfswap.Model.Place, and plan with Options.ComputeDevice
	// "/device:CPU:1"), with one intra-op and two inter-op threads per session, so that
	// the results are the same to the bit from run to run. Both devices share one
	// allocator: the emulation shows placement, transfers and timing, not memory savings.
	TwoDevice bool
	// AllowGrowth lets TensorFlow's GPU allocator take memory as it needs it instead of all
	// it may use at the start (GPUOptions.allow_growth). The allocator's limit, the budget
	// a plan is made for, is the same.
	AllowGrowth bool
	// VisibleDevices lists the GPUs the session uses, by index ("0", "0,1";
	// GPUOptions.visible_device_list). Empty means every GPU.
	VisibleDevices string
	// GrapplerMemoryOptimizer leaves Grappler's memory optimizer at TensorFlow's default,
	// whose swapping heuristics add swaps of their own to a graph TensorFlow judges too
	// large. By default it is off, so that a step runs the plan as tfswap made it.
	GrapplerMemoryOptimizer bool
	// SoftPlacement lets TensorFlow move a node placed on a device that cannot run it
	// (ConfigProto.allow_soft_placement). By default such a node is an error.
	SoftPlacement bool
	// InterOpThreads and IntraOpThreads size the session's thread pools; zero means
	// TensorFlow's default, or in the two-device emulation 2 and 1.
	InterOpThreads, IntraOpThreads int
}

// Proto returns the ConfigProto of c.
func (c Config) Proto() *ConfigProto {
	p := &ConfigProto{}
	if c.TwoDevice {
		p = tfrun.TwoDeviceConfig()
	}
	p.AllowSoftPlacement = c.SoftPlacement
	if c.InterOpThreads > 0 {
		p.InterOpParallelismThreads = int32(c.InterOpThreads)
		p.UsePerSessionThreads = true
	}
	if c.IntraOpThreads > 0 {
		p.IntraOpParallelismThreads = int32(c.IntraOpThreads)
	}
	if c.AllowGrowth || c.VisibleDevices != "" {
		p.GpuOptions = &cpb.GPUOptions{AllowGrowth: c.AllowGrowth, VisibleDeviceList: c.VisibleDevices}
	}
	if !c.GrapplerMemoryOptimizer {
		p.GraphOptions = &cpb.GraphOptions{RewriteOptions: &cpb.RewriterConfig{MemoryOptimization: cpb.RewriterConfig_NO_MEM_OPT}}
	}
	return p
}

// marshal serialises c's ConfigProto, deterministically.
func (c Config) marshal() ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(c.Proto())
}
