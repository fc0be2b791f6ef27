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
		&cli.IntFlag{Name: "swapout-threshold", Value: rewrite.DefaultSwapoutThreshold, Usage: "least topological distance (levels) from producer to a consumer for that consumer to read a swapped-in copy"},
		&cli.IntFlag{Name: "swapin-ahead", Value: rewrite.DefaultSwapinAhead, Usage: "levels before its consumer at which a swap-in is triggered"},
		&cli.IntFlag{Name: "swapin-groupby", Value: rewrite.DefaultSwapinGroupBy, Usage: "far consumers within this many levels share one swap-in (0 or -1: one swap-in per consumer)"},
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
	return o, nil
}

// planFlags are the flags of budget-driven planning.
func planFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "strategy", Usage: "plan for a memory budget with this strategy: " + strings.Join(rewrite.StrategyNames(), ", ") + " (default auto when --budget or --device is given; --list-strategies describes them)"},
		&cli.BoolFlag{Name: "list-strategies", Usage: "describe the planning strategies and exit"},
		&cli.StringFlag{Name: "device", Usage: "plan for this GPU, a built-in device profile (default " + rewrite.DefaultDevice + " when planning; see tfswap simulate --list-devices)"},
		&cli.StringFlag{Name: "device-file", Usage: "plan for the GPU of this device profile file"},
		&cli.StringFlag{Name: "budget", Usage: "most memory each GPU may use, e.g. 15GiB (default: the device's memory less the larger of 300 MiB and 6%)"},
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

// planning reports whether the command line asks for budget-driven planning; planning
// options without it are a usage error.
func planning(c *cli.Context) (bool, error) {
	for _, f := range []string{"strategy", "budget", "device", "device-file", "device-budget"} {
		if c.IsSet(f) {
			return true, nil
		}
	}
	for _, f := range []string{"shared-link", "batch-scale", "fetch", "measured", "no-tf32", "bo-iterations", "window", "explain", "fit-accounting", "recompute"} {
		if c.IsSet(f) {
			return false, usagef("--%s is a planning option: give --budget, --device or --strategy too", f)
		}
	}
	return false, nil
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
	// The LMS distances, when given, are kept as they are by the lms strategy.
	for _, f := range []string{"swapout-threshold", "swapin-ahead", "swapin-groupby"} {
		po.FixedLMS = po.FixedLMS || c.IsSet(f)
	}
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
		Description: "Reads MODEL (.pb, .pbtxt, SavedModel directory, or - for a binary GraphDef on stdin), swaps\n" +
			"every tensor made on a compute device out to host memory for its consumers at least\n" +
			"--swapout-threshold levels later, and writes the result atomically to OUTPUT (default\n" +
			"MODEL.swap.pb; - for stdout). The input is never overwritten unless --in-place is given.\n\n" +
			"With --budget, --device or --strategy it plans instead: it picks the tensors to swap, the\n" +
			"ops that trigger their swap-ins and the ops that wait for swap-outs so that the simulated\n" +
			"peak of every GPU stays within the budget at the least simulated step time, and fails\n" +
			"(exit 1) saying what is live at the lowest peak it reached when nothing fits. The auto\n" +
			"strategy also recomputes tensors where that beats swapping alone (--recompute).",
		Flags: append(append(modelFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "where to write the rewritten model (- for stdout)"},
			&cli.StringFlag{Name: "output-format", Usage: "pb, pbtxt or savedmodel (default: from the output path)"},
			&cli.BoolFlag{Name: "in-place", Usage: "overwrite the input model"},
			&cli.StringFlag{Name: "report", Usage: "also write the list of swaps as JSON to this file"},
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
	var po *rewrite.PlanOptions
	plan, err := planning(c)
	if err != nil {
		return err
	}
	if plan {
		p, err := planOptions(c)
		if err != nil {
			return err
		}
		po = &p
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
	case out != "-" && sameFile(in, out):
		return usagef("refusing to overwrite the input %s (use --in-place)", in)
	}
	var res *rewrite.Result
	var planned *rewrite.Planned
	if po != nil {
		planned, err = rewrite.RewriteWithPlanner(m, opts, *po)
		if err != nil {
			return err
		}
		res = planned.Result
	} else if res, err = rewrite.Rewrite(m, opts); err != nil {
		return err
	}
	summary := c.App.Writer
	if out == "-" {
		summary = c.App.ErrWriter
		data, err := marshalFor(res.Model, outFormat)
		if err != nil {
			return err
		}
		if _, err := c.App.Writer.Write(data); err != nil {
			return fmt.Errorf("<stdout>: %v", err)
		}
	} else if err := res.Model.Save(out, graphdef.SaveOptions{Format: outFormat}); err != nil {
		return err
	}
	if path := c.String("report"); path != "" {
		rep := reportOf(in, out, res)
		if planned != nil {
			rep.Plan = planReportOf(planned)
		}
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := graphdef.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	printSummary(summary, in, out, res, c.Bool("verbose"))
	if planned != nil {
		printPlan(summary, planned)
		if po.Explain {
			fmt.Fprint(summary, "\nexplanation:\n"+rewrite.FormatExplanation(planned.Explanation, units.FormatBytes))
		}
	}
	return nil
}

// planReport is the JSON form of a plan's prediction.
type planReport struct {
	Strategy     string                      `json:"strategy"`
	PlanStrategy string                      `json:"plan_strategy"`
	Device       string                      `json:"device"`
	Budget       int64                       `json:"budget"`
	Devices      []planDeviceReport          `json:"devices"`
	StepTime     int64                       `json:"step_time_ns"`
	BaseStepTime int64                       `json:"unswapped_step_time_ns"`
	Overhead     float64                     `json:"overhead"`
	SwapInStall  int64                       `json:"swap_in_stall_ns"`
	Transferred  int64                       `json:"bytes_transferred"`
	Waits        int                         `json:"waits"`
	Simulations  int                         `json:"simulations"`
	BatchScale   int                         `json:"batch_scale"`
	Explanation  []rewrite.TensorExplanation `json:"explanation,omitempty"`
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

func planReportOf(p *rewrite.Planned) *planReport {
	r := &planReport{Strategy: p.Strategy, PlanStrategy: p.Eval.Strategy, Device: p.Profile.Name, Budget: p.Budget,
		StepTime: p.Eval.StepTime, BaseStepTime: p.Base.StepTime, Overhead: p.Eval.Overhead, SwapInStall: p.Eval.Result.SwapInStall(),
		Transferred: p.Eval.Transferred, Waits: len(p.Waits), Simulations: p.Simulations, BatchScale: max(1, p.Eval.Result.Options.BatchScale), Explanation: p.Explanation}
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

// printPlan prints what the plan is predicted to do.
func printPlan(w io.Writer, p *rewrite.Planned) {
	from := ""
	if p.Eval.Strategy != p.Strategy {
		from = " (plan from " + p.Eval.Strategy + ")"
	}
	fmt.Fprintf(w, "  strategy:        %s%s for %s, budget %s per GPU\n", p.Strategy, from, p.Profile.Name, units.FormatBytes(p.Budget))
	for _, d := range p.Eval.Devices {
		base := int64(0)
		for _, b := range p.Base.Devices {
			if b.Name == d.Name {
				base = b.Peak
			}
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
		fmt.Fprintf(w, "  predicted peak:  %s %s of %s by tfswap's model of the runtime%s (unswapped %s)\n", d.Name, units.FormatBytes(d.Peak),
			units.FormatBytes(d.Budget), mark("tfswap"), units.FormatBytes(base))
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
	if len(p.Waits) > 0 {
		fmt.Fprintf(w, "  waits:           %d op(s) wait for a swap-out to reach the host\n", len(p.Waits))
	}
	fmt.Fprintf(w, "  planning:        %d simulations\n", p.Simulations)
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
