package gpucheck

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/tfrun"
)

const gib = int64(1) << 30

// fakeGPU is a GPU as TensorFlow would list it: the description gpu_device.cc writes and a
// memory limit below the card's memory (what TensorFlow leaves after its reserve).
func fakeGPU(model, cc string, limit int64) tfrun.GPU {
	devs := []tfrun.DeviceInfo{
		{Name: "/job:localhost/replica:0/task:0/device:CPU:0", Type: "CPU", MemoryBytes: 256 << 20},
		{Name: "/job:localhost/replica:0/task:0/device:GPU:0", Type: "GPU", MemoryBytes: limit,
			Description: "device: 0, name: " + model + ", pci bus id: 0000:00:04.0, compute capability: " + cc},
	}
	return tfrun.GPUs(devs)[0]
}

// TestMatchProfile maps GPUs, as a fake device list describes them, to built-in profiles.
func TestMatchProfile(t *testing.T) {
	cases := []struct {
		gpu     tfrun.GPU
		arch    string
		profile string
		by      string
	}{
		{fakeGPU("Tesla V100-SXM2-16GB", "7.0", 15*gib), "amd64", "v100-16gb", "name"},
		{fakeGPU("Tesla V100-SXM2-32GB", "7.0", 31*gib), "amd64", "v100-32gb", "name"},
		{fakeGPU("Tesla V100-SXM2-16GB", "7.0", 15*gib), "ppc64le", "v100-16gb-nvlink", "name"},
		{fakeGPU("NVIDIA A100-SXM4-40GB", "8.0", 38*gib), "amd64", "a100-40gb", "name"},
		{fakeGPU("NVIDIA A100 80GB PCIe", "8.0", 77*gib), "amd64", "a100-80gb", "name"},
		{fakeGPU("NVIDIA H100 80GB HBM3", "9.0", 77*gib), "amd64", "h100", "name"},
		{fakeGPU("NVIDIA GH200 480GB", "9.0", 93*gib), "arm64", "gh200", "name"},
		{fakeGPU("NVIDIA GeForce GTX 1080 Ti", "6.1", 10*gib), "amd64", "gtx1080ti", "name"},
		{fakeGPU("GeForce GTX TITAN X", "5.2", 11*gib), "amd64", "titanx", "name"},
		// The Pascal TITAN X is not the Maxwell one the titanx profile describes.
		{fakeGPU("NVIDIA TITAN X (Pascal)", "6.1", 11*gib), "amd64", "gtx1080ti", "capability"},
		{fakeGPU("NVIDIA GeForce RTX 3090", "8.6", 23*gib), "amd64", "a100-40gb", "major"},
		{fakeGPU("Tesla T4", "7.5", 14*gib), "amd64", "v100-16gb", "major"},
		{fakeGPU("Tesla K80", "3.7", 11*gib), "amd64", "titanx", "nearest"},
		{tfrun.GPU{Device: "/device:GPU:0", MemoryBytes: 30 * gib}, "amd64", "v100-32gb", "memory"},
	}
	for _, c := range cases {
		m, err := MatchProfile(c.gpu, cost.Profiles(), c.arch)
		if err != nil {
			t.Fatal(err)
		}
		if m.Profile.Name != c.profile || m.By != c.by || m.Reason == "" {
			t.Errorf("%s (%s, %s): %s by %s (%s), want %s by %s", c.gpu.Model, c.gpu.ComputeCapability, c.arch, m.Profile.Name, m.By, m.Reason, c.profile, c.by)
		}
	}
	m, _ := MatchProfile(cases[0].gpu, cost.Profiles(), "amd64")
	if !strings.Contains(m.Reason, `"Tesla V100-SXM2-16GB"`) || !strings.Contains(m.Reason, "v100-16gb, v100-32gb") {
		t.Errorf("reason: %s", m.Reason)
	}
	if _, err := MatchProfile(cases[0].gpu, nil, "amd64"); err == nil {
		t.Error("no profiles: no error")
	}
}
