//go:build tensorflow

package tfrun

import "testing"

// TestListDevices lists the devices of a real session: the two-device configuration has
// exactly its two CPUs, and VisibleGPUs agrees with the GPUs of a default session (none on
// a machine without a GPU).
func TestListDevices(t *testing.T) {
	devs, err := ListDevices(TwoDeviceConfigBytes())
	if err != nil {
		t.Fatal(err)
	}
	var cpus []string
	for _, d := range devs {
		if d.Type == "CPU" {
			cpus = append(cpus, d.Name)
		}
	}
	if len(cpus) != 2 || cpus[0] != "/job:localhost/replica:0/task:0/device:CPU:0" || cpus[1] != "/job:localhost/replica:0/task:0/device:CPU:1" {
		t.Errorf("two-device session lists CPUs %v (all: %+v)", cpus, devs)
	}
	gpus, err := VisibleGPUs()
	if err != nil {
		t.Fatal(err)
	}
	def, err := ListDevices(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := GPUs(def); len(gpus) != len(want) {
		t.Errorf("VisibleGPUs: %+v, a default session has %+v", gpus, want)
	}
	for _, g := range gpus {
		if g.MemoryBytes <= 0 {
			t.Errorf("GPU %s without a memory limit", g.Name)
		}
	}
	t.Logf("visible GPUs: %+v", gpus)
}
