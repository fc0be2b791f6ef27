package main

import (
	"encoding/json"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/urfave/cli/v2"
)

// lmsFlags are the flags of the LMS-style rewrite options.
func lmsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "swapout-threshold", Value: rewrite.DefaultSwapoutThreshold, Usage: "fixed LMS threshold (no planning): least topological distance (levels) from producer to a consumer for that consumer to read a swapped-in copy"},
		&cli.IntFlag{Name: "swapin-ahead", Value: rewrite.DefaultSwapinAhead, Usage: "fixed LMS threshold (no planning): levels before its consumer at which a swap-in is triggered"},
		&cli.IntFlag{Name: "swapin-groupby", Value: rewrite.DefaultSwapinGroupBy, Usage: "fixed LMS threshold (no planning): far consumers within this many levels share one swap-in (0 or -1: one swap-in per consumer)"},
		&cli.StringFlag{Name: "min-bytes", Value: "64KiB", Usage: "smallest tensor to swap (e.g. 65536, 64KiB, 1MiB; 0 for no minimum)"},
		&cli.StringSliceFlag{Name: "exclude-scope", Usage: "never swap tensors made in this name scope (repeatable)"},
		&cli.StringSliceFlag{Name: "exclude-op", Usage: "never swap outputs of this op type (repeatable)"},
		&cli.StringSliceFlag{Name: "preserve", Usage: "leave this node exactly as it is (name the nodes a step feeds): never swap or recompute its outputs, never redirect or add to its inputs (repeatable; the node must exist)"},
		&cli.StringSliceFlag{Name: "compute-device", Usage: "a device whose tensors are swapped, e.g. /device:GPU:1; repeat it or give a comma list for the replicas of a data-parallel step, each planned with its own budget (default: every GPU; nodes without a device count as the first named, or /device:GPU:0)"},
		&cli.StringFlag{Name: "host-device", Usage: "the device swapped tensors are kept on (default: CPU:0 of the producer's task)"},
		&cli.StringFlag{Name: "gate-kind", Value: "identity", Usage: "the op each gate (the node a swap-in's control edge comes from) is: identity (an Identity of the trigger's output) or reduce (an L2Loss of a floating-point output, 4 bytes, which Grappler's VirtualCluster counts as 4 bytes instead of the whole tensor; an Identity where the trigger has none)"},
		&cli.StringFlag{Name: "gate", Value: "host", Usage: "which swap-in carries the trigger: host (saves memory) or device (an experiment: TensorFlow copies early)", Hidden: true},
	}
}

// lmsOptions reads the LMS flags into opts, checking them where the command line gives them:
// a fixed threshold is passed on only when its flag is given (tfswap.Options then asks for
// fixed LMS thresholds), the rest always.
func lmsOptions(c *cli.Context, opts *tfswap.Options) error {
	if c.Int("swapout-threshold") < 1 {
		return usagef("--swapout-threshold must be at least 1")
	}
	if c.Int("swapin-ahead") < 1 {
		return usagef("--swapin-ahead must be at least 1")
	}
	if c.IsSet("swapout-threshold") {
		opts.SwapoutThreshold = c.Int("swapout-threshold")
	}
	if c.IsSet("swapin-ahead") {
		opts.SwapinAhead = c.Int("swapin-ahead")
	}
	switch g := c.Int("swapin-groupby"); {
	case g < -1:
		return usagef("--swapin-groupby must be -1 or more")
	case !c.IsSet("swapin-groupby"):
	case g == 0 || g == -1:
		opts.OneSwapInPerConsumer = true
	default:
		opts.SwapinGroupBy = g
	}
	opts.ExcludeScopes = c.StringSlice("exclude-scope")
	opts.ExcludeOps = c.StringSlice("exclude-op")
	opts.Preserve = c.StringSlice("preserve")
	opts.ComputeDevice = strings.Join(c.StringSlice("compute-device"), ",")
	opts.HostDevice = c.String("host-device")
	n, err := units.ParseBytes(c.String("min-bytes"))
	if err != nil {
		return usagef("--min-bytes: %v", err)
	}
	if n == 0 {
		opts.NoMinTensorBytes = true
	} else {
		opts.MinTensorBytes = n
	}
	switch c.String("gate") {
	case "host":
	case "device":
		opts.DeviceGate = true
	default:
		return usagef("--gate must be host or device, not %q", c.String("gate"))
	}
	switch k, err := rewrite.ParseGateKind(c.String("gate-kind")); {
	case err != nil:
		return usagef("--gate-kind: %v", err)
	case k == rewrite.GateReduce:
		opts.ReduceGates = true
	}
	if _, err := rewrite.ParseComputeDevices(opts.ComputeDevice); err != nil {
		return usagef("--compute-device: %v", err)
	}
	if _, err := graphdef.ParseDevice(opts.HostDevice); err != nil {
		return usagef("--host-device: %v", err)
	}
	if err := rewrite.CheckDevices(opts.ComputeDevice, opts.HostDevice); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// lmsRewriteOptions reads the LMS flags as the rewrite package's options, for the commands
// that analyse or tune a graph without planning it (inspect, tune).
func lmsRewriteOptions(c *cli.Context) (rewrite.Options, error) {
	var o tfswap.Options
	if err := lmsOptions(c, &o); err != nil {
		return rewrite.Options{}, err
	}
	ro := rewrite.Options{SwapoutThreshold: o.SwapoutThreshold, SwapinAhead: o.SwapinAhead, SwapinGroupBy: o.SwapinGroupBy, MinTensorBytes: o.MinTensorBytes,
		ExcludeScopes: o.ExcludeScopes, ExcludeOps: o.ExcludeOps, Preserve: o.Preserve, ComputeDevice: o.ComputeDevice, HostDevice: o.HostDevice}
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
	return ro, nil
}

// planFlags are the flags of budget-driven planning.
func planFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "strategy", Usage: "the strategy: " + strings.Join(plan.StrategyNames(), ", ") + " (default auto, or lms-fixed when a fixed LMS threshold is given; --list-strategies describes them)"},
		&cli.BoolFlag{Name: "list-strategies", Usage: "describe the planning strategies and exit"},
		&cli.StringSliceFlag{Name: "debug-pass", Usage: "print the best plan after this planning pass to stderr (repeatable; all for every pass; one of " + strings.Join(plan.DebugPassNames(), ", ") + "); sets TFSWAP_DEBUG_PASS"},
		&cli.BoolFlag{Name: "pass-time", Usage: "print each planning pass's time and simulations to stderr; sets TFSWAP_PASSTIME"},
		&cli.StringFlag{Name: "device", Usage: "plan for this GPU, a built-in device profile (default: the GPU TensorFlow sees when this tfswap has the runtime and no --budget is given, else " + plan.DefaultDevice + "; see tfswap simulate --list-devices)"},
		&cli.StringFlag{Name: "device-file", Usage: "plan for the GPU of this device profile file"},
		&cli.StringFlag{Name: "budget", Usage: "most memory each GPU may use, e.g. 14GiB (default: what TensorFlow " + cost.TensorFlowVersion + "'s allocator gets on the device: the limit TensorFlow reports for a GPU it sees, else the profile's memory less 500 MiB to 1800 MiB by compute capability)"},
		&cli.StringSliceFlag{Name: "device-budget", Usage: "DEVICE=SIZE: the budget of one GPU, e.g. /device:GPU:1=10GiB (repeatable)"},
		&cli.StringSliceFlag{Name: "shared-link", Usage: "DEVICE+DEVICE+...: GPUs that share one host link, a PCIe switch, e.g. /device:GPU:0+/device:GPU:1 (repeatable, one group each)"},
		&cli.IntFlag{Name: "batch-scale", Value: 1, Usage: "plan as if the batch dimension were this many times larger (the graph's shapes are kept)"},
		&cli.StringSliceFlag{Name: "fetch", Usage: "node a training step runs (repeatable, e.g. --fetch train); planning simulates only its fan-in (default: the training step found, the sinks whose fan-in holds the variable updates)"},
		&cli.StringFlag{Name: "measured", Usage: "measured op profile whose per-node times replace the estimates when planning"},
		&cli.BoolFlag{Name: "no-tf32", Usage: "plan with float32 matrix products at the FP32 rate even where TF32 tensor cores exist"},
		&cli.IntFlag{Name: "bo-iterations", Usage: "autoswap: weight vectors the Bayesian optimisation tries after the four plain scores (default 12; -1: none)"},
		&cli.StringFlag{Name: "window", Usage: "window: the schedule-window in bytes (default: tuned)"},
		&cli.IntFlag{Name: "search-candidates", Usage: "auto's effort rule: on a graph with more swap candidates (tensors a later op reads) than this, auto runs only vdnn-all, vdnn-conv and window at one size, without the searches whose time grows as the square of the graph, and says so (default " + strconv.Itoa(plan.DefaultSearchCandidates) + "; -1: no bound)"},
		&cli.BoolFlag{Name: "explain", Usage: "print the plan's reasoning for every swap candidate"},
		&cli.StringFlag{Name: "offload", Value: "none", Usage: "keep variables and their optimizer slots in host memory, their updates on the host CPU and their reads copied to the GPU just before use: none, all, or auto (the planner moves the largest variables where swapping alone does not fit or slows the step)"},
		&cli.StringSliceFlag{Name: "offload-variables", Usage: "NAME[,NAME...]: keep these variables (each with its group: its optimizer slots) in host memory whatever the budget, instead of an --offload mode; names the graph does not hold are ignored. The choice does not depend on the graph, so every graph of a session places them alike: give the Grappler bridge the variables an offline --offload auto plan moved (repeatable)"},
		&cli.StringFlag{Name: "recompute", Value: "auto", Usage: "where backward readers may read a recomputed copy of a cheap op's output instead of a swapped-in one: auto (the auto strategy recomputes where the simulator says it beats swapping alone), off, or max (recompute every candidate, then swap what remains)"},
		&cli.StringFlag{Name: "fit-accounting", Value: "all", Usage: "the accountings a plan's peak must fit the budget by: all (tfswap's model of the runtime, and Grappler's VirtualCluster trace read to the nanosecond and, as TensorFlow's DeterminePeakMemoryUsage reads it, to the microsecond), or a comma-separated list of tfswap, grappler-ns, grappler-us; both is tfswap,grappler-ns with the 2% recomputation margin of earlier versions"},
	}
}

// fixedThresholds are the options that fix LMS's thresholds: with any of them the rewrite
// is LMS with those thresholds (the lms-fixed strategy), not planned for the budget.
var fixedThresholds = []string{"swapout-threshold", "swapin-ahead", "swapin-groupby"}

// plannerOnly are the planning options that fixed LMS thresholds leave without effect.
var plannerOnly = []string{"explain", "bo-iterations", "window", "search-candidates", "recompute", "offload", "offload-variables", "debug-pass", "pass-time"}

// rewriteStrategy returns the strategy the command line asks for: lms-fixed with a fixed
// LMS threshold or --strategy lms-fixed, else --strategy, else auto.
func rewriteStrategy(c *cli.Context) (string, error) {
	s := c.String("strategy")
	for _, f := range fixedThresholds {
		if !c.IsSet(f) {
			continue
		}
		switch s {
		case "", "lms", "lms-fixed":
			s = "lms-fixed"
		default:
			return "", usagef("--%s fixes LMS's thresholds, which --strategy %s does not use: drop it, or give --strategy lms-fixed", f, s)
		}
	}
	if s == "" {
		s = "auto"
	}
	if s == "lms-fixed" {
		for _, f := range plannerOnly {
			if c.IsSet(f) {
				return "", usagef("--%s is a planning option: fixed LMS thresholds (lms-fixed) do not plan for the budget", f)
			}
		}
	}
	return s, nil
}

// planOptions reads the planning flags into opts, checking them where the command line gives
// them, so that a bad value is a usage error naming its flag.
func planOptions(c *cli.Context, opts *tfswap.Options) error {
	if _, err := plan.LookupStrategy(c.String("strategy")); err != nil {
		return usagef("--strategy: %v", err)
	}
	if r := c.String("recompute"); !slices.Contains(rewrite.RecomputeModes, r) {
		return usagef("--recompute: want one of %s, got %q", strings.Join(rewrite.RecomputeModes, ", "), r)
	} else if c.IsSet("recompute") {
		opts.Recompute = r
	}
	if _, err := rewrite.ParseOffloadMode(c.String("offload")); err != nil {
		return usagef("--offload: %v", err)
	}
	opts.Offload = c.String("offload")
	if names := c.StringSlice("offload-variables"); len(names) > 0 {
		if opts.Offload != string(rewrite.OffloadNone) {
			return usagef("give either --offload %s or --offload-variables, not both", opts.Offload)
		}
		for _, n := range names {
			if n == "" {
				return usagef("--offload-variables: empty variable name")
			}
		}
		opts.OffloadVariables = names
	}
	opts.FitAccounting = c.String("fit-accounting")
	if _, err := plan.ParseFitAccounting(opts.FitAccounting); err != nil {
		return usagef("--fit-accounting: %v", err)
	}
	opts.Explain = c.Bool("explain")
	if c.IsSet("device") && c.IsSet("device-file") {
		return usagef("give either --device or --device-file, not both")
	}
	opts.Device, opts.DeviceFile = c.String("device"), c.String("device-file")
	if s := c.String("budget"); s != "" {
		n, err := units.ParseBytes(s)
		if err != nil || n <= 0 {
			return usagef("--budget: want a size such as 15GiB, got %q", s)
		}
		opts.Budget = n
	}
	for _, db := range c.StringSlice("device-budget") {
		dev, size, ok := strings.Cut(db, "=")
		d, err := graphdef.ParseDevice(dev)
		if !ok || err != nil || d.Type == "" {
			return usagef("--device-budget: want DEVICE=SIZE such as /device:GPU:1=10GiB, got %q", db)
		}
		if d.Type == "CPU" {
			// A CPU is a compute device only when --compute-device names it (the two-device
			// CPU emulation); every other CPU is a host, which has no budget.
			if !rewrite.NamesComputeCPU(strings.Join(c.StringSlice("compute-device"), ","), d) {
				return usagef("--device-budget: %s is a CPU, not a compute device (budgets are for GPUs, or for the CPU --compute-device names)", d)
			}
		}
		n, err := units.ParseBytes(size)
		if err != nil || n <= 0 {
			return usagef("--device-budget: bad size in %q", db)
		}
		if opts.DeviceBudgets == nil {
			opts.DeviceBudgets = map[string]int64{}
		}
		opts.DeviceBudgets[d.String()] = n
	}
	for _, l := range c.StringSlice("shared-link") {
		var group []string
		for _, m := range strings.Split(l, "+") {
			d, err := graphdef.ParseDevice(strings.TrimSpace(m))
			if err != nil || d.Type == "" {
				return usagef("--shared-link: %q is not a device", m)
			}
			group = append(group, d.String())
		}
		if len(group) < 2 {
			return usagef("--shared-link: name at least two devices joined by +, e.g. /device:GPU:0+/device:GPU:1")
		}
		opts.SharedLinks = append(opts.SharedLinks, group)
	}
	if n := c.Int("batch-scale"); n < 1 {
		return usagef("--batch-scale must be at least 1, not %d", n)
	}
	opts.BatchScale = c.Int("batch-scale")
	opts.Fetch = c.StringSlice("fetch")
	opts.NoTF32 = c.Bool("no-tf32")
	opts.MeasuredProfile = c.String("measured")
	if s := c.String("window"); s != "" {
		n, err := units.ParseBytes(s)
		if err != nil || n <= 0 {
			return usagef("--window: want a size such as 4GiB, got %q", s)
		}
		opts.Window = n
	}
	switch n := c.Int("search-candidates"); {
	case n < -1:
		return usagef("--search-candidates must be -1 or more")
	default:
		opts.SearchCandidates = n
	}
	switch n := c.Int("bo-iterations"); {
	case n < -1:
		return usagef("--bo-iterations must be -1 or more")
	case n == -1:
		opts.NoBayesianOptimisation = true
	default:
		opts.BOIterations = n
	}
	s, err := rewriteStrategy(c)
	if err != nil {
		return err
	}
	opts.Strategy = s
	return passDebugFlags(c)
}

// passDebugFlags checks --debug-pass and --pass-time and passes them to the planner as
// TFSWAP_DEBUG_PASS and TFSWAP_PASSTIME (rewrite/plan/passes.go), which it reads.
func passDebugFlags(c *cli.Context) error {
	if ps := c.StringSlice("debug-pass"); len(ps) > 0 {
		names := plan.DebugPassNames()
		for _, p := range ps {
			if p != "all" && !slices.Contains(names, p) {
				return usagef("--debug-pass: unknown planning pass %q (passes: all, %s)", p, strings.Join(names, ", "))
			}
		}
		if err := os.Setenv("TFSWAP_DEBUG_PASS", strings.Join(ps, ",")); err != nil {
			return err
		}
	}
	if c.Bool("pass-time") {
		if err := os.Setenv("TFSWAP_PASSTIME", "1"); err != nil {
			return err
		}
	}
	return nil
}

func listStrategies(w io.Writer) {
	for _, p := range plan.Strategies() {
		fmt.Fprintf(w, "%-10s %s\n", p.Name, p.Doc)
	}
}

func init() {
	register(&cli.Command{
		Name:      "rewrite",
		Usage:     "swap tensors to host memory: write the rewritten graph",
		UsageText: "tfswap rewrite [options] MODEL [-o OUTPUT]",
		Description: "Reads MODEL (.pb, .pbtxt, SavedModel directory, or - for a binary GraphDef on stdin) and writes\n" +
			"it rewritten, atomically, to OUTPUT (default MODEL.swap.pb; - for stdout). The input is never\n" +
			"overwritten unless --in-place is given.\n\n" +
			"With no options it plans for the GPU the graph will run on: the GPU TensorFlow sees when this\n" +
			"tfswap has the TensorFlow runtime and a GPU is present, with the memory limit TensorFlow gives\n" +
			"its allocator as the budget; otherwise the " + plan.DefaultDevice + " profile at its default budget, the\n" +
			"memory less what TensorFlow " + cost.TensorFlowVersion + " keeps back (500 MiB to 1800 MiB by compute capability).\n" +
			"The auto strategy picks the tensors to swap (or recompute), the ops that trigger their\n" +
			"swap-ins and the ops that wait for swap-outs so that the simulated peak of every GPU stays\n" +
			"within the budget at the least simulated step time. A graph that already fits is written\n" +
			"unchanged. When nothing fits it fails (exit 1) saying what is live at the lowest peak it\n" +
			"reached. --device, --budget and --strategy choose otherwise.\n\n" +
			"--swapout-threshold, --swapin-ahead, --swapin-groupby or --strategy lms-fixed apply TensorFlow\n" +
			"Large Model Support's fixed thresholds instead (defaults 10, 2 and 5): every tensor is swapped\n" +
			"for its consumers at least --swapout-threshold levels later, whatever the budget.\n\n" +
			"Every rewrite ends with its prediction for the device: the peak against the budget by\n" +
			"each accounting (tfswap's, and the VirtualCluster's in nanoseconds and in microseconds),\n" +
			"the step-time overhead against\n" +
			"the unswapped graph, the bytes over the host link, and a warning when the result does not\n" +
			"fit or costs more than 50%.",
		Flags: append(append(modelFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "where to write the rewritten model (- for stdout)"},
			&cli.StringFlag{Name: "output-format", Usage: "pb, pbtxt or savedmodel (default: from the output path)"},
			&cli.BoolFlag{Name: "in-place", Usage: "overwrite the input model"},
			&cli.StringFlag{Name: "report", Usage: "also write the swaps and the prediction as JSON to this file"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "list every swap with its trigger and consumers"},
		), append(lmsFlags(), planFlags()...)...),
		Action: rewriteAction,
	})
}

func rewriteAction(c *cli.Context) error {
	if c.Bool("list-strategies") {
		listStrategies(c.App.Writer)
		return nil
	}
	var opts tfswap.Options
	if err := lmsOptions(c, &opts); err != nil {
		return err
	}
	if err := planOptions(c, &opts); err != nil {
		return err
	}
	if c.NArg() == 1 && c.String("output") != "" && c.Bool("in-place") {
		return usagef("give either --output or --in-place, not both")
	}
	outFormat, err := graphdef.ParseFormat(c.String("output-format"))
	if err != nil {
		return usagef("--output-format: %v", err)
	}
	m, in, err := loadFacadeModel(c, c.App.Reader)
	if err != nil {
		return err
	}
	out := c.String("output")
	switch {
	case c.Bool("in-place"):
		if in == "-" {
			return usagef("--in-place needs a model file, not stdin")
		}
		out = in
	case out == "" && in == "-":
		out = "-"
	case out == "":
		out = defaultOutput(in)
	}
	if outFormat, err = m.OutputFormat(out, outFormat); err != nil {
		return err
	}
	outputs := append([]pathArg{{opt: "-o", path: out, dir: outFormat == graphdef.FormatSavedModel, mayBeModel: c.Bool("in-place"), stdout: true}},
		fileArgs(c, "report")...)
	if err := checkPaths(append([]pathArg{modelArg(m.Graph(), in)}, fileArgs(c, "measured", "device-file")...), outputs); err != nil {
		if !c.Bool("in-place") && c.String("output") != "" && in != "-" && graphdef.SamePath(in, out) {
			return fmt.Errorf("%w (use --in-place to replace it)", err)
		}
		return err
	}
	// Without --device the plan is for the GPU TensorFlow sees, unless a budget is given
	// (tfswap.Options.VisibleGPUs), else for the default profile.
	opts.VisibleGPUs = facadeGPUs(visibleGPUs, "neither built in nor a tfswap-runtime binary beside tfswap")
	res, err := tfswap.Plan(m, opts)
	if err != nil {
		return err
	}
	summary := c.App.Writer
	if out == "-" {
		summary = c.App.ErrWriter
		data, err := res.Model.Marshal(outFormat)
		if err != nil {
			return err
		}
		if _, err := c.App.Writer.Write(data); err != nil {
			return fmt.Errorf("<stdout>: %v", err)
		}
	} else if err := res.Model.Write(out, tfswap.WriteOptions{Format: outFormat, InPlace: c.Bool("in-place")}); err != nil {
		return err
	}
	if path := c.String("report"); path != "" {
		data, err := json.MarshalIndent(reportOf(in, out, res.Report), "", "  ")
		if err != nil {
			return err
		}
		if err := graphdef.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	if err := res.Report.WriteText(summary, tfswap.TextOptions{Input: in, Output: out, Verbose: c.Bool("verbose")}); err != nil {
		return err
	}
	for _, w := range res.Report.Prediction.Warnings {
		fmt.Fprintf(c.App.ErrWriter, "tfswap: warning: %s\n", w)
	}
	return nil
}

// report is the JSON form of a rewrite, as --report writes it: the facade's report with the
// input and output paths.
type report struct {
	Input  string `json:"input"`
	Output string `json:"output"`
	*tfswap.Report
}

// reportOf returns the --report JSON of a rewrite of in written to out. Its "device_source"
// says "flag" where the facade says tfswap.DeviceGiven (--device or --device-file), as the
// command's reports always have.
func reportOf(in, out string, r *tfswap.Report) report {
	rep := *r
	if rep.Prediction.DeviceSource == tfswap.DeviceGiven {
		rep.Prediction.DeviceSource = "flag"
	}
	return report{Input: in, Output: out, Report: &rep}
}

// marshalFor serialises m in format f for stdout (a SavedModel cannot be written there).
func marshalFor(m *graphdef.Model, f graphdef.Format) ([]byte, error) {
	switch f {
	case graphdef.FormatPBTXT:
		return m.MarshalText()
	case graphdef.FormatSavedModel:
		return nil, usagef("a SavedModel cannot be written to stdout")
	}
	return m.Marshal()
}
