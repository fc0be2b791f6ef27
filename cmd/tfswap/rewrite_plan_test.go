package main

import (
	"bytes"
	"encoding/json"
	"github.com/tfswap/tfswap/rewrite/plan"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/rewrite"
)

const planFixture = "../../testmodels/fixtures/resnet.pb"

func TestRewritePlanCommand(t *testing.T) {
	tmp := t.TempDir()
	out, rep := filepath.Join(tmp, "out.pb"), filepath.Join(tmp, "rep.json")
	code, stdout, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out, "--budget", "6MiB", "--fetch", "train", "--explain", "--report", rep)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"strategy:        auto", "predicted peak:  /device:GPU:0", "by tfswap's model of the runtime",
		"by Grappler's VirtualCluster, trace in nanoseconds", "trace in microseconds (DeterminePeakMemoryUsage)", "predicted step:", "explanation:", "swapped "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	var r struct {
		Swaps []rewrite.Swap `json:"swaps"`
		Plan  struct {
			Strategy string `json:"strategy"`
			Device   string `json:"device"`
			Budget   int64  `json:"budget"`
			Devices  []struct {
				Peak           int64    `json:"peak"`
				GrapplerPeak   int64    `json:"grappler_peak"`
				GrapplerPeakUS int64    `json:"grappler_peak_us"`
				Judged         []string `json:"fit_accountings"`
				Budget         int64    `json:"budget"`
			} `json:"devices"`
			StepTime int64 `json:"step_time_ns"`
		} `json:"plan"`
	}
	data, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Plan.Strategy != "auto" || r.Plan.Device != plan.DefaultDevice || r.Plan.Budget != 6<<20 || len(r.Plan.Devices) != 1 || r.Plan.StepTime == 0 || len(r.Swaps) == 0 {
		t.Errorf("report: %+v", r.Plan)
	}
	// All three accountings were checked and all fit (--fit-accounting all, the default).
	for _, d := range r.Plan.Devices {
		if d.Peak <= 0 || d.Peak > d.Budget || d.GrapplerPeak <= 0 || d.GrapplerPeak > d.Budget || d.GrapplerPeakUS < d.GrapplerPeak ||
			d.GrapplerPeakUS > d.Budget || strings.Join(d.Judged, ",") != "tfswap,grappler-ns,grappler-us" {
			t.Errorf("report devices: %+v", r.Plan.Devices)
		}
	}
	// With tfswap's accounting alone every figure is still reported, and only that one judged.
	if code, stdout, stderr := runSimCLI(t, "rewrite", planFixture, "-o", filepath.Join(tmp, "t.pb"), "--budget", "6MiB", "--fetch", "train",
		"--fit-accounting", "tfswap"); code != 0 || !strings.Contains(stdout, "trace in microseconds (DeterminePeakMemoryUsage) (not required)") {
		t.Errorf("--fit-accounting tfswap: exit %d\n%s%s", code, stdout, stderr)
	}
	// The same command again writes the same bytes.
	out2 := filepath.Join(tmp, "out2.pb")
	if code, _, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out2, "--budget", "6MiB", "--fetch", "train"); code != 0 {
		t.Fatal(stderr)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(out2)
	if !bytes.Equal(a, b) {
		t.Error("two plans of the same graph differ")
	}
}

func TestRewritePlanErrors(t *testing.T) {
	tmp := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--budget", "1MiB", "--fetch", "train"}, 1, "no plan fits /device:GPU:0"},
		{[]string{"--strategy", "magic"}, 2, "unknown strategy"},
		{[]string{"--budget", "lots"}, 2, "--budget"},
		{[]string{"--device", "gtx9999"}, 2, "unknown device profile"},
		{[]string{"--device-budget", "gpu1=1GiB"}, 2, "--device-budget"},
		{[]string{"--budget", "8GiB", "--shared-link", "/device:GPU:0"}, 2, "--shared-link"},
		{[]string{"--shared-link", "/device:GPU:0+/device:GPU:1"}, 1, "no GPU of the graph matches"},
		{[]string{"--swapout-threshold", "5", "--explain"}, 2, "planning option"},
		{[]string{"--strategy", "lms-fixed", "--recompute", "max"}, 2, "planning option"},
		{[]string{"--swapin-ahead", "3", "--window", "1GiB"}, 2, "planning option"},
		{[]string{"--swapout-threshold", "5", "--strategy", "auto"}, 2, "--strategy lms-fixed"},
		{[]string{"--swapin-groupby", "2", "--strategy", "vdnn-all"}, 2, "fixes LMS's thresholds"},
		{[]string{"--budget", "8GiB", "--fit-accounting", "vc"}, 2, "--fit-accounting"},
		{[]string{"--budget", "8GiB", "--fit-accounting", "tfswap,all"}, 2, "--fit-accounting"},
		{[]string{"--budget", "8GiB", "--recompute", "always"}, 2, "--recompute"},
		{[]string{"--budget", "8GiB", "--shared-link", "/device:GPU:0+/device:GPU:7"}, 1, "no GPU of the graph matches"},
		{[]string{"--budget", "8GiB", "--debug-pass", "nope"}, 2, "unknown planning pass \"nope\" (passes: all, analyze"},
		{[]string{"--strategy", "lms-fixed", "--pass-time"}, 2, "planning option"},
	} {
		args := append([]string{"rewrite", planFixture, "-o", filepath.Join(tmp, "x.pb")}, tc.args...)
		code, _, stderr := runSimCLI(t, args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d %q, want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	code, stdout, _ := runSimCLI(t, "rewrite", "--list-strategies")
	for _, s := range plan.StrategyNames() {
		if code != 0 || !strings.Contains(stdout, s+" ") {
			t.Errorf("--list-strategies lacks %s: %s", s, stdout)
		}
	}
}

// TestRewritePassDebug: --pass-time and --debug-pass (which print to the process's standard
// error) leave the rewritten graph byte for byte as it is without them.
func TestRewritePassDebug(t *testing.T) {
	// The flags set these for the process; t.Setenv restores them after the test.
	t.Setenv("TFSWAP_DEBUG_PASS", "")
	t.Setenv("TFSWAP_PASSTIME", "")
	tmp := t.TempDir()
	plain, debugged := filepath.Join(tmp, "plain.pb"), filepath.Join(tmp, "debugged.pb")
	if code, _, stderr := runSimCLI(t, "rewrite", planFixture, "-o", plain, "--budget", "6MiB", "--fetch", "train"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runSimCLI(t, "rewrite", planFixture, "-o", debugged, "--budget", "6MiB", "--fetch", "train", "--pass-time", "--debug-pass", "all"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if os.Getenv("TFSWAP_DEBUG_PASS") != "all" || os.Getenv("TFSWAP_PASSTIME") != "1" {
		t.Errorf("the flags did not reach the planner: TFSWAP_DEBUG_PASS=%q TFSWAP_PASSTIME=%q", os.Getenv("TFSWAP_DEBUG_PASS"), os.Getenv("TFSWAP_PASSTIME"))
	}
	a, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(debugged)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("--pass-time and --debug-pass changed the rewritten graph")
	}
}

// TestRewriteRecomputeReport: with --recompute max the summary counts the recomputations,
// the JSON report lists each with its copies, trigger, gate and readers, and the same
// command writes the same bytes again. (The 4 MiB budget was chosen for the accountings of
// --fit-accounting both; by the microsecond figure the window strategy's plans stay just over
// it on this graph, whose whole step lasts 140 us.)
func TestRewriteRecomputeReport(t *testing.T) {
	tmp := t.TempDir()
	out, rep := filepath.Join(tmp, "out.pb"), filepath.Join(tmp, "rep.json")
	args := []string{"rewrite", planFixture, "-o", out, "--budget", "4MiB", "--fetch", "train", "--strategy", "window", "--recompute", "max",
		"--report", rep, "--explain", "--fit-accounting", "both"}
	code, stdout, stderr := runSimCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "recomputed:") || !strings.Contains(stdout, "plan from window+recompute") || !strings.Contains(stdout, "\nrecomputed ") {
		t.Errorf("summary lacks the recomputations:\n%s", stdout)
	}
	var r struct {
		Recomputes []rewrite.Recompute `json:"recomputes"`
	}
	data, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Recomputes) == 0 {
		t.Fatalf("report lists no recomputation: %s", data)
	}
	for _, rc := range r.Recomputes {
		if len(rc.Ops) == 0 || len(rc.Copies) != len(rc.Ops) || rc.Trigger == "" || rc.Gate != "tfswap/"+rc.Trigger+"/recompute_gate" || len(rc.Consumers) == 0 || rc.Bytes <= 0 {
			t.Errorf("report entry %+v", rc)
		}
	}
	out2 := filepath.Join(tmp, "out2.pb")
	args[3] = out2
	if code, _, stderr := runSimCLI(t, args...); code != 0 {
		t.Fatal(stderr)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(out2)
	if !bytes.Equal(a, b) {
		t.Error("two recomputing plans of the same graph differ")
	}
}
