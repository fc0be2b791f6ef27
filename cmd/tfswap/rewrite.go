package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

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
		&cli.StringFlag{Name: "compute-device", Usage: "the device whose tensors are swapped, e.g. /device:GPU:1 (default: every GPU; nodes without a device count as /device:GPU:0)"},
		&cli.StringFlag{Name: "host-device", Usage: "the device swapped tensors are kept on (default: CPU:0 of the producer's task)"},
		&cli.StringFlag{Name: "gate", Value: "host", Usage: "which swap-in carries the trigger: host (saves memory) or device (an experiment: TensorFlow copies early)", Hidden: true},
	}
}

// lmsOptions reads the LMS flags.
func lmsOptions(c *cli.Context) (rewrite.Options, error) {
	o := rewrite.Options{
		SwapoutThreshold: c.Int("swapout-threshold"),
		SwapinAhead:      c.Int("swapin-ahead"),
		SwapinGroupBy:    c.Int("swapin-groupby"),
		ExcludeScopes:    c.StringSlice("exclude-scope"),
		ExcludeOps:       c.StringSlice("exclude-op"),
		ComputeDevice:    c.String("compute-device"),
		HostDevice:       c.String("host-device"),
	}
	if o.SwapoutThreshold < 1 {
		return o, usagef("--swapout-threshold must be at least 1")
	}
	if o.SwapinAhead < 1 {
		return o, usagef("--swapin-ahead must be at least 1")
	}
	if o.SwapinGroupBy == 0 || o.SwapinGroupBy == -1 {
		o.SwapinGroupBy = -1 // one swap-in per consumer (the library's zero means "default")
	} else if o.SwapinGroupBy < -1 {
		return o, usagef("--swapin-groupby must be -1 or more")
	}
	n, err := units.ParseBytes(c.String("min-bytes"))
	if err != nil {
		return o, usagef("--min-bytes: %v", err)
	}
	o.MinTensorBytes = n
	if n == 0 {
		o.MinTensorBytes = -1
	}
	switch c.String("gate") {
	case "host":
		o.Gate = rewrite.GateHost
	case "device":
		o.Gate = rewrite.GateDevice
	default:
		return o, usagef("--gate must be host or device, not %q", c.String("gate"))
	}
	for _, d := range []struct{ flag, val string }{{"compute-device", o.ComputeDevice}, {"host-device", o.HostDevice}} {
		if _, err := graphdef.ParseDevice(d.val); err != nil {
			return o, usagef("--%s: %v", d.flag, err)
		}
	}
	if err := rewrite.CheckDevices(o.ComputeDevice, o.HostDevice); err != nil {
		return o, usagef("%v", err)
	}
	return o, nil
}

// planFlags are the flags of budget-driven planning.
func planFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "strategy", Usage: "the strategy: " + strings.Join(rewrite.StrategyNames(), ", ") + " (default auto, or lms-fixed when a fixed LMS threshold is given; --list-strategies describes them)"},
		&cli.BoolFlag{Name: "list-strategies", Usage: "describe the planning strategies and exit"},
		&cli.StringFlag{Name: "device", Usage: "plan for this GPU, a built-in device profile (default: the GPU TensorFlow sees when this tfswap has the runtime and no --budget is given, else " + rewrite.DefaultDevice + "; see tfswap simulate --list-devices)"},
		&cli.StringFlag{Name: "device-file", Usage: "plan for the GPU of this device profile file"},
		&cli.StringFlag{Name: "budget", Usage: "most memory each GPU may use, e.g. 14GiB (default: what TensorFlow " + cost.TensorFlowVersion + "'s allocator gets on the device: the limit TensorFlow reports for a GPU it sees, else the profile's memory less 500 MiB to 1800 MiB by compute capability)"},
		&cli.StringSliceFlag{Name: "device-budget", Usage: "DEVICE=SIZE: the budget of one GPU, e.g. /device:GPU:1=10GiB (repeatable)"},
		&cli.StringSliceFlag{Name: "shared-link", Usage: "DEVICE+DEVICE+...: GPUs that share one host link, a PCIe switch, e.g. /device:GPU:0+/device:GPU:1 (repeatable, one group each)"},
		&cli.IntFlag{Name: "batch-scale", Value: 1, Usage: "plan as if the batch dimension were this many times larger (the graph's shapes are kept)"},
		&cli.StringSliceFlag{Name: "fetch", Usage: "node a training step runs (repeatable, e.g. --fetch train); planning simulates only its fan-in (default: every node)"},
		&cli.StringFlag{Name: "measured", Usage: "measured op profile whose per-node times replace the estimates when planning"},
		&cli.BoolFlag{Name: "no-tf32", Usage: "plan with float32 matrix products at the FP32 rate even where TF32 tensor cores exist"},
		&cli.IntFlag{Name: "bo-iterations", Usage: "autoswap: weight vectors the Bayesian optimisation tries after the four plain scores (default 12; -1: none)"},
		&cli.StringFlag{Name: "window", Usage: "window: the schedule-window in bytes (default: tuned)"},
		&cli.BoolFlag{Name: "explain", Usage: "print the plan's reasoning for every swap candidate"},
		&cli.StringFlag{Name: "recompute", Value: "auto", Usage: "where backward readers may read a recomputed copy of a cheap op's output instead of a swapped-in one: auto (the auto strategy recomputes where the simulator says it beats swapping alone), off, or max (recompute every candidate, then swap what remains)"},
		&cli.StringFlag{Name: "fit-accounting", Value: "all", Usage: "the accountings a plan's peak must fit the budget by: all (tfswap's model of the runtime, and Grappler's VirtualCluster trace read to the nanosecond and, as TensorFlow's DeterminePeakMemoryUsage reads it, to the microsecond), or a comma-separated list of tfswap, grappler-ns, grappler-us; both is tfswap,grappler-ns with the 2% recomputation margin of earlier versions"},
	}
}

// fixedThresholds are the options that fix LMS's thresholds: with any of them the rewrite
// is LMS with those thresholds (the lms-fixed strategy), not planned for the budget.
var fixedThresholds = []string{"swapout-threshold", "swapin-ahead", "swapin-groupby"}

// plannerOnly are the planning options that fixed LMS thresholds leave without effect.
var plannerOnly = []string{"explain", "bo-iterations", "window", "recompute"}

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

// planOptions reads the planning flags.
func planOptions(c *cli.Context) (rewrite.PlanOptions, error) {
	po := rewrite.PlanOptions{Strategy: c.String("strategy"), Explain: c.Bool("explain"), BOIterations: c.Int("bo-iterations"), FitAccounting: c.String("fit-accounting"), Recompute: c.String("recompute")}
	if _, err := rewrite.LookupStrategy(po.Strategy); err != nil {
		return po, usagef("--strategy: %v", err)
	}
	if !slices.Contains(rewrite.RecomputeModes, po.Recompute) {
		return po, usagef("--recompute: want one of %s, got %q", strings.Join(rewrite.RecomputeModes, ", "), po.Recompute)
	}
	if _, err := rewrite.ParseFitAccounting(po.FitAccounting); err != nil {
		return po, usagef("--fit-accounting: %v", err)
	}
	if c.IsSet("device") || c.IsSet("device-file") {
		p, err := profileFromFlags(c)
		if err != nil {
			return po, err
		}
		po.Profile = p
	}
	if s := c.String("budget"); s != "" {
		n, err := units.ParseBytes(s)
		if err != nil || n <= 0 {
			return po, usagef("--budget: want a size such as 15GiB, got %q", s)
		}
		po.Budget = n
	}
	for _, db := range c.StringSlice("device-budget") {
		dev, size, ok := strings.Cut(db, "=")
		d, err := graphdef.ParseDevice(dev)
		if !ok || err != nil || d.Type == "" {
			return po, usagef("--device-budget: want DEVICE=SIZE such as /device:GPU:1=10GiB, got %q", db)
		}
		if d.Type == "CPU" {
			// A CPU is a compute device only when --compute-device names it (the two-device
			// CPU emulation); every other CPU is a host, which has no budget.
			cd, err := graphdef.ParseDevice(c.String("compute-device"))
			if err != nil || cd.Type != "CPU" || !d.Matches(cd) {
				return po, usagef("--device-budget: %s is a CPU, not a compute device (budgets are for GPUs, or for the CPU --compute-device names)", d)
			}
		}
		n, err := units.ParseBytes(size)
		if err != nil || n <= 0 {
			return po, usagef("--device-budget: bad size in %q", db)
		}
		if po.DeviceBudgets == nil {
			po.DeviceBudgets = map[string]int64{}
		}
		po.DeviceBudgets[d.String()] = n
	}
	for _, l := range c.StringSlice("shared-link") {
		var group []string
		for _, m := range strings.Split(l, "+") {
			d, err := graphdef.ParseDevice(strings.TrimSpace(m))
			if err != nil || d.Type == "" {
				return po, usagef("--shared-link: %q is not a device", m)
			}
			group = append(group, d.String())
		}
		if len(group) < 2 {
			return po, usagef("--shared-link: name at least two devices joined by +, e.g. /device:GPU:0+/device:GPU:1")
		}
		po.Sim.SharedLinks = append(po.Sim.SharedLinks, group)
	}
	if n := c.Int("batch-scale"); n < 1 {
		return po, usagef("--batch-scale must be at least 1, not %d", n)
	}
	po.Sim.BatchScale = c.Int("batch-scale")
	po.Sim.Fetch = c.StringSlice("fetch")
	po.Sim.NoTF32 = c.Bool("no-tf32")
	if path := c.String("measured"); path != "" {
		m, err := cost.LoadMeasured(path)
		if err != nil {
			return po, err
		}
		po.Sim.Measured = m
	}
	if s := c.String("window"); s != "" {
		n, err := units.ParseBytes(s)
		if err != nil || n <= 0 {
			return po, usagef("--window: want a size such as 4GiB, got %q", s)
		}
		po.Window = n
	}
	if c.Int("bo-iterations") < -1 {
		return po, usagef("--bo-iterations must be -1 or more")
	}
	s, err := rewriteStrategy(c)
	if err != nil {
		return po, err
	}
	po.Strategy = s
	return po, nil
}

func listStrategies(w io.Writer) {
	for _, p := range rewrite.Strategies() {
		fmt.Fprintf(w, "%-10s %s\n", p.Name(), p.Doc())
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
			"its allocator as the budget; otherwise the " + rewrite.DefaultDevice + " profile at its default budget, the\n" +
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
	opts, err := lmsOptions(c)
	if err != nil {
		return err
	}
	po, err := planOptions(c)
	if err != nil {
		return err
	}
	if c.NArg() == 1 && c.String("output") != "" && c.Bool("in-place") {
		return usagef("give either --output or --in-place, not both")
	}
	outFormat, err := graphdef.ParseFormat(c.String("output-format"))
	if err != nil {
		return usagef("--output-format: %v", err)
	}
	m, in, err := loadModel(c, c.App.Reader)
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
	if outFormat, err = outputFormat(m, out, outFormat); err != nil {
		return err
	}
	outputs := append([]pathArg{{opt: "-o", path: out, dir: outFormat == graphdef.FormatSavedModel, mayBeModel: c.Bool("in-place"), stdout: true}},
		fileArgs(c, "report")...)
	if err := checkPaths(append([]pathArg{modelArg(m, in)}, fileArgs(c, "measured", "device-file")...), outputs); err != nil {
		if !c.Bool("in-place") && c.String("output") != "" && in != "-" && graphdef.SamePath(in, out) {
			return fmt.Errorf("%w (use --in-place to replace it)", err)
		}
		return err
	}
	// The device planned for: the one named, or the GPU TensorFlow sees when no budget is
	// given either (a budget names the memory; asking TensorFlow would start CUDA for
	// nothing, and in a process beside one that holds the GPU, as under the Grappler
	// bridge, TensorFlow would report only what that process left free), or the default.
	tgt := target{source: "flag", why: "--device"}
	if c.IsSet("device-file") {
		tgt.why = "--device-file " + c.String("device-file")
	}
	if po.Profile == nil {
		list, unlisted := visibleGPUs, "no TensorFlow runtime: neither built in nor a tfswap-runtime binary beside tfswap"
		if c.IsSet("budget") || c.IsSet("device-budget") {
			list, unlisted = nil, "--budget given"
		}
		if tgt, err = defaultTarget(list, unlisted); err != nil {
			return err
		}
		po.Profile = tgt.profile
		if po.Budget == 0 {
			po.Budget = tgt.budget
		}
	}
	budgetWhy := budgetOrigin(po.Profile)
	switch {
	case c.IsSet("budget"):
		budgetWhy = "--budget"
	case tgt.source == "runtime":
		budgetWhy = "the memory limit TensorFlow gives its allocator on this GPU"
	}
	planned, err := rewrite.RewriteWithPlanner(m, opts, po)
	if err != nil {
		return err
	}
	res := planned.Result
	model := res.Model
	if planned.Unchanged() {
		model = m // written as it was read
	}
	summary := c.App.Writer
	if out == "-" {
		summary = c.App.ErrWriter
		data, err := marshalFor(model, outFormat)
		if err != nil {
			return err
		}
		if _, err := c.App.Writer.Write(data); err != nil {
			return fmt.Errorf("<stdout>: %v", err)
		}
	} else if err := model.Save(out, graphdef.SaveOptions{Format: outFormat}); err != nil {
		return err
	}
	warnings := predictionWarnings(planned)
	if path := c.String("report"); path != "" {
		rep := reportOf(in, out, res)
		rep.Plan = planReportOf(planned, tgt.source, warnings)
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := graphdef.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	if planned.Unchanged() && planned.Strategy != "lms-fixed" {
		fmt.Fprintf(summary, "%s -> %s\n", in, out)
		fmt.Fprintf(summary, "  nothing needed:  the graph fits the budget as it is; written unchanged\n")
	} else {
		printSummary(summary, in, out, res, c.Bool("verbose"))
		if planned.Unchanged() {
			fmt.Fprintf(summary, "  nothing swapped: no tensor meets the fixed thresholds; written unchanged\n")
		}
	}
	printPlan(summary, planned, tgt.why, budgetWhy)
	if po.Explain {
		fmt.Fprint(summary, "\nexplanation:\n"+rewrite.FormatExplanation(planned.Explanation, units.FormatBytes))
	}
	for _, w := range warnings {
		fmt.Fprintf(c.App.ErrWriter, "tfswap: warning: %s\n", w)
	}
	return nil
}

// maxOverhead is the predicted step-time overhead above which a rewrite is warned about.
const maxOverhead = 0.5

// predictionWarnings says what is wrong with a rewrite's prediction, and what to change: a
// peak over the budget (possible only with fixed LMS thresholds, which ignore the budget)
// or a step-time overhead above maxOverhead.
func predictionWarnings(p *rewrite.Planned) []string {
	var ws []string
	b := units.FormatBytes
	fixed := p.Strategy == "lms-fixed"
	for _, d := range p.Eval.Devices {
		if d.Over() <= 0 {
			continue
		}
		by := fmt.Sprintf("predicted peak %s by tfswap's accounting", b(d.Peak))
		if d.GrapplerPeak > 0 {
			by += fmt.Sprintf(", %s by Grappler's VirtualCluster rules (its trace in nanoseconds)", b(d.GrapplerPeak))
		}
		if d.GrapplerPeakUS > 0 {
			by += fmt.Sprintf(", %s by DeterminePeakMemoryUsage (in microseconds)", b(d.GrapplerPeakUS))
		}
		w := fmt.Sprintf("the rewritten graph does not fit %s's budget of %s on %s: %s. ", d.Name, b(d.Budget), p.Profile.Name, by)
		if fixed {
			w += "Fixed LMS thresholds ignore the budget: drop them to plan for it (--strategy auto), or swap more (a smaller --swapout-threshold); "
		}
		ws = append(ws, w+"a smaller batch or a GPU with more memory (--device) also fits")
	}
	if p.Eval.Overhead > maxOverhead {
		w := fmt.Sprintf("predicted step-time overhead %+.0f%% (more than %.0f%%): %s a step over %s's host link (%s). ",
			100*p.Eval.Overhead, 100*maxOverhead, b(p.Eval.Transferred), p.Profile.Name, linkOf(p.Profile))
		if fixed {
			w += "Fixed LMS thresholds ignore the cost: drop them to plan for the budget at the least overhead (--strategy auto); "
		} else {
			w += "This is the least the strategy found for the budget; "
		}
		ws = append(ws, w+"a smaller batch, a larger budget or a GPU with more memory or a faster host link (--device) costs less")
	}
	return ws
}

// planReport is the JSON form of a rewrite's prediction.
type planReport struct {
	Strategy     string `json:"strategy"`
	PlanStrategy string `json:"plan_strategy"`
	Device       string `json:"device"`
	// DeviceSource says where the device comes from: "flag" (--device, --device-file),
	// "runtime" (the GPU TensorFlow sees) or "default" (the default profile).
	DeviceSource string             `json:"device_source"`
	Budget       int64              `json:"budget"`
	Fits         bool               `json:"fits"`
	Unchanged    bool               `json:"unchanged"`
	Devices      []planDeviceReport `json:"devices"`
	StepTime     int64              `json:"step_time_ns"`
	BaseStepTime int64              `json:"unswapped_step_time_ns"`
	Overhead     float64            `json:"overhead"`
	SwapInStall  int64              `json:"swap_in_stall_ns"`
	Transferred  int64              `json:"bytes_transferred"`
	ToHost       int64              `json:"bytes_to_host"`
	ToDevice     int64              `json:"bytes_to_device"`
	Waits        int                `json:"waits"`
	Simulations  int                `json:"simulations"`
	BatchScale   int                `json:"batch_scale"`
	Warnings     []string           `json:"warnings,omitempty"`
	// Fetch are the nodes whose fan-in was simulated as the step; empty means every node.
	Fetch          []string                    `json:"fetch"`
	SimulatedNodes int                         `json:"simulated_nodes"`
	Explanation    []rewrite.TensorExplanation `json:"explanation,omitempty"`
}

type planDeviceReport struct {
	Name string `json:"name"`
	Peak int64  `json:"peak"`
	// GrapplerPeak and GrapplerPeakUS are the VirtualCluster's GraphMemory peaks (trace
	// read to the nanosecond, and to the microsecond as DeterminePeakMemoryUsage reads it);
	// Judged names the accountings the plan had to fit by.
	GrapplerPeak   int64    `json:"grappler_peak,omitempty"`
	GrapplerPeakUS int64    `json:"grappler_peak_us,omitempty"`
	Judged         []string `json:"fit_accountings,omitempty"`
	Budget         int64    `json:"budget"`
	UnswappedPeak  int64    `json:"unswapped_peak"`
	PeakTime       int64    `json:"peak_time_ns"`
}

func planReportOf(p *rewrite.Planned, source string, warnings []string) *planReport {
	r := &planReport{Strategy: p.Strategy, PlanStrategy: p.Eval.Strategy, Device: p.Profile.Name, DeviceSource: source, Budget: p.Budget,
		Fits: p.Eval.Fits, Unchanged: p.Unchanged(), StepTime: p.Eval.StepTime, BaseStepTime: p.Base.StepTime, Overhead: p.Eval.Overhead,
		SwapInStall: p.Eval.Result.SwapInStall(), Transferred: p.Eval.Transferred, ToHost: p.Eval.Result.D2H.Bytes, ToDevice: p.Eval.Result.H2D.Bytes,
		Waits: len(p.Waits), Simulations: p.Simulations, BatchScale: max(1, p.Eval.Result.Options.BatchScale), Warnings: warnings, Explanation: p.Explanation,
		Fetch: append([]string{}, p.Base.Result.Options.Fetch...), SimulatedNodes: p.Base.Result.Simulated}
	for _, d := range p.Eval.Devices {
		dr := planDeviceReport{Name: d.Name, Peak: d.Peak, GrapplerPeak: d.GrapplerPeak, GrapplerPeakUS: d.GrapplerPeakUS,
			Judged: d.Judged(), Budget: d.Budget, PeakTime: d.PeakTime}
		for _, b := range p.Base.Devices {
			if b.Name == d.Name {
				dr.UnswappedPeak = b.Peak
			}
		}
		r.Devices = append(r.Devices, dr)
	}
	return r
}

// printPlan prints the rewrite's prediction: the device and budget and where they come
// from, the strategy, the peak by every accounting, the step time, the host link's load.
func printPlan(w io.Writer, p *rewrite.Planned, deviceWhy, budgetWhy string) {
	from := ""
	if p.Eval.Strategy != p.Strategy && p.Eval.Strategy != "none" {
		from = " (plan from " + p.Eval.Strategy + ")"
	}
	fmt.Fprintf(w, "  device:          %s: %s\n", p.Profile.Name, deviceWhy)
	fmt.Fprintf(w, "  budget:          %s per GPU: %s\n", units.FormatBytes(p.Budget), budgetWhy)
	fmt.Fprintf(w, "  strategy:        %s%s\n", p.Strategy, from)
	fmt.Fprintf(w, "  simulated step:  %s\n", simulatedStep(p.Base.Result))
	for _, d := range p.Eval.Devices {
		base := int64(0)
		for _, b := range p.Base.Devices {
			if b.Name == d.Name {
				base = b.Peak
			}
		}
		fits := ""
		if d.Over() > 0 {
			fits = " (does not fit)"
		}
		judged := map[string]bool{}
		for _, a := range d.Judged() {
			judged[a] = true
		}
		mark := func(acc string) string {
			if judged[acc] {
				return ""
			}
			return " (not required)"
		}
		fmt.Fprintf(w, "  predicted peak:  %s %s of %s by tfswap's model of the runtime%s (unswapped %s)%s\n", d.Name, units.FormatBytes(d.Peak),
			units.FormatBytes(d.Budget), mark("tfswap"), units.FormatBytes(base), fits)
		if d.GrapplerPeak > 0 {
			margin := ""
			if d.GrapplerMargin > 0 {
				margin = fmt.Sprintf(", %s kept free by it for the recomputations", units.FormatBytes(d.GrapplerMargin))
			}
			fmt.Fprintf(w, "                   %s by Grappler's VirtualCluster, trace in nanoseconds%s%s\n", units.FormatBytes(d.GrapplerPeak), mark("grappler-ns"), margin)
			fmt.Fprintf(w, "                   %s by Grappler's VirtualCluster, trace in microseconds (DeterminePeakMemoryUsage)%s\n", units.FormatBytes(d.GrapplerPeakUS), mark("grappler-us"))
		}
	}
	fmt.Fprintf(w, "  predicted step:  %s (unswapped %s, %+.1f%% overhead), %s stalled on swap-ins\n", cost.FormatDuration(p.Eval.StepTime),
		cost.FormatDuration(p.Base.StepTime), 100*p.Eval.Overhead, cost.FormatDuration(p.Eval.Result.SwapInStall()))
	fmt.Fprintf(w, "  host link:       %s to the host, %s back per step (%s)\n", units.FormatBytes(p.Eval.Result.D2H.Bytes),
		units.FormatBytes(p.Eval.Result.H2D.Bytes), linkOf(p.Profile))
	if len(p.Waits) > 0 {
		fmt.Fprintf(w, "  waits:           %d op(s) wait for a swap-out to reach the host\n", len(p.Waits))
	}
	if p.Strategy != "lms-fixed" {
		fmt.Fprintf(w, "  planning:        %d simulations\n", p.Simulations)
	}
}

// linkOf describes a profile's host link: "PCIe 3.0 x16, 12.8 GB/s each way".
func linkOf(p *cost.Profile) string {
	rate := fmt.Sprintf("%.1f GB/s each way", p.H2D/1e9)
	if p.D2H != p.H2D {
		rate = fmt.Sprintf("%.1f GB/s to the host, %.1f GB/s back", p.D2H/1e9, p.H2D/1e9)
	}
	if p.Link == "" {
		return rate
	}
	return p.Link + ", " + rate
}

// simulatedStep says which step a plan was simulated for: the fan-in of the fetches, or every
// node of the graph when no --fetch was given.
func simulatedStep(r *cost.Result) string {
	if len(r.Options.Fetch) == 0 {
		return fmt.Sprintf("every node of the graph (%d nodes; no --fetch given, so initialisers and reads outside the training step count as part of it: give --fetch with the training op)", r.Simulated)
	}
	return fmt.Sprintf("the fan-in of %s (%d nodes)", strings.Join(r.Options.Fetch, ", "), r.Simulated)
}

func marshalFor(m *graphdef.Model, f graphdef.Format) ([]byte, error) {
	switch f {
	case graphdef.FormatPBTXT:
		return m.MarshalText()
	case graphdef.FormatSavedModel:
		return nil, usagef("a SavedModel cannot be written to stdout")
	}
	return m.Marshal()
}

// report is the JSON form of a rewrite's result.
type report struct {
	Input    string             `json:"input"`
	Output   string             `json:"output"`
	Swaps    []rewrite.Swap     `json:"swaps"`
	Skipped  []rewrite.Skipped  `json:"skipped"`
	BytesOut int64              `json:"bytes_out"`
	BytesIn  int64              `json:"bytes_in"`
	Waits    []rewrite.WaitInfo `json:"waits,omitempty"`
	// Recomputes are the tensors whose later readers read a recomputed copy.
	Recomputes []rewrite.Recompute `json:"recomputes,omitempty"`
	Plan       *planReport         `json:"plan,omitempty"`
}

func reportOf(in, out string, r *rewrite.Result) report {
	return report{Input: in, Output: out, Swaps: r.Swaps, Skipped: r.Skipped, BytesOut: r.BytesOut(), BytesIn: r.BytesIn(), Waits: r.Waits, Recomputes: r.Recomputes}
}

func printSummary(w io.Writer, in, out string, r *rewrite.Result, verbose bool) {
	swapIns := 0
	for _, s := range r.Swaps {
		swapIns += len(s.SwapIns)
	}
	fmt.Fprintf(w, "%s -> %s\n", in, out)
	fmt.Fprintf(w, "  tensors swapped: %d (%d swap-ins)\n", len(r.Swaps), swapIns)
	if len(r.Recomputes) > 0 {
		var bytes, ns int64
		ops := 0
		for _, rc := range r.Recomputes {
			bytes += rc.Bytes
			ns += rc.CostNS
			ops += len(rc.Ops)
		}
		fmt.Fprintf(w, "  recomputed:      %d tensors (%s) by %d op copies, %s of compute in the unswapped step\n", len(r.Recomputes), units.FormatBytes(bytes), ops, cost.FormatDuration(ns))
	}
	fmt.Fprintf(w, "  bytes per step:  %s device-to-host, %s host-to-device\n", units.FormatBytes(r.BytesOut()), units.FormatBytes(r.BytesIn()))
	unsized := 0
	for _, s := range r.Skipped {
		if !strings.HasPrefix(s.Reason, "no trigger") {
			unsized++
		}
	}
	if unsized > 0 {
		fmt.Fprintf(w, "  not swapped:     %d tensor(s) of unknown size (-v lists them)\n", unsized)
	}
	if len(r.Skipped)-unsized > 0 {
		fmt.Fprintf(w, "  not swapped:     %d consumer group(s) without a trigger (-v lists them)\n", len(r.Skipped)-unsized)
	}
	for i, s := range r.Swaps {
		if !verbose && i >= 10 {
			fmt.Fprintf(w, "  ... %d more (-v lists all)\n", len(r.Swaps)-i)
			break
		}
		shape := graphdef.FormatShape(s.Shape)
		for _, si := range s.SwapIns {
			fmt.Fprintf(w, "  %-40s %s %s %10s  trigger %s", s.Tensor, s.DType, shape, units.FormatBytes(s.Bytes), si.Trigger)
			if verbose {
				fmt.Fprintf(w, "  distance %d  swap-in %s on %s  consumers %s", si.Distance, si.Node, si.Device, strings.Join(si.Consumers, ", "))
			}
			fmt.Fprintln(w)
		}
	}
	if verbose {
		for _, s := range r.Skipped {
			fmt.Fprintf(w, "  skipped %s: %s\n", s.Tensor, s.Reason)
		}
	}
}
