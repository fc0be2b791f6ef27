//go:build tensorflow

package tfrun

import (
	"strings"
	"testing"
)

// TestListDevices lists the devices of the two-device emulation through the C API and the
// DeviceAttributes behind it: two CPUs, each with the memory limit the C API reports (Devices
// checks that the attributes it read match the C API's name and limit, device by device),
// an empty description (TensorFlow describes only GPUs), and no GPU on this CPU wheel.
func TestListDevices(t *testing.T) {
	devs, err := ListDevices(TwoDeviceConfigBytes())
	if err != nil {
		t.Fatal(err)
	}
	var cpus []string
	for _, d := range devs {
		if d.Type == "CPU" {
			cpus = append(cpus, ShortDevice(d.Name))
		}
		if d.Type == "CPU" && (d.MemoryBytes <= 0 || d.Description != "") {
			t.Errorf("%+v", d)
		}
	}
	if strings.Join(cpus, ",") != "/device:CPU:0,/device:CPU:1" {
		t.Errorf("CPU devices %v in %+v", cpus, devs)
	}
	if gpus := GPUs(devs); len(gpus) != 0 {
		t.Errorf("the CPU wheel lists GPUs: %+v", gpus)
	}
	visible, err := VisibleGPUs()
	if err != nil || len(visible) != 0 {
		t.Errorf("VisibleGPUs on the CPU wheel: %+v, %v", visible, err)
	}
}
