package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tfswap/tfswap/cost"
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

// autoStrategy is the auto strategy (autoPlanner), the default. It requires every other
// planning strategy but lms-fixed, which does not plan for the budget: their plans are its
// starting points.
var autoStrategy = &Strategy{
	Name: "auto",
	Doc: "tfswap's planner: the best of every other strategy, its own greedy over all gaps of all tensors, then trigger tuning from the " +
		"plan's own timeline, pruning of swaps the budget does not need, and Kim's staggering on GPUs sharing a host link; " +
		"on a graph with more than " + strconv.Itoa(DefaultSearchCandidates) + " swap candidates (--search-candidates) only vdnn-all, vdnn-conv and window at one window size (the budget), a few whole plans each, where the rest grows as the square of the graph",
	Requires: []*Strategy{lmsStrategy, vdnnAllStrategy, vdnnConvStrategy, vdnnDynStrategy, autoSwapStrategy, windowStrategy},
	Run:      func(pass *Pass) (*Evaluation, error) { return autoPlanner{}.Plan(pass) },
}

// DefaultSearchCandidates is the default of auto's effort rule (PlanOptions.SearchCandidates):
// on a graph with more swap candidates than this (rewrite.Analysis.Candidates: the tensors
// of known size on a compute device that a later op reads), auto runs only the searches
// whose cost grows about linearly with the graph (scaleStrategies). The searches it leaves
// out try one change at a time and predict or replay the whole plan after each (vDNN_dyn's
// drop-one loop, the greedy selections, the pruning), or screen and simulate many whole
// plans (the window sizes), or plan the whole problem again (the recomputed graph, the
// tighter budgets), so their time grows about as the square of the graph: on the synthetic
// training graphs of bench/scale.py (one core), 6k candidates (10k nodes) planned in about
// 37 s, 12k (20k nodes) in 108 to 137 s and 18k (30k nodes) in 301 s. The bound sits where
// the full search passes about a minute, far above the benchmark's graphs (ResNet-50's
// training graph at batch 32 has 614 candidates).
const DefaultSearchCandidates = 8192

// scaleStrategies are the strategies auto requires on a graph past its effort bound: vDNN's
// two static plans and the window strategy at one window size, the budget (Pass.scale),
// each a few whole plans fitted with the simulator. Their plans are kept and compared as
// always. LMS is left out too: its threshold search predicts about 20 whole plans for each
// of its 24 settings (at 100k nodes it ran for more than a minute of CPU time).
var scaleStrategies = []*Strategy{vdnnAllStrategy, vdnnConvStrategy, windowStrategy}

// searchEffort is auto's effort rule as it applies to a problem.
type searchEffort struct {
	// candidates is the graph's swap candidate count and limit the bound it was held to
	// (0: no bound).
	candidates, limit int
}

// searchEffortOf returns the effort rule's reading of pr.
func searchEffortOf(pr *Problem) searchEffort {
	limit := pr.Opts.SearchCandidates
	if limit == 0 {
		limit = DefaultSearchCandidates
	}
	if limit < 0 {
		return searchEffort{}
	}
	cands, _ := pr.Analysis.Candidates()
	return searchEffort{candidates: len(cands), limit: limit}
}

// bounded reports whether auto runs only its linear searches.
func (e searchEffort) bounded() bool { return e.limit > 0 && e.candidates > e.limit }

// note says what the rule left out, for the report; empty when the search was not bounded.
func (e searchEffort) note() string {
	if !e.bounded() {
		return ""
	}
	var names []string
	for _, s := range scaleStrategies {
		n := s.Name
		if s == windowStrategy {
			n += " at one window size (the budget)"
		}
		names = append(names, n)
	}
	return fmt.Sprintf("effort bounded: %d swap candidates, more than %d (--search-candidates): auto ran only %s, "+
		"without its greedy, its improvement, recomputation and the tighter budgets", e.candidates, e.limit, strings.Join(names, ", "))
}

// autoPruneTries bounds the simulations pruning spends that do not improve the plan, and the
// first autoPruneKept drops that improve it cost none; autoStarts is how many plans (the best
// fitting plan of each strategy, best first) are improved.
const (
	autoPruneTries = 8
	autoPruneKept  = 64
	autoStarts     = 2
)

// Plan plans for pass.Problem's budgets, starting from the plans of the strategies pass's
// strategy requires. It runs autoPasses in order.
func (p autoPlanner) Plan(pass *Pass) (*Evaluation, error) {
	pr := pass.run
	if pr.Base.Fits {
		return pr.Base, nil
	}
	st := &autoState{pass: pass, pr: pr, effort: searchEffortOf(pr.Problem)}
	if st.effort.bounded() {
		// A few whole plans are simulated: estimate tables the size of the graph would be
		// live through the largest of them for little use (cost.SetupCache.Spare).
		pr.simOpts.Setup.Spare()
	}
	dbg := readPassDebug() // its names checked by planPrepared
	for _, ap := range autoPasses {
		t0 := time.Now()
		sims := pr.sims
		if err := ap.fn(st); err != nil {
			return nil, err
		}
		dbg.report(autoPassPrefix+ap.name, t0, pr.sims-sims, func(w io.Writer) { dumpEvaluation(w, st.best, 0, pr.sims) })
	}
	return st.best, nil
}

// autoPassPrefix prefixes the names of auto's passes in timing lines and TFSWAP_DEBUG_PASS.
const autoPassPrefix = "auto."

// autoState is what auto's passes share: the pass running and the best plan so far.
type autoState struct {
	pass *Pass
	pr   *planRun
	best *Evaluation
	// lowest is the lowest-memory plan, when the lowest-memory pass tried it.
	lowest *Evaluation
	// effort is the effort rule's reading of the problem: when bounded, only
	// scaleStrategies run, and the greedy and the improvement are left out.
	effort searchEffort
}

// consider keeps ev when it is better than the best plan so far.
func (st *autoState) consider(ev *Evaluation) {
	if better(ev, st.best) {
		st.best = ev
	}
}

// autoPass is one of auto's passes.
type autoPass struct {
	name, doc string
	fn        func(st *autoState) error
}

// autoPasses are auto's passes in the order they run.
var autoPasses = []autoPass{
	{"required", "run the strategies auto requires (lms, vDNN, autoswap, window)", autoRequired},
	{"greedy", "its own greedy over every gap of every buffer, four score weightings screened", autoGreedy},
	{"lowest-memory", "when nothing fits: every gap of every tensor, each copy brought back just before its reader", autoLowestMemory},
	{"throttle", "when that does not fit either: the same plan with ops held back where the device runs ahead of its swap-outs", autoThrottle},
	{"peak-repair", "when nothing fits yet: the least excess reached, its waiting copies re-triggered past the peak", autoPeakRepair},
	{"improve", "improve the best fitting plan of the two best strategies: trigger tuning, pruning, swap-in merging above +50%", autoImprove},
	{"stagger", "on GPUs sharing a host link, Kim et al.'s staggering of the best plan", autoStagger},
}

// autoPassOrder are the ordering constraints between autoPasses, checked at initialisation.
var autoPassOrder = []passConstraint{
	{"required", "improve", "improve starts from each strategy's best fitting plan, read from the planning run's cache of plans"},
	{"greedy", "lowest-memory", "the lowest-memory plan is tried only when neither the strategies nor the greedy found a plan that fits"},
	{"lowest-memory", "throttle", "throttling holds back the lowest-memory plan's ops"},
	{"throttle", "peak-repair", "peak repair starts from the least excess evaluated so far, the throttled plan's included"},
	{"peak-repair", "improve", "improvement and staggering start from a plan that fits, which the fallbacks may be the first to find"},
	{"improve", "stagger", "staggering starts from the best plan, improved"},
}

func init() {
	var names []string
	for _, p := range autoPasses {
		names = append(names, p.name)
	}
	if err := checkPassOrder(names, autoPassOrder); err != nil {
		panic(err)
	}
}

// autoRequired runs the strategies auto requires.
func autoRequired(st *autoState) error {
	if st.effort.bounded() {
		only := map[string]bool{}
		for _, s := range scaleStrategies {
			if st.pass.only == nil || st.pass.only[s.Name] {
				only[s.Name] = true
			}
		}
		st.pass.only = only
		st.pass.scale = true
	}
	required, err := st.pass.runRequired()
	if err != nil {
		return err
	}
	for _, ev := range required {
		st.consider(ev)
	}
	st.pr.strategy = st.pass.Strategy.Name
	return nil
}

// autoGreedy is auto's own greedy over every gap of every buffer.
func autoGreedy(st *autoState) error {
	if st.effort.bounded() {
		return nil
	}
	pr := st.pr
	cands := pr.allGapCandidates()
	ws := []asWeights{{0, 0, 0, 0, 1}, {0, 0, 0, 1, 0}, {1, 0, 0, 0, 0}, {0, 0, 0, 0.5, 1}}
	ev, _, err := pr.screened(len(ws), 2, func(i int, target []int64) *rewrite.Plan { return pr.autoSwapSelect(cands, ws[i], target) })
	if err != nil {
		return err
	}
	st.consider(ev)
	return nil
}

// autoLowestMemory: when nothing fits yet, it tries the lowest-memory plan (every gap of
// every tensor, each copy brought back by the op just before its reader), which the no-fit
// error would otherwise report as reachable; when it fits it is improved like any other.
func autoLowestMemory(st *autoState) error {
	if st.best != nil && st.best.Fits {
		return nil
	}
	lp, err := st.pr.Evaluate(st.pr.lowestMemoryPlan())
	if err != nil {
		return err
	}
	st.lowest = lp
	st.consider(lp)
	return nil
}

// autoThrottle: when the lowest-memory plan does not fit either, the same plan with the ops
// held back where the fast model sees the device run ahead of its swap-outs (the forward
// pass of a batch several times the largest that fits makes tensors faster than the host
// link takes them away).
func autoThrottle(st *autoState) error {
	if st.lowest == nil || st.best.Fits {
		return nil
	}
	tp, _ := st.pr.throttled(st.lowest.Plan, st.pr.targets())
	tev, err := st.pr.Evaluate(tp)
	if err != nil {
		return err
	}
	st.consider(tev)
	return nil
}

// autoPeakRepair: when nothing fits after the fallbacks, the least excess reached, with its
// waiting copies re-triggered past the peak.
func autoPeakRepair(st *autoState) error {
	if st.lowest == nil || st.best.Fits || !peakRepair {
		return nil
	}
	rev, err := st.pr.repairPeak(st.pr.lowest)
	if err != nil {
		return err
	}
	st.consider(rev)
	return nil
}

// autoImprove improves the best plans found, when one fits: the best of each strategy that
// fits, best first.
func autoImprove(st *autoState) error {
	if st.best == nil || !st.best.Fits || st.effort.bounded() {
		return nil
	}
	starts := st.pr.fittingByStrategy()
	if len(starts) > autoStarts {
		starts = starts[:autoStarts]
	}
	for _, s := range starts {
		ev, err := st.pr.improve(s)
		if err != nil {
			return err
		}
		st.consider(ev)
	}
	return nil
}

// autoStagger tries Kim et al.'s staggering on GPUs that share a host link, when a plan fits.
func autoStagger(st *autoState) error {
	if st.best == nil || !st.best.Fits {
		return nil
	}
	ev, err := st.pr.stagger(st.best)
	if err != nil {
		return err
	}
	if ev != nil {
		st.consider(ev)
	}
	return nil
}

// fittingByStrategy returns the best fitting evaluation of each strategy, best first, at
// most three.
func (pr *planRun) fittingByStrategy() []*Evaluation {
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
		for _, k := range b.splitsFromProduction(pr.fast.xferTime(b.bytes, false)) {
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

// improve tunes triggers and prunes swaps of a fitting plan with the simulator in the loop,
// and merges the swap-ins of a plan that stays costly (mergeSwapIns).
func (pr *planRun) improve(start *Evaluation) (*Evaluation, error) {
	cur := start
	// Trigger tuning from the plan's own timeline (the second pass sees the first's): all
	// triggers re-chosen by cost, or only the swap-ins whose consumers waited moved earlier by
	// their wait, in full or by half (Kim et al.: as late as possible without delay, as early
	// as the memory allows).
	for it := 0; it < 2; it++ {
		_, tm, err := pr.evaluateTimed(cur.Plan)
		if err != nil {
			return cur, err
		}
		var variants []*rewrite.Plan
		if plan, ok := pr.retime(cur.Plan, tm); ok {
			pr.Explain.derive(plan, cur.Plan, "triggers re-tuned from the plan's own simulated timeline")
			variants = append(variants, plan)
		}
		for _, f := range []float64{1, 0.5} {
			if plan, ok := pr.earlier(cur.Plan, tm, f); ok {
				pr.Explain.derive(plan, cur.Plan, "triggers of late swap-ins moved earlier")
				variants = append(variants, plan)
			}
		}
		improved := false
		for _, plan := range variants {
			ev, err := pr.Evaluate(plan)
			if err != nil {
				return cur, err
			}
			if better(ev, cur) {
				cur, improved = ev, true
			}
		}
		if !improved {
			break
		}
	}
	// Pruning: drop whole buffers the fast model says the budget does not need, the
	// simulator confirming. Only the drops the simulator rejects count against
	// autoPruneTries: at ResNet-50 8x B0 on v100-16gb (tfswap's accounting, --gate-kind
	// reduce, simulated) the first eight tries on auto's 47-unit plan each dropped a unit, and
	// counting them stopped pruning at +479.7% before merging (+286.2% after); pruning on
	// while drops are kept gives +176.1%.
	tries, kept, halves := 0, 0, PruneHalves
	for tries < autoPruneTries {
		base := pr.fast.predict(cur.Plan)
		calib := make([]int64, len(base.base))
		for _, d := range cur.Devices {
			p, _ := base.peak(d.SimulatedIndex)
			calib[d.SimulatedIndex] = d.Peak - p
		}
		units := pr.unitsOf(cur.Plan)
		var cs []pruneCand
		drop := pr.newWithoutSweep(cur.Plan)
		for i := range units {
			peak := drop.peakWithout(units[i])
			worst := int64(-1 << 62)
			for _, d := range cur.Devices {
				p := peak(d.SimulatedIndex)
				if x := p + calib[d.SimulatedIndex] - d.Budget; x > worst {
					worst = x
				}
			}
			if worst <= 0 {
				cs = append(cs, pruneCand{i, worst})
			}
		}
		if len(cs) == 0 {
			break
		}
		sort.SliceStable(cs, func(a, b int) bool { return cs[a].excess < cs[b].excess })
		if halves {
			kept, judged, err := pr.pruneHalf(&cur, drop, units, cs[:len(cs)/2], calib)
			if err != nil {
				return cur, err
			}
			if kept {
				continue
			}
			// A half the simulator rejected costs no try, so that pruning goes on one drop
			// at a time as it would have; the fast model misjudged this plan's halves, so
			// no more are tried.
			halves = !judged
		}
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
				if kept < autoPruneKept {
					kept++
					tries--
				}
				break
			}
		}
		if !improved {
			break
		}
	}
	if !MergeSwapIns || !costly(cur) {
		return cur, nil
	}
	// Merging again after a pass that changed the plan: each kept change moves the timeline,
	// and a merge rejected early in a pass may fit and be faster after the later ones. At
	// ResNet-50 8x B0 (tfswap's accounting, --gate-kind reduce, simulated) the second pass
	// merges two swap-ins of stage2/block3/out: +171.2% to +160.8%.
	left := autoMergeTries
	for round := 0; round < mergeRounds && left > 0; round++ {
		next, spent, err := pr.mergeSwapIns(cur, left)
		if err != nil || next == cur {
			return next, err
		}
		cur, left = next, left-spent
	}
	return cur, nil
}

// mergeRounds bounds the passes of mergeSwapIns over one plan in improve (a variable only so
// that tests can compare against one pass).
var mergeRounds = 3

// unitsOf groups a plan's swaps by buffer: the swaps that must go together for a buffer to
// be freed. Each unit is a set of swap indices.
func (pr *Problem) unitsOf(plan *rewrite.Plan) [][]int {
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
// withoutSweep predicts the plans without(plan, unit) by replaying one prepared sweep of
// plan's swaps (without its waits, as without drops them) with the unit's buffer skipped.
type withoutSweep struct {
	pr   *Problem
	plan *rewrite.Plan
	prep *preparedSweep
	// step is the incremental simulator of prep with every buffer kept (made on first use);
	// swapsOf counts each prepared buffer's swaps, and drop lists the buffers a unit drops.
	step    *cost.SwapStep
	swapsOf []int
	drop    []int
}

func (pr *Problem) newWithoutSweep(plan *rewrite.Plan) *withoutSweep {
	return &withoutSweep{pr: pr, plan: plan, prep: pr.fast.prepare(&rewrite.Plan{Swaps: plan.Swaps}, nil)}
}

// predict returns the same as pr.fast.predict(without(plan, drop)).
func (w *withoutSweep) predict(drop []int) *fastResult {
	if kb, ok := w.prep.keepOf(func(i int) bool { return !slices.Contains(drop, i) }); ok {
		return w.prep.result(kb)
	}
	return w.pr.fast.predict(without(w.plan, drop))
}

// peakWithout returns each device's predicted peak for the plan without the swaps drop (the
// same as pr.fast.predict(without(plan, drop)).peak), valid until the next call: the
// incremental simulator with the dropped swaps' buffers unswapped, when drop holds every
// swap of the buffers it names.
func (w *withoutSweep) peakWithout(drop []int) func(dev int) int64 {
	if w.swapsOf == nil {
		w.swapsOf = make([]int, len(w.prep.bufs))
		for _, bi := range w.prep.bufOfSwap {
			if bi >= 0 {
				w.swapsOf[bi]++
			}
		}
	}
	w.drop = w.drop[:0]
	whole := true
	for _, i := range drop {
		bi := int(w.prep.bufOfSwap[i])
		if bi < 0 || slices.Contains(w.drop, bi) {
			continue
		}
		n := 0
		for _, j := range drop {
			if int(w.prep.bufOfSwap[j]) == bi {
				n++
			}
		}
		whole = whole && n == w.swapsOf[bi]
		w.drop = append(w.drop, bi)
	}
	if !whole {
		r := w.pr.fast.predict(without(w.plan, drop))
		return func(dev int) int64 { p, _ := r.peak(dev); return p }
	}
	if w.step == nil {
		w.step = w.prep.swapStep(nil)
	}
	w.step.Undo()
	w.step.Set(false, w.drop...)
	return func(dev int) int64 { p, _ := w.step.Peak(dev); return p }
}

func without(plan *rewrite.Plan, drop []int) *rewrite.Plan {
	out := &rewrite.Plan{}
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

// pruneCand is a candidate of improve's pruning: the unit i of the plan's buffers' swaps
// (unitsOf) and the fast model's excess of the plan without it over the budget.
type pruneCand struct {
	i      int
	excess int64
}

// PruneHalves lets improve's pruning drop half its candidates in one simulation
// (planRun.pruneHalf; switched off only by tests, to compare).
var PruneHalves = true

// pruneHalf tries, before improve's pruning drops its candidates one at a time, to drop half
// of them at once: half, the first of the candidates (at least two units of units, the
// buffers' swaps of cur's plan, in pruning's order), when the fast model (drop, calibrated
// on cur by calib) predicts that the plan without all of them fits every device's budget. The
// simulator judges that plan; it replaces *cur when it fits and is better. It reports whether
// the half was kept and whether the simulator judged it. Improve counts neither against
// autoPruneTries, so that a rejected half leaves the one-at-a-time pruning as it was: counted,
// the two halves the simulator rejected on the session Example's plan ended its pruning early,
// at 5 swaps and +0.67% instead of 6 swaps and +0.00% (simulated). Pruning otherwise keeps one
// drop per simulation: at ResNet-50 batch 740 on v100-16gb (`--strategy auto --budget
// 16078864384 --fetch train`, simulated at 567846e) the recompute pass's improve spent 110
// simulations without halves and 46 with them (three kept halves: 42 swaps to 21, 11, 6).
func (pr *planRun) pruneHalf(cur **Evaluation, drop *withoutSweep, units [][]int, half []pruneCand, calib []int64) (kept, judged bool, err error) {
	if len(half) < 2 {
		return false, false, nil
	}
	var all []int
	for _, c := range half {
		all = append(all, units[c.i]...)
	}
	peak := drop.peakWithout(all)
	for _, d := range (*cur).Devices {
		if peak(d.SimulatedIndex)+calib[d.SimulatedIndex] > d.Budget {
			return false, false, nil
		}
	}
	plan := without((*cur).Plan, all)
	pr.Explain.derive(plan, (*cur).Plan, "kept when pruning")
	ev, err := pr.Evaluate(plan)
	if err != nil {
		return false, true, err
	}
	if ev.Fits && better(ev, *cur) {
		*cur = ev
		return true, true, nil
	}
	return false, true, nil
}

// autoMergeTries bounds the simulations improve's passes of mergeSwapIns spend on one plan.
const autoMergeTries = 256

// MergeSwapIns lets improve merge the swap-ins of a costly plan (mergeSwapIns; switched off
// only by tests, to show what it changes).
var MergeSwapIns = true

// mergeSwapIns merges swap-ins of a fitting plan that costs more than +50% (costly), spending
// at most budget simulations and returning how many it spent: for each swapped tensor, in
// plan order, each swap-in and the next of the same tensor become one (the earlier one's
// trigger, both groups' reads), kept when the plan still fits and is better,
// the simulator judging; a merged swap-in is tried again with the next. A plan the host link
// binds often swaps a tensor in once for each of its later reads, each copy freed at once; one
// copy serving two reads moves the tensor once less, where the memory between them allows it.
// At ResNet-50 8x B0 on v100-16gb (tfswap's accounting, simulated) auto's plan swapped the
// block outputs kept for the recomputation chains in up to 6 times each (127 swap-ins, 163.50
// GiB back a step, +479.7%); merged, 50 swap-ins move 83.13 GiB back and the step is +286.2%.
//
// Before merging a tensor's swap-ins, it drops the first of them where the tensor has more
// than one, its reads reading the original again, kept on the same terms: the original then
// stays until those reads, and the swap-out leaves after them. A swap-in for a read soon after
// the swap-out (a residual block's sum, in the forward pass) costs a round trip over the link
// that the compute stream waits for. At 8x B0 this keeps stage4/block5/out and
// stage5/block1/conv1's output for their first reads: +176.1% to +171.2%.
func (pr *planRun) mergeSwapIns(cur *Evaluation, budget int) (*Evaluation, int, error) {
	// keep evaluates plan, derived from cur's for the reason why, and makes it cur when it
	// fits and is better.
	keep := func(plan *rewrite.Plan, why string) (bool, error) {
		pr.Explain.derive(plan, cur.Plan, why)
		ev, err := pr.Evaluate(plan)
		if err != nil || !ev.Fits || !better(ev, cur) {
			return false, err
		}
		cur = ev
		return true, nil
	}
	tries := 0
	var base *fastResult
	baseOf := (*Evaluation)(nil)
	for i := 0; i < len(cur.Plan.Swaps); i++ {
		if len(cur.Plan.Swaps[i].Groups) > 1 && tries < budget {
			if baseOf != cur {
				base, baseOf = pr.fast.predict(cur.Plan), cur
			}
			plan := withGroups(cur.Plan, i, append([]rewrite.SwapInGroup(nil), cur.Plan.Swaps[i].Groups[1:]...))
			if pr.fastFits(plan, cur, base) {
				tries++
				if _, err := keep(plan, "the first swap-in of the tensor dropped, its reads reading the original"); err != nil {
					return cur, tries, err
				}
			}
		}
		for j := 0; j+1 < len(cur.Plan.Swaps[i].Groups) && tries < budget; {
			tries++
			ps := cur.Plan.Swaps[i]
			m := ps.Groups[j]
			if triggerDescends(pr.Analysis.Graph, m.Trigger, ps.Groups[j+1].Uses) {
				// The merged copy would wait for a trigger that runs after one of its reads.
				j++
				continue
			}
			m.Uses = append(append([]graphdef.Use(nil), m.Uses...), ps.Groups[j+1].Uses...)
			groups := append(append(append([]rewrite.SwapInGroup(nil), ps.Groups[:j]...), m), ps.Groups[j+2:]...)
			kept, err := keep(withGroups(cur.Plan, i, groups), "two swap-ins of the tensor merged into one")
			if err != nil {
				return cur, tries, err
			}
			if !kept {
				j++
			}
		}
	}
	return cur, tries, nil
}

// withGroups returns a copy of plan whose swap i has the swap-ins groups.
func withGroups(plan *rewrite.Plan, i int, groups []rewrite.SwapInGroup) *rewrite.Plan {
	out := *plan
	out.Swaps = append([]rewrite.PlannedSwap(nil), plan.Swaps...)
	out.Swaps[i].Groups = groups
	return &out
}

// fastFits reports whether the fast model, calibrated on cur (the simulated peak less base,
// the peak it predicts for cur's plan, per device), predicts that plan fits every device's
// budget.
func (pr *planRun) fastFits(plan *rewrite.Plan, cur *Evaluation, base *fastResult) bool {
	r := pr.fast.predict(plan)
	for _, d := range cur.Devices {
		p0, _ := base.peak(d.SimulatedIndex)
		p, _ := r.peak(d.SimulatedIndex)
		if p+d.Peak-p0 > d.Budget {
			return false
		}
	}
	return true
}

// triggerDescends reports whether trigger is a descendant, in g, of a node that reads one of
// uses.
func triggerDescends(g *graphdef.Graph, trigger *graphdef.Node, uses []graphdef.Use) bool {
	if trigger == nil || trigger.Index < 0 || trigger.Index >= len(g.Nodes) || g.Nodes[trigger.Index] != trigger {
		return true
	}
	for _, u := range uses {
		if u.Node == trigger || g.Descendants(u.Node)[trigger.Index] {
			return true
		}
	}
	return false
}

// retime re-chooses every swap-in trigger of plan by cost from timing tm.
func (pr *Problem) retime(plan *rewrite.Plan, tm *timing) (*rewrite.Plan, bool) {
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
			ts = append(ts, triggers.Transfer{Producer: ps.Tensor.Node, Consumers: rewrite.SwapInReaders(g.Uses), Engine: pr.fast.h2d[dev],
				Duration: pr.fast.xferTime(bytes, true), Latency: 2*pr.latency + pr.hostIdent})
		}
	}
	chs, err := triggers.ByCostMemo(ts, pr.memo(tm), pr.eligible)
	if err != nil {
		return nil, false
	}
	out := &rewrite.Plan{}
	i := 0
	for _, ps := range plan.Swaps {
		np := rewrite.PlannedSwap{Tensor: ps.Tensor, Bytes: ps.Bytes}
		for _, g := range ps.Groups {
			np.Groups = append(np.Groups, rewrite.SwapInGroup{Uses: g.Uses, Trigger: chs[i].Trigger})
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
func (pr *planRun) stagger(best *Evaluation) (*Evaluation, error) {
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

// earlier moves the trigger of every swap-in whose first consumer waited for it (in timing tm,
// the plan's own) earlier by frac of the wait: to the latest op on the consumer's ancestry
// that ends that much before the current trigger. It reports false when no swap-in waited.
func (pr *Problem) earlier(plan *rewrite.Plan, tm *timing, frac float64) (*rewrite.Plan, bool) {
	res := tm.res
	copyEnd := map[string]int64{}
	for _, x := range res.Timeline.Xfers {
		if !res.Devices[x.Src].GPU && res.Devices[x.Dst].GPU {
			copyEnd[x.Tensor] = x.End
		}
	}
	// prevEnd: when the op before each node on its device ended.
	prevEnd := map[*graphdef.Node]int64{}
	for _, order := range tm.order {
		for k, n := range order {
			if k > 0 {
				prevEnd[n] = tm.times.End[order[k-1].Index]
			}
		}
	}
	out := &rewrite.Plan{Waits: plan.Waits}
	moved := false
	memo := pr.memo(tm)
	for _, ps := range plan.Swaps {
		np := rewrite.PlannedSwap{Tensor: ps.Tensor, Bytes: ps.Bytes}
		for k, g := range ps.Groups {
			ng := g
			arrive, ok := copyEnd[rewrite.SwapNodeName(ps.Tensor, "swap_in_"+strconv.Itoa(k))+":0"]
			nodes := rewrite.SwapInReaders(g.Uses)
			first := nodes[0]
			for _, n := range nodes {
				if tm.times.Start[n.Index] < tm.times.Start[first.Index] {
					first = n
				}
			}
			if ok && tm.times.Start[first.Index] >= 0 && tm.times.Start[first.Index] <= arrive {
				// The consumer started when the copy arrived: how long would it have waited?
				ready := prevEnd[first]
				for _, in := range first.Inputs {
					if in != ps.Tensor {
						ready = max(ready, tm.times.End[in.Node.Index])
					}
				}
				for _, c := range first.ControlInputs {
					ready = max(ready, tm.times.End[c.Index])
				}
				if wait := arrive - ready; wait > 0 {
					by := tm.times.End[g.Trigger.Index] - int64(frac*float64(wait))
					if t, _, err := memo.ByTime(ps.Tensor.Node, nodes, by, pr.eligible); err == nil && t != g.Trigger {
						ng.Trigger = t
						moved = true
					}
				}
			}
			np.Groups = append(np.Groups, ng)
		}
		out.Swaps = append(out.Swaps, np)
	}
	return out, moved
}
