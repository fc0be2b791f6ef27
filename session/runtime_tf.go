//go:build tensorflow

package session

import "github.com/tfswap/tfswap/tfrun"

// openBackend creates a session of the TensorFlow C runtime.
func openBackend(graphDef, config []byte) (backend, error) {
	s, err := tfrun.NewSession(graphDef, config)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// visibleGPUs lists the GPUs of the TensorFlow runtime in this process.
func visibleGPUs() ([]tfrun.GPU, error) { return tfrun.VisibleGPUs() }
