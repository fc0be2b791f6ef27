package plan

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"sort"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
)

// copyWindowDivisors are the byte windows planOffloaded schedules weight copies forwards
// under, as divisors of the smallest compute device's budget (largest window first).
var copyWindowDivisors = []int64{4, 8}

// planOffloaded plans model (prepared: g is its graph, opts has its defaults) with variables
// on the host. The copies of the variables' reads are triggered from the unswapped step's
// predicted times (scheduled forwards under byte windows, or backwards on the host-to-device
// link from their consumers; the best fitting plan of these is kept), or, when no plan of
// those fits, SwapinAhead levels before their consumers. With OffloadAll every variable group moves; with
// PlanOptions.OffloadVariables the groups holding a named variable move (none named in g:
// the plan has no offload); with OffloadAuto the planner first
// plans with every variable resident and keeps that plan when it fits without slowing the
// step, else it tries offloading the largest groups (a variable's bytes, its gradient's and
// its slots' leave the device) in amounts covering half, all and twice the unswapped graph's
// excess over its budget, and all of them, each planned in full with swaps and
// recomputations on top, and keeps the best outcome (fitting first, then the shortest
// simulated step). Small variables are the last to move: they save little and their copies
// cost a transfer's latency each. Every outcome's overhead is against the original graph's
// unswapped step.
func planOffloaded(model *graphdef.Model, g *graphdef.Graph, opts rewrite.Options, po PlanOptions, mode rewrite.OffloadMode) (*Planned, error) {
	planner, err := LookupStrategy(po.Strategy)
	if err != nil {
		return nil, err
	}
	if planner == lmsFixedStrategy {
		return nil, fmt.Errorf("offload %s is planned for the budget: fixed LMS thresholds (lms-fixed) do not plan; give a planning strategy", mode)
	}
	a := rewrite.Analyze(g, opts)
	groups := rewrite.VariableGroups(a)
	if len(groups) == 0 {
		return planPrepared(model, g, opts, po)
	}
	p0, err := newProblem(model, a, po)
	if err != nil {
		return nil, err
	}
	pr0 := p0.newRun("")
	base := pr0.Base
	// The copies' triggers are chosen from the original graph's unswapped step.
	var timing *rewrite.CopyTiming
	if g0, err := pr0.graphFor(&rewrite.Plan{}); err == nil {
		if _, tm, err := pr0.simulate(&rewrite.Plan{}, g0, true); err == nil && tm != nil && pr0.Profile.H2D > 0 {
			timing = &rewrite.CopyTiming{Times: &tm.times, Rate: pr0.Profile.H2D, Latency: pr0.latency}
		}
	}
	var excess int64
	for _, d := range base.Devices {
		excess = max(excess, d.Peak-d.Budget)
	}
	type choice struct {
		sel    []*rewrite.VariableGroup
		reason string
	}
	var choices []choice
	var best *Planned
	var lastErr error
	switch mode {
	case rewrite.OffloadAll:
		choices = append(choices, choice{groups, "every variable is offloaded (--offload all)"})
	case rewrite.OffloadNamed:
		sel := rewrite.NamedGroups(groups, po.OffloadVariables)
		if len(sel) == 0 {
			return planPrepared(model, g, opts, po)
		}
		choices = append(choices, choice{sel, "named by --offload-variables"})
	case rewrite.OffloadAuto:
		p0, err := planPrepared(model, g, opts, po)
		if err == nil && p0.Eval.Fits && p0.Eval.StepTime <= base.StepTime {
			return p0, nil
		}
		var nf *NoFitError
		if err != nil && !errors.As(err, &nf) {
			return nil, err
		}
		best, lastErr = p0, err
		bySize := append([]*rewrite.VariableGroup(nil), groups...)
		sort.SliceStable(bySize, func(i, j int) bool { return bySize[i].Bytes > bySize[j].Bytes })
		seen := map[int]bool{}
		for _, target := range []int64{excess / 2, excess, 2 * excess, -1} {
			k, moved := 0, int64(0)
			for k < len(bySize) && (target < 0 || moved < target || k == 0) {
				// A variable's gradient and its slots leave the device with it: its own
				// bytes are a lower bound of what moving it saves.
				moved = rewrite.AddSat(moved, bySize[k].Bytes)
				k++
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			why := fmt.Sprintf("among the %d largest of %d variable groups (%s) offloaded", k, len(bySize), units.FormatBytes(moved))
			if excess > 0 {
				why += fmt.Sprintf(": the unswapped graph is %s over its budget", units.FormatBytes(excess))
			} else {
				why += ": swapping alone slows the step"
			}
			choices = append(choices, choice{bySize[:k], why})
		}
	}
	// Copies triggered from the predicted times start as early as the host link needs; where
	// that keeps too many weights on the device for the budget, the copies triggered
	// SwapinAhead levels before their consumers (later, so fewer weights at a time) are
	// planned instead.
	// Before both, the copies are scheduled forwards under byte windows of a quarter and an
	// eighth of the smallest compute device's budget (windowStarts): each starts as early as
	// the bytes of the copies still held leave room, so the link does not idle while copies
	// are pending. The fitting plans of the timed schedules compete (fitting first, then the
	// shortest step); the level-based one is planned only when none of them fits.
	var timings []*rewrite.CopyTiming
	if timing != nil {
		var budget int64
		for _, d := range base.Devices {
			if d.Budget > 0 && (budget == 0 || d.Budget < budget) {
				budget = d.Budget
			}
		}
		for _, div := range copyWindowDivisors {
			if budget/div > 0 {
				w := *timing
				w.Window = budget / div
				timings = append(timings, &w)
			}
		}
	}
	timings = append(timings, timing)
	for _, c := range choices {
		var p *Planned
		for _, tm := range timings {
			q, err := planWithOffload(model, g, a, opts, po, c.sel, c.reason, tm)
			if err != nil {
				var nf *NoFitError
				if !errors.As(err, &nf) {
					return nil, err
				}
				lastErr = err
				continue
			}
			if p == nil || better(q.Eval, p.Eval) {
				p = q
			}
		}
		if p == nil && timing != nil {
			p, err = planWithOffload(model, g, a, opts, po, c.sel, c.reason, nil)
			if err != nil {
				var nf *NoFitError
				if !errors.As(err, &nf) {
					return nil, err
				}
				lastErr = err
			}
		}
		if p == nil {
			continue
		}
		p.Simulations += pr0.sims
		p.Base = base
		p.Eval.Overhead = float64(p.Eval.StepTime-base.StepTime) / float64(base.StepTime)
		if best == nil || better(p.Eval, best.Eval) {
			best = p
		}
	}
	if best == nil {
		return nil, lastErr
	}
	return best, nil
}

// planWithOffload offloads the groups sel of model (whose graph is g, analysed as a), the
// copies' triggers chosen from timing when it is not nil, and plans the result's swaps and
// recomputations.
func planWithOffload(model *graphdef.Model, g *graphdef.Graph, a *rewrite.Analysis, opts rewrite.Options, po PlanOptions, sel []*rewrite.VariableGroup, reason string, timing *rewrite.CopyTiming) (*Planned, error) {
	// Groups in graph order, whatever order sel has: the rewrite is deterministic.
	ordered := append([]*rewrite.VariableGroup(nil), sel...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Nodes[0].Index < ordered[j].Nodes[0].Index })
	off, err := rewrite.OffloadGroups(model, a, ordered, reason, timing)
	if err != nil {
		return nil, err
	}
	if err := rewrite.VerifyOffload(g, off); err != nil {
		return nil, fmt.Errorf("internal error: the offload breaks an invariant: %v", err)
	}
	g2, err := graphdef.NewGraph(off.Model.Graph, model.Source)
	if err != nil {
		return nil, fmt.Errorf("internal error: the offloaded graph is invalid: %v", err)
	}
	p, err := planPrepared(off.Model, g2, opts, po)
	if err != nil {
		return nil, err
	}
	p.Offload = off
	return p, nil
}
