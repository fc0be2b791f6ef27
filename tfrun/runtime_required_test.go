//go:build !tensorflow

package tfrun

import (
	"os"
	"testing"
)

// TestTensorFlowRuntimeRequired fails under CI (CI=true) when the package was tested
// without the "tensorflow" build tag and nothing else runs its TensorFlow-backed tests: they
// were then not even compiled, and a green run would hide that. `make test-pure` runs this
// build on purpose and sets TFSWAP_PURE_RUN=1, because `make test-go` runs the tagged tests
// right after it. Outside CI it passes, so that `go test ./...` works without TensorFlow
// installed.
func TestTensorFlowRuntimeRequired(t *testing.T) {
	if err := runtimeRequired(os.Getenv("CI"), os.Getenv("TFSWAP_PURE_RUN")); err != "" {
		t.Fatal(err)
	}
	t.Log("TensorFlow-backed tests skipped: built without -tags tensorflow (they are required when CI=true, and `make test-go` runs them)")
}

// runtimeRequired returns why a run without the tensorflow tag is not acceptable, or "".
func runtimeRequired(ci, pureRun string) string {
	if ci == "true" && pureRun != "1" {
		return "CI=true but tfrun was tested without -tags tensorflow, so none of its TensorFlow-backed " +
			"tests were compiled or run; run `source .tfenv && go test -tags tensorflow ./tfrun/...` " +
			"(scripts/setup.sh installs the runtime), or `make test`"
	}
	return ""
}

// TestRuntimeRequiredRule checks the rule itself: a CI run without the tag fails unless it
// is make's pure run.
func TestRuntimeRequiredRule(t *testing.T) {
	for _, c := range []struct {
		ci, pure string
		fail     bool
	}{{"true", "", true}, {"true", "1", false}, {"", "", false}, {"false", "", false}} {
		if got := runtimeRequired(c.ci, c.pure) != ""; got != c.fail {
			t.Errorf("CI=%q TFSWAP_PURE_RUN=%q: fails %v, want %v", c.ci, c.pure, got, c.fail)
		}
	}
}
