package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/urfave/cli/v2"
)

// defaultInspectDevice is the GPU inspect predicts the peak for when --device is not given.
const defaultInspectDevice = "v100-16gb"

// init adds the cost model's predicted peak to tfswap inspect: its flags, and a hook that
// prints the peak and the tensors live at it. inspect.go's init, which registers the
// command, runs first (files initialise in name order).
func init() {
	for _, c := range commands {
		if c.Name != "inspect" {
			continue
		}
		c.Flags = append(c.Flags,
			&cli.StringFlag{Name: "device", Value: defaultInspectDevice, Usage: "the GPU to predict the peak memory for (a built-in profile; see tfswap simulate --list-devices)"},
			&cli.StringFlag{Name: "device-file", Usage: "device profile JSON file, instead of --device"},
			&cli.StringSliceFlag{Name: "fetch", Usage: "node a step runs (repeatable): predict the peak of its fan-in only (default: the training step found, the sinks whose fan-in holds the variable updates)"},
		)
	}
	inspectHooks = append(inspectHooks, inspectPeak)
}

func inspectPeak(c *cli.Context, w io.Writer, g *graphdef.Graph) error {
	var p *cost.Profile
	var err error
	if file := c.String("device-file"); file != "" {
		if c.IsSet("device") {
			return usagef("give either --device or --device-file, not both")
		}
		p, err = cost.LoadProfileFile(file)
		if err != nil {
			return err
		}
	} else {
		name := c.String("device")
		if name == "" {
			name = defaultInspectDevice
		}
		if p, err = cost.LookupProfile(name); err != nil {
			return usagef("--device: %v", err)
		}
	}
	top := c.Int("top")
	fetch := graphdef.UserFetch(g, c.StringSlice("fetch"))
	// Nodes without a device run on the first compute device named (as the rewrite takes it).
	var first string
	if cds := rewrite.SplitComputeDevices(strings.Join(c.StringSlice("compute-device"), ",")); len(cds) > 0 {
		first = cds[0]
	}
	opts := cost.Options{Fetch: fetch.Nodes, ComputeDevice: first, TopLive: top}
	if top == 0 {
		opts.TopLive = -1
	}
	res, err := cost.Simulate(g, p, opts)
	if err != nil {
		return err
	}
	scope := "every node"
	if len(opts.Fetch) > 0 {
		scope = "the fan-in of " + strings.Join(opts.Fetch, ", ")
	}
	fmt.Fprintf(w, "\nPredicted peak memory on %s (one step of %s; tfswap simulate for more):\n", p.Name, scope)
	fmt.Fprintf(w, "  fetch: %s\n", fetch)
	for _, d := range res.Devices {
		limit := ""
		if d.MemoryLimit > 0 {
			limit = fmt.Sprintf(" (%.1f%% of %s)", 100*float64(d.PeakBytes)/float64(d.MemoryLimit), units.FormatBytes(d.MemoryLimit))
		}
		fmt.Fprintf(w, "  %-16s %s%s at %s of a %s step; %s resident (variables, constants)\n", d.Name, units.FormatBytes(d.PeakBytes), limit,
			cost.FormatDuration(d.PeakTime), cost.FormatDuration(res.StepTime), units.FormatBytes(d.ResidentBytes))
		if len(d.Live) > 0 {
			fmt.Fprintf(w, "    live at the peak: %d buffers; the largest:\n", d.LiveCount)
			for _, l := range d.Live {
				fmt.Fprintf(w, "      %-52s %10s  %-10s %s\n", l.Name, units.FormatBytes(l.Bytes), l.Kind, l.Op)
			}
		}
	}
	return nil
}
