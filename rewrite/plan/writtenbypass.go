package plan

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// WrittenBypass says whether auto, where Grappler's accountings are required beside
// tfswap's and its best plan is costly or nothing fits, bypasses the tuple Identities of the
// plan tfswap's accounting alone chooses in the graph it writes (passWrittenBypass); tests
// turn it off to compare.
var WrittenBypass = true

// passWrittenBypass: where tfswap's accounting and Grappler's are required, auto's best plan
// so far costs more than tupleOrderOverhead or nothing fits, and the graph runs on one GPU,
// auto plans the input again by tfswap's accounting alone. When that plan is faster than the
// best so far, its rewrite's tf.gradients tuple Identities are bypassed
// (rewrite.BypassWritten: tfswap's accounting models them as forwarding their input's
// buffer, Grappler's VirtualCluster counts each as a buffer of its own), the rewrite is
// spaced (spaceWritten) and, when it then fits by every accounting required and is better,
// it becomes the plan (its strategy gains "+wbypass", and "+space" with spacers). The
// tuple-bypass pass instead bypasses the Identities of the input and plans that graph again,
// a different search: at ResNet-50 8x B0 on v100-16gb (--gate-kind reduce, simulated) the
// plan tfswap's accounting chooses is +286.2%, and the only plan on the bypassed input that
// fitted its accounting +820.3%.
func passWrittenBypass(st *planState) error {
	if !writtenMay(st) {
		return nil
	}
	cur := st.final.ev
	if cur != nil && cur.Fits && (!costly(cur) || !writtenMayWin(st)) {
		return nil
	}
	st.writtenRan = true
	best, sub, err := st.writtenAt(st.po, nil, cur)
	if err != nil || best == nil {
		return err
	}
	st.keepWritten(best, sub)
	return nil
}

// writtenMay reports whether the written bypass may run on st: auto's planning of the input
// (the top state), not bounded by the effort rule, with a plan so far and the step's fetches
// known, where tfswap's accounting and Grappler's are required and the graph runs on one
// GPU.
func writtenMay(st *planState) bool {
	if !WrittenBypass || st.input == nil || st.planner != autoStrategy || st.effort.bounded() || st.final == nil || st.pr == nil || len(st.opts.Fetch) == 0 {
		return false
	}
	fit := st.pr.Problem.fit
	return fit.tfswap && fit.grappler() && !st.pr.relabel && len(st.pr.gpuDevices()) == 1
}

// writtenAt plans st's input again by tfswap's accounting alone, with the options po (st.po,
// or a tighter budget's, planned without the passes skip names as the tighter pass plans
// one), and, when that plan is faster than cur (nil when nothing fits), writes it with its
// tuple Identities bypassed and spaces it (spaceWritten) by the budgets asked for (st.pr's);
// when that rewrite does not fit, it tries up to writtenTries-1 more of the fastest plans that
// fitted tfswap's accounting there (writtenCandidates). It returns the first rewrite that
// fits by every accounting required and is better than cur, as a stage, and the state the
// input was planned with; a nil stage for none. Its simulations count in st.sims.
func (st *planState) writtenAt(po PlanOptions, skip map[string]bool, cur *Evaluation) (*stage, *planState, error) {
	tmp := *st
	tmp.po = po
	tmp.po.FitAccounting = "tfswap"
	sub := &planState{retrySkip: skip}
	if err := tmp.replan(sub, st.input, "input graph planned by tfswap's accounting"); err != nil {
		return nil, nil, st.dropPass("the written bypass", err)
	}
	st.sims += sub.sims
	st.dropped = append(st.dropped, sub.dropped...)
	f := sub.final
	if f == nil || f.ev == nil || !f.ev.Fits || f.ev.Plan == nil || len(f.spacers) > 0 || (cur != nil && cur.Fits && f.ev.StepTime >= cur.StepTime) {
		return nil, nil, nil
	}
	// tupleNames returns the names of the tuple Identities of a's graph.
	tupleNames := func(a *rewrite.Analysis) []string {
		ids := rewrite.TupleIdentities(a.Graph, a, st.opts.Fetch)
		names := make([]string, len(ids))
		for i, n := range ids {
			names[i] = n.Name
		}
		return names
	}
	names, namesOf := tupleNames(f.a), f.a
	for _, cs := range writtenCandidates(f, cur) {
		c := *cs
		cand := cs.ev
		if c.a != namesOf {
			// The level f replaced has a graph of its own.
			names, namesOf = tupleNames(c.a), c.a
		}
		if po.Budget != st.po.Budget {
			// Spaced and judged by the budgets asked for.
			c.ev = withBudgets(cand, st.pr.Problem)
		}
		// spaceWritten simulates on st.pr; those simulations count in the report too.
		before := st.pr.sims
		ev, ws, err := spaceWrittenFn(st.pr, &c, names)
		st.sims += st.pr.sims - before
		if err != nil {
			if err := st.dropPass("the written bypass of the plan from "+cand.Strategy, err); err != nil {
				return nil, nil, err
			}
			continue
		}
		if ev == nil {
			continue
		}
		if debugOrder {
			fmt.Fprintf(os.Stderr, "order: written bypass of %d tuple Identities (plan %+.1f%%, budget %d), %d spacers, %d gates widened, %d swap-ins triggered later: fits %v (excess %d), step %+.1f%%\n", len(ws.bypassed), 100*cand.Overhead, po.Budget, len(ws.spacers), len(ws.wide), ws.retriggered, ev.Fits, ev.Excess, 100*ev.Overhead)
		}
		if ev.Fits && (cur == nil || better(ev, cur)) {
			return &stage{model: c.model, a: c.a, pr: c.pr, ev: ev, descs: c.descs, spacers: ws.spacers, written: ws.bypassed, wide: ws.wide}, sub, nil
		}
	}
	return nil, nil, nil
}

// spaceWrittenFn is spaceWritten; tests replace it to make a candidate fail.
var spaceWrittenFn = spaceWritten

// keepWritten makes best, a written bypass's stage (writtenAt), st's plan, with the graph
// and ordering edges of sub, the state its plan was planned with.
func (st *planState) keepWritten(best *stage, sub *planState) {
	st.final = best
	st.xpr, st.orders, st.tupleOrders, st.bypassed = sub.xpr, sub.orders, sub.tupleOrders, sub.bypassed
	st.model, st.g, st.a = sub.model, sub.g, sub.a
}

// writtenState is a rewrite spaceWritten tries: the plan (its swap-ins' triggers may be
// later than the plan chosen's), the triggers whose gates are widened, the spacers, and what
// building it gave: the Identities bypassed and the swap-ins triggered later.
type writtenState struct {
	plan        *rewrite.Plan
	wide        []string
	spacers     []rewrite.Spacer
	bypassed    []string
	retriggered int
}

// writtenMayWin reports whether a plan that fitted tfswap's accounting but not Grappler's
// was faster than auto's best plan so far (grapplerBound), among the plans of the input's
// problem, of the recompute pass's and of the best plan's: only then may tfswap's choice,
// written with the bypass, beat it. (ResNet-50 6x B0 on v100-16gb by all accountings: the
// best plan, +60.6%, is the one tfswap's accounting alone chooses, and planning it again
// would cost a whole search.)
func writtenMayWin(st *planState) bool {
	for _, pr := range []*planRun{st.pr, st.final.pr} {
		if grapplerBound(st.final.ev, pr, st.rs) {
			return true
		}
	}
	return false
}

// spaceWritten writes f's plan with the tuple Identities names bypassed
// (rewrite.BypassWritten) and, where Grappler's accountings that top (the problem of the
// input, which says what a plan must fit by) requires are over the budget, changes the
// rewrite one step at a time at the peak over by more (then at the other reading's peak).
// Grappler's VirtualCluster copies a swap-in in a nanosecond, so its copy is live from its
// gate's end; the steps, in order:
//   - where a swap-in's copy live there is released by an L2Loss gate that reads a smaller
//     output of its trigger than the largest, the gate of the one allocated last is widened
//     (rewrite.WidenGates): its copy then lands more than a microsecond after its trigger
//     ends, not in the microsecond whose freed inputs Cluster.DeterminePeakMemoryUsage
//     counts beside it;
//   - where an op of the graph planned starts after a swap-in's copy landed there, the
//     swap-in is triggered by that op instead (retrigger), unless the op descends from a
//     reader of the copy: the copy then lands once the op has run;
//   - otherwise a spacer goes before the op nextSpacerReading picks (reading the swap-in's
//     copy the op reads, if any, so that it runs once the copy has landed).
//
// A step is kept only when the excess does not grow with it, or with it and the step after
// it. Once nothing is left to try or the rewrite fits, each widened gate and spacer (the last
// first) whose removal does not raise the excess, or leaves the rewrite fitting, is dropped.
// It returns f's evaluation with the figures of the result by every accounting (simulated)
// and the state kept; a nil evaluation when no Identity was bypassed.
func spaceWritten(top *planRun, f *stage, names []string) (*Evaluation, writtenState, error) {
	opts := top.grapplerOpts()
	opts.TopLive = writtenLive
	margin := func(d DevicePeak) int64 { return top.grapplerMargin * d.Budget / 1000 }
	fit := top.Problem.fit
	// build writes s's rewrite: its plan with the Identities bypassed, the gates widened
	// whose triggers still gate a swap-in, and its spacers.
	build := func(s *writtenState) (*rewrite.Result, error) {
		res, err := rewrite.Apply(f.model, f.a, f.pr.placed(s.plan))
		if err != nil {
			return nil, err
		}
		if s.bypassed, err = rewrite.BypassWritten(res, names); err != nil {
			return nil, fmt.Errorf("internal error: %v", err)
		}
		gates := map[string]bool{}
		for _, nd := range res.Model.Graph.GetNode() {
			gates[nd.GetName()] = true
		}
		s.wide = slices.DeleteFunc(slices.Clone(s.wide), func(t string) bool { return !gates[rewrite.Scope+t+"/gate"] })
		if err := rewrite.WidenGates(res, s.wide); err != nil {
			return nil, fmt.Errorf("internal error: %v", err)
		}
		if err := rewrite.AddSpacers(res, s.spacers); err != nil {
			return nil, fmt.Errorf("internal error: %v", err)
		}
		return res, nil
	}
	// measure simulates res by Grappler's accounting: its excess, and the buffers live at
	// the peak over by more, then at the other.
	measure := func(res *rewrite.Result) (int64, [][]cost.LiveTensor, *cost.Result, *graphdef.Graph, error) {
		g, err := graphdef.NewGraph(res.Model.Graph, f.model.Source)
		if err != nil {
			return 0, nil, nil, nil, fmt.Errorf("internal error: the bypassed rewrite is invalid: %v", err)
		}
		r, err := cost.Simulate(g, top.Profile, opts)
		top.sims++
		if err != nil {
			return 0, nil, nil, nil, fmt.Errorf("simulating by Grappler's accounting: %v", err)
		}
		over := int64(-1 << 62)
		var lives [][]cost.LiveTensor
		for _, d := range f.ev.Devices {
			gd := r.Device(d.simName)
			if gd == nil {
				continue
			}
			ns, us := int64(-1<<62), int64(-1<<62)
			if fit.ns {
				ns = gd.PeakBytes + margin(d) - d.Budget
			}
			if fit.us {
				us = gd.MicrosecondPeakBytes - d.Budget
			}
			if max(ns, us) <= over {
				continue
			}
			over = max(ns, us)
			switch {
			case us >= ns && fit.ns:
				lives = [][]cost.LiveTensor{gd.MicrosecondLive, gd.Live}
			case us >= ns:
				lives = [][]cost.LiveTensor{gd.MicrosecondLive}
			case fit.us:
				lives = [][]cost.LiveTensor{gd.Live, gd.MicrosecondLive}
			default:
				lives = [][]cost.LiveTensor{gd.Live}
			}
		}
		return over, lives, r, g, nil
	}
	cur := writtenState{plan: f.ev.Plan}
	res, err := build(&cur)
	if err != nil || len(cur.bypassed) == 0 {
		return nil, cur, err
	}
	over, lives, r, g, err := measure(res)
	if err != nil {
		return nil, cur, err
	}
	tried := map[string]bool{}
	// try builds and measures s.
	type outcome struct {
		s     writtenState
		over  int64
		lives [][]cost.LiveTensor
		r     *cost.Result
		g     *graphdef.Graph
	}
	try := func(s writtenState) (outcome, error) {
		res, err := build(&s)
		if err != nil {
			return outcome{}, err
		}
		o, l, r, g, err := measure(res)
		return outcome{s, o, l, r, g}, err
	}
	for over > 0 && len(cur.spacers)+len(cur.wide)+cur.retriggered < maxSpacers {
		s2, what, ok := nextWrittenStep(f, res, g, lives, cur, tried)
		if !ok {
			break
		}
		o2, err := try(s2)
		if err != nil {
			return nil, cur, err
		}
		if debugOrder {
			fmt.Fprintf(os.Stderr, "order: written bypass: %s: over %d -> %d\n", what, over, o2.over)
		}
		if o2.over > over {
			// A step may only uncover a moment its shift of the schedule made worse: one
			// step more on top of it is tried before it is given up.
			res2, err := build(&o2.s)
			if err != nil {
				return nil, cur, err
			}
			if s3, what3, ok := nextWrittenStep(f, res2, o2.g, o2.lives, o2.s, tried); ok {
				o3, err := try(s3)
				if err != nil {
					return nil, cur, err
				}
				if debugOrder {
					fmt.Fprintf(os.Stderr, "order: written bypass: and %s: over %d -> %d\n", what3, over, o3.over)
				}
				if o3.over <= over {
					tried[what] = true
					cur, over, lives, r, g = o3.s, o3.over, o3.lives, o3.r, o3.g
					res, err = build(&cur)
					if err != nil {
						return nil, cur, err
					}
					continue
				}
			}
			tried[what] = true
			continue
		}
		tried[what] = true
		cur, over, lives, r, g = o2.s, o2.over, o2.lives, o2.r, o2.g
		if res, err = build(&cur); err != nil {
			return nil, cur, err
		}
	}
	// Drop the widened gates and spacers that do not lower the excess, the last first.
	for i := len(cur.wide) + len(cur.spacers) - 1; i >= 0; i-- {
		s2 := cur
		if i < len(cur.wide) {
			s2.wide = slices.Delete(slices.Clone(cur.wide), i, i+1)
		} else {
			s2.spacers = slices.Delete(slices.Clone(cur.spacers), i-len(cur.wide), i-len(cur.wide)+1)
		}
		o2, err := try(s2)
		if err != nil {
			return nil, cur, err
		}
		if o2.over <= over || (over <= 0 && o2.over <= 0) {
			cur, over, r, g = o2.s, o2.over, o2.r, o2.g
		}
	}
	if _, err := build(&cur); err != nil {
		return nil, cur, err
	}
	tr, err := cost.Simulate(g, top.Profile, top.simOpts)
	top.sims++
	if err != nil {
		return nil, cur, err
	}
	ev := *f.ev
	ev.Plan = cur.plan
	ev.Devices = append([]DevicePeak(nil), f.ev.Devices...)
	ev.Result, ev.StepTime, ev.Fits, ev.Excess = tr, tr.StepTime, true, -1<<62
	ev.Transferred = tr.D2H.Bytes + tr.H2D.Bytes
	for i := range ev.Devices {
		d := &ev.Devices[i]
		d.fit = fit
		d.GrapplerMargin = margin(*d)
		if gd := r.Device(d.simName); gd != nil {
			d.GrapplerPeak, d.GrapplerPeakUS = gd.PeakBytes, gd.MicrosecondPeakBytes
		}
		if sd := tr.Device(d.simName); sd != nil {
			d.Peak, d.PeakTime, d.SwapInStall = sd.PeakBytes, sd.PeakTime, sd.SwapInStall
		}
		ev.Excess = max(ev.Excess, d.Over())
		if d.Over() > 0 {
			ev.Fits = false
		}
	}
	if top.Base != nil && top.Base.StepTime > 0 {
		ev.Overhead = float64(ev.StepTime-top.Base.StepTime) / float64(top.Base.StepTime)
	}
	tr.Shapes = tr.Shapes.Summary()
	ev.Strategy = strings.TrimSuffix(ev.Strategy, "+wbypass") + "+wbypass"
	if len(cur.spacers) > 0 {
		ev.Strategy += "+space"
	}
	return &ev, cur, nil
}

// writtenLive is how many of the buffers live at a Grappler peak spaceWritten looks at (the
// largest): more than spaceForGrappler's spacerLive, so that a recomputation chain's
// outputs (566.6 MiB at ResNet-50 8x B0's stage5) are seen beside the forward's larger
// tensors still live at the end of the forward.
const writtenLive = 24

// writtenTries is how many plans passWrittenBypass bypasses and spaces at most.
const writtenTries = 4

// writtenCandidates returns the plans passWrittenBypass tries, in order, each as the stage
// it was planned in with that plan: f's; then the plan of the level f's replaced
// (stage.replaced: where two recomputation levels were planned, the link's level's plan is
// the faster by tfswap's accounting, and at ResNet-50 8x B0 on v100-16gb the written bypass
// finds no spacing of it but does of the byte level's) when it fits and is faster than cur
// where cur fits; then the fastest others of f's problem that fit tfswap's accounting (the
// first by planKey on a tie) and are faster than cur where cur fits; writtenTries in all at
// most.
func writtenCandidates(f *stage, cur *Evaluation) []*stage {
	faster := func(ev *Evaluation) bool {
		return ev != nil && ev.Fits && ev.Plan != nil && (cur == nil || !cur.Fits || ev.StepTime < cur.StepTime)
	}
	out := []*stage{f}
	if r := f.replaced; r != nil && faster(r.ev) {
		out = append(out, r)
	}
	fk := planKey(f.ev.Plan)
	var keys []string
	for k, ev := range f.pr.cache {
		if k != fk && faster(ev) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(f.pr.cache[a].StepTime, f.pr.cache[b].StepTime), strings.Compare(a, b))
	})
	for _, k := range keys {
		if len(out) == writtenTries {
			break
		}
		c := *f
		c.ev = f.pr.cache[k]
		out = append(out, &c)
	}
	return out
}

// nextWrittenStep returns the next step spaceWritten tries from cur, whose rewrite res
// (graph g) has the buffers lives live at its peaks (the one over by more first), and a
// name for it, avoiding those tried: for the first peak that offers one, the widened gate,
// then the later trigger, then the spacer spaceWritten describes. ok is false when no peak
// offers a step.
func nextWrittenStep(f *stage, res *rewrite.Result, g *graphdef.Graph, lives [][]cost.LiveTensor, cur writtenState, tried map[string]bool) (writtenState, string, bool) {
	for _, live := range lives {
		// The swap-in copy allocated last at the peak whose gate is narrow.
		var last *cost.LiveTensor
		trigger := ""
		for i := range live {
			if t := narrowGateTrigger(g, live[i].Name); t != "" && !slices.Contains(cur.wide, t) && !tried["widen "+t] && (last == nil || live[i].Since > last.Since) {
				last, trigger = &live[i], t
			}
		}
		if trigger != "" {
			s := cur
			s.wide = append(slices.Clone(cur.wide), trigger)
			return s, "widen " + trigger, true
		}
		if s, what, ok := laterTrigger(f, res, g, live, cur, tried); ok {
			return s, what, true
		}
		var done []rewrite.Spacer
		for _, t := range slices.Sorted(maps.Keys(tried)) {
			if n, ok := strings.CutPrefix(t, "spacer before "); ok {
				done = append(done, rewrite.Spacer{Node: n})
			}
		}
		if sp, ok := nextSpacerReading(g, live, append(slices.Clone(cur.spacers), done...), true); ok {
			s := cur
			s.spacers = append(slices.Clone(cur.spacers), sp)
			return s, "spacer before " + sp.Node, true
		}
	}
	return cur, "", false
}

// laterTrigger returns cur with a swap-in triggered later, where live (the buffers live at
// a peak of cur's rewrite res, graph g) holds a swap-in's copy and, allocated after it, the
// output of an op N of the graph planned (the one allocated last) that reads no copy of that
// swap-in, does not descend from a reader of the swapped tensor's copy and descends from its
// producer: the swap-in's group is triggered by N instead. ok is false when live offers none
// not tried.
func laterTrigger(f *stage, res *rewrite.Result, g *graphdef.Graph, live []cost.LiveTensor, cur writtenState, tried map[string]bool) (writtenState, string, bool) {
	var n *graphdef.Node
	var nSince int64
	for _, t := range live {
		name, _, _, err := graphdef.ParseInput(t.Name)
		if err != nil || strings.HasPrefix(name, rewrite.Scope) {
			continue
		}
		if on := f.a.Graph.Node(name); on != nil && (n == nil || t.Since > nSince) {
			n, nSince = on, t.Since
		}
	}
	if n == nil {
		return cur, "", false
	}
	for _, t := range live {
		name, _, _, err := graphdef.ParseInput(t.Name)
		sn := g.Node(name)
		if err != nil || sn == nil || t.Since >= nSince || string(sn.Def.GetAttr()[rewrite.RoleAttr].GetS()) != "swap_in" {
			continue
		}
		what := "trigger " + name + " by " + n.Name
		if tried[what] {
			continue
		}
		if s, ok := retrigger(f, res, g, cur, name, n); ok {
			s.retriggered++
			return s, what, true
		}
	}
	return cur, "", false
}

// retrigger returns cur with the group of the swap-in named swapIn (of cur's rewrite res,
// whose graph is w) triggered by n, an op of f's graph; ok is false when the group is not
// found or n may not trigger it (it reads the swapped tensor's copy or descends from a reader
// of it, or does not descend from the tensor's producer, in f's graph; or it descends from
// the swap-in in w, through the edges the rewrite added: another swap-in triggered after a
// reader of this copy, whose own reader n descends from, and the like, where n's gate would
// close a cycle).
func retrigger(f *stage, res *rewrite.Result, w *graphdef.Graph, cur writtenState, swapIn string, n *graphdef.Node) (writtenState, bool) {
	if sn, wn := w.Node(swapIn), w.Node(n.Name); sn == nil || wn == nil || w.Reachable(sn, wn) {
		return cur, false
	}
	for _, rs := range res.Swaps {
		for _, si := range rs.SwapIns {
			if si.Node != swapIn {
				continue
			}
			for i, ps := range cur.plan.Swaps {
				if ps.Tensor.String() != rs.Tensor {
					continue
				}
				at := -1
				for j, gr := range ps.Groups {
					if gr.Trigger != nil && gr.Trigger.Name == si.Trigger {
						if at >= 0 {
							return cur, false
						}
						at = j
					}
				}
				if at < 0 || triggerDescends(f.a.Graph, n, ps.Groups[at].Uses) || !f.a.Graph.Reachable(ps.Tensor.Node, n) {
					return cur, false
				}
				plan := *cur.plan
				plan.Swaps = slices.Clone(cur.plan.Swaps)
				groups := slices.Clone(ps.Groups)
				groups[at].Trigger = n
				plan.Swaps[i].Groups = groups
				s := cur
				s.plan = &plan
				return s, true
			}
			return cur, false
		}
	}
	return cur, false
}

// narrowGateTrigger returns the trigger of the swap-in of g that makes tensor (its name),
// when its gate is an L2Loss that reads a smaller output of the trigger than
// rewrite.WidestGatePort's; "" otherwise.
func narrowGateTrigger(g *graphdef.Graph, tensor string) string {
	name, _, _, err := graphdef.ParseInput(tensor)
	n := g.Node(name)
	if err != nil || n == nil || string(n.Def.GetAttr()[rewrite.RoleAttr].GetS()) != "swap_in" || len(n.ControlInputs) != 1 {
		return ""
	}
	gate := n.ControlInputs[0]
	if gate.Op != "L2Loss" || len(gate.Inputs) != 1 || string(gate.Def.GetAttr()[rewrite.RoleAttr].GetS()) != "gate" {
		return ""
	}
	t := gate.Inputs[0]
	if gate.Name != rewrite.GateNodeName(t.Node) {
		return ""
	}
	port, _, ok := rewrite.WidestGatePort(t.Node)
	if !ok || port == t.Port {
		return ""
	}
	cur, known, _ := t.Bytes()
	if w, wk, _ := (graphdef.Tensor{Node: t.Node, Port: port}).Bytes(); known && wk && w <= cur {
		return ""
	}
	return t.Node.Name
}
