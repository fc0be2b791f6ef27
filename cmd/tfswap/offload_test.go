package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRewriteOffloadCommand runs rewrite --offload all on the resnet fixture: the summary and
// the report list the offloaded variables, inspect shows them on the host in the output and
// as groups on the device in the input, a bad mode is a usage error and lms-fixed refuses it.
func TestRewriteOffloadCommand(t *testing.T) {
	tmp := t.TempDir()
	out, rep := filepath.Join(tmp, "off.pb"), filepath.Join(tmp, "off.json")
	code, stdout, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out, "--offload", "all", "--fetch", "train", "--report", rep)
	if code != 0 {
		t.Fatalf("rewrite: %d %s", code, stderr)
	}
	if !strings.Contains(stdout, "offloaded:       57 variable groups (92 variables") || !strings.Contains(stdout, "--offload all") {
		t.Errorf("summary does not list the offload:\n%s", stdout)
	}
	var r struct {
		Offloaded []struct {
			Name      string
			Variables []string
			Copies    int
		} `json:"offloaded"`
		Copies int `json:"offload_copies"`
		Plan   struct {
			Unchanged bool `json:"unchanged"`
		} `json:"plan"`
	}
	data, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Offloaded) != 57 || r.Offloaded[0].Name != "block4/b/conv/weights" || r.Copies == 0 || r.Plan.Unchanged {
		t.Errorf("report: %d groups, first %+v, %d copies, unchanged %v", len(r.Offloaded), r.Offloaded[0], r.Copies, r.Plan.Unchanged)
	}
	code, stdout, stderr = runSimCLI(t, "inspect", out, "--top", "2")
	if code != 0 || !strings.Contains(stdout, "Variables on the host: 92") {
		t.Errorf("inspect of the offloaded graph: %d %s\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runSimCLI(t, "inspect", planFixture, "--top", "2")
	if code != 0 || !strings.Contains(stdout, "57 groups, 92 variables") || !strings.Contains(stdout, "block4/b/conv/weights") {
		t.Errorf("inspect of the fixture does not list the variable groups:\n%s", stdout)
	}
	if code, _, stderr = runSimCLI(t, "rewrite", planFixture, "-o", out, "--offload", "some"); code != 2 || !strings.Contains(stderr, "--offload") {
		t.Errorf("--offload some: exit %d, %s", code, stderr)
	}
	if code, _, stderr = runSimCLI(t, "rewrite", planFixture, "-o", out, "--offload", "all", "--strategy", "lms-fixed"); code != 2 {
		t.Errorf("--offload all with lms-fixed: exit %d, %s", code, stderr)
	}
}

// TestRewriteOffloadVariablesCommand runs rewrite --offload-variables on the resnet fixture:
// exactly the named groups (each variable with its Momentum slot) move to the host, whatever
// the budget, on the training graph and on the initialiser's alike; an empty name, or a mode
// given with it, is a usage error.
func TestRewriteOffloadVariablesCommand(t *testing.T) {
	tmp := t.TempDir()
	named := "block4/b/conv/weights,block4/a/conv/weights"
	for _, fetch := range []string{"train", "init"} {
		out, rep := filepath.Join(tmp, fetch+".pb"), filepath.Join(tmp, fetch+".json")
		code, stdout, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out, "--offload-variables", named, "--fetch", fetch, "--report", rep)
		if code != 0 {
			t.Fatalf("rewrite --fetch %s: %d %s", fetch, code, stderr)
		}
		if !strings.Contains(stdout, "named by --offload-variables") {
			t.Errorf("--fetch %s: the summary does not give the reason:\n%s", fetch, stdout)
		}
		var r struct {
			Offloaded []struct {
				Name      string
				Variables []string
			} `json:"offloaded"`
		}
		data, err := os.ReadFile(rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range r.Offloaded {
			got = append(got, v.Variables...)
		}
		want := "block4/b/conv/weights block4/b/conv/weights/Momentum block4/a/conv/weights block4/a/conv/weights/Momentum"
		if strings.Join(got, " ") != want {
			t.Errorf("--fetch %s: offloaded %v, want %s", fetch, got, want)
		}
	}
	out := filepath.Join(tmp, "bad.pb")
	if code, _, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out, "--offload-variables", named, "--offload", "auto"); code != 2 || !strings.Contains(stderr, "--offload-variables") {
		t.Errorf("--offload-variables with --offload auto: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out, "--offload-variables", "a,,b"); code != 2 || !strings.Contains(stderr, "--offload-variables") {
		t.Errorf("--offload-variables with an empty name: exit %d, %s", code, stderr)
	}
}
