//go:build !tensorflow

package session

import (
	"fmt"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/tfrun"
)

// errNoRuntime is the error of a build without the TensorFlow runtime.
var errNoRuntime = fmt.Errorf("%w: this program was built without the tensorflow build tag (go build -tags tensorflow, with the TensorFlow C library; see .tfenv)", tfswap.ErrNoRuntime)

// openBackend fails: there is no TensorFlow runtime in this build.
func openBackend(graphDef, config []byte) (backend, error) { return nil, errNoRuntime }

// visibleGPUs fails: there is no TensorFlow runtime in this build.
func visibleGPUs() ([]tfrun.GPU, error) { return nil, errNoRuntime }
