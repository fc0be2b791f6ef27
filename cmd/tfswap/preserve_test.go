package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRewritePreserve: --preserve keeps a node the plan swapped out of the plan, and a name
// that is no node of the graph is bad input naming it (issue 13, item 3).
func TestRewritePreserve(t *testing.T) {
	tmp := t.TempDir()
	out, rep := filepath.Join(tmp, "out.pb"), filepath.Join(tmp, "rep.json")
	producers := func(args ...string) map[string]bool {
		t.Helper()
		code, stdout, stderr := runSimCLI(t, append([]string{"rewrite", planFixture, "-o", out, "--budget", "6MiB", "--report", rep}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d:\n%s%s", args, code, stdout, stderr)
		}
		var r struct {
			Swaps []struct{ Producer string } `json:"swaps"`
		}
		data, err := os.ReadFile(rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, s := range r.Swaps {
			m[s.Producer] = true
		}
		return m
	}
	free := producers()
	if len(free) == 0 {
		t.Fatal("the fixture swaps nothing at 6MiB: the test checks nothing")
	}
	var p string
	for n := range free {
		if p == "" || n < p {
			p = n
		}
	}
	kept := producers("--preserve", p)
	if kept[p] {
		t.Errorf("--preserve %s: it is still swapped", p)
	}
	if len(kept) == 0 {
		t.Errorf("--preserve %s: nothing swapped at all", p)
	}
	code, _, stderr := runSimCLI(t, "rewrite", planFixture, "-o", out, "--budget", "6MiB", "--preserve", "no/such/node")
	if code != 1 || !strings.Contains(stderr, `"no/such/node"`) {
		t.Errorf("unknown --preserve: exit %d, want 1 naming the node:\n%s", code, stderr)
	}
}
