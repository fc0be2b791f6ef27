package tfswap

import (
	"bufio"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"io"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/rewrite"
)

// TextOptions say how WriteText writes a report.
type TextOptions struct {
	// Input and Output name the model read and the one written, for the first line
	// ("model.pb -> model.swap.pb").
	Input, Output string
	// Verbose lists every swap with its trigger, swap-in and consumers, and every tensor
	// not swapped; without it at most ten swaps are listed.
	Verbose bool
}

// WriteText writes the report as tfswap rewrite prints it: what was swapped or recomputed,
// the bytes over the host link per step, then the prediction (the device and budget and why,
// the strategy, the step simulated, the peak of every compute device by each accounting, the
// step time against the unswapped graph's, the host link's load) and, when the plan was
// explained, the explanation. Warnings are not written (Prediction.Warnings holds them).
func (r *Report) WriteText(w io.Writer, opts TextOptions) error {
	bw := bufio.NewWriter(w)
	p := &r.Prediction
	if p.Unchanged && p.Strategy != "lms-fixed" {
		fmt.Fprintf(bw, "%s -> %s\n", opts.Input, opts.Output)
		fmt.Fprintf(bw, "  nothing needed:  the graph fits the budget as it is; written unchanged\n")
	} else {
		r.writeSummary(bw, opts)
		if p.Unchanged {
			fmt.Fprintf(bw, "  nothing swapped: %s; written unchanged\n", r.whyNothingSwapped())
		}
	}
	p.writeText(bw)
	if p.Explanation != nil {
		fmt.Fprint(bw, "\nexplanation:\n"+plan.FormatExplanation(rewriteExplanation(p.Explanation), units.FormatBytes))
	}
	return bw.Flush()
}

// whyNothingSwapped says, in one clause, why a fixed-threshold rewrite swapped nothing: no
// tensor met the thresholds, or those that did have no op that may trigger their swap-ins
// (every op between producer and consumer inside a while loop, say), or have unknown sizes.
func (r *Report) whyNothingSwapped() string {
	var noTrigger, loop, unsized int
	for _, s := range r.Skipped {
		if strings.HasPrefix(s.Reason, "no trigger") {
			noTrigger++
			if strings.Contains(s.Reason, rewrite.NoTriggerInLoop) {
				loop++
			}
		} else {
			unsized++
		}
	}
	switch {
	case noTrigger > 0 && loop == noTrigger:
		return fmt.Sprintf("the %d consumer group(s) that meet the fixed thresholds have no op that may trigger their swap-in: every op between producer and consumer lies %s, where tfswap swaps nothing (-v lists them)", noTrigger, rewrite.NoTriggerInLoop)
	case noTrigger > 0:
		return fmt.Sprintf("the %d consumer group(s) that meet the fixed thresholds have no op that may trigger their swap-in (-v lists them with the reasons)", noTrigger)
	case unsized > 0:
		return fmt.Sprintf("no tensor of known size meets the fixed thresholds (%d tensors of unknown size; see the shape warning)", unsized)
	}
	return "no tensor meets the fixed thresholds"
}

// writeSummary writes what the rewrite did.
func (r *Report) writeSummary(w io.Writer, opts TextOptions) {
	swapIns := 0
	for _, s := range r.Swaps {
		swapIns += len(s.SwapIns)
	}
	fmt.Fprintf(w, "%s -> %s\n", opts.Input, opts.Output)
	fmt.Fprintf(w, "  tensors swapped: %d (%d swap-ins)\n", len(r.Swaps), swapIns)
	if len(r.Recomputes) > 0 {
		var bytes, ns int64
		ops := 0
		for _, rc := range r.Recomputes {
			bytes += rc.Bytes
			ns += int64(rc.Cost)
			ops += len(rc.Ops)
		}
		fmt.Fprintf(w, "  recomputed:      %d tensors (%s) by %d op copies, %s of compute in the unswapped step\n", len(r.Recomputes), units.FormatBytes(bytes), ops, cost.FormatDuration(ns))
	}
	if len(r.Offloaded) > 0 {
		var bytes int64
		nv := 0
		for _, v := range r.Offloaded {
			bytes += v.Bytes
			nv += len(v.Variables)
		}
		fmt.Fprintf(w, "  offloaded:       %d variable groups (%d variables with their slots, %s) on the host, %d gated weight copies; %s\n",
			len(r.Offloaded), nv, units.FormatBytes(bytes), r.OffloadCopies, r.Offloaded[0].Reason)
		for i, v := range r.Offloaded {
			if !opts.Verbose && r.Prediction.Explanation == nil && i >= 5 {
				fmt.Fprintf(w, "    ... %d more (-v lists all)\n", len(r.Offloaded)-i)
				break
			}
			fmt.Fprintf(w, "    %-40s %10s  %d variables, %d copies, on %s\n", v.Name, units.FormatBytes(v.Bytes), len(v.Variables), v.Copies, v.Host)
		}
	}
	if len(r.Accumulators) > 0 {
		var bytes int64
		pushed := 0
		for _, a := range r.Accumulators {
			bytes += a.Bytes
			pushed += len(a.Pushed)
		}
		fmt.Fprintf(w, "  loop stacks:     %d while-loop stack or TensorList accumulators on %s (%d tensors pushed, %s per iteration, not in the bytes per step)\n",
			len(r.Accumulators), r.Accumulators[0].Host, pushed, units.FormatBytes(bytes))
	}
	for _, l := range r.FunctionalLoops {
		fmt.Fprintf(w, "  loop stacks:     not moved: the %d accumulator(s) of %s, a functional While loop: %s\n", l.Pushes, l.While, rewrite.UnloweredLoopLimit)
	}
	fmt.Fprintf(w, "  bytes per step:  %s device-to-host, %s host-to-device\n", units.FormatBytes(r.BytesOut), units.FormatBytes(r.BytesIn))
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
		if !opts.Verbose && i >= 10 {
			fmt.Fprintf(w, "  ... %d more (-v lists all)\n", len(r.Swaps)-i)
			break
		}
		shape := graphdef.FormatShape(s.Shape)
		for _, si := range s.SwapIns {
			fmt.Fprintf(w, "  %-40s %s %s %10s  trigger %s", s.Tensor, s.DType, shape, units.FormatBytes(s.Bytes), si.Trigger)
			if opts.Verbose {
				fmt.Fprintf(w, "  distance %d  swap-in %s on %s  consumers %s", si.Distance, si.Node, si.Device, strings.Join(si.Consumers, ", "))
			}
			fmt.Fprintln(w)
		}
	}
	if opts.Verbose {
		for _, s := range r.Skipped {
			fmt.Fprintf(w, "  skipped %s: %s\n", s.Tensor, s.Reason)
		}
	}
}

// WriteText writes the prediction as tfswap rewrite prints it, one item a line: the device
// and budget and why, the strategy, the step simulated, the peak of every compute device by
// each accounting, the step time, the host link's load, the waits, and the simulations run.
func (p *Prediction) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p.writeText(bw)
	return bw.Flush()
}

func (p *Prediction) writeText(w io.Writer) {
	from := ""
	if p.PlanStrategy != p.Strategy && p.PlanStrategy != "none" {
		from = " (plan from " + p.PlanStrategy + ")"
	}
	fmt.Fprintf(w, "  device:          %s: %s\n", p.Device, p.DeviceReason)
	fmt.Fprintf(w, "  budget:          %s per GPU: %s\n", units.FormatBytes(p.Budget), p.BudgetReason)
	fmt.Fprintf(w, "  strategy:        %s%s\n", p.Strategy, from)
	fmt.Fprintf(w, "  fetch:           %s\n", graphdef.Fetch{Nodes: p.Fetch, Found: p.FetchFound, Reason: p.fetchReason()})
	fmt.Fprintf(w, "  simulated step:  %s\n", p.simulatedStep())
	for _, d := range p.Devices {
		fits := ""
		if d.Over() > 0 {
			fits = " (does not fit)"
		}
		judged := map[string]bool{}
		for _, a := range d.Judged {
			judged[a] = true
		}
		mark := func(acc string) string {
			if judged[acc] {
				return ""
			}
			return " (not required)"
		}
		fmt.Fprintf(w, "  predicted peak:  %s %s of %s by tfswap's model of the runtime%s (unswapped %s)%s\n", d.Name, units.FormatBytes(d.Peak),
			units.FormatBytes(d.Budget), mark("tfswap"), units.FormatBytes(d.UnswappedPeak), fits)
		if d.GrapplerPeak > 0 {
			margin := ""
			if d.GrapplerMargin > 0 {
				margin = fmt.Sprintf(", %s kept free by it for the recomputations", units.FormatBytes(d.GrapplerMargin))
			}
			fmt.Fprintf(w, "                   %s by Grappler's VirtualCluster, trace in nanoseconds%s%s\n", units.FormatBytes(d.GrapplerPeak), mark("grappler-ns"), margin)
			fmt.Fprintf(w, "                   %s by Grappler's VirtualCluster, trace in microseconds (DeterminePeakMemoryUsage)%s\n", units.FormatBytes(d.GrapplerPeakUS), mark("grappler-us"))
		}
	}
	fmt.Fprintf(w, "  predicted step:  %s (unswapped %s, %+.1f%% overhead), %s stalled on swap-ins\n", cost.FormatDuration(int64(p.StepTime)),
		cost.FormatDuration(int64(p.UnswappedStepTime)), 100*p.Overhead, cost.FormatDuration(int64(p.SwapInStall)))
	fmt.Fprintf(w, "  host link:       %s to the host, %s back per step (%s)\n", units.FormatBytes(p.ToHost), units.FormatBytes(p.ToDevice), p.Link)
	if p.Waits > 0 {
		fmt.Fprintf(w, "  waits:           %d op(s) wait for a swap-out to reach the host\n", p.Waits)
	}
	if p.Strategy != "lms-fixed" {
		fmt.Fprintf(w, "  planning:        %d simulations\n", p.Simulations)
		if p.Effort != "" {
			fmt.Fprintf(w, "                   %s\n", p.Effort)
		}
	}
}

// fetchReason is p.FetchReason, or "--fetch" for a prediction built without one.
func (p *Prediction) fetchReason() string {
	if p.FetchReason == "" {
		if len(p.Fetch) > 0 {
			return "--fetch"
		}
		return "no --fetch given"
	}
	return p.FetchReason
}

// simulatedStep says which step a plan was simulated for: the fan-in of the fetches, or every
// node of the graph when no fetch was given.
func (p *Prediction) simulatedStep() string {
	if len(p.Fetch) == 0 {
		return fmt.Sprintf("every node of the graph (%d nodes; no training step found and no --fetch given, so initialisers and reads outside the training step count as part of it: give --fetch with the training op)", p.SimulatedNodes)
	}
	return fmt.Sprintf("the fan-in of %s (%d nodes)", strings.Join(p.Fetch, ", "), p.SimulatedNodes)
}

// rewriteExplanation converts an explanation back to the rewrite package's types, which
// format it.
func rewriteExplanation(es []TensorExplanation) []plan.TensorExplanation {
	out := make([]plan.TensorExplanation, 0, len(es))
	for _, e := range es {
		te := plan.TensorExplanation{Tensor: e.Tensor, Bytes: e.Bytes, Swapped: e.Swapped, Recomputed: e.Recomputed, Reason: e.Reason, Reads: e.Reads, Out: int64(e.Out)}
		for _, s := range e.SwapIns {
			te.SwapIns = append(te.SwapIns, plan.SwapInExplanation{Node: s.Node, Trigger: s.Trigger, Consumer: s.Consumer, TriggerEnd: int64(s.TriggerEnd),
				CopyStart: int64(s.CopyStart), CopyEnd: int64(s.CopyEnd), ConsumerStart: int64(s.ConsumerStart), Wait: int64(s.Wait)})
		}
		out = append(out, te)
	}
	return out
}
