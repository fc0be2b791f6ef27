//go:build tensorflow

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/gpucheck"
	"github.com/tfswap/tfswap/tfrun"
)

// hasNvidiaGPU reports whether this machine shows an NVIDIA GPU, where `tfswap gpu-check`
// without a fake device list would run the whole check.
func hasNvidiaGPU() bool {
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		return true
	}
	_, err := os.Stat("/proc/driver/nvidia")
	return err == nil
}

func writeDevices(t *testing.T, path string, devs []tfrun.DeviceInfo) string {
	t.Helper()
	data, err := json.Marshal(devs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var cpu0 = tfrun.DeviceInfo{Name: "/job:localhost/replica:0/task:0/device:CPU:0", Type: "CPU", MemoryBytes: 256 << 20}

// TestGPUCheckWithoutGPU: on a machine without a GPU, gpu-check says so in one line and
// exits 0, from the runtime's own device list and from a CPU-only list.
func TestGPUCheckWithoutGPU(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runTF(t, "gpu-check", "--work-dir", dir, "--devices-file", writeDevices(t, filepath.Join(dir, "cpu.json"), []tfrun.DeviceInfo{cpu0}))
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.HasPrefix(stdout, "gpu-check: no GPU found: TensorFlow ") {
		t.Errorf("CPU-only list: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if hasNvidiaGPU() {
		t.Log("this machine has an NVIDIA GPU: gpu-check with the runtime's device list not run")
		return
	}
	code, stdout, stderr = runTF(t, "gpu-check", "--work-dir", dir)
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, "no GPU found") || !strings.Contains(stdout, "/device:CPU:0 (CPU)") {
		t.Errorf("runtime's list: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runTF(t, "gpu-check", "--steps", "0"); code != 2 || !strings.Contains(stderr, "--steps") {
		t.Errorf("--steps 0: exit %d\n%s", code, stderr)
	}
}

// TestGPUCheckOnFakeGPU runs the whole command with a fake device list (a V100 with 4 MiB for
// TensorFlow) and a stand-in generator of a small MLP (gpucheck/testdata/tiny_large.py,
// large.py with one more model): B0 is searched on generated graphs, the unswapped graph and
// the plans train in worker processes (on this machine's CPU: nothing to measure on a GPU
// allocator), the swapped graph trains bit-identically to the unswapped one, and the
// report is written as JSON and Markdown.
func TestGPUCheckOnFakeGPU(t *testing.T) {
	if os.Getenv("TFSWAP_PYTHON") == "" {
		t.Skip("TFSWAP_PYTHON is not set (source .tfenv)")
	}
	dir := t.TempDir()
	gpu := tfrun.DeviceInfo{Name: "/job:localhost/replica:0/task:0/device:GPU:0", Type: "GPU", MemoryBytes: 4 << 20,
		Description: "device: 0, name: Tesla V100-SXM2-16GB, pci bus id: 0000:00:04.0, compute capability: 7.0"}
	devs := writeDevices(t, filepath.Join(dir, "gpu.json"), []tfrun.DeviceInfo{cpu0, gpu})
	cmd := exec.Command(tfswapBinary(t), "gpu-check", "--devices-file", devs, "--generator", "gpucheck/testdata/tiny_large.py",
		"--models", "mlp", "--multiples", "1,2", "--warmup", "1", "--steps", "2", "--identity-steps", "2", "--work-dir", dir)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "TF_CPP_MIN_LOG_LEVEL=2")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	for _, s := range []string{"### Measured on GPU Tesla V100-SXM2-16GB", "| model | batch | graph |", "- mlp: B0 = ", "**bit-identical**", "report: "} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "mlp: searching B0") {
		t.Errorf("no progress on stderr:\n%s", stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep gpucheck.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Profile != "v100-16gb" || rep.Budget != 4<<20 || len(rep.Models) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	m := rep.Models[0]
	if m.B0 < 4 || len(m.Rows) != 4 || m.Identity == nil || m.Identity.Status != gpucheck.IdentityIdentical {
		t.Fatalf("model: %+v", m)
	}
	planned := 0
	for _, r := range m.Rows {
		// On the CPU every graph trains; no GPU allocator reports.
		if r.Graph == "unswapped" && (r.Status != gpucheck.StatusRan || r.MeasuredStepNS <= 0 || r.MeasuredPeak != 0) {
			t.Errorf("row %+v", r)
		}
		if r.Graph == "auto" && r.Swaps+r.Recomputes > 0 {
			planned++
			if r.Status != gpucheck.StatusRan || r.MeasuredOverhead == nil {
				t.Errorf("planned row %+v", r)
			}
		}
	}
	if planned == 0 {
		t.Errorf("nothing was planned at 2 x B0: %+v", m.Rows)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.md")); err != nil {
		t.Error(err)
	}
}
