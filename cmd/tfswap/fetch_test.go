package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanSaysWhichStepWasSimulated: planning says which fetch it simulated as the step,
// and says so loudly when no --fetch was given and every node, initialisers included, was
// simulated (issue 11, item 9).
func TestPlanSaysWhichStepWasSimulated(t *testing.T) {
	tmp := t.TempDir()
	out, rep := filepath.Join(tmp, "out.pb"), filepath.Join(tmp, "rep.json")
	for _, tc := range []struct {
		args  []string
		want  string
		fetch []string
	}{
		{nil, "simulated step:  every node of the graph (1095 nodes; no --fetch given", []string{}},
		{[]string{"--fetch", "train"}, "simulated step:  the fan-in of train (", []string{"train"}},
	} {
		args := append([]string{"rewrite", planFixture, "-o", out, "--budget", "6MiB", "--report", rep}, tc.args...)
		code, stdout, stderr := runSimCLI(t, args...)
		if code != 0 || !strings.Contains(stdout, tc.want) {
			t.Errorf("%v: exit %d, output lacks %q:\n%s%s", tc.args, code, tc.want, stdout, stderr)
			continue
		}
		var r struct {
			Plan struct {
				Fetch          []string `json:"fetch"`
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
		if strings.Join(r.Plan.Fetch, ",") != strings.Join(tc.fetch, ",") || r.Plan.Fetch == nil || r.Plan.SimulatedNodes == 0 {
			t.Errorf("%v: report plan fetch %v, %d nodes", tc.args, r.Plan.Fetch, r.Plan.SimulatedNodes)
		}
	}
	// A plan that does not fit says it too.
	code, _, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out, "--budget", "1MiB")
	if code != 1 || !strings.Contains(stderr, "simulated step: every node of the graph (1095 nodes): no fetch was given") {
		t.Errorf("no fit without --fetch: exit %d %s", code, stderr)
	}
	code, _, stderr = runSimCLI(t, "rewrite", planFixture, "-o", out, "--budget", "1MiB", "--fetch", "train")
	if code != 1 || strings.Contains(stderr, "simulated step") {
		t.Errorf("no fit with --fetch: exit %d %s", code, stderr)
	}
}
