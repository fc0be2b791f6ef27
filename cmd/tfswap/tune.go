//go:build tensorflow

package main

import (
	"encoding/json"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"io"
	"os"
	"time"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/tfswap/tfswap/tfrun"
	"github.com/tfswap/tfswap/tune"
	"github.com/urfave/cli/v2"
)

// emulatedGPU is the device that stands for the GPU in the two-device emulation.
const emulatedGPU = "/device:CPU:1"

func init() {
	register(&cli.Command{
		Name:      "tune",
		Usage:     "tune swap-in triggers on the real runtime (Kim et al.): earliest safe, then latest without stall",
		UsageText: "tfswap tune [options] MODEL --budget BYTES [--device v100-16gb] [-o OUTPUT]",
		Description: "Chooses the tensors to swap as tfswap rewrite --strategy lms-fixed does (the LMS flags),\n" +
			"then tunes the op that triggers each swap-in, as Kim et al. tune theirs from early\n" +
			"training iterations:\n\n" +
			"  1. every trigger right before its use; each is then moved earlier, round robin, as long as\n" +
			"     the predicted peak of the compute device stays within --budget (the earliest safe\n" +
			"     trigger). The peak is predicted by tfswap's simulator for the GPU of --device, with op\n" +
			"     times measured on this machine (--profile FILE, or a profile taken first with\n" +
			"     --iterations steps), scaled to that GPU when measured on another kind of device.\n" +
			"  2. the triggers are moved later again while the measured step time does not grow: each\n" +
			"     round caps how far ahead of its use a trigger may sit (the lead), trying 0, then\n" +
			"     doubling after a slower plan and bisecting once one was accepted, for at most --rounds\n" +
			"     rounds. A round runs the candidate plan in a TensorFlow session, --steps steps\n" +
			"     interleaved with the earliest safe plan's, and accepts it when the median of the\n" +
			"     paired step-time ratios is within --tolerance or a sign test over the pairs does not\n" +
			"     find it slower. --predicted-time also rejects plans the simulated GPU predicts slower.\n\n" +
			"Every round is reported (predicted peak, measured step time). Finally the untuned plan\n" +
			"(triggers --swapin-ahead levels before the use, as tfswap rewrite --strategy lms-fixed sets\n" +
			"them) and the tuned " +
			"plan are timed side by side, and the tuned graph is written to OUTPUT (default\n" +
			"MODEL.swap.pb), its nodes placed as in MODEL (--place is applied only to run it). With --config two-device the sessions have /device:CPU:0 (the host) and\n" +
			"/device:CPU:1, which stands for the GPU: nodes without a device run there (--place);\n" +
			"memory is then only predicted, since both devices share one allocator. On a GPU the step\n" +
			"is also traced once per round and a plan whose measured peak (the GPU allocator's\n" +
			"figures in RunMetadata) exceeds the budget is rejected.",
		Flags: append(append(append(modelFlags(),
			&cli.StringFlag{Name: "budget", Required: true, Usage: "the most memory the compute device may use, as the simulator counts it (e.g. 12GiB, 5000000)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "where to write the tuned model (default MODEL.swap.pb)"},
			&cli.StringFlag{Name: "device", Value: "v100-16gb", Usage: "built-in GPU profile the peak is predicted for (see simulate --list-devices)"},
			&cli.StringFlag{Name: "device-file", Usage: "GPU profile JSON file, instead of --device"},
			&cli.StringFlag{Name: "profile", Usage: "measured op profile (tfswap profile) to predict with; without it tune profiles MODEL first"},
			&cli.IntFlag{Name: "iterations", Value: 10, Usage: "traced steps of the profile tune takes when --profile is not given"},
			&cli.IntFlag{Name: "warmup", Value: 3, Usage: "untimed steps in every session before its steps are timed"},
			&cli.StringFlag{Name: "config", Value: "default", Usage: "session config: default (TensorFlow's), or two-device (/device:CPU:0 + /device:CPU:1 standing for the GPU)"},
			&cli.StringFlag{Name: "place", Usage: "run nodes without a device on this device (default: /device:CPU:1 with --config two-device, none otherwise)"},
			&cli.IntFlag{Name: "rounds", Value: tune.DefaultRounds, Usage: "most measured rounds when moving triggers later"},
			&cli.IntFlag{Name: "steps", Value: tune.DefaultSteps, Usage: "timed steps of each plan per round"},
			&cli.Float64Flag{Name: "tolerance", Value: tune.DefaultTolerance, Usage: "how much slower than the earliest safe plan a plan may measure (0.03 = 3%)"},
			&cli.BoolFlag{Name: "predicted-time", Usage: "also reject, unmeasured, plans whose predicted step time on --device exceeds the earliest safe plan's by more than --tolerance (the emulation's copies are free; the simulated GPU's are not)"},
			&cli.StringFlag{Name: "report", Usage: "also write the rounds and the final comparison as JSON to this file"},
		), stepCLIFlags()...), lmsFlags()...),
		Action: tuneAction,
	})
}

// tuneReport is the JSON form of a tuning run.
type tuneReport struct {
	Input, Output string
	Budget        int64
	Device        string
	Swaps         int
	SwapIns       int
	Rounds        []tune.Round
	Converged     bool
	// Untuned and Tuned compare the plan with rewrite's distance triggers and the tuned plan:
	// predicted peak, measured median step time (interleaved steps), paired ratio tuned/untuned.
	Untuned, Tuned compared
	// Ratio is the median of the paired step-time ratios tuned/untuned; SlowerSteps counts
	// the pairs in which the tuned step was the slower, out of Pairs; P is the one-sided sign
	// test's p-value of that count.
	Ratio              float64
	SlowerSteps, Pairs int
	P                  float64
}

// compared is one plan of the final comparison.
type compared struct {
	PredictedPeak     int64
	PredictedStepNS   int64
	MedianStepNS      int64
	MeanTriggerLevels float64
}

func tuneAction(c *cli.Context) error {
	opts, err := lmsRewriteOptions(c)
	if err != nil {
		return err
	}
	if opts.Gate != rewrite.GateHost {
		return usagef("tune tunes host-gated swap-ins; --gate device saves no memory")
	}
	budget, err := units.ParseBytes(c.String("budget"))
	if err != nil || budget <= 0 {
		return usagef("--budget: want a positive size such as 12GiB, got %q", c.String("budget"))
	}
	for _, f := range []string{"rounds", "steps", "iterations"} {
		if c.Int(f) < 1 {
			return usagef("--%s must be at least 1", f)
		}
	}
	if c.Int("warmup") < 0 || c.Float64("tolerance") < 0 {
		return usagef("--warmup and --tolerance must not be negative")
	}
	prof, err := gpuProfileFlags(c)
	if err != nil {
		return err
	}
	cfg, err := sessionConfig(c.String("config"))
	if err != nil {
		return err
	}
	place := c.String("place")
	if place == "" && c.String("config") == "two-device" {
		place = emulatedGPU
	}
	if place != "" {
		if d, err := graphdef.ParseDevice(place); err != nil || d.Type == "" {
			return usagef("--place: want a device such as %s, got %q", emulatedGPU, place)
		}
	}
	fm, in, err := loadFacadeModel(c, c.App.Reader)
	if err != nil {
		return err
	}
	m := fm.Graph()
	out := c.String("output")
	switch {
	case out == "" && in == "-":
		return usagef("give -o when the model comes from stdin")
	case out == "":
		out = defaultOutput(in)
	}
	outFormat, err := fm.OutputFormat(out, graphdef.FormatAuto)
	if err != nil {
		return err
	}
	inputs := append(append([]pathArg{modelArg(m, in)}, fileArgs(c, "profile", "device-file")...), feedArgs(c)...)
	outputs := append([]pathArg{{opt: "-o", path: out, dir: outFormat == graphdef.FormatSavedModel}}, fileArgs(c, "report")...)
	if err := checkPaths(inputs, outputs); err != nil {
		return err
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		return err
	}
	if err := rewrite.CheckNotRewritten(g); err != nil {
		return err
	}
	sp, err := stepFlags(c, g)
	if err != nil {
		return err
	}
	w := c.App.Writer
	a := rewrite.Analyze(g, opts)
	base, _ := plan.PlanLMS(a)
	if len(base.Swaps) == 0 {
		return fmt.Errorf("%s: nothing to swap with these options (see tfswap rewrite -v)", in)
	}
	p, err := tune.NewProblem(m, a, base)
	if err != nil {
		return err
	}
	var measured *cost.Measured
	if path := c.String("profile"); path != "" {
		if measured, err = cost.LoadMeasured(path); err != nil {
			return err
		}
	} else {
		placed := tune.Place(m, place)
		data, err := placed.Marshal()
		if err != nil {
			return err
		}
		pg, err := graphdef.NewGraph(placed.Graph, m.Source)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "profiling %s: %d traced steps\n", in, c.Int("iterations"))
		r, err := profiling.Run(data, pg, profiling.Options{Init: sp.Init, Targets: sp.Targets, Fetches: sp.Fetches, Feeds: sp.Feeds,
			Warmup: c.Int("warmup"), Iterations: c.Int("iterations"), Config: cfg, Progress: newProgress(c)})
		if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		data, err = r.Measured(profiling.Info{Graph: in, TensorFlowVersion: tfrun.Version()}).Marshal()
		if err != nil {
			return err
		}
		if measured, err = cost.ParseMeasured(data, in+" (profile)"); err != nil {
			return err
		}
	}
	pr := &tune.Predictor{Profile: prof, Analysis: a, Sim: cost.Options{
		Fetch: append(append([]string{}, sp.Targets...), sp.Fetches...), Measured: measured, ScaleMeasured: true,
	}}
	rt := &tune.TFRunner{Config: cfg, Place: place, Init: sp.Init, Targets: sp.Targets, Fetches: sp.Fetches, Feeds: sp.Feeds, Warmup: c.Int("warmup")}
	nIns := len(p.Groups)
	fmt.Fprintf(w, "%s: %d tensors swapped, %d swap-ins; budget %s on %s (predicted); step time measured (TensorFlow %s, %s config%s)\n",
		in, len(base.Swaps), nIns, units.FormatBytes(budget), prof.Name, tfrun.Version(), c.String("config"), placeNote(place))
	res, err := tune.Tune(p, pr, rt, tune.Options{
		Budget: budget, Rounds: c.Int("rounds"), Steps: c.Int("steps"), Tolerance: c.Float64("tolerance"), PredictedTime: c.Bool("predicted-time"),
		Report: func(r tune.Round) { fmt.Fprintf(w, "  %s\n", r) },
	})
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if err := rewrite.Verify(g, res.Rewrite, rewrite.GateHost); err != nil {
		return internalf("the tuned rewrite is invalid: %v", err)
	}
	if res.Converged {
		fmt.Fprintf(w, "converged after %d round(s) of the latest-trigger search\n", len(res.Rounds)-1)
	} else {
		fmt.Fprintf(w, "stopped after %d round(s) (--rounds) without converging; keeping the latest accepted triggers\n", len(res.Rounds)-1)
	}

	// The untuned plan: the same swaps, triggers --swapin-ahead levels before the use.
	untuned, err := rewrite.Apply(m, a, base)
	if err != nil {
		return err
	}
	upd, err := pr.Predict(untuned.Model)
	if err != nil {
		return err
	}
	n := 2 * c.Int("steps")
	tu, tt, err := tune.Benchmark(rt, untuned.Model, res.Rewrite.Model, n)
	if err != nil {
		return fmt.Errorf("%s: timing the untuned and the tuned plan: %w", in, err)
	}
	_, ratio, slower, pval := tune.Slower(tu, tt, c.Float64("tolerance"))
	rep := tuneReport{
		Input: in, Output: out, Budget: budget, Device: prof.Name, Swaps: len(base.Swaps), SwapIns: nIns,
		Rounds: res.Rounds, Converged: res.Converged, Ratio: ratio, SlowerSteps: slower, Pairs: n, P: pval,
		Untuned: compared{PredictedPeak: upd.Peak, PredictedStepNS: upd.StepTime, MedianStepNS: int64(tune.Median(tu)), MeanTriggerLevels: tune.PlanDistance(base)},
		Tuned:   compared{PredictedPeak: res.Predicted.Peak, PredictedStepNS: res.Predicted.StepTime, MedianStepNS: int64(tune.Median(tt)), MeanTriggerLevels: p.Distance(res.Final)},
	}
	printComparison(w, rep, n, upd.Peak > budget)
	if err := res.Rewrite.Model.Save(out, graphdef.SaveOptions{Format: outFormat}); err != nil {
		return err
	}
	if path := c.String("report"); path != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := graphdef.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "%s -> %s\n", in, out)
	return nil
}

// gpuProfileFlags returns the GPU profile of --device or --device-file.
func gpuProfileFlags(c *cli.Context) (*cost.Profile, error) {
	if file := c.String("device-file"); file != "" {
		if c.IsSet("device") {
			return nil, usagef("give either --device or --device-file, not both")
		}
		return cost.LoadProfileFile(file)
	}
	p, err := cost.LookupProfile(c.String("device"))
	if err != nil {
		return nil, usagef("--device: %v", err)
	}
	return p, nil
}

func placeNote(place string) string {
	if place == "" {
		return ""
	}
	return ", nodes without a device on " + place
}

// printComparison prints the untuned and the tuned plan side by side.
func printComparison(w io.Writer, r tuneReport, steps int, untunedOver bool) {
	over := ""
	if untunedOver {
		over = " (over budget)"
	}
	fmt.Fprintf(w, "untuned (rewrite's triggers) vs tuned, %d interleaved steps each:\n", steps)
	fmt.Fprintf(w, "  %-26s %14s %14s\n", "", "untuned", "tuned")
	fmt.Fprintf(w, "  %-26s %14s %14s%s\n", "predicted peak", units.FormatBytes(r.Untuned.PredictedPeak), units.FormatBytes(r.Tuned.PredictedPeak), over)
	fmt.Fprintf(w, "  %-26s %14s %14s\n", "predicted step time", cost.FormatDuration(r.Untuned.PredictedStepNS), cost.FormatDuration(r.Tuned.PredictedStepNS))
	fmt.Fprintf(w, "  %-26s %14s %14s  (paired ratio tuned/untuned %.3f; tuned slower in %d/%d pairs, sign test p %.3f)\n",
		"measured median step time", fmtStep(r.Untuned.MedianStepNS), fmtStep(r.Tuned.MedianStepNS), r.Ratio, r.SlowerSteps, r.Pairs, r.P)
	fmt.Fprintf(w, "  %-26s %14.1f %14.1f\n", "trigger lead (levels)", r.Untuned.MeanTriggerLevels, r.Tuned.MeanTriggerLevels)
}

func fmtStep(ns int64) string { return profiling.FormatDuration(time.Duration(ns)) }

// newProgress returns the progress reporter on the command's stderr: a progress bar on a
// terminal, also when tfswap runs this binary with its stderr filtered (stderrTerminalEnv).
func newProgress(c *cli.Context) *profiling.Progress {
	if f, ok := c.App.ErrWriter.(*os.File); ok {
		return profiling.NewProgress(f, profiling.IsTerminal(f) || f == os.Stderr && os.Getenv(stderrTerminalEnv) == "1")
	}
	return profiling.NewProgress(c.App.ErrWriter, false)
}
