package plan

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// GrapplerSpacers says whether the tuple-bypass pass, when nothing fits its graph, spaces
// the plan that fitted tfswap's accounting with the least excess by Grappler's
// (spaceForGrappler); tests turn it off to compare.
var GrapplerSpacers = true

// maxSpacers is the most spacers spaceForGrappler adds to one plan.
const maxSpacers = 24

// spacerLive is how many of the buffers live at a Grappler peak spaceForGrappler looks at.
const spacerLive = 8

// spaceForGrappler makes a plan fit where Grappler's accountings alone keep the plans of
// sub's final problem from fitting: of the plans that fitted tfswap's accounting and were
// judged by Grappler's, it takes the one with the least excess by them (the faster, then
// the first by planKey, on a tie) and, one at a time, puts a spacer (rewrite.Spacer) before
// the op that starts last among the buffers live at the Grappler peak over the budget by
// more (the microsecond one on a tie), until the plan's rewrite fits by every accounting
// required or no op is left to space. There, in the VirtualCluster's trace, an op starts the
// very nanosecond (or microsecond) the op before it ends, so the inputs that op frees count
// beside the outputs this op allocates: at ResNet-50 8x B0 on v100-16gb a residual add's
// output beside the batch norm's output it reads, the block's input and the convolution
// output the batch norm has just freed. TensorFlow's executor frees those inputs first. When
// the spaced plan fits by every accounting, sub's final stage becomes it (its strategy gains
// "+space"); otherwise sub is unchanged. With TighterBypass, the plan with the least excess
// of each tighter budget sub's tighter pass planned (sub.tighter) is spaced too, judged by
// sub's budget, and the fastest spaced plan that fits is kept: a plan for a smaller budget is
// a candidate for this one (LSTM LM batch 2029 on v100-16gb, the af99bb3 benchmark's curve,
// simulated at 4b65853: +11.7% at 9.99 GiB with the plan of 9.99 GiB spaced, +10.2% with
// these).
func spaceForGrappler(sub *planState) error {
	f := sub.final
	if !GrapplerSpacers || f == nil || f.pr == nil || (f.ev != nil && f.ev.Fits) {
		return nil
	}
	pr := f.pr
	if !pr.fit.grappler() || !pr.fit.tfswap || pr.relabel || len(pr.gpuDevices()) != 1 {
		return nil
	}
	on := *f
	least := leastGrapplerExcess(pr)
	if least != nil {
		if err := spacePlan(sub, &on, pr, least); err != nil {
			return err
		}
	}
	if !TighterBypass {
		return nil
	}
	// The tighter budgets' plans of the graph planned before any reorder (sub.tighter),
	// judged by the budget asked for, which the spacers must bring them within: one of them
	// may fit it faster once spaced (monotone in the budget).
	t := sub.tighter
	if t.model != sub.model {
		return nil
	}
	for _, r := range t.runs {
		if least := leastGrapplerExcess(r.pr); least != nil {
			at := stage{model: t.model, a: t.a, pr: r.pr}
			if err := spacePlan(sub, &at, r.pr, withBudgets(least, sub.pr.Problem)); err != nil {
				return err
			}
		}
	}
	return nil
}

// spacePlan is spaceForGrappler's spacing of cand, a plan of on's graph by pr (on's
// problem or one of its graph) that fitted tfswap's accounting, judged by cand's budgets: it adds spacers one at a time until the
// plan's rewrite fits by every accounting pr requires or no op is left to space, and then
// makes it sub's final stage when it fits and beats that stage (acceptSpaced).
func spacePlan(sub *planState, on *stage, pr *planRun, cand *Evaluation) error {
	res, err := rewrite.Apply(on.model, on.a, pr.placed(cand.Plan))
	if err != nil {
		return err
	}
	opts := pr.grapplerOpts()
	opts.TopLive = spacerLive
	var spacers []rewrite.Spacer
	for len(spacers) <= maxSpacers {
		g, err := graphdef.NewGraph(res.Model.Graph, on.model.Source)
		if err != nil {
			return fmt.Errorf("internal error: the spaced rewrite is invalid: %v", err)
		}
		r, err := cost.Simulate(g, pr.Profile, opts)
		pr.sims++
		if err != nil {
			return fmt.Errorf("simulating by Grappler's accounting: %v", err)
		}
		ev, over, live := spacedEvaluation(cand, r)
		if over <= 0 {
			return acceptSpaced(sub, on, pr, cand, ev, g, spacers)
		}
		s, ok := nextSpacer(g, live, spacers)
		if !ok || len(spacers) == maxSpacers {
			if debugOrder {
				fmt.Fprintf(os.Stderr, "order: spacers: %d added, still %d over by Grappler's accounting\n", len(spacers), over)
			}
			return nil
		}
		if debugOrder {
			fmt.Fprintf(os.Stderr, "order: spacer before %s reading %s (%d over)\n", s.Node, s.Reads, over)
		}
		spacers = append(spacers, s)
		if err := rewrite.AddSpacers(res, []rewrite.Spacer{s}); err != nil {
			return fmt.Errorf("internal error: %v", err)
		}
	}
	return nil
}

// leastGrapplerExcess returns, among pr's evaluated plans that fitted tfswap's accounting
// and were judged by Grappler's, the one with the least excess (the faster, then the first
// by planKey, on a tie); nil when there is none.
func leastGrapplerExcess(pr *planRun) *Evaluation {
	var best *Evaluation
	bestKey := ""
	for key, ev := range pr.cache {
		if !grapplerJudged(ev) {
			continue
		}
		if c := cmp.Or(cmp.Compare(ev.Excess, best0(best).Excess), cmp.Compare(ev.StepTime, best0(best).StepTime), strings.Compare(key, bestKey)); best == nil || c < 0 {
			best, bestKey = ev, key
		}
	}
	return best
}

// grapplerJudged reports whether ev is a plan that does not fit, fitted tfswap's accounting
// and was judged by Grappler's.
func grapplerJudged(ev *Evaluation) bool {
	if ev == nil || ev.Fits || ev.Plan == nil || len(ev.Devices) == 0 {
		return false
	}
	for _, d := range ev.Devices {
		if d.Peak > d.Budget || d.GrapplerPeak == 0 || d.GrapplerPeakUS == 0 {
			return false
		}
	}
	return true
}

// best0 returns ev, or an evaluation no plan is worse than when ev is nil.
func best0(ev *Evaluation) *Evaluation {
	if ev == nil {
		return &Evaluation{Excess: 1 << 62, StepTime: 1 << 62}
	}
	return ev
}

// spacedEvaluation returns cand's evaluation with the Grappler peaks of r (the simulation of
// its spaced rewrite by Grappler's accounting), its largest excess by the Grappler figures
// required, and the buffers live at the peak over by more.
func spacedEvaluation(cand *Evaluation, r *cost.Result) (*Evaluation, int64, []cost.LiveTensor) {
	ev := *cand
	ev.Devices = slices.Clone(cand.Devices)
	over := int64(-1 << 62)
	var live []cost.LiveTensor
	for i := range ev.Devices {
		d := &ev.Devices[i]
		gd := r.Device(d.simName)
		if gd == nil {
			continue
		}
		d.GrapplerPeak, d.GrapplerPeakUS = gd.PeakBytes, gd.MicrosecondPeakBytes
		ns, us := int64(-1<<62), int64(-1<<62)
		if d.fit.ns {
			ns = d.GrapplerPeak + d.GrapplerMargin - d.Budget
		}
		if d.fit.us {
			us = d.GrapplerPeakUS - d.Budget
		}
		if ns > over {
			over, live = ns, gd.Live
		}
		if us >= ns && us > over {
			over, live = us, gd.MicrosecondLive
		}
	}
	return &ev, over, live
}

// nextSpacer returns the spacer to add to g (a plan's rewrite) given the buffers live at its
// Grappler peak: before the producer of the one allocated last that is an op of the graph
// planned (not tfswap's) on a GPU, not a control-flow op (rewrite.SpacerMayHold) and not
// spaced yet, reading the first of its data inputs
// made on its device with a half, bfloat16, float or double dtype, and waiting for the
// producers of its other data inputs on its device. ok is false when no buffer qualifies.
func nextSpacer(g *graphdef.Graph, live []cost.LiveTensor, done []rewrite.Spacer) (rewrite.Spacer, bool) {
	return nextSpacerReading(g, live, done, false)
}

// nextSpacerReading is nextSpacer; with swapIns, a spacer before an op that reads a
// swap-in's copy reads that copy instead (the largest of them, the first of equals:
// spacerSwapIn), so that it runs once the copy has landed, and a recomputed copy of an op
// may be held back too (a recomputation chain's outputs, the conv output its batch norm
// frees beside the add that reads the batch norm's).
func nextSpacerReading(g *graphdef.Graph, live []cost.LiveTensor, done []rewrite.Spacer, swapIns bool) (rewrite.Spacer, bool) {
	live = slices.Clone(live)
	slices.SortStableFunc(live, func(a, b cost.LiveTensor) int {
		return cmp.Or(cmp.Compare(b.Since, a.Since), strings.Compare(a.Name, b.Name))
	})
	for _, t := range live {
		name, _, _, err := graphdef.ParseInput(t.Name)
		n := g.Node(name)
		tfswapNode := n != nil && (n.Def.GetAttr()[rewrite.RoleAttr] != nil || strings.HasPrefix(n.Name, rewrite.Scope))
		if swapIns && n != nil && string(n.Def.GetAttr()[rewrite.RoleAttr].GetS()) == "recompute" {
			tfswapNode = false
		}
		if err != nil || n == nil || n.Device.Type == "CPU" || !rewrite.SpacerMayHold(n.Op) || tfswapNode ||
			slices.ContainsFunc(done, func(s rewrite.Spacer) bool { return s.Node == n.Name }) {
			continue
		}
		s := rewrite.Spacer{Node: n.Name}
		k := -1
		if swapIns {
			k = spacerSwapIn(n)
		}
		if k < 0 {
			k = spacerInput(n)
		}
		if k < 0 {
			continue
		}
		s.Reads = n.Inputs[k].InputString()
		for i, in := range n.Inputs {
			if i == k || in.Node.Def.GetDevice() != n.Def.GetDevice() {
				continue
			}
			if in.Node.Name != name && !slices.Contains(s.After, in.Node.Name) {
				s.After = append(s.After, in.Node.Name)
			}
		}
		reads, _, _, _ := graphdef.ParseInput(s.Reads)
		s.After = slices.DeleteFunc(s.After, func(a string) bool { return a == reads })
		return s, true
	}
	return rewrite.Spacer{}, false
}

// spacerInput returns the index of the data input of n a spacer before n reads: the largest
// (by its static byte size, unknown sizes last; the first of equals) of those made on n's
// device with a half, bfloat16, float or double dtype, or -1 when there is none. The spacer
// must take at least a microsecond in Grappler's cost model to part n's start from the end
// of the op before it; an L2Loss of a small input (the [batch, 1] ExpandDims of a
// cross-entropy gradient's Mul: 369 KB at batch 92,330) takes about that long, and the
// VirtualCluster then read the two in one microsecond where tfswap's model did not.
func spacerInput(n *graphdef.Node) int {
	return largestSpacerInput(n, func(in graphdef.Tensor) bool { return in.Node.Def.GetDevice() == n.Def.GetDevice() })
}

// spacerSwapIn returns the index of the data input of n that reads a swap-in's copy with
// a half, bfloat16, float or double dtype, the largest of them by its static byte size
// (the first of equals), or -1 when there is none. A swap-in on the host lands on n's
// device when its trigger fires; a spacer that reads it runs after it has landed.
func spacerSwapIn(n *graphdef.Node) int {
	return largestSpacerInput(n, func(in graphdef.Tensor) bool {
		return string(in.Node.Def.GetAttr()[rewrite.RoleAttr].GetS()) == "swap_in"
	})
}

// largestSpacerInput returns the index of the largest data input of n (by its static byte
// size, unknown sizes last; the first of equals) that a spacer may read (rewrite.SpacerType)
// and that use accepts, or -1 when there is none.
func largestSpacerInput(n *graphdef.Node, use func(graphdef.Tensor) bool) int {
	best, bestBytes := -1, int64(-1)
	for i, in := range n.Inputs {
		if !use(in) {
			continue
		}
		dt, ok := in.DataType()
		if !ok || !rewrite.SpacerType(dt) {
			continue
		}
		b, known, _ := in.Bytes()
		if !known {
			b = -1
		}
		if best < 0 || b > bestBytes {
			best, bestBytes = i, b
		}
	}
	return best
}

// acceptSpaced simulates g, cand's rewrite with spacers, by tfswap's accounting and, when it
// fits there too and beats sub's final stage, makes it sub's final stage: on's graph with
// cand's plan and the spacers.
func acceptSpaced(sub *planState, on *stage, pr *planRun, cand, ev *Evaluation, g *graphdef.Graph, spacers []rewrite.Spacer) error {
	r, err := cost.Simulate(g, pr.Profile, pr.simOpts)
	pr.sims++
	if err != nil {
		return err
	}
	ev.Result, ev.StepTime, ev.Fits, ev.Excess = r, r.StepTime, true, -1<<62
	ev.Transferred = r.D2H.Bytes + r.H2D.Bytes
	for i := range ev.Devices {
		d := &ev.Devices[i]
		if sd := r.Device(d.simName); sd != nil {
			d.Peak, d.PeakTime, d.SwapInStall = sd.PeakBytes, sd.PeakTime, sd.SwapInStall
		}
		ev.Excess = max(ev.Excess, d.Over())
		if d.Over() > 0 {
			ev.Fits = false
		}
	}
	if debugOrder {
		fmt.Fprintf(os.Stderr, "order: %d spacers: fits %v, excess %d, step %d (was %d)\n", len(spacers), ev.Fits, ev.Excess, ev.StepTime, cand.StepTime)
	}
	if !ev.Fits {
		return nil
	}
	if pr.Base != nil && pr.Base.StepTime > 0 {
		ev.Overhead = float64(ev.StepTime-pr.Base.StepTime) / float64(pr.Base.StepTime)
	}
	ev.Strategy += "+space"
	if !better(ev, sub.final.ev) {
		return nil
	}
	r.Shapes = r.Shapes.Summary()
	f := *on
	f.ev, f.spacers = ev, spacers
	sub.final = &f
	return nil
}
