package tfrun

import (
	"reflect"
	"testing"
)

// TestGPUs keeps the GPUs of a device list, in order, whatever the case of their type.
func TestGPUs(t *testing.T) {
	devs := []RuntimeDevice{{Name: "/device:CPU:0", Type: "CPU"}, {Name: "/device:GPU:0", Type: "GPU", MemoryBytes: 1 << 30},
		{Name: "/device:TPU:0", Type: "TPU"}, {Name: "/device:GPU:1", Type: "gpu", MemoryBytes: 2 << 30}}
	got := GPUs(devs)
	if want := []RuntimeDevice{devs[1], devs[3]}; !reflect.DeepEqual(got, want) {
		t.Errorf("GPUs = %+v, want %+v", got, want)
	}
	if GPUs(devs[:1]) != nil {
		t.Error("a CPU-only list has GPUs")
	}
}
