package tfrun

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
)

// DeviceInfo is one device of a TensorFlow runtime's device list: what a session reports
// for it (TF_SessionListDevices, TensorFlow's DeviceAttributes).
type DeviceInfo struct {
	// Name is the full device name, "/job:localhost/replica:0/task:0/device:GPU:0".
	Name string `json:"name"`
	// Type is the device type, "GPU" or "CPU".
	Type string `json:"type"`
	// MemoryBytes is the device's memory limit: for a GPU, what TensorFlow's allocator may
	// hand out (the free memory at start less TensorFlow's reserve).
	MemoryBytes int64 `json:"memory_bytes"`
	// Description is the runtime's physical_device_desc. For a GPU TensorFlow writes
	// "device: 0, name: NAME, pci bus id: BUS, compute capability: X.Y"
	// (tensorflow/core/common_runtime/gpu/gpu_device.cc, GetShortDeviceDescription); it is
	// empty for a CPU.
	Description string `json:"description,omitempty"`
}

// GPU is a GPU a TensorFlow runtime sees, with the fields of its description parsed.
type GPU struct {
	// Device is the full device name and Index its ordinal (N of /device:GPU:N).
	Device string `json:"device"`
	Index  int    `json:"index"`
	// Model is the name the driver gives the GPU ("Tesla V100-SXM2-16GB"); PCIBusID its bus
	// address; ComputeCapability its CUDA compute capability ("7.0"). They are empty when the
	// description did not have them.
	Model             string `json:"model"`
	PCIBusID          string `json:"pci_bus_id,omitempty"`
	ComputeCapability string `json:"compute_capability"`
	// MemoryBytes is TensorFlow's memory limit of the GPU (DeviceInfo.MemoryBytes).
	MemoryBytes int64 `json:"memory_bytes"`
	// Description is the runtime's description, unparsed.
	Description string `json:"description,omitempty"`
}

// DeviceLister lists the devices of a TensorFlow runtime. ListDevices (built with the
// "tensorflow" tag) is the real one; tests pass fixed lists.
type DeviceLister func() ([]DeviceInfo, error)

// gpuDescription matches the GPU description TensorFlow writes. The model name may itself
// hold commas, so it runs up to the last ", pci bus id: ".
var gpuDescription = regexp.MustCompile(`^device: (\d+), name: (.*), pci bus id: ([^,]*), compute capability: (\d+\.\d+)`)

// ParseGPUDescription reads a GPU's physical_device_desc: the model name, the PCI bus id and
// the compute capability. ok is false when desc is not in TensorFlow's format.
func ParseGPUDescription(desc string) (model, pciBusID, computeCapability string, ok bool) {
	m := gpuDescription.FindStringSubmatch(strings.TrimSpace(desc))
	if m == nil {
		return "", "", "", false
	}
	return m[2], m[3], m[4], true
}

// GPUs returns the GPUs of a device list, by ordinal. A GPU whose description is not in
// TensorFlow's format is kept, with its model and compute capability empty.
func GPUs(devs []DeviceInfo) []GPU {
	var out []GPU
	for _, d := range devs {
		if !strings.EqualFold(d.Type, "GPU") {
			continue
		}
		idx := -1
		if pd, err := graphdef.ParseDevice(d.Name); err == nil && strings.EqualFold(pd.Type, "GPU") {
			idx = pd.Index
		}
		g := GPU{Device: d.Name, Index: idx, MemoryBytes: d.MemoryBytes, Description: d.Description}
		g.Model, g.PCIBusID, g.ComputeCapability, _ = ParseGPUDescription(d.Description)
		out = append(out, g)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// DetectGPUs lists the runtime's devices with list and returns its GPUs (none on a machine
// without one, or with a TensorFlow built without CUDA).
func DetectGPUs(list DeviceLister) ([]GPU, error) {
	devs, err := list()
	if err != nil {
		return nil, fmt.Errorf("tfrun: listing the runtime's devices: %w", err)
	}
	return GPUs(devs), nil
}

// String describes the GPU in one line: "GPU:0 Tesla V100-SXM2-16GB, compute capability
// 7.0, 15.50 GiB for TensorFlow".
func (g GPU) String() string {
	model := g.Model
	if model == "" {
		model = "(no description)"
	}
	cc := g.ComputeCapability
	if cc == "" {
		cc = "unknown"
	}
	return fmt.Sprintf("GPU:%d %s, compute capability %s, %s for TensorFlow", g.Index, model, cc, units.FormatBytes(g.MemoryBytes))
}
