//go:build !tensorflow

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRuntimeCommandsWithoutTensorFlow checks that profile, tune and gpu-check exist in a build
// without the TensorFlow runtime and fail with exit status 1, saying how to get them.
func TestRuntimeCommandsWithoutTensorFlow(t *testing.T) {
	for _, cmd := range []string{"profile", "tune", "gpu-check"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"tfswap", cmd, "model.pb", "--budget", "1GiB"}, strings.NewReader(""), &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "built without the TensorFlow runtime") || !strings.Contains(stderr.String(), "-tags tensorflow") {
			t.Errorf("%s: exit %d, stderr %q", cmd, code, stderr.String())
		}
	}
}
