package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanSaysWhichStepWasSimulated: planning says which fetch it simulated as the step:
// the --fetch given, or, without one, the training step it found (the sink whose fan-in holds
// the variable updates, not the initialisers), in the text and in the report (issue 11, item
// 9; issue 12, item 5).
func TestPlanSaysWhichStepWasSimulated(t *testing.T) {
	tmp := t.TempDir()
	out, rep := filepath.Join(tmp, "out.pb"), filepath.Join(tmp, "rep.json")
	for _, tc := range []struct {
		args   []string
		want   []string
		found  bool
		reason string
	}{
		{nil, []string{"fetch:           train (found: the sink whose fan-in holds the ", "simulated step:  the fan-in of train ("}, true, "the sink whose fan-in holds the"},
		{[]string{"--fetch", "train"}, []string{"fetch:           train (--fetch)", "simulated step:  the fan-in of train ("}, false, "--fetch"},
	} {
		args := append([]string{"rewrite", planFixture, "-o", out, "--budget", "6MiB", "--report", rep}, tc.args...)
		code, stdout, stderr := runSimCLI(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d:\n%s%s", tc.args, code, stdout, stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, stdout)
			}
		}
		var r struct {
			Plan struct {
				Fetch          []string `json:"fetch"`
				FetchFound     bool     `json:"fetch_found"`
				FetchReason    string   `json:"fetch_reason"`
				SimulatedNodes int      `json:"simulated_nodes"`
			} `json:"plan"`
		}
		data, err := os.ReadFile(rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		if strings.Join(r.Plan.Fetch, ",") != "train" || r.Plan.SimulatedNodes == 0 || r.Plan.FetchFound != tc.found || !strings.HasPrefix(r.Plan.FetchReason, tc.reason) {
			t.Errorf("%v: report plan fetch %v found %v (%q), %d nodes", tc.args, r.Plan.Fetch, r.Plan.FetchFound, r.Plan.FetchReason, r.Plan.SimulatedNodes)
		}
	}
	// A plan that does not fit: the step found is the training step, not every node.
	for _, args := range [][]string{nil, {"--fetch", "train"}} {
		code, _, stderr := runSimCLI(t, append([]string{"rewrite", planFixture, "-o", out, "--budget", "1MiB"}, args...)...)
		if code != 1 || strings.Contains(stderr, "simulated step: every node") {
			t.Errorf("no fit %v: exit %d %s", args, code, stderr)
		}
	}
}

// TestOneBaselineEverywhere: without --fetch, rewrite, simulate (the rewritten graph against
// the original as --baseline) and inspect all simulate the training step they find, so
// rewrite's predicted overhead is simulate's for the same plan, to the nanosecond, and
// inspect's peak is rewrite's unswapped peak (issue 12, item 5: they differed, +85.7% against
// +87.7%, when rewrite simulated every node).
func TestOneBaselineEverywhere(t *testing.T) {
	tmp := t.TempDir()
	out, rep, sim := filepath.Join(tmp, "out.pb"), filepath.Join(tmp, "rep.json"), filepath.Join(tmp, "sim.json")
	if code, stdout, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out, "--budget", "5MiB", "--report", rep); code != 0 {
		t.Fatalf("rewrite: exit %d\n%s%s", code, stdout, stderr)
	}
	var r struct {
		Swaps []json.RawMessage `json:"swaps"`
		Plan  struct {
			StepTime  int64 `json:"step_time_ns"`
			Unswapped int64 `json:"unswapped_step_time_ns"`
			Nodes     int   `json:"simulated_nodes"`
		} `json:"plan"`
	}
	data, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Swaps) == 0 || r.Plan.StepTime <= r.Plan.Unswapped {
		t.Fatalf("the plan swapped nothing or costs nothing: %d swaps, %d ns against %d ns", len(r.Swaps), r.Plan.StepTime, r.Plan.Unswapped)
	}
	code, stdout, stderr := runSimCLI(t, "simulate", "--device", "v100-16gb", out, "--baseline", planFixture, "--json", sim)
	if code != 0 || !strings.Contains(stdout, "fetch: train (found: ") {
		t.Fatalf("simulate: exit %d\n%s%s", code, stdout, stderr)
	}
	var s struct {
		Fetch  []string `json:"fetch"`
		Found  bool     `json:"fetch_found"`
		Result struct {
			StepTime int64 `json:"step_time_ns"`
		} `json:"result"`
		Baseline struct {
			StepTime int64 `json:"step_time_ns"`
		} `json:"baseline"`
	}
	if data, err = os.ReadFile(sim); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Fetch, ",") != "train" || !s.Found {
		t.Errorf("simulate's fetch %v found %v, want train found", s.Fetch, s.Found)
	}
	if s.Result.StepTime != r.Plan.StepTime || s.Baseline.StepTime != r.Plan.Unswapped {
		t.Errorf("simulate predicts %d ns against a %d ns baseline, rewrite %d ns against %d ns", s.Result.StepTime, s.Baseline.StepTime, r.Plan.StepTime, r.Plan.Unswapped)
	}
	code, stdout, stderr = runSimCLI(t, "inspect", planFixture)
	if code != 0 || !strings.Contains(stdout, "  fetch: train (found: ") || !strings.Contains(stdout, "one step of the fan-in of train") {
		t.Errorf("inspect: exit %d\n%s%s", code, stdout, stderr)
	}
}
