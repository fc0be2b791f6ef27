package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "simulate",
		Usage:     "predict a training step's GPU memory and time on a given GPU",
		UsageText: "tfswap simulate [options] MODEL --device NAME [--baseline ORIGINAL] [--trace step.json] [--plot memory.svg]",
		Description: "Replays one step of MODEL as TensorFlow's executor would on the GPU described by --device\n" +
			"(a built-in profile; --list-devices lists them) or --device-file, and prints per device the\n" +
			"peak memory, when it occurs and which tensors are live then, the step time, and the time the\n" +
			"GPU stalled waiting for swap-ins. With --baseline (the graph before tfswap rewrite) both are\n" +
			"simulated and shown side by side. Nodes without a device run on /device:GPU:0 (see\n" +
			"--compute-device); tfswap's swap nodes run on the host. See docs/SIMULATOR.md.",
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "device", Usage: "built-in device profile, e.g. v100-16gb, a100-40gb, gtx1080ti, titanx, h100"},
			&cli.StringFlag{Name: "device-file", Usage: "device profile JSON file (format in docs/SIMULATOR.md)"},
			&cli.BoolFlag{Name: "list-devices", Usage: "list the built-in device profiles and exit"},
			&cli.StringFlag{Name: "dump-profile", Usage: "write the device profile used, in --device-file format, to this file"},
			&cli.IntFlag{Name: "batch-scale", Value: 1, Usage: "multiply the batch dimension (dimension 0 of the tensors downstream of the batch placeholders) by this"},
			&cli.StringFlag{Name: "baseline", Usage: "the original graph, simulated alongside for comparison"},
			&cli.StringSliceFlag{Name: "fetch", Usage: "node a step runs (repeatable); only its fan-in is simulated (default: the training step found in MODEL, the sinks whose fan-in holds the variable updates; the baseline gets the same)"},
			&cli.StringFlag{Name: "measured", Aliases: []string{"profile"}, Usage: "measured op profile (tfswap profile -o FILE) whose per-node times replace the estimates; times taken on another kind of device are scaled (see cost.Measured)"},
			&cli.BoolFlag{Name: "no-tf32", Usage: "run float32 matrix products at the FP32 rate even where TF32 tensor cores exist"},
			&cli.BoolFlag{Name: "grappler", Usage: "account memory as Grappler's VirtualCluster does (for comparison with it)"},
			&cli.StringFlag{Name: "conventions", Hidden: true, Usage: "accounting rules switched to Grappler's, comma-separated (see docs/SIMULATOR.md), or tfswap, grappler"},
			&cli.StringFlag{Name: "compute-device", Usage: "the device nodes without a device run on (default /device:GPU:0)"},
			&cli.StringFlag{Name: "trace", Usage: "write a Chrome trace event file (Perfetto, chrome://tracing) to this file"},
			&cli.StringFlag{Name: "plot", Usage: "write a plot of memory over time (with the budget line) to this file: .svg or .png"},
			&cli.StringFlag{Name: "json", Usage: "write the results as JSON to this file (- for stdout)"},
			&cli.IntFlag{Name: "top", Value: 10, Usage: "how many of the tensors live at the peak to list"},
		),
		Action: simulateAction,
	})
}

// profileFromFlags returns the device profile named by --device or --device-file.
func profileFromFlags(c *cli.Context) (*cost.Profile, error) {
	name, file := c.String("device"), c.String("device-file")
	switch {
	case name != "" && file != "":
		return nil, usagef("give either --device or --device-file, not both")
	case file != "":
		return cost.LoadProfileFile(file)
	case name != "":
		p, err := cost.LookupProfile(name)
		if err != nil {
			return nil, usagef("--device: %v", err)
		}
		return p, nil
	}
	return nil, usagef("give the GPU to simulate with --device NAME (one of %s) or --device-file FILE", strings.Join(cost.ProfileNames(), ", "))
}

func listDevices(w io.Writer) {
	tflops := func(v float64) string {
		switch {
		case v == 0:
			return "-"
		case v < 100e12:
			return fmt.Sprintf("%.1f T", v/1e12)
		}
		return fmt.Sprintf("%.0f T", v/1e12)
	}
	fmt.Fprintf(w, "%-18s %9s %4s %9s %8s %8s %8s %10s %10s  %s\n", "profile", "memory", "cc", "budget", "FP32", "TF32", "FP16", "mem BW", "link/dir", "")
	for _, p := range cost.Profiles() {
		fmt.Fprintf(w, "%-18s %9s %4s %9s %8s %8s %8s %5.0f GB/s %5.1f GB/s  %s\n", p.Name, units.FormatBytes(p.MemoryBytes), p.ComputeCapability,
			units.FormatBytes(plan.DefaultBudget(p)), tflops(p.FP32), tflops(p.TF32), tflops(p.FP16), p.MemBandwidth/1e9, p.H2D/1e9, p.Description)
	}
	fmt.Fprintf(w, "\ncc is the CUDA compute capability; budget is tfswap rewrite's default, the memory less what TensorFlow %s keeps\n"+
		"back for the compute capability (MinSystemMemory, tensorflow/core/common_runtime/gpu/gpu_device.cc).\n"+
		"FLOP/s are dense peaks (T = 10^12); link/dir is the effective host-link rate each way.\nSources: tfswap simulate --device NAME --dump-profile FILE writes a profile with its sources.\n", cost.TensorFlowVersion)
}

// loadGraphFile reads and indexes a model named by a flag (the baseline); its format is
// taken from its path, and --tags apply to it as to MODEL.
func loadGraphFile(path string, c *cli.Context) (*graphdef.Graph, error) {
	m, err := graphdef.Load(path, graphdef.LoadOptions{Tags: c.StringSlice("tags")})
	if err != nil {
		return nil, err
	}
	if err := checkNodes(m); err != nil {
		return nil, err
	}
	return graphdef.NewGraph(m.Graph, m.Source)
}

func simulateAction(c *cli.Context) error {
	w := c.App.Writer
	if c.Bool("list-devices") {
		listDevices(w)
		return nil
	}
	p, err := profileFromFlags(c)
	if err != nil {
		return err
	}
	if path := c.String("dump-profile"); path != "" && c.NArg() == 0 {
		// Only the profile is wanted.
		if err := checkPaths(fileArgs(c, "device-file"), stdoutArgs(c, "dump-profile")); err != nil {
			return err
		}
		return dumpProfile(p, path)
	}
	if c.Int("batch-scale") < 1 {
		return usagef("--batch-scale must be at least 1, not %d", c.Int("batch-scale"))
	}
	if c.Int("top") < 0 {
		return usagef("--top must not be negative")
	}
	if plot := c.String("plot"); plot != "" {
		if ext := strings.ToLower(filepath.Ext(plot)); ext != ".svg" && ext != ".png" {
			return usagef("--plot writes SVG or PNG: give a file name ending in .svg or .png, not %q", plot)
		}
	}
	if d := c.String("compute-device"); d != "" {
		if dev, err := graphdef.ParseDevice(d); err != nil || dev.Type == "" {
			return usagef("--compute-device: want a device such as /device:GPU:0, got %q", d)
		}
	}
	opts := cost.Options{
		Fetch:         c.StringSlice("fetch"),
		BatchScale:    c.Int("batch-scale"),
		ComputeDevice: c.String("compute-device"),
		NoTF32:        c.Bool("no-tf32"),
		Timeline:      c.String("trace") != "" || c.String("plot") != "",
		TopLive:       c.Int("top"),
	}
	if opts.TopLive == 0 {
		opts.TopLive = -1
	}
	if c.Bool("grappler") {
		opts.Conventions = cost.GrapplerConventions()
	}
	if spec := c.String("conventions"); spec != "" {
		conv, err := cost.ParseConventions(spec)
		if err != nil {
			return usagef("--conventions: %v", err)
		}
		if c.Bool("grappler") && conv != cost.GrapplerConventions() {
			return usagef("give either --grappler or --conventions, not both")
		}
		opts.Conventions = conv
	}
	if path := c.String("measured"); path != "" {
		m, err := cost.LoadMeasured(path)
		if err != nil {
			return err
		}
		opts.Measured = m
		opts.ScaleMeasured = true
		if m.Device.Profile != "" && m.Device.Profile != p.Name {
			fmt.Fprintf(c.App.ErrWriter, "tfswap: warning: %s was measured on %s (profile %s), simulating %s: its GPU times are scaled\n", path, m.Device.Model, m.Device.Profile, p.Name)
		}
	}
	m, in, err := loadModel(c, c.App.Reader)
	if err != nil {
		return err
	}
	inputs := append([]pathArg{modelArg(m, in)}, fileArgs(c, "baseline", "measured", "device-file")...)
	if b := c.String("baseline"); b != "" && graphdef.FormatOf(b) == graphdef.FormatSavedModel {
		inputs[1].dir = true
	}
	if err := checkPaths(inputs, append(stdoutArgs(c, "json", "dump-profile"), fileArgs(c, "trace", "plot")...)); err != nil {
		return err
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		return err
	}
	// One step for the model and its baseline: the --fetch given, or the training step found
	// in the model simulated.
	fetch := graphdef.UserFetch(g, opts.Fetch)
	opts.Fetch = fetch.Nodes
	res, err := cost.Simulate(g, p, opts)
	if err != nil {
		return err
	}
	var base *cost.Result
	basePath := c.String("baseline")
	if basePath != "" {
		bg, err := loadGraphFile(basePath, c)
		if err != nil {
			return err
		}
		base, err = cost.Simulate(bg, p, opts)
		if err != nil {
			return err
		}
	}
	if path := c.String("dump-profile"); path != "" {
		if err := dumpProfile(p, path); err != nil {
			return err
		}
	}
	var runs []cost.Run
	if base != nil {
		runs = append(runs, cost.Run{Label: filepath.Base(basePath) + " (baseline)", Result: base})
	}
	runs = append(runs, cost.Run{Label: filepath.Base(in), Result: res})
	if path := c.String("trace"); path != "" {
		var buf bytes.Buffer
		if err := cost.WriteTrace(&buf, runs); err != nil {
			return err
		}
		if err := graphdef.WriteFileAtomic(path, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if path := c.String("plot"); path != "" {
		var buf bytes.Buffer
		write := cost.WritePlotSVG
		if strings.EqualFold(filepath.Ext(path), ".png") {
			write = cost.WritePlotPNG
		}
		if err := write(&buf, runs, cost.PlotOptions{}); err != nil {
			return err
		}
		if err := graphdef.WriteFileAtomic(path, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if path := c.String("json"); path != "" {
		out := map[string]any{"model": in, "result": cost.ReportOf(res), "fetch": append([]string{}, fetch.Nodes...), "fetch_found": fetch.Found, "fetch_reason": fetch.Reason}
		if base != nil {
			out["baseline_model"] = basePath
			out["baseline"] = cost.ReportOf(base)
		}
		data, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		if path == "-" {
			_, err = w.Write(data)
			return err
		}
		if err := graphdef.WriteFileAtomic(path, data, 0o644); err != nil {
			return err
		}
	}
	printSimulation(w, in, p, opts, fetch, res, basePath, base)
	return nil
}

func dumpProfile(p *cost.Profile, path string) error {
	data, err := cost.MarshalProfile(p)
	if err != nil {
		return err
	}
	if path == "-" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return graphdef.WriteFileAtomic(path, data, 0o644)
}

func pct(a, b int64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%+.1f%%", 100*float64(a-b)/float64(b))
}

func printSimulation(w io.Writer, in string, p *cost.Profile, opts cost.Options, f graphdef.Fetch, res *cost.Result, basePath string, base *cost.Result) {
	fmt.Fprintf(w, "%s on %s: %s\n", in, p.Name, p.Description)
	fmt.Fprintf(w, "  fetch: %s\n", f)
	fetch := "every node"
	if len(opts.Fetch) > 0 {
		fetch = "the fan-in of " + strings.Join(opts.Fetch, ", ")
	}
	fmt.Fprintf(w, "  simulated %d nodes (%s)", res.Simulated, fetch)
	if opts.BatchScale > 1 {
		fmt.Fprintf(w, ", batch x%d (%d tensors scaled, batch %d from %s)", opts.BatchScale, res.Shapes.Scaled, res.Shapes.Batch, strings.Join(res.Shapes.BatchInputs, ", "))
	}
	fmt.Fprintf(w, "; accounting: %s\n", cost.ConventionsName(opts.Conventions))
	cols := []*cost.Result{res}
	heads := []string{filepath.Base(in)}
	if base != nil {
		cols = []*cost.Result{base, res}
		heads = []string{filepath.Base(basePath) + " (baseline)", filepath.Base(in)}
	}
	row := func(label string, cells []string, extra string) {
		fmt.Fprintf(w, "  %-28s", label)
		for _, c := range cells {
			fmt.Fprintf(w, " %-30s", c)
		}
		if extra != "" {
			fmt.Fprintf(w, " %s", extra)
		}
		fmt.Fprintln(w)
	}
	row("", heads, "")
	// Devices, the compute device first.
	var names []string
	seen := map[string]bool{}
	for _, r := range cols {
		for _, d := range r.Devices {
			if !seen[d.Name] {
				seen[d.Name] = true
				names = append(names, d.Name)
			}
		}
	}
	for _, name := range names {
		var peak, at, resident []string
		var vals []int64
		for _, r := range cols {
			d := r.Device(name)
			if d == nil {
				peak, at, resident = append(peak, "-"), append(at, "-"), append(resident, "-")
				vals = append(vals, 0)
				continue
			}
			s := units.FormatBytes(d.PeakBytes)
			if d.MemoryLimit > 0 {
				s += fmt.Sprintf(" (%.1f%% of %s)", 100*float64(d.PeakBytes)/float64(d.MemoryLimit), units.FormatBytes(d.MemoryLimit))
			}
			peak = append(peak, s)
			at = append(at, cost.FormatDuration(d.PeakTime))
			resident = append(resident, units.FormatBytes(d.ResidentBytes))
			vals = append(vals, d.PeakBytes)
		}
		extra := ""
		if len(vals) == 2 && vals[0] > 0 && vals[1] > 0 {
			extra = pct(vals[1], vals[0])
		}
		row(name+" peak", peak, extra)
		row("  at", at, "")
		row("  resident (variables...)", resident, "")
		// Under GraphMemory's rule (--grappler) the trace read to the microsecond, as
		// DeterminePeakMemoryUsage reads it, gives a second peak.
		var us []string
		anyUS := false
		for _, r := range cols {
			if d := r.Device(name); d != nil && d.MicrosecondPeakBytes > 0 {
				us = append(us, fmt.Sprintf("%s at %s", units.FormatBytes(d.MicrosecondPeakBytes), cost.FormatDuration(d.MicrosecondPeakTime)))
				anyUS = true
			} else {
				us = append(us, "-")
			}
		}
		if anyUS {
			row("  peak, trace in µs", us, "")
		}
	}
	var step, stall, d2h, h2d []string
	for _, r := range cols {
		step = append(step, cost.FormatDuration(r.StepTime))
		stall = append(stall, cost.FormatDuration(r.SwapInStall()))
		d2h = append(d2h, fmt.Sprintf("%d, %s", r.D2H.Count, units.FormatBytes(r.D2H.Bytes)))
		h2d = append(h2d, fmt.Sprintf("%d, %s", r.H2D.Count, units.FormatBytes(r.H2D.Bytes)))
	}
	extra := ""
	if base != nil {
		extra = pct(res.StepTime, base.StepTime) + " step-time overhead"
	}
	row("step time", step, extra)
	row("compute stalled on swap-ins", stall, "")
	row("transfers device-to-host", d2h, "")
	row("transfers host-to-device", h2d, "")
	for i, r := range cols {
		label := heads[i]
		if len(r.UnknownOps) > 0 {
			var parts []string
			n := 0
			for _, op := range r.UnknownOpList() {
				n += r.UnknownOps[op]
				parts = append(parts, fmt.Sprintf("%s x%d", op, r.UnknownOps[op]))
			}
			fmt.Fprintf(w, "  %s: %d node(s) without a cost rule, timed by their bytes only: %s\n", label, n, strings.Join(parts, ", "))
		}
		if r.PrunedNodes > 0 {
			fmt.Fprintf(w, "  %s: %d node(s) whose value nothing reads run as the NoOps Grappler makes of them, reading nothing (--conventions ...,run-value-dead runs them)\n", label, r.PrunedNodes)
		}
		if r.UntakenNodes > 0 {
			fmt.Fprintf(w, "  %s: %d node(s) of conditional branches not taken (each conditional runs its larger branch; --conventions both-branches runs both)\n", label, r.UntakenNodes)
		}
		if r.CostedCalls > 0 {
			fmt.Fprintf(w, "  %s: %d function call(s) costed from their bodies (--conventions calls-by-bytes times them by their bytes)\n", label, r.CostedCalls)
		}
		if r.Accumulators > 0 {
			fmt.Fprintf(w, "  %s: %d while loop accumulator push(es) hold every iteration's element from the forward loop to the backward one (--conventions no-accumulators holds one)\n", label, r.Accumulators)
			if r.UnboundedAccumulators > 0 {
				fmt.Fprintf(w, "  %s: %d of them in a loop whose iteration count is not static: counted as one iteration\n", label, r.UnboundedAccumulators)
			}
		}
		if r.UnsizedTensors > 0 {
			how := "counted as 0 bytes"
			if opts.Conventions.UnknownDimsAsOne {
				how = "unknown dimensions counted as 1"
			}
			fmt.Fprintf(w, "  %s: %d tensor(s) of unknown size (%s)\n", label, r.UnsizedTensors, how)
		}
		if r.MeasuredNodes > 0 {
			fmt.Fprintf(w, "  %s: %d node(s) timed from measurements\n", label, r.MeasuredNodes)
			if r.MeasuredScaled > 0 {
				fmt.Fprintf(w, "  %s: %d of them measured on another kind of device, scaled by %.4g (their estimated / measured total)\n", label, r.MeasuredScaled, r.MeasuredScale)
			}
		}
	}
	for _, d := range res.Devices {
		if len(d.Live) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: live at the %s peak (%s at %s), %d buffers; the largest:\n", filepath.Base(in), d.Name, units.FormatBytes(d.PeakBytes), cost.FormatDuration(d.PeakTime), d.LiveCount)
		for _, l := range d.Live {
			fmt.Fprintf(w, "  %-56s %10s  %-10s %-22s since %s\n", l.Name, units.FormatBytes(l.Bytes), l.Kind, l.Op, cost.FormatDuration(l.Since))
		}
	}
}
