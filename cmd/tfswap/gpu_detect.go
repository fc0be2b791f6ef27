package main

import (
	"fmt"
	"runtime"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/gpucheck"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/rewrite"
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

// target is the GPU a rewrite is planned or predicted for when no --device or --device-file
// is given: its profile, its per-device budget, and where both come from.
type target struct {
	profile *cost.Profile
	budget  int64
	// source is "runtime" (a GPU TensorFlow sees) or "default" (the default profile); why
	// says it in words for the output.
	source, why string
}

// defaultTarget chooses the GPU to plan for when the command line names none: the GPU
// TensorFlow's runtime sees when this tfswap has the runtime and a GPU is present, with the
// memory limit TensorFlow gives its allocator as the budget (the smallest, with several
// GPUs) and, for timing, the built-in profile that gpucheck.MatchProfile picks for it (by
// model name, then compute capability, then memory); otherwise the default profile
// (rewrite.DefaultDevice) at its default budget. A nil list means the runtime is not asked;
// unlisted says why, for the output.
func defaultTarget(list func() ([]tfrun.GPU, error), unlisted string) (target, error) {
	var gpus []tfrun.GPU
	none := unlisted
	if list != nil {
		var err error
		gpus, err = list()
		switch {
		case err != nil:
			none = fmt.Sprintf("TensorFlow's device list failed (%v)", err)
			gpus = nil
		case len(gpus) == 0:
			none = "TensorFlow sees no GPU"
		}
	}
	if len(gpus) > 0 {
		g := gpus[0]
		for _, d := range gpus[1:] {
			if d.MemoryBytes < g.MemoryBytes {
				g = d
			}
		}
		if g.MemoryBytes <= 0 {
			return target{}, fmt.Errorf("TensorFlow lists %s without a memory limit", g.Device)
		}
		match, err := gpucheck.MatchProfile(g, cost.Profiles(), runtime.GOARCH)
		if err != nil {
			return target{}, err
		}
		n := ""
		if len(gpus) > 1 {
			n = fmt.Sprintf(", the smallest limit of the %d GPUs", len(gpus))
		}
		why := fmt.Sprintf("the GPU TensorFlow sees: %s, %s for its allocator%s; timing from %s: %s (--device names the GPU)",
			g, units.FormatBytes(g.MemoryBytes), n, match.Profile.Name, match.Reason)
		return target{profile: match.Profile, budget: g.MemoryBytes, source: "runtime", why: why}, nil
	}
	p, err := cost.LookupProfile(rewrite.DefaultDevice)
	if err != nil {
		return target{}, err
	}
	return target{profile: p, budget: rewrite.DefaultBudget(p), source: "default",
		why: fmt.Sprintf("the default profile (%s; --device names the GPU)", none)}, nil
}

// budgetOrigin says how a profile's default budget is made, for the output: "16.00 GiB less
// the 1050 MiB TensorFlow 2.18 keeps back at compute capability 7.0".
func budgetOrigin(p *cost.Profile) string {
	cc := "compute capability " + p.ComputeCapability
	if _, ok := p.CCMajor(); !ok {
		cc = "an unknown compute capability (the largest reserve)"
	}
	r := units.FormatBytes(rewrite.DefaultReserve(p))
	if n := rewrite.DefaultReserve(p); n%(1<<20) == 0 {
		r = fmt.Sprintf("%d MiB", n>>20) // as TensorFlow's source states it
	}
	return fmt.Sprintf("%s less the %s TensorFlow %s keeps back at %s", units.FormatBytes(p.MemoryBytes), r, cost.TensorFlowVersion, cc)
}
