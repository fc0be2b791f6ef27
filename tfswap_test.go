package tfswap

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

const fixtures = "testmodels/fixtures"

func load(t *testing.T, name string) *Model {
	t.Helper()
	m, err := Load(filepath.Join(fixtures, name+".pb"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func marshal(t *testing.T, m *Model) []byte {
	t.Helper()
	b, err := m.Marshal(FormatPB)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kinds are the error kinds, for messages.
var kinds = []error{ErrBadInput, ErrBadOptions, ErrNoFit, ErrRefusedOutput, ErrWriteFailed, ErrInternal}

// kindOf returns the one kind err matches; it fails the test when err matches none or
// several.
func kindOf(t *testing.T, err error) error {
	t.Helper()
	var found []error
	for _, k := range kinds {
		if errors.Is(err, k) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		t.Fatalf("error %v matches %d kinds (%v), want exactly one", err, len(found), found)
	}
	return found[0]
}

// TestErrorKinds: every failure of Load, Plan and Write matches exactly one kind, keeps the
// message that names the file, node, option or path, and the graphdef error it wraps.
func TestErrorKinds(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pb")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{filepath.Join(dir, "missing.pb"), "missing.pb: cannot read"},
		{empty, "empty.pb: is empty"},
	} {
		_, err := Load(tc.path)
		var ge *graphdef.Error
		if kindOf(t, err) != ErrBadInput || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ge) {
			t.Errorf("Load(%s): %v, want ErrBadInput with %q wrapping a *graphdef.Error", tc.path, err, tc.want)
		}
	}
	if _, err := Read(strings.NewReader(""), LoadOptions{}); kindOf(t, err) != ErrBadInput || !strings.Contains(err.Error(), "<stdin>") {
		t.Errorf("Read of nothing: %v", err)
	}

	m := load(t, "cnn")
	for _, tc := range []struct {
		opts Options
		kind error
		want string
	}{
		{Options{Strategy: "magic"}, ErrBadOptions, "unknown strategy"},
		{Options{Budget: -1}, ErrBadOptions, "Budget must not be negative"},
		{Options{Device: "gtx9999"}, ErrBadOptions, "unknown device profile"},
		{Options{Device: "v100-16gb", DeviceFile: "x.json"}, ErrBadOptions, "either Device or DeviceFile"},
		{Options{HostDevice: "/device:GPU:1"}, ErrBadOptions, "is not a CPU"},
		{Options{ComputeDevice: "/device:CPU:0"}, ErrBadOptions, "is the host"},
		{Options{ComputeDevice: "/device:CPU:1,/device:CPU:0"}, ErrBadOptions, "is the host"},
		{Options{ComputeDevice: "/device:CPU:1,/device:CPU:1"}, ErrBadOptions, "named twice"},
		{Options{Budget: 8 << 20, ComputeDevice: "/device:CPU:1", DeviceBudgets: map[string]int64{"/device:CPU:2": 1 << 20}}, ErrBadOptions, "not a compute device"},
		{Options{MinTensorBytes: 1 << 20, NoMinTensorBytes: true}, ErrBadOptions, "either MinTensorBytes or NoMinTensorBytes"},
		{Options{SwapoutThreshold: 5, Strategy: "vdnn-all"}, ErrBadOptions, "fixes LMS's thresholds"},
		{Options{Strategy: "lms-fixed", Explain: true}, ErrBadOptions, "planning option"},
		{Options{Budget: 8 << 20, DeviceBudgets: map[string]int64{"/device:CPU:1": 1 << 20}}, ErrBadOptions, "not a compute device"},
		{Options{Budget: 8 << 20, SharedLinks: [][]string{{"/device:GPU:0"}}}, ErrBadOptions, "at least two devices"},
		{Options{Budget: 8 << 20, Recompute: "always"}, ErrBadOptions, "Recompute"},
		{Options{Budget: 8 << 20, DeviceBudgets: map[string]int64{"/device:GPU:3": 1 << 20}, Fetch: []string{"train"}}, ErrBadInput, "no compute device of the graph matches /device:GPU:3"},
		{Options{Budget: 8 << 20, SharedLinks: [][]string{{"/device:GPU:0", "/device:GPU:7"}}}, ErrBadInput, "no GPU of the graph matches"},
		{Options{DeviceFile: filepath.Join(dir, "nope.json")}, ErrBadInput, "nope.json"},
		{Options{Budget: 8 << 20, MeasuredProfile: empty}, ErrBadInput, "empty.pb"},
		{Options{Budget: 1 << 20, Fetch: []string{"train"}}, ErrNoFit, "no plan fits /device:GPU:0 within 1.0 MiB"},
	} {
		_, err := Plan(m, tc.opts)
		if err == nil {
			t.Errorf("%+v: planned", tc.opts)
			continue
		}
		if k := kindOf(t, err); k != tc.kind || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v (%v), want %v with %q", tc.opts, err, k, tc.kind, tc.want)
		}
	}

	// A panic inside planning is an internal error, with its value and stack.
	_, err := Plan(m, Options{VisibleGPUs: func() ([]GPU, error) { panic("a test panic") }})
	var ie *InternalError
	if kindOf(t, err) != ErrInternal || !errors.As(err, &ie) || ie.Value != "a test panic" || !bytes.Contains(ie.Stack, []byte("tfswap_test.go")) ||
		err.Error() != "internal error: a test panic" {
		t.Errorf("panic: %v", err)
	}

	// Writing over the input is refused, unless in place; nothing is written.
	in := filepath.Join(dir, "cnn.pb")
	orig, _ := os.ReadFile(filepath.Join(fixtures, "cnn.pb"))
	if err := os.WriteFile(in, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	mi, err := Load(in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Plan(mi, Options{Budget: 2500 << 10, Fetch: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	var oe *graphdef.OutputError
	if err := res.Model.Write(in, WriteOptions{}); kindOf(t, err) != ErrRefusedOutput || !errors.As(err, &oe) {
		t.Errorf("write over the input: %v", err)
	}
	if now, _ := os.ReadFile(in); !bytes.Equal(now, orig) {
		t.Error("the input was changed")
	}
	if err := res.Model.Write(in, WriteOptions{InPlace: true}); err != nil {
		t.Errorf("in place: %v", err)
	}
	if now, _ := os.ReadFile(in); bytes.Equal(now, orig) || !bytes.Equal(now, marshal(t, res.Model)) {
		t.Error("in place: the input was not replaced by the rewrite")
	}
	if err := res.Model.Write("-", WriteOptions{}); kindOf(t, err) != ErrRefusedOutput {
		t.Errorf("write to -: %v", err)
	}
	if err := res.Model.Write(dir, WriteOptions{}); kindOf(t, err) != ErrRefusedOutput {
		t.Errorf("write to a directory: %v", err)
	}
	if err := res.Model.Write(filepath.Join(dir, "sm"), WriteOptions{Format: FormatSavedModel}); kindOf(t, err) != ErrBadOptions {
		t.Errorf("a GraphDef as a SavedModel: %v", err)
	}
	if err := res.Model.Write(filepath.Join(dir, "no", "such", "dir", "x.pb"), WriteOptions{}); kindOf(t, err) != ErrWriteFailed {
		t.Errorf("write into a missing directory: %v", err)
	}
}

// TestZeroOptionsAreTheDefaults: the zero Options plan as the explicit defaults do, and the
// booleans that switch a default off change what is planned.
func TestZeroOptionsAreTheDefaults(t *testing.T) {
	m := load(t, "resnet")
	budget, err := DefaultBudget(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, a, b Options) *Result {
		t.Helper()
		ra, err := Plan(m, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		rb, err := Plan(m, b)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !bytes.Equal(marshal(t, ra.Model), marshal(t, rb.Model)) {
			t.Errorf("%s: the graphs differ", what)
		}
		return ra
	}
	r := same("defaults", Options{}, Options{Strategy: "auto", Device: DefaultDevice, Budget: budget, BatchScale: 1, FitAccounting: "all", Recompute: "auto", BOIterations: 12})
	if p := r.Report.Prediction; !p.Unchanged || p.Device != DefaultDevice || p.Budget != budget || p.Strategy != "auto" || p.DeviceSource != DeviceDefault {
		t.Errorf("defaults: %+v", p)
	}
	if !bytes.Equal(marshal(t, r.Model), marshal(t, m)) {
		t.Error("a graph that fits was not returned unchanged")
	}
	lms := same("LMS defaults", Options{Strategy: "lms-fixed"}, Options{SwapoutThreshold: 10, SwapinAhead: 2, SwapinGroupBy: 5, MinTensorBytes: 64 << 10})
	if lms.Report.Prediction.Strategy != "lms-fixed" || len(lms.Report.Swaps) == 0 {
		t.Errorf("a fixed threshold did not ask for lms-fixed: %s, %d swaps", lms.Report.Prediction.Strategy, len(lms.Report.Swaps))
	}
	count := func(o Options) (swaps, swapIns int) {
		t.Helper()
		r, err := Plan(load(t, "mlp"), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Report.Swaps {
			swapIns += len(s.SwapIns)
		}
		return len(r.Report.Swaps), swapIns
	}
	s0, _ := count(Options{Strategy: "lms-fixed", SwapoutThreshold: 4})
	s1, _ := count(Options{Strategy: "lms-fixed", SwapoutThreshold: 4, NoMinTensorBytes: true})
	if s1 <= s0 {
		t.Errorf("NoMinTensorBytes: %d swaps, with the 64 KiB minimum %d", s1, s0)
	}
	_, in0 := count(Options{Strategy: "lms-fixed", SwapoutThreshold: 2, NoMinTensorBytes: true})
	_, in1 := count(Options{Strategy: "lms-fixed", SwapoutThreshold: 2, NoMinTensorBytes: true, OneSwapInPerConsumer: true})
	if in1 <= in0 {
		t.Errorf("OneSwapInPerConsumer: %d swap-ins, grouped %d", in1, in0)
	}
}

// TestVisibleGPUs: without a device or budget the plan is for the GPU the list gives, at the
// memory TensorFlow's allocator gets there; a list that cannot be had, or a budget, plans for
// the default device, and says why.
func TestVisibleGPUs(t *testing.T) {
	m := load(t, "cnn")
	v100 := GPU{Device: "/job:localhost/replica:0/task:0/device:GPU:0", Model: "Tesla V100-SXM2-16GB", ComputeCapability: "7.0", MemoryBytes: 14 << 30}
	called := 0
	list := func(gpus []GPU, err error) func() ([]GPU, error) {
		return func() ([]GPU, error) { called++; return gpus, err }
	}
	for _, tc := range []struct {
		name   string
		opts   Options
		source string
		budget int64
		reason string
		calls  int
	}{
		{"v100", Options{VisibleGPUs: list([]GPU{v100}, nil)}, DeviceRuntime, 14 << 30, "the GPU TensorFlow sees: GPU:0 Tesla V100-SXM2-16GB", 1},
		{"none", Options{VisibleGPUs: list(nil, nil)}, DeviceDefault, 0, "TensorFlow sees no GPU", 1},
		{"no runtime", Options{VisibleGPUs: list(nil, fmt.Errorf("%w: built without the tensorflow tag", ErrNoRuntime))}, DeviceDefault, 0,
			"the default profile (no TensorFlow runtime: built without the tensorflow tag;", 1},
		{"fails", Options{VisibleGPUs: list(nil, errors.New("no driver"))}, DeviceDefault, 0, "TensorFlow's device list failed (no driver)", 1},
		{"budget", Options{Budget: 3 << 20, Fetch: []string{"train"}, VisibleGPUs: list([]GPU{v100}, nil)}, DeviceDefault, 3 << 20, "--budget given", 0},
		{"device", Options{Device: "a100-40gb", VisibleGPUs: list([]GPU{v100}, nil)}, DeviceGiven, 40<<30 - 1536<<20, "--device", 0},
	} {
		called = 0
		r, err := Plan(m, tc.opts)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		p := r.Report.Prediction
		if tc.budget == 0 {
			tc.budget, _ = DefaultBudget(DefaultDevice)
		}
		if p.DeviceSource != tc.source || p.Budget != tc.budget || !strings.Contains(p.DeviceReason, tc.reason) || called != tc.calls {
			t.Errorf("%s: %s at %d (%s), listed %d times; want %s at %d (%q), %d", tc.name, p.DeviceSource, p.Budget, p.DeviceReason, called, tc.source, tc.budget, tc.reason, tc.calls)
		}
	}
}

// TestPlanIsDeterministic: the same model and options give byte-identical output and the
// same report.
func TestPlanIsDeterministic(t *testing.T) {
	var outs [][]byte
	var texts []string
	m := load(t, "resnet")
	before := marshal(t, m)
	for i := 0; i < 2; i++ {
		r, err := Plan(m, Options{Budget: 6 << 20, Fetch: []string{"train"}, Explain: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Report.Swaps) == 0 || len(r.Report.Prediction.Explanation) == 0 {
			t.Fatalf("nothing swapped or explained: %+v", r.Report.Prediction)
		}
		var b strings.Builder
		if err := r.Report.WriteText(&b, TextOptions{Input: "in", Output: "out", Verbose: true}); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, marshal(t, r.Model))
		texts = append(texts, b.String())
	}
	if !bytes.Equal(outs[0], outs[1]) || texts[0] != texts[1] {
		t.Error("two plans of the same graph differ")
	}
	if !bytes.Equal(marshal(t, m), before) || bytes.Equal(outs[0], before) {
		t.Error("Plan changed its input model, or returned it unchanged")
	}
	if !strings.Contains(texts[0], "\nexplanation:\n") || !strings.Contains(texts[0], "\nswapped ") {
		t.Errorf("no explanation:\n%s", texts[0])
	}
}
