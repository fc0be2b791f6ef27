package tfrun

import (
	"errors"
	"strings"
	"testing"
)

// v100Desc is the physical_device_desc TensorFlow writes for a V100 (the format of
// gpu_device.cc's GetShortDeviceDescription).
const v100Desc = "device: 0, name: Tesla V100-SXM2-16GB, pci bus id: 0000:00:1e.0, compute capability: 7.0"

func TestParseGPUDescription(t *testing.T) {
	cases := []struct {
		desc, model, bus, cc string
		ok                   bool
	}{
		{v100Desc, "Tesla V100-SXM2-16GB", "0000:00:1e.0", "7.0", true},
		{"device: 1, name: NVIDIA A100-SXM4-40GB, pci bus id: 0000:07:00.0, compute capability: 8.0", "NVIDIA A100-SXM4-40GB", "0000:07:00.0", "8.0", true},
		// A model name with a comma in it keeps the comma.
		{"device: 0, name: Acme GPU, rev 2, pci bus id: 0000:01:00.0, compute capability: 12.0", "Acme GPU, rev 2", "0000:01:00.0", "12.0", true},
		{"", "", "", "", false},
		{"device: 0, name: X", "", "", "", false},
	}
	for _, c := range cases {
		model, bus, cc, ok := ParseGPUDescription(c.desc)
		if model != c.model || bus != c.bus || cc != c.cc || ok != c.ok {
			t.Errorf("%q: got %q %q %q %v", c.desc, model, bus, cc, ok)
		}
	}
}

// TestDetectGPUsOnFakeDeviceLists checks GPU detection on device lists shaped like the
// ones TensorFlow reports: a CPU-only machine, one GPU, and two GPUs listed out of order
// with one description TensorFlow could not fill.
func TestDetectGPUsOnFakeDeviceLists(t *testing.T) {
	cpu := DeviceInfo{Name: "/job:localhost/replica:0/task:0/device:CPU:0", Type: "CPU", MemoryBytes: 268435456}
	none, err := DetectGPUs(func() ([]DeviceInfo, error) { return []DeviceInfo{cpu}, nil })
	if err != nil || len(none) != 0 {
		t.Fatalf("CPU only: %v, %v", none, err)
	}
	one, err := DetectGPUs(func() ([]DeviceInfo, error) {
		return []DeviceInfo{cpu, {Name: "/job:localhost/replica:0/task:0/device:GPU:0", Type: "GPU", MemoryBytes: 15_510_929_408, Description: v100Desc}}, nil
	})
	if err != nil || len(one) != 1 {
		t.Fatalf("one GPU: %v, %v", one, err)
	}
	g := one[0]
	if g.Index != 0 || g.Model != "Tesla V100-SXM2-16GB" || g.ComputeCapability != "7.0" || g.PCIBusID != "0000:00:1e.0" || g.MemoryBytes != 15_510_929_408 {
		t.Errorf("one GPU: %+v", g)
	}
	if s := g.String(); s != "GPU:0 Tesla V100-SXM2-16GB, compute capability 7.0, 14.45 GiB for TensorFlow" {
		t.Errorf("String: %q", s)
	}
	two, err := DetectGPUs(func() ([]DeviceInfo, error) {
		return []DeviceInfo{
			{Name: "/job:localhost/replica:0/task:0/device:GPU:1", Type: "GPU", MemoryBytes: 1 << 34, Description: "odd"},
			cpu,
			{Name: "/job:localhost/replica:0/task:0/device:GPU:0", Type: "GPU", MemoryBytes: 1 << 33, Description: v100Desc},
		}, nil
	})
	if err != nil || len(two) != 2 || two[0].Index != 0 || two[1].Index != 1 || two[1].Model != "" || two[1].ComputeCapability != "" {
		t.Fatalf("two GPUs: %+v, %v", two, err)
	}
	if !strings.Contains(two[1].String(), "(no description), compute capability unknown") {
		t.Errorf("String without a description: %q", two[1].String())
	}
	_, err = DetectGPUs(func() ([]DeviceInfo, error) { return nil, errors.New("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("lister error: %v", err)
	}
}
