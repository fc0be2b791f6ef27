package tfswap

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"runtime"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/gpucheck"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/tfrun"
)

// GPU is a GPU TensorFlow's runtime sees, as its device list describes it (session.VisibleGPUs
// lists them).
type GPU struct {
	// Device is the full device name and Index its ordinal (N of /device:GPU:N).
	Device string `json:"device"`
	Index  int    `json:"index"`
	// Model is the name the driver gives the GPU ("Tesla V100-SXM2-16GB"), PCIBusID its bus
	// address and ComputeCapability its CUDA compute capability ("7.0"); they are empty when
	// TensorFlow's description did not have them.
	Model             string `json:"model"`
	PCIBusID          string `json:"pci_bus_id,omitempty"`
	ComputeCapability string `json:"compute_capability"`
	// MemoryBytes is the memory TensorFlow's allocator may hand out on the GPU.
	MemoryBytes int64 `json:"memory_bytes"`
	// Description is TensorFlow's description of the device, unparsed.
	Description string `json:"description,omitempty"`
}

// String describes the GPU in one line: "GPU:0 Tesla V100-SXM2-16GB, compute capability 7.0,
// 15.50 GiB for TensorFlow".
func (g GPU) String() string { return tfrun.GPU(g).String() }

// Where a plan's device comes from (Prediction.DeviceSource).
const (
	// DeviceGiven says that Options.Device or Options.DeviceFile named the device.
	DeviceGiven = "given"
	// DeviceRuntime says that the device is the GPU Options.VisibleGPUs listed.
	DeviceRuntime = "runtime"
	// DeviceDefault says that the device is DefaultDevice.
	DeviceDefault = "default"
)

// target is the device a plan is made for, its per-device budget (0: the profile's
// default), where both come from, and why, in words.
type target struct {
	profile      *cost.Profile
	budget       int64
	source       string
	deviceReason string
	budgetReason string
}

// chooseTarget resolves the device and budget of o (see Options.Device and VisibleGPUs).
func chooseTarget(o *Options) (target, error) {
	t := target{source: DeviceGiven, budget: o.Budget}
	var err error
	switch {
	case o.DeviceFile != "":
		t.profile, err = cost.LoadProfileFile(o.DeviceFile)
		if err != nil {
			return t, &Error{Kind: ErrBadInput, Err: err}
		}
		t.deviceReason = "--device-file " + o.DeviceFile
	case o.Device != "":
		t.profile, err = cost.LookupProfile(o.Device)
		if err != nil {
			return t, badOptions("--device: %v", err)
		}
		t.deviceReason = "--device"
	default:
		list, unlisted := o.VisibleGPUs, "no GPU list given: Options.VisibleGPUs is nil"
		if o.Budget != 0 || len(o.DeviceBudgets) > 0 {
			// A budget names the memory: asking TensorFlow would start CUDA for nothing,
			// and beside a process that holds the GPU it would report what that process
			// left free.
			list, unlisted = nil, "--budget given"
		}
		if t, err = defaultTarget(list, unlisted); err != nil {
			return t, err
		}
		if o.Budget != 0 {
			t.budget = o.Budget
		}
	}
	switch {
	case o.Budget != 0:
		t.budgetReason = "--budget"
	case t.source == DeviceRuntime:
		t.budgetReason = "the memory limit TensorFlow gives its allocator on this GPU"
	default:
		t.budgetReason = budgetOrigin(t.profile)
	}
	return t, nil
}

// defaultTarget chooses the GPU to plan for when the options name none: the GPU list gives,
// with the memory limit TensorFlow gives its allocator as the budget (the smallest, with
// several GPUs) and, for timing, the built-in profile gpucheck.MatchProfile picks for it (by
// model name, then compute capability, then memory); otherwise DefaultDevice at its default
// budget. A nil list is not asked; unlisted says why, for the report.
func defaultTarget(list func() ([]GPU, error), unlisted string) (target, error) {
	var gpus []GPU
	none := unlisted
	if list != nil {
		var err error
		gpus, err = list()
		switch {
		case errors.Is(err, ErrNoRuntime):
			none = err.Error()
			gpus = nil
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
			return target{}, &Error{Kind: ErrBadInput, Err: fmt.Errorf("TensorFlow lists %s without a memory limit", g.Device)}
		}
		match, err := gpucheck.MatchProfile(tfrun.GPU(g), cost.Profiles(), runtime.GOARCH)
		if err != nil {
			return target{}, &Error{Kind: ErrBadInput, Err: err}
		}
		n := ""
		if len(gpus) > 1 {
			n = fmt.Sprintf(", the smallest limit of the %d GPUs", len(gpus))
		}
		why := fmt.Sprintf("the GPU TensorFlow sees: %s, %s for its allocator%s; timing from %s: %s (--device names the GPU)",
			g, units.FormatBytes(g.MemoryBytes), n, match.Profile.Name, match.Reason)
		return target{profile: match.Profile, budget: g.MemoryBytes, source: DeviceRuntime, deviceReason: why}, nil
	}
	p, err := cost.LookupProfile(plan.DefaultDevice)
	if err != nil {
		return target{}, &InternalError{Err: err}
	}
	return target{profile: p, source: DeviceDefault,
		deviceReason: fmt.Sprintf("the default profile (%s; --device names the GPU)", none)}, nil
}

// budgetOrigin says how a profile's default budget is made: "16.00 GiB less the 1050 MiB
// TensorFlow 2.18 keeps back at compute capability 7.0".
func budgetOrigin(p *cost.Profile) string {
	cc := "compute capability " + p.ComputeCapability
	if _, ok := p.CCMajor(); !ok {
		cc = "an unknown compute capability (the largest reserve)"
	}
	r := units.FormatBytes(plan.DefaultReserve(p))
	if n := plan.DefaultReserve(p); n%(1<<20) == 0 {
		r = fmt.Sprintf("%d MiB", n>>20) // as TensorFlow's source states it
	}
	return fmt.Sprintf("%s less the %s TensorFlow %s keeps back at %s", units.FormatBytes(p.MemoryBytes), r, cost.TensorFlowVersion, cc)
}
