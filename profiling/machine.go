package profiling

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/tfswap/tfswap/cost"
)

// Machine describes the computer the program runs on: host name, GOOS and GOARCH, the CPU
// model (from /proc/cpuinfo where there is one), the logical CPU count, and the GPUs
// nvidia-smi lists when it is installed (none otherwise). oneDNN says whether TensorFlow's
// oneDNN optimizations are on.
func Machine(oneDNN bool) *cost.MeasuredMachine {
	m := &cost.MeasuredMachine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), OneDNN: &oneDNN}
	m.Hostname, _ = os.Hostname()
	m.CPU = cpuModel()
	m.GPUs = nvidiaGPUs()
	return m
}

// cpuModel returns the "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// nvidiaGPUs returns the GPU names nvidia-smi reports, or nil when it is not installed or
// fails (within two seconds).
func nvidiaGPUs() []string {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu=name", "--format=csv,noheader").Output()
	if err != nil {
		return nil
	}
	var gpus []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			gpus = append(gpus, l)
		}
	}
	return gpus
}

// DeviceModel describes the hardware of a device the runtime names: for a GPU the
// nvidia-smi name of the GPU with that index, for a CPU the machine's CPU model, or "".
func DeviceModel(m *cost.MeasuredMachine, device string) string {
	d := ShortDevice(device)
	switch {
	case strings.Contains(d, "GPU:"):
		i := strings.LastIndexByte(d, ':')
		idx := 0
		for _, c := range d[i+1:] {
			if c < '0' || c > '9' {
				return ""
			}
			idx = idx*10 + int(c-'0')
		}
		if m != nil && idx < len(m.GPUs) {
			return m.GPUs[idx]
		}
	case strings.Contains(d, "CPU:") && m != nil:
		return m.CPU
	}
	return ""
}
