package cost

import "fmt"

// TensorFlowVersion is the TensorFlow release whose GPU memory rules TFMemoryLimit follows:
// the release the graphs run on (requirements.txt pins tensorflow-cpu 2.18.0, and the Go
// bindings are generated from it).
const TensorFlowVersion = "2.18"

// MinSystemMemory returns the device memory TensorFlow 2.18's GPU device keeps out of its
// allocator's reach on a GPU whose free memory when TensorFlow creates the device is
// available bytes and whose CUDA compute capability has major version ccMajor: 225 MiB when
// less than 2 GiB is available; otherwise 500 MiB up to compute capability 6.x (Pascal and
// older), 1050 MiB on 7.x (Volta, Turing), 1536 MiB on 8.x (Ampere, Ada) and 1800 MiB from
// 9.0 on (Hopper).
//
// The rule is the function MinSystemMemory of tensorflow/core/common_runtime/gpu/gpu_device.cc
// in TensorFlow 2.18, an optimized build (debug builds double the reserve). The same file's
// SingleVirtualDeviceMemoryLimit subtracts it from the available memory (cudaMemGetInfo's free
// bytes) to get the memory limit of the GPU's BFC allocator, unless
// GPUOptions.per_process_gpu_memory_fraction, GPUOptions.Experimental.gpu_system_memory_size_in_mb
// or the environment variable TF_DEVICE_MIN_SYS_MEMORY_IN_MB say otherwise. The constants
// were checked against the 2.18.0 GPU wheel (libtensorflow_framework.so.2, where the function
// is inlined into BaseGPUDeviceFactory::CreateDevices); see docs/PLANNING.md.
func MinSystemMemory(available int64, ccMajor int) int64 {
	const mib = 1 << 20
	switch {
	case available < 2<<30:
		return 225 * mib
	case ccMajor <= 6:
		return 500 * mib
	case ccMajor == 7:
		return 1050 * mib
	case ccMajor == 8:
		return 1536 * mib
	}
	return 1800 * mib
}

// CCMajor returns the major version of the profile's compute capability, and false when the
// profile does not give one.
func (p *Profile) CCMajor() (int, bool) {
	var maj, min int
	if n, err := fmt.Sscanf(p.ComputeCapability, "%d.%d", &maj, &min); n != 2 || err != nil {
		return 0, false
	}
	return maj, true
}

// TFMemoryLimit returns the memory TensorFlow 2.18's allocator may hand out on the profile's
// GPU with default GPU options: its memory less MinSystemMemory for its compute capability,
// as SingleVirtualDeviceMemoryLimit in tensorflow/core/common_runtime/gpu/gpu_device.cc
// computes it (the whole memory when the reserve would take all of it). The profile's memory
// is taken as the memory available when TensorFlow starts; on a real GPU the CUDA context and
// the driver take some of it first, which no profile records. A profile without a compute
// capability (a device profile file may omit it) is given the largest reserve of the rule,
// Hopper's.
func TFMemoryLimit(p *Profile) int64 {
	maj, ok := p.CCMajor()
	if !ok {
		maj = 9
	}
	r := MinSystemMemory(p.MemoryBytes, maj)
	if r >= p.MemoryBytes {
		return p.MemoryBytes
	}
	return p.MemoryBytes - r
}
