package tfrun

import (
	"fmt"

	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// ConfigProto, RunOptions and RunMetadata are TensorFlow's session protos.
type (
	ConfigProto = cpb.ConfigProto
	RunOptions  = cpb.RunOptions
	RunMetadata = cpb.RunMetadata
)

// Thread pool sizes of TwoDeviceConfig.
const (
	// InterOpThreads lets two nodes run at once, so the two emulated devices really run
	// concurrently and the order of events in a trace is not forced by a single thread.
	// Results do not depend on it: the order in which independent nodes run does not change
	// any node's arithmetic.
	InterOpThreads = 2
	// IntraOpThreads is 1 so that every kernel (matmul, convolution, reductions) computes
	// on one thread. Eigen splits work into shards by thread count, and summation order,
	// hence float rounding, follows the sharding; one thread gives one fixed order on every
	// machine. The intra-op pool is process-wide and sized by the first session, so all
	// sessions of a test process should use this same value.
	IntraOpThreads = 1
)

// TwoDeviceConfig returns the session configuration of the two-device emulation: two CPU
// devices (/device:CPU:0 as "host", /device:CPU:1 as "device"), fixed thread pools (see
// InterOpThreads, IntraOpThreads), each session with its own inter-op pool (otherwise the
// process-wide pool is sized by whichever session came first), and no soft placement, so a
// node placed on a device that cannot run it fails instead of moving silently.
func TwoDeviceConfig() *ConfigProto {
	return &ConfigProto{
		DeviceCount:               map[string]int32{"CPU": 2},
		InterOpParallelismThreads: InterOpThreads,
		IntraOpParallelismThreads: IntraOpThreads,
		UsePerSessionThreads:      true,
		AllowSoftPlacement:        false,
	}
}

// MarshalConfig returns the serialized ConfigProto, deterministically.
func MarshalConfig(c *ConfigProto) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("tfrun: marshal ConfigProto: %w", err)
	}
	return b, nil
}

// TwoDeviceConfigBytes returns TwoDeviceConfig serialized.
func TwoDeviceConfigBytes() []byte {
	b, err := MarshalConfig(TwoDeviceConfig())
	if err != nil {
		panic(err) // a ConfigProto without unknown fields always marshals
	}
	return b
}

// TraceOptions returns the RunOptions of a traced step: FULL_TRACE step stats and the
// partition graphs (the graphs after Grappler and partitioning, with _Send/_Recv nodes).
func TraceOptions() *RunOptions {
	return &RunOptions{TraceLevel: cpb.RunOptions_FULL_TRACE, OutputPartitionGraphs: true}
}
