package profiling

import (
	"sort"
	"strings"
)

// IsGPUAllocator reports whether an allocator name is a GPU's device memory allocator:
// TensorFlow names GPU N's BFC allocator "GPU_N_bfc"
// (tensorflow/core/common_runtime/gpu/gpu_process_state.cc). The pinned host allocator
// ("gpu_host_bfc") and the CPU's ("cpu") are not.
func IsGPUAllocator(name string) bool { return strings.HasPrefix(name, "GPU_") }

// GPUPeak returns the most device memory a GPU allocator had allocated during the traced
// step md (AllocatorPeaks: the largest allocator_bytes_in_use any node reported, which
// counts the variables, or the step's own replayed allocations when larger), over the GPU
// allocators, with the allocator's name. ok is false when no GPU allocator reported, as on a
// machine without a GPU or in the two-device emulation, where both devices share the host
// allocator.
func GPUPeak(md *RunMetadata) (peak int64, allocator string, ok bool) {
	peaks := AllocatorPeaks(md)
	names := make([]string, 0, len(peaks))
	for name := range peaks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if IsGPUAllocator(name) && (!ok || peaks[name] > peak) {
			peak, allocator, ok = peaks[name], name, true
		}
	}
	return peak, allocator, ok
}

// GPUTrace is what the device tracer recorded of one GPU in a traced step.
type GPUTrace struct {
	// Device is the tracer's device, "/device:GPU:0".
	Device string
	// Kernels counts the kernels and KernelNS sums their durations (from stream:all, or the
	// stream:S tracks when there is no stream:all).
	Kernels  int
	KernelNS int64
	// H2D and D2H count the host-to-device and device-to-host copies; H2DNS and D2HNS sum
	// their durations.
	H2D, D2H     int
	H2DNS, D2HNS int64
}

// GPUTraces returns, per GPU the device tracer recorded in md, its kernels and copies, by
// device name. It is empty when the tracer recorded nothing (no GPU, or CUPTI not loaded).
func GPUTraces(md *RunMetadata) map[string]*GPUTrace {
	out := map[string]*GPUTrace{}
	get := func(dev string) *GPUTrace {
		t := out[dev]
		if t == nil {
			t = &GPUTrace{Device: dev}
			out[dev] = t
		}
		return t
	}
	hasAll := map[string]bool{}
	for _, d := range md.GetStepStats().GetDevStats() {
		if parent, stream, ok := isTracerDevice(d.GetDevice()); ok && stream == "stream:all" {
			hasAll[parent] = true
		}
	}
	for _, d := range md.GetStepStats().GetDevStats() {
		parent, stream, ok := isTracerDevice(d.GetDevice())
		if !ok {
			continue
		}
		switch {
		case isKernelTrack(stream):
			if hasAll[parent] && stream != "stream:all" {
				continue
			}
			t := get(parent)
			for _, ns := range d.GetNodeStats() {
				t.Kernels++
				t.KernelNS += kernelTime(ns)
			}
		case strings.HasSuffix(stream, "<MemcpyH2D>"):
			t := get(parent)
			for _, ns := range d.GetNodeStats() {
				t.H2D++
				t.H2DNS += kernelTime(ns)
			}
		case strings.HasSuffix(stream, "<MemcpyD2H>"):
			t := get(parent)
			for _, ns := range d.GetNodeStats() {
				t.D2H++
				t.D2HNS += kernelTime(ns)
			}
		}
	}
	return out
}
