package gpucheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/tfrun"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// RunSpec says what one training run does: a graph, trained in a fresh process for Warmup
// untimed and Steps timed steps, then one traced step (Trace) whose RunMetadata gives the
// GPU's peak. With Deterministic the process runs with TF_DETERMINISTIC_OPS=1 and reports
// digests of every loss and of every variable after training, for bit-for-bit comparison.
type RunSpec struct {
	// Label names the run in reports and file names ("resnet50_b64.auto").
	Label string `json:"label"`
	// Graph is the GraphDef file; Init, Train and Loss name its init op, train op and loss
	// tensor; Variables are the tensors that read the trainable variables.
	Graph     string   `json:"graph"`
	Init      string   `json:"init"`
	Train     string   `json:"train"`
	Loss      string   `json:"loss"`
	Variables []string `json:"variables,omitempty"`
	// Seed seeds the random feeds (the same in every run of a model at a batch).
	Seed          uint64 `json:"seed"`
	Warmup        int    `json:"warmup"`
	Steps         int    `json:"steps"`
	Trace         bool   `json:"trace"`
	Deterministic bool   `json:"deterministic"`
	// TraceFile, when set, receives the traced step's RunMetadata (binary proto).
	TraceFile string `json:"trace_file,omitempty"`
}

// Run statuses.
const (
	StatusRan     = "ran"
	StatusOOM     = "out of memory"
	StatusFailed  = "failed"
	StatusCrashed = "crashed"
)

// RunResult is what a run reports.
type RunResult struct {
	// Status is StatusRan, StatusOOM (TensorFlow reported RESOURCE_EXHAUSTED, or an
	// allocation failure under another code), StatusFailed or StatusCrashed (the process
	// died); Code and Error are TensorFlow's status code name and message.
	Status string `json:"status"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error,omitempty"`
	// Devices are the session's devices, as TensorFlow listed them.
	Devices []DeviceSummary `json:"devices,omitempty"`
	// StepNS are the timed steps' wall times.
	StepNS []int64 `json:"step_ns,omitempty"`
	// Measurement is what the traced step's RunMetadata says (Trace).
	Measurement *Measurement `json:"measurement,omitempty"`
	// Losses are the losses of the timed steps.
	Losses []float64 `json:"losses,omitempty"`
	// LossDigests and VariableDigests are SHA-256 digests of every timed step's loss and of
	// every variable after training (Deterministic).
	LossDigests     []string `json:"loss_digests,omitempty"`
	VariableDigests []string `json:"variable_digests,omitempty"`
}

// DeviceSummary is one device of a run's session.
type DeviceSummary struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	MemoryBytes int64  `json:"memory_bytes"`
}

// Measurement is what a traced step's RunMetadata says about the GPU.
type Measurement struct {
	// Peak is the GPU allocator's peak (profiling.GPUPeak: the largest bytes in use, the
	// variables included) and Allocator its name; StepPeak is the peak of the step's own
	// allocations, replayed from the allocation records.
	Peak      int64  `json:"peak_bytes"`
	Allocator string `json:"allocator"`
	StepPeak  int64  `json:"step_peak_bytes"`
	// GPU is what the device tracer recorded (nil without tracer entries).
	GPU *profiling.GPUTrace `json:"gpu_trace,omitempty"`
}

// Measure reads a traced step's RunMetadata. ok is false when no GPU allocator reported.
func Measure(md *profiling.RunMetadata) (*Measurement, bool) {
	peak, alloc, ok := profiling.GPUPeak(md)
	if !ok {
		return nil, false
	}
	m := &Measurement{Peak: peak, Allocator: alloc, StepPeak: profiling.StepPeaks(md)[alloc]}
	traces := profiling.GPUTraces(md)
	names := make([]string, 0, len(traces))
	for n := range traces {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 {
		m.GPU = traces[names[0]]
	}
	return m, true
}

// Classify returns the status of a run that failed with TensorFlow status code (its name,
// "RESOURCE_EXHAUSTED") and message: StatusOOM for RESOURCE_EXHAUSTED and for allocation
// failures TensorFlow reports under other codes (cuDNN's and cuBLAS's), StatusFailed
// otherwise.
func Classify(code, message string) string {
	if code == "RESOURCE_EXHAUSTED" {
		return StatusOOM
	}
	low := strings.ToLower(message)
	for _, s := range []string{"oom when allocating", "out of memory", "cudnn_status_alloc_failed", "cublas_status_alloc_failed", "failed to allocate"} {
		if strings.Contains(low, s) {
			return StatusOOM
		}
	}
	return StatusFailed
}

// Runner runs one training run.
type Runner interface {
	Run(spec RunSpec) (*RunResult, error)
}

// ProcessRunner runs every run in a fresh process, `Exe gpu-check-worker SPEC RESULT`: each
// gets its own CUDA context and GPU allocator (a peak measured in one process does not
// include another run's leftovers, and a run that exhausts the GPU's memory or crashes the
// runtime leaves the others alone). Dir receives the spec, result and log files.
type ProcessRunner struct {
	Exe, Dir string
	// Env is added to the workers' environment.
	Env []string
}

// WorkerCommand is the hidden command the workers run.
const WorkerCommand = "gpu-check-worker"

// Run runs spec in a worker process. An error means the worker could not be started or
// said nothing; a run that failed inside TensorFlow, or crashed, is a RunResult.
func (r *ProcessRunner) Run(spec RunSpec) (*RunResult, error) {
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(r.Dir, spec.Label)
	specFile, resFile, logFile := base+".spec.json", base+".result.json", base+".log"
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specFile, data, 0o644); err != nil {
		return nil, err
	}
	os.Remove(resFile)
	cmd := exec.Command(r.Exe, WorkerCommand, specFile, resFile)
	env := append(os.Environ(), r.Env...)
	if spec.Deterministic {
		env = append(env, "TF_DETERMINISTIC_OPS=1", "TF_ENABLE_ONEDNN_OPTS=0")
	}
	cmd.Env = env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	runErr := cmd.Run()
	os.WriteFile(logFile, log.Bytes(), 0o644)
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &RunResult{Status: StatusCrashed, Error: fmt.Sprintf("the worker died of %v; its output is in %s%s", ws.Signal(), logFile, lastLines(log.String()))}, nil
		}
	} else if runErr != nil {
		return nil, fmt.Errorf("gpucheck: starting the worker for %s: %w", spec.Label, runErr)
	}
	out, err := os.ReadFile(resFile)
	if err != nil {
		return nil, fmt.Errorf("gpucheck: the worker for %s wrote no result (%v); its output is in %s%s", spec.Label, runErr, logFile, lastLines(log.String()))
	}
	res := &RunResult{}
	if err := json.Unmarshal(out, res); err != nil {
		return nil, fmt.Errorf("gpucheck: %s: %v", resFile, err)
	}
	return res, nil
}

// lastLines returns the last few lines of a log, indented, for an error message.
func lastLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return ":\n    " + strings.Join(lines, "\n    ")
}

// SessionConfig returns the serialized ConfigProto of the runs: TensorFlow's defaults, with
// soft placement on and Grappler's memory optimizer off. Its default (DEFAULT_MEM_OPT)
// includes the swapping heuristics (rewriter_config.proto), which would swap an unswapped
// graph that does not fit by itself and blur what tfswap's plans change.
func SessionConfig() []byte {
	b, err := tfrun.MarshalConfig(&tfrun.ConfigProto{
		AllowSoftPlacement: true,
		GraphOptions: &cpb.GraphOptions{RewriteOptions: &cpb.RewriterConfig{
			MemoryOptimization: cpb.RewriterConfig_NO_MEM_OPT,
		}},
	})
	if err != nil {
		panic(err) // a ConfigProto without unknown fields always marshals
	}
	return b
}
