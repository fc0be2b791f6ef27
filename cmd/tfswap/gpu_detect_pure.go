//go:build !tensorflow

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/tfswap/tfswap/tfrun"
)

// init lets a tfswap built without the TensorFlow runtime ask the runtime binary
// (tfswap-runtime, see runtimeBinary) for the GPUs TensorFlow sees, when that binary exists:
// the pure binary never loads TensorFlow itself.
func init() {
	if bin, err := runtimeBinary(); err == nil && bin != "" {
		visibleGPUs = func() ([]tfrun.GPU, error) { return gpusOfRuntime(bin) }
	}
}

// gpusOfRuntime runs the runtime binary's hidden gpus command and decodes its list.
func gpusOfRuntime(bin string) ([]tfrun.GPU, error) {
	cmd := exec.Command(bin, gpusCommand)
	cmd.Env = append(os.Environ(), delegatedEnv+"=1", "TF_CPP_MIN_LOG_LEVEL=3")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, fmt.Errorf("%s %s: %v %s", bin, gpusCommand, err, msg)
	}
	var gpus []tfrun.GPU
	if err := json.Unmarshal(stdout.Bytes(), &gpus); err != nil {
		return nil, fmt.Errorf("%s %s: %v", bin, gpusCommand, err)
	}
	return gpus, nil
}
