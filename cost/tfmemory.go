package cost

import (
	"fmt"
	"strconv"
	"strings"
)

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

// MinSystemMemoryTF1 returns the device memory the GPU device of TensorFlow releases before
// 2.5 keeps out of its allocator's reach on a GPU with available bytes free: 225 MiB when
// less than 2 GiB is available, otherwise the larger of 300 MiB and 6% of the available
// memory (MinSystemMemory of tensorflow/core/common_runtime/gpu/gpu_device.cc in those
// releases, kMinSystemMemoryFraction = 0.06). tensorflow/tensorflow#44810 (November 2020,
// after the 2.4 branch) replaced that 6% policy with the fixed reserves by compute
// capability of MinSystemMemory.
func MinSystemMemoryTF1(available int64) int64 {
	const mib = 1 << 20
	if available < 2<<30 {
		return 225 * mib
	}
	return max(300*mib, int64(float64(available)*0.06))
}

// parseTFVersion parses a TensorFlow release "MAJOR.MINOR" (a patch number is allowed and
// ignored): 1.x or 2.x.
func parseTFVersion(v string) (major, minor int, err error) {
	parts := strings.Split(strings.TrimSpace(v), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, fmt.Errorf("%q is not a TensorFlow release (want MAJOR.MINOR, e.g. %q)", v, TensorFlowVersion)
	}
	var nums [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, 0, fmt.Errorf("%q is not a TensorFlow release (want MAJOR.MINOR, e.g. %q)", v, TensorFlowVersion)
		}
		nums[i] = n
	}
	if nums[0] != 1 && nums[0] != 2 {
		return 0, 0, fmt.Errorf("TensorFlow %s: tfswap knows the GPU memory rules of releases 1.x and 2.x", v)
	}
	return nums[0], nums[1], nil
}

// tf1Rule reports whether the profile's TensorFlow release keeps memory back by the rule of
// releases before 2.5 (MinSystemMemoryTF1).
func tf1Rule(p *Profile) bool {
	if p.TensorFlow == "" {
		return false
	}
	maj, min, err := parseTFVersion(p.TensorFlow)
	return err == nil && (maj == 1 || (maj == 2 && min < 5))
}

// TFMemoryLimit returns the memory TensorFlow's allocator may hand out on the profile's GPU
// with default GPU options, for the release the graphs run on (Profile.TensorFlow; empty
// means TensorFlowVersion): its memory less MinSystemMemory for its compute capability, as
// SingleVirtualDeviceMemoryLimit in tensorflow/core/common_runtime/gpu/gpu_device.cc
// computes it from 2.5 on (the whole memory when the reserve would take all of it), or less
// MinSystemMemoryTF1 before. The profile's memory is taken as the memory available when
// TensorFlow starts; on a real GPU the CUDA context and the driver take some of it first,
// which no profile records. A profile without a compute capability (a device profile file
// may omit it) is given the largest reserve of the rule, Hopper's.
func TFMemoryLimit(p *Profile) int64 {
	var r int64
	if tf1Rule(p) {
		r = MinSystemMemoryTF1(p.MemoryBytes)
	} else {
		maj, ok := p.CCMajor()
		if !ok {
			maj = 9
		}
		r = MinSystemMemory(p.MemoryBytes, maj)
	}
	if r >= p.MemoryBytes {
		return p.MemoryBytes
	}
	return p.MemoryBytes - r
}
