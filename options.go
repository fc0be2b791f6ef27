package tfswap

import (
	"github.com/tfswap/tfswap/rewrite/plan"
	"slices"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// Options say what Plan plans for and how. The zero value plans as the tfswap command does
// with no options: the "auto" strategy, for DefaultDevice at its default budget (or for the
// GPU VisibleGPUs lists), simulating every node of the graph as the step. Every field's zero
// value means its default; fields that switch a default off are booleans named No... (there
// is no magic -1). Each field is the tfswap rewrite option of the same name, which the
// messages of errors and warnings name.
type Options struct {
	// Strategy names the planning strategy (Strategies lists them; --strategy). Empty means
	// "auto", or "lms-fixed" when SwapoutThreshold, SwapinAhead, SwapinGroupBy or
	// OneSwapInPerConsumer is set: TensorFlow Large Model Support's fixed thresholds, which
	// swap whatever the budget and are written even when they do not fit.
	Strategy string

	// Device names the built-in device profile planned for ("v100-16gb", "a100-40gb", ...;
	// DeviceNames lists them; --device), and DeviceFile a device profile file of your own
	// (--device-file). At most one may be given. With neither, the plan is for the GPU
	// VisibleGPUs lists when no budget is given, else for DefaultDevice.
	Device     string
	DeviceFile string
	// VisibleGPUs lists the GPUs TensorFlow sees (session.VisibleGPUs in a program built
	// with the "tensorflow" tag). It is called only when neither Device, DeviceFile, Budget
	// nor DeviceBudgets is given; the plan is then for the GPU it lists (the one with the
	// least memory), its budget the memory TensorFlow's allocator gets there, timed with
	// the built-in profile nearest that GPU. Nil, an empty list or an error (ErrNoRuntime,
	// wrapped with the reason, for a program without the runtime) plan for DefaultDevice,
	// and the report says why.
	VisibleGPUs func() ([]GPU, error)
	// Budget is the most memory each compute device may use, in bytes as the simulator
	// counts peaks (activations, resident variables, kernel workspace; --budget). Zero means
	// the device's default budget (DefaultBudget): what TensorFlow's allocator may hand out
	// there.
	Budget int64
	// DeviceBudgets override Budget for single compute devices, by a device specification
	// that matches the device ("/device:GPU:1"; --device-budget). A CPU may have a budget
	// only when ComputeDevice names it (the two-device CPU emulation).
	DeviceBudgets map[string]int64
	// SharedLinks are groups of GPUs that share one host link, a PCIe switch (each group at
	// least two device specifications; --shared-link).
	SharedLinks [][]string
	// BatchScale plans as if the batch dimension were this many times larger, keeping the
	// graph's shapes (--batch-scale). Zero means 1.
	BatchScale int
	// Fetch are the nodes a training step runs, such as the training op (--fetch): planning
	// simulates only their fan-in. Empty means the training step graphdef.DefaultFetch finds
	// (the sinks whose fan-in holds the variable updates, initialisers and reads outside the
	// step left out), or every node of the graph when it finds none; Report.Prediction says
	// which.
	Fetch []string
	// MeasuredProfile is a measured op profile (written by tfswap profile) whose per-node
	// times replace the estimates (--measured).
	MeasuredProfile string
	// NoTF32 plans float32 matrix products at the FP32 rate even where TF32 tensor cores
	// exist (--no-tf32).
	NoTF32 bool
	// FitAccounting names the accountings by which a plan's peak must fit the budget
	// (--fit-accounting): "all", or a comma-separated list of "tfswap" (tfswap's model of
	// the runtime), "grappler-ns" (the rules of Grappler's VirtualCluster, on its trace's
	// nanoseconds) and "grappler-us" (the same on its microseconds, as TensorFlow's
	// DeterminePeakMemoryUsage reads it); "both" is tfswap and grappler-ns with the margin
	// for recomputations of earlier versions. Empty means "all".
	FitAccounting string
	// Recompute says where backward readers may read a recomputed copy of a cheap op's
	// output instead of a swapped-in one (--recompute): "auto" (the auto strategy weighs it
	// against swapping alone), "off" or "max". Empty means "auto".
	Recompute string
	// Offload says which variables, with their optimizer slots, live in host memory
	// (--offload): "none" (the default), "all", or "auto" (the planner moves the largest
	// groups where swapping alone does not fit or slows the step). Empty means "none".
	Offload string
	// OffloadVariables names variables to keep in host memory with their optimizer slots
	// (--offload-variables), instead of a mode: each group holding a named variable moves,
	// whatever the budget, and names the graph does not hold are ignored. Unlike "auto" the
	// choice does not depend on the graph, so every graph of a session (its initialiser's,
	// its training step's) places the named variables alike: this is how the Grappler
	// bridge runs a plan made offline with Offload "auto". It needs Offload "" or "none".
	OffloadVariables []string
	// Explain records the plan's reasoning for every swap candidate in the report
	// (Prediction.Explanation; --explain).
	Explain bool
	// BOIterations is how many weight vectors the autoswap strategy's Bayesian optimisation
	// tries after its four plain scores (--bo-iterations). Zero means the default, 12;
	// NoBayesianOptimisation turns the optimisation off.
	BOIterations           int
	NoBayesianOptimisation bool
	// Window fixes the window strategy's schedule-window in bytes (--window). Zero tunes it.
	Window int64
	// SearchCandidates is auto's effort rule (--search-candidates): on a graph with more
	// swap candidates than this, auto runs only LMS and vDNN's static plans, without its
	// quadratic searches (plan.DefaultSearchCandidates says which and why), and the report
	// says so (Prediction.Effort). Zero means plan.DefaultSearchCandidates; negative turns
	// the rule off.
	SearchCandidates int

	// SwapoutThreshold is LMS's swapout_threshold: a consumer at least this many topological
	// levels after the producer reads a swapped-in copy (--swapout-threshold). Zero means 10.
	SwapoutThreshold int
	// SwapinAhead is LMS's swapin_ahead: the swap-in is triggered this many levels before
	// its consumer (--swapin-ahead). Zero means 2.
	SwapinAhead int
	// SwapinGroupBy is LMS's swapin_groupby: far consumers within this many levels of each
	// other share one swap-in (--swapin-groupby). Zero means 5; OneSwapInPerConsumer gives
	// every far consumer its own swap-in instead.
	SwapinGroupBy        int
	OneSwapInPerConsumer bool
	// MinTensorBytes is the smallest tensor swapped (--min-bytes). Zero means 64 KiB;
	// NoMinTensorBytes swaps tensors of any size.
	MinTensorBytes   int64
	NoMinTensorBytes bool
	// ExcludeScopes are name scopes whose tensors are never swapped ("a/b" excludes "a/b"
	// and "a/b/...", not "a/bc"; --exclude-scope), and ExcludeOps op types whose outputs
	// are never swapped (--exclude-op).
	ExcludeScopes []string
	ExcludeOps    []string
	// Preserve names nodes tfswap leaves exactly as they are (--preserve): their outputs are
	// never swapped or recomputed, and no input is added to them or redirected. Every name
	// must be a node of the graph ("a:1" and "^a" name node a).
	Preserve []string
	// ComputeDevice is the device whose tensors are swapped, such as "/device:GPU:1", or
	// "/device:CPU:1" in the two-device CPU emulation (--compute-device); or several, comma
	// separated, for the replicas of a data-parallel step ("/device:CPU:1,/device:CPU:2"):
	// each is planned against its own budget (Budget applies per device, DeviceBudgets by
	// name) and swaps to the host of its own task. Empty means every GPU; nodes without a
	// device count as /device:GPU:0 (or the first device named).
	ComputeDevice string
	// HostDevice is the CPU swapped tensors are kept on (--host-device). Empty means CPU:0
	// of the producer's task.
	HostDevice string
	// DeviceGate puts the trigger's control edge on a swap-in on the consumer's device
	// instead of the host. It is an experiment that shows why tfswap gates on the host:
	// TensorFlow then copies the tensor back right after the swap-out, and no memory is
	// saved. Never set it to save memory.
	DeviceGate bool
	// ReduceGates makes each gate whose trigger has a floating-point output an L2Loss of it
	// (a 4-byte scalar; rewrite.GateReduce) instead of an Identity (--gate-kind reduce).
	// TensorFlow runs the same step either way; Grappler's VirtualCluster, which counts an
	// Identity gate's output as a new buffer as large as the tensor it reads, then counts 4
	// bytes per gate.
	ReduceGates bool
}

// DefaultDevice is the device profile planned for when Options name none and no GPU is
// listed: the 16 GB V100 on PCIe 3.0.
const DefaultDevice = plan.DefaultDevice

// Strategies returns the names of the planning strategies, "auto" (the default) first.
func Strategies() []string { return plan.StrategyNames() }

// DeviceNames returns the names of the built-in device profiles.
func DeviceNames() []string { return cost.ProfileNames() }

// DefaultBudget returns the default budget of a built-in device profile: the memory
// TensorFlow's allocator may hand out on that GPU, its memory less what TensorFlow keeps back
// for its compute capability (14.97 GiB on the 16 GiB V100).
func DefaultBudget(device string) (int64, error) {
	p, err := cost.LookupProfile(device)
	if err != nil {
		return 0, &Error{Kind: ErrBadOptions, Err: err}
	}
	return plan.DefaultBudget(p), nil
}

// fixedThresholds reports whether o fixes any of LMS's thresholds, and the first it fixes.
func (o *Options) fixedThresholds() (string, bool) {
	switch {
	case o.SwapoutThreshold != 0:
		return "SwapoutThreshold", true
	case o.SwapinAhead != 0:
		return "SwapinAhead", true
	case o.SwapinGroupBy != 0:
		return "SwapinGroupBy", true
	case o.OneSwapInPerConsumer:
		return "OneSwapInPerConsumer", true
	}
	return "", false
}

// strategy returns the strategy o asks for (see Options.Strategy).
func (o *Options) strategy() (string, error) {
	s := o.Strategy
	if f, ok := o.fixedThresholds(); ok {
		switch s {
		case "", "lms", "lms-fixed":
			s = "lms-fixed"
		default:
			return "", badOptions("%s fixes LMS's thresholds, which strategy %s does not use: drop it, or use strategy lms-fixed", f, s)
		}
	}
	if s == "" {
		s = "auto"
	}
	if _, err := plan.LookupStrategy(s); err != nil {
		return "", &Error{Kind: ErrBadOptions, Err: err}
	}
	if s == "lms-fixed" {
		for _, p := range []struct {
			name string
			set  bool
		}{{"Explain", o.Explain}, {"BOIterations", o.BOIterations != 0 || o.NoBayesianOptimisation}, {"Window", o.Window != 0}, {"Recompute", o.Recompute != ""}, {"SearchCandidates", o.SearchCandidates != 0}} {
			if p.set {
				return "", badOptions("%s is a planning option: fixed LMS thresholds (lms-fixed) do not plan for the budget", p.name)
			}
		}
	}
	return s, nil
}

// rewriteOptions checks o and returns the rewrite package's options for it (without the
// device, budget and files, which Plan resolves).
func (o *Options) rewriteOptions() (rewrite.Options, plan.PlanOptions, error) {
	var ro rewrite.Options
	var po plan.PlanOptions
	s, err := o.strategy()
	if err != nil {
		return ro, po, err
	}
	check := func(ok bool, format string, args ...any) {
		if !ok && err == nil {
			err = badOptions(format, args...)
		}
	}
	check(o.Device == "" || o.DeviceFile == "", "give either Device or DeviceFile, not both")
	check(o.Budget >= 0, "Budget must not be negative, not %d", o.Budget)
	check(o.BatchScale >= 0, "BatchScale must not be negative, not %d", o.BatchScale)
	check(o.BOIterations >= 0, "BOIterations must not be negative, not %d (NoBayesianOptimisation turns it off)", o.BOIterations)
	check(!o.NoBayesianOptimisation || o.BOIterations == 0, "give either BOIterations or NoBayesianOptimisation, not both")
	check(o.Window >= 0, "Window must not be negative, not %d", o.Window)
	check(o.SwapoutThreshold >= 0, "SwapoutThreshold must be at least 1, not %d", o.SwapoutThreshold)
	check(o.SwapinAhead >= 0, "SwapinAhead must be at least 1, not %d", o.SwapinAhead)
	check(o.SwapinGroupBy >= 0, "SwapinGroupBy must not be negative, not %d (OneSwapInPerConsumer gives every consumer its own swap-in)", o.SwapinGroupBy)
	check(!o.OneSwapInPerConsumer || o.SwapinGroupBy == 0, "give either SwapinGroupBy or OneSwapInPerConsumer, not both")
	check(o.MinTensorBytes >= 0, "MinTensorBytes must not be negative, not %d (NoMinTensorBytes swaps tensors of any size)", o.MinTensorBytes)
	check(!o.NoMinTensorBytes || o.MinTensorBytes == 0, "give either MinTensorBytes or NoMinTensorBytes, not both")
	if _, perr := rewrite.ParseOffloadMode(o.Offload); perr != nil {
		check(false, "Offload: %v", perr)
	}
	check(len(o.OffloadVariables) == 0 || o.Offload == "" || o.Offload == string(rewrite.OffloadNone), "give either Offload %q or OffloadVariables, not both", o.Offload)
	for _, v := range o.OffloadVariables {
		check(v != "", "OffloadVariables: empty variable name")
	}
	check(o.Recompute == "" || slices.Contains(rewrite.RecomputeModes, o.Recompute), "Recompute: want one of %s, got %q", strings.Join(rewrite.RecomputeModes, ", "), o.Recompute)
	if err != nil {
		return ro, po, err
	}
	if _, err := plan.ParseFitAccounting(o.FitAccounting); err != nil {
		return ro, po, badOptions("FitAccounting: %v", err)
	}
	ro = rewrite.Options{SwapoutThreshold: o.SwapoutThreshold, SwapinAhead: o.SwapinAhead, SwapinGroupBy: o.SwapinGroupBy, MinTensorBytes: o.MinTensorBytes,
		ExcludeScopes: clone(o.ExcludeScopes), ExcludeOps: clone(o.ExcludeOps), Preserve: clone(o.Preserve), ComputeDevice: o.ComputeDevice, HostDevice: o.HostDevice}
	if o.OneSwapInPerConsumer {
		ro.SwapinGroupBy = -1
	}
	if o.NoMinTensorBytes {
		ro.MinTensorBytes = -1
	}
	if o.DeviceGate {
		ro.Gate = rewrite.GateDevice
	}
	if o.ReduceGates {
		ro.GateKind = rewrite.GateReduce
	}
	if _, err := rewrite.ParseComputeDevices(o.ComputeDevice); err != nil {
		return ro, po, badOptions("ComputeDevice: %v", err)
	}
	if _, err := graphdef.ParseDevice(o.HostDevice); err != nil {
		return ro, po, badOptions("HostDevice: %v", err)
	}
	if err := rewrite.CheckDevices(o.ComputeDevice, o.HostDevice); err != nil {
		return ro, po, &Error{Kind: ErrBadOptions, Err: err}
	}
	po = plan.PlanOptions{Strategy: s, Budget: o.Budget, Explain: o.Explain, BOIterations: o.BOIterations, Window: o.Window, SearchCandidates: o.SearchCandidates,
		FitAccounting: o.FitAccounting, Recompute: o.Recompute, Offload: rewrite.OffloadMode(o.Offload),
		OffloadVariables: clone(o.OffloadVariables)}
	if o.NoBayesianOptimisation {
		po.BOIterations = -1
	}
	for key, n := range o.DeviceBudgets {
		d, err := graphdef.ParseDevice(key)
		if err != nil || d.Type == "" {
			return ro, po, badOptions("DeviceBudgets: %q is not a device such as /device:GPU:1", key)
		}
		if d.Type == "CPU" {
			// A CPU is a compute device only when ComputeDevice names it (the two-device CPU
			// emulation); every other CPU is a host, which has no budget.
			if !rewrite.NamesComputeCPU(o.ComputeDevice, d) {
				return ro, po, badOptions("DeviceBudgets: %s is a CPU, not a compute device (budgets are for GPUs, or for the CPU ComputeDevice names)", d)
			}
		}
		if n <= 0 {
			return ro, po, badOptions("DeviceBudgets: the budget of %s must be positive, not %d", key, n)
		}
		if po.DeviceBudgets == nil {
			po.DeviceBudgets = map[string]int64{}
		}
		po.DeviceBudgets[d.String()] = n
	}
	for _, group := range o.SharedLinks {
		var g []string
		for _, m := range group {
			d, err := graphdef.ParseDevice(strings.TrimSpace(m))
			if err != nil || d.Type == "" {
				return ro, po, badOptions("SharedLinks: %q is not a device", m)
			}
			g = append(g, d.String())
		}
		if len(g) < 2 {
			return ro, po, badOptions("SharedLinks: a group names at least two devices, such as /device:GPU:0 and /device:GPU:1")
		}
		po.Sim.SharedLinks = append(po.Sim.SharedLinks, g)
	}
	po.Sim.BatchScale = max(1, o.BatchScale)
	po.Sim.Fetch = clone(o.Fetch)
	po.Sim.NoTF32 = o.NoTF32
	return ro, po, nil
}
