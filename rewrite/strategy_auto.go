package rewrite

import (
	"sort"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/triggers"
)

// autoPlanner is tfswap's own planner. It runs every other strategy (so its answer is never
// worse than theirs: they share one cache of simulated plans, and auto keeps the best), adds
// a greedy selection of its own over a wider set of candidates, and improves the best plan
// found with the simulator in the loop:
//
//   - candidates are every buffer of at least Options.MinTensorBytes and every gap between
//     its reads, not only the forward-to-backward gap: a tensor read twice far apart within
//     the backward pass is a candidate too, and a buffer may be swapped out more than once;
//     selection is AutoSwap's (a candidate absent at the current peak, the load updated after
//     each choice) with an extra score that prefers big buffers whose gap leaves the copies
//     slack;
//   - trigger tuning as Kim et al. tune triggers in early iterations: the plan's swap-ins are
//     re-triggered from the plan's own simulated timeline (cost-based, copy queues included),
//     and kept when the step gets shorter;
//   - pruning: swaps the budget does not need are dropped, one buffer at a time, the fast
//     model proposing and the simulator confirming;
//   - on GPUs that share a host link, Kim et al.'s staggering (GPU i swaps layers
//     i mod x + j·x) is tried and kept when it lowers the step time.
//
// Weights and optimizer slots are not swapped: a variable's buffer lives across iterations
// and is updated in place, so swapping it needs a different graph pattern (the variable kept
// on the host, read into the device and written back every step), which tfswap does not
// build.
type autoPlanner struct{}

func (autoPlanner) Name() string { return "auto" }

func (autoPlanner) Doc() string {
	return "tfswap's planner: the best of every other strategy, its own greedy over all gaps of all tensors, then trigger tuning from the " +
		"plan's own timeline, pruning of swaps the budget does not need, and Kim's staggering on GPUs sharing a host link"
}

// autoPruneTries bounds the simulations pruning spends; autoStarts is how many plans (the
// best fitting plan of each strategy, best first) are improved.
const (
	autoPruneTries = 8
	autoStarts     = 2
)

func (p autoPlanner) Plan(pr *Problem) (*Evaluation, error) {
	if pr.Base.Fits {
		return pr.Base, nil
	}
	var best *Evaluation
	consider := func(ev *Evaluation) {
		if better(ev, best) {
			best = ev
		}
	}
	for _, s := range []Planner{lmsPlanner{}, vdnnPlanner{policy: vdnnAll}, vdnnPlanner{policy: vdnnConv}, vdnnPlanner{policy: vdnnDyn}, autoSwapPlanner{}, windowPlanner{}} {
		pr.strategy = s.Name()
		ev, err := s.Plan(pr)
		if err != nil {
			return nil, err
		}
		consider(ev)
	}
	pr.strategy = "auto"
	// Its own greedy over every gap of every buffer.
	cands := pr.allGapCandidates()
	ws := []asWeights{{0, 0, 0, 0, 1}, {0, 0, 0, 1, 0}, {1, 0, 0, 0, 0}, {0, 0, 0, 0.5, 1}}
	ev, _, err := pr.screened(len(ws), 2, func(i int, target []int64) *Plan { return pr.autoSwapSelect(cands, ws[i], target) })
	if err != nil {
		return nil, err
	}
	consider(ev)
	if best == nil || !best.Fits {
		return best, nil
	}
	// Improve the best plans found: the best of each strategy that fits, best first.
	starts := pr.fittingByStrategy()
	if len(starts) > autoStarts {
		starts = starts[:autoStarts]
	}
	for _, st := range starts {
		ev, err := pr.improve(st)
		if err != nil {
			return nil, err
		}
		consider(ev)
	}
	if ev, err := pr.stagger(best); err != nil {
		return nil, err
	} else if ev != nil {
		consider(ev)
	}
	return best, nil
}

// fittingByStrategy returns the best fitting evaluation of each strategy, best first, at
// most three.
func (pr *Problem) fittingByStrategy() []*Evaluation {
	byS := map[string]*Evaluation{}
	var names []string
	keys := make([]string, 0, len(pr.cache))
	for k := range pr.cache {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ev := pr.cache[k]
		if !ev.Fits || len(ev.Plan.Swaps) == 0 {
			continue
		}
		if _, ok := byS[ev.Strategy]; !ok {
			names = append(names, ev.Strategy)
		}
		if better(ev, byS[ev.Strategy]) {
			byS[ev.Strategy] = ev
		}
	}
	var out []*Evaluation
	for _, n := range names {
		out = append(out, byS[n])
	}
	sort.SliceStable(out, func(i, j int) bool { return better(out[i], out[j]) })
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// allGapCandidates returns a candidate for every gap of every buffer of at least the
// minimum size.
func (pr *Problem) allGapCandidates() []*asCand {
	var out []*asCand
	for _, b := range pr.sortedBuffers(-1) {
		if b.bytes < pr.Analysis.Opts.MinTensorBytes {
			continue
		}
		for _, k := range b.splits() {
			if _, ok := redirects(b.tree, b.accesses[k].start, 1<<62); !ok {
				continue
			}
			c := pr.newCand(b, k, "absent across a gap between its reads that covers the peak")
			if c.to > c.from {
				out = append(out, c)
			}
		}
	}
	return out
}

// improve tunes triggers and prunes swaps of a fitting plan with the simulator in the loop.
func (pr *Problem) improve(start *Evaluation) (*Evaluation, error) {
	cur := start
	// Trigger tuning from the plan's own timeline, twice (the second pass sees the first's
	// timeline).
	for it := 0; it < 2; it++ {
		_, tm, err := pr.evaluateTimed(cur.Plan)
		if err != nil {
			return cur, err
		}
		plan, ok := pr.retime(cur.Plan, tm)
		if !ok {
			break
		}
		pr.Explain.derive(plan, cur.Plan, "triggers re-tuned from the plan's own simulated timeline")
		ev, err := pr.Evaluate(plan)
		if err != nil {
			return cur, err
		}
		if !better(ev, cur) {
			break
		}
		cur = ev
	}
	// Pruning: drop whole buffers the fast model says the budget does not need, the
	// simulator confirming.
	tries := 0
	for tries < autoPruneTries {
		base := pr.fast.predict(cur.Plan)
		calib := make([]int64, len(base.base))
		for _, d := range cur.Devices {
			p, _ := base.peak(d.SimulatedIndex)
			calib[d.SimulatedIndex] = d.Peak - p
		}
		units := pr.unitsOf(cur.Plan)
		type cand struct {
			i      int
			excess int64
		}
		var cs []cand
		for i := range units {
			plan := without(cur.Plan, units[i])
			r := pr.fast.predict(plan)
			worst := int64(-1 << 62)
			for _, d := range cur.Devices {
				p, _ := r.peak(d.SimulatedIndex)
				if x := p + calib[d.SimulatedIndex] - d.Budget; x > worst {
					worst = x
				}
			}
			if worst <= 0 {
				cs = append(cs, cand{i, worst})
			}
		}
		if len(cs) == 0 {
			break
		}
		sort.SliceStable(cs, func(a, b int) bool { return cs[a].excess < cs[b].excess })
		improved := false
		for _, c := range cs {
			if tries >= autoPruneTries {
				break
			}
			tries++
			plan := without(cur.Plan, units[c.i])
			pr.Explain.derive(plan, cur.Plan, "kept when pruning")
			ev, err := pr.Evaluate(plan)
			if err != nil {
				return cur, err
			}
			if ev.Fits && better(ev, cur) {
				cur = ev
				improved = true
				break
			}
		}
		if !improved {
			break
		}
	}
	return cur, nil
}

// unitsOf groups a plan's swaps by buffer: the swaps that must go together for a buffer to
// be freed. Each unit is a set of swap indices.
func (pr *Problem) unitsOf(plan *Plan) [][]int {
	byB := map[*buffer]int{}
	var units [][]int
	for i, ps := range plan.Swaps {
		b := pr.bufOf[ps.Tensor]
		if b == nil {
			units = append(units, []int{i})
			continue
		}
		if u, ok := byB[b]; ok {
			units[u] = append(units[u], i)
			continue
		}
		byB[b] = len(units)
		units = append(units, []int{i})
	}
	return units
}

// without returns plan without the swaps at the given indices.
func without(plan *Plan, drop []int) *Plan {
	out := &Plan{}
	for i, ps := range plan.Swaps {
		skip := false
		for _, d := range drop {
			skip = skip || d == i
		}
		if !skip {
			out.Swaps = append(out.Swaps, ps)
		}
	}
	return out
}

// retime re-chooses every swap-in trigger of plan by cost from timing tm.
func (pr *Problem) retime(plan *Plan, tm *timing) (*Plan, bool) {
	var ts []triggers.Transfer
	for _, ps := range plan.Swaps {
		dev := tm.dev[ps.Tensor.Node.Index]
		if dev < 0 || pr.fast.h2d[dev] < 0 {
			return nil, false
		}
		bytes, ok := pr.shapes.Bytes(ps.Tensor)
		if !ok {
			return nil, false
		}
		for _, g := range ps.Groups {
			ts = append(ts, triggers.Transfer{Producer: ps.Tensor.Node, Consumers: useNodes(g.Uses), Engine: pr.fast.h2d[dev],
				Duration: pr.fast.xferTime(bytes, true), Latency: 2*pr.latency + pr.hostIdent})
		}
	}
	chs, err := triggers.ByCostMemo(ts, pr.memo(tm), pr.eligible)
	if err != nil {
		return nil, false
	}
	out := &Plan{}
	i := 0
	for _, ps := range plan.Swaps {
		np := PlannedSwap{Tensor: ps.Tensor, Bytes: ps.Bytes}
		for _, g := range ps.Groups {
			np.Groups = append(np.Groups, SwapInGroup{Uses: g.Uses, Trigger: chs[i].Trigger})
			i++
		}
		out.Swaps = append(out.Swaps, np)
	}
	return out, true
}

// stagger applies Kim et al.'s rule to the GPUs of each shared host link: with a the number
// of candidate layers of a GPU and b the number its plan swaps, x = a/b, GPU i of the group
// swaps layers i mod x + j·x (j < b), so that GPUs do not swap the same layer at the same
// time. It returns the staggered plan's evaluation, or nil when no GPUs share a link.
func (pr *Problem) stagger(best *Evaluation) (*Evaluation, error) {
	if len(pr.simOpts.SharedLinks) == 0 || best == nil {
		return nil, nil
	}
	res := pr.timing.res
	memberOf := func(dev int) (group, rank int) {
		d, err := graphdef.ParseDevice(res.Devices[dev].Name)
		if err != nil {
			return -1, 0
		}
		for gi, g := range pr.simOpts.SharedLinks {
			for ri, m := range g {
				if spec, err := graphdef.ParseDevice(m); err == nil && spec.Type != "" && d.Matches(spec) {
					return gi, ri
				}
			}
		}
		return -1, 0
	}
	// Swapped buffers per device in the best plan.
	swapped := map[int]int{}
	seen := map[*buffer]bool{}
	for _, ps := range best.Plan.Swaps {
		if b := pr.bufOf[ps.Tensor]; b != nil && !seen[b] {
			seen[b] = true
			swapped[b.dev]++
		}
	}
	var cs []*choice
	staggered := false
	for _, dev := range pr.gpuDevices() {
		var layers []*buffer
		for _, b := range pr.sortedBuffers(dev) {
			if b.bytes >= pr.Analysis.Opts.MinTensorBytes && b.largestGap() >= 0 {
				layers = append(layers, b)
			}
		}
		a, nb := len(layers), swapped[dev]
		group, rank := memberOf(dev)
		if nb == 0 {
			continue
		}
		x := 1
		if group >= 0 && nb < a {
			x = a / nb
			staggered = staggered || x > 1
		}
		for j := 0; j < nb; j++ {
			l := rank%x + j*x
			if l >= a {
				break
			}
			b := layers[l]
			cs = append(cs, &choice{b: b, splits: []int{b.largestGap()}, why: "staggered with the GPUs sharing its host link (Kim et al.)"})
		}
	}
	if !staggered {
		return nil, nil
	}
	plan, _ := pr.buildPlan(cs, costRule(nil, 0))
	return pr.Evaluate(plan)
}
