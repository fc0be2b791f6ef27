package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

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

func init() {
	register(&cli.Command{
		Name:      "rewrite",
		Usage:     "swap tensors to host memory: write the rewritten graph",
		UsageText: "tfswap rewrite [options] MODEL [-o OUTPUT]",
		Description: "Reads MODEL (.pb, .pbtxt, SavedModel directory, or - for a binary GraphDef on stdin), swaps\n" +
			"every tensor made on a compute device out to host memory for its consumers at least\n" +
			"--swapout-threshold levels later, and writes the result atomically to OUTPUT (default\n" +
			"MODEL.swap.pb; - for stdout). The input is never overwritten unless --in-place is given.",
		Flags: append(append(modelFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "where to write the rewritten model (- for stdout)"},
			&cli.StringFlag{Name: "output-format", Usage: "pb, pbtxt or savedmodel (default: from the output path)"},
			&cli.BoolFlag{Name: "in-place", Usage: "overwrite the input model"},
			&cli.StringFlag{Name: "report", Usage: "also write the list of swaps as JSON to this file"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "list every swap with its trigger and consumers"},
		), lmsFlags()...),
		Action: rewriteAction,
	})
}

func rewriteAction(c *cli.Context) error {
	opts, err := lmsOptions(c)
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
	case out != "-" && sameFile(in, out):
		return usagef("refusing to overwrite the input %s (use --in-place)", in)
	}
	res, err := rewrite.Rewrite(m, opts)
	if err != nil {
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
		data, err := json.MarshalIndent(reportOf(in, out, res), "", "  ")
		if err != nil {
			return err
		}
		if err := graphdef.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	printSummary(summary, in, out, res, c.Bool("verbose"))
	return nil
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
	Input    string            `json:"input"`
	Output   string            `json:"output"`
	Swaps    []rewrite.Swap    `json:"swaps"`
	Skipped  []rewrite.Skipped `json:"skipped"`
	BytesOut int64             `json:"bytes_out"`
	BytesIn  int64             `json:"bytes_in"`
}

func reportOf(in, out string, r *rewrite.Result) report {
	return report{Input: in, Output: out, Swaps: r.Swaps, Skipped: r.Skipped, BytesOut: r.BytesOut(), BytesIn: r.BytesIn()}
}

func printSummary(w io.Writer, in, out string, r *rewrite.Result, verbose bool) {
	swapIns := 0
	for _, s := range r.Swaps {
		swapIns += len(s.SwapIns)
	}
	fmt.Fprintf(w, "%s -> %s\n", in, out)
	fmt.Fprintf(w, "  tensors swapped: %d (%d swap-ins)\n", len(r.Swaps), swapIns)
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
