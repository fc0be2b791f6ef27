package tfrun

import "strings"

// RuntimeDevice is one device of a TensorFlow session as the runtime lists it
// (TF_SessionListDevices).
type RuntimeDevice struct {
	// Name is the device's full name, "/job:localhost/replica:0/task:0/device:GPU:0".
	Name string
	// Type is its type: "CPU", "GPU", ...
	Type string
	// MemoryBytes is the memory its allocator may hand out. For a GPU it is the memory limit
	// of TensorFlow's BFC allocator: the free memory when the device was created less
	// TensorFlow's reserve (MinSystemMemory in tensorflow/core/common_runtime/gpu/
	// gpu_device.cc), or what the session's GPUOptions ask for.
	MemoryBytes int64
}

// GPUs returns the devices of type GPU among devs, in order.
func GPUs(devs []RuntimeDevice) []RuntimeDevice {
	var out []RuntimeDevice
	for _, d := range devs {
		if strings.EqualFold(d.Type, "GPU") {
			out = append(out, d)
		}
	}
	return out
}
