package gpucheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/profiling/fakegpu"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// TestMeasureOnGPUSteps reads the constructed GPU steps kept in profiling/fakegpu/testdata
// (constructed from TensorFlow's step-stats format, not recorded): the GPU allocator's peak,
// the step's own peak, the kernels and the copies.
func TestMeasureOnGPUSteps(t *testing.T) {
	var peaks []int64
	for _, c := range fakegpu.Testdata() {
		md, err := fakegpu.LoadMetadata(c.Path(".."))
		if err != nil {
			t.Fatal(err)
		}
		m, ok := Measure(md)
		if !ok || m.Allocator != "GPU_0_bfc" || m.Peak <= m.StepPeak || m.StepPeak <= 0 || m.GPU == nil || m.GPU.Kernels == 0 || m.GPU.Device != "/device:GPU:0" {
			t.Fatalf("%s: %+v", c.File, m)
		}
		if c.Swapped && (m.GPU.D2H == 0 || m.GPU.H2D == 0) {
			t.Errorf("%s: no swap copies in %+v", c.File, m.GPU)
		}
		peaks = append(peaks, m.Peak)
	}
	if peaks[1] >= peaks[0] {
		t.Errorf("swapped peak %d not below %d", peaks[1], peaks[0])
	}
	if _, ok := Measure(&cpb.RunMetadata{}); ok {
		t.Error("a step without a GPU allocator measured")
	}
}

func TestClassify(t *testing.T) {
	// TensorFlow's message (op_kernel.cc, OpKernelContext::allocate_tensor) as the executor
	// returns it.
	oom := "OOM when allocating tensor with shape[256,64,112,112] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n\t [[{{node conv1/Conv2D}}]]"
	for _, c := range []struct{ code, msg, want string }{
		{"RESOURCE_EXHAUSTED", oom, StatusOOM},
		{"INTERNAL", "cuDNN launch failure : input shape ([256,3,224,224]) CUDNN_STATUS_ALLOC_FAILED", StatusOOM},
		{"INTERNAL", "Failed to allocate 123 bytes", StatusOOM},
		{"INVALID_ARGUMENT", "Incompatible shapes", StatusFailed},
		{"UNIMPLEMENTED", "Determinism is not yet supported", StatusFailed},
	} {
		if got := Classify(c.code, c.msg); got != c.want {
			t.Errorf("%s %q: %s, want %s", c.code, c.msg, got, c.want)
		}
	}
}

// TestSessionConfig: the runs' sessions switch Grappler's memory optimizer off.
func TestSessionConfig(t *testing.T) {
	c := &cpb.ConfigProto{}
	if err := proto.Unmarshal(SessionConfig(), c); err != nil {
		t.Fatal(err)
	}
	if c.GetGraphOptions().GetRewriteOptions().GetMemoryOptimization() != cpb.RewriterConfig_NO_MEM_OPT || !c.GetAllowSoftPlacement() {
		t.Errorf("%v", c)
	}
}

// TestProcessRunner runs a stand-in worker (a shell script) the way the check runs tfswap's:
// its result is read back, a worker killed by a signal is a crashed run, one that writes
// nothing is an error naming its log, and deterministic runs get TF_DETERMINISTIC_OPS=1.
func TestProcessRunner(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "worker.sh")
	script := `#!/bin/sh
[ "$1" = gpu-check-worker ] || exit 9
case "$MODE" in
ok) printf '{"status":"ran","error":"det=%s","step_ns":[5,7,6]}' "$TF_DETERMINISTIC_OPS" > "$3" ;;
kill) echo "about to die"; kill -9 $$ ;;
silent) echo "nothing written" >&2; exit 3 ;;
esac
`
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(mode string, det bool) (*RunResult, error) {
		r := &ProcessRunner{Exe: exe, Dir: filepath.Join(dir, "runs"), Env: []string{"MODE=" + mode}}
		return r.Run(RunSpec{Label: "m_b1." + mode, Graph: "g.pb", Deterministic: det})
	}
	res, err := run("ok", true)
	if err != nil || res.Status != StatusRan || res.Error != "det=1" || len(res.StepNS) != 3 {
		t.Errorf("ok: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", "m_b1.ok.spec.json")); err != nil {
		t.Errorf("no spec file: %v", err)
	}
	res, err = run("ok", false)
	if err != nil || res.Error != "det=" {
		t.Errorf("not deterministic: %+v, %v", res, err)
	}
	res, err = run("kill", false)
	if err != nil || res.Status != StatusCrashed || !strings.Contains(res.Error, "killed") || !strings.Contains(res.Error, "about to die") {
		t.Errorf("kill: %+v, %v", res, err)
	}
	_, err = run("silent", false)
	if err == nil || !strings.Contains(err.Error(), "wrote no result") || !strings.Contains(err.Error(), "m_b1.silent.log") || !strings.Contains(err.Error(), "nothing written") {
		t.Errorf("silent: %v", err)
	}
}
