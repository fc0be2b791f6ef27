//go:build !tensorflow

package tfrun

import (
	"os"
	"testing"
)

// TestTensorFlowRuntimeRequired fails under CI (CI=true) when the package was tested
// without the "tensorflow" build tag: the tests that run the real TensorFlow runtime were
// then not even compiled, and a green run would hide that. Outside CI it passes, so that
// `go test ./...` works without TensorFlow installed.
func TestTensorFlowRuntimeRequired(t *testing.T) {
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but tfrun was tested without -tags tensorflow, so none of its TensorFlow-backed " +
			"tests were compiled or run; run `source .tfenv && go test -tags tensorflow ./tfrun/...` " +
			"(scripts/setup.sh installs the runtime)")
	}
	t.Log("TensorFlow-backed tests skipped: built without -tags tensorflow (they are required when CI=true)")
}
