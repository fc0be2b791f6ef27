package main

import (
	"fmt"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/tfrun"
)

// visibleGPUs lists the GPUs TensorFlow's runtime sees, each with the memory limit of its
// allocator (tfrun.VisibleGPUs, through the C API's device list): in this process when tfswap
// is built with the runtime (gpu_detect_tf.go), else by running the runtime binary's hidden
// gpus command (gpu_detect_pure.go). It stays nil when there is no runtime at all. Tests
// replace it with a fake device list.
var visibleGPUs func() ([]tfrun.GPU, error)

// gpusCommand is the runtime binary's hidden command that prints visibleGPUs' list as JSON.
const gpusCommand = "gpus"

// facadeGPUs adapts a device list to tfswap.Options.VisibleGPUs, which rewrite asks only
// when the command line names neither a device nor a budget. A nil list is no runtime at
// all, for the reason given.
func facadeGPUs(list func() ([]tfrun.GPU, error), noRuntime string) func() ([]tfswap.GPU, error) {
	return func() ([]tfswap.GPU, error) {
		if list == nil {
			return nil, fmt.Errorf("%w: %s", tfswap.ErrNoRuntime, noRuntime)
		}
		gpus, err := list()
		if err != nil {
			return nil, err
		}
		out := make([]tfswap.GPU, len(gpus))
		for i, g := range gpus {
			out[i] = tfswap.GPU(g)
		}
		return out, nil
	}
}
