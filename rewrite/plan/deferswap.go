package plan

// DeferSwapOnly says whether a re-plan for a tighter budget defers its swap-only planning
// until the recompute pass has planned (deferSwapOnly); tests turn it off to compare.
var DeferSwapOnly = true

// deferredSwap is what deferSwapOnly found: the shortest step a swap-only plan of the
// state's problem can reach (swapBound).
type deferredSwap struct {
	bound int64
}

// deferSwapOnly reports whether passStrategy may leave st's swap-only planning to the
// recompute pass (recomputeDeferred), and marks st so when it may. That is where st re-plans
// a graph for a tighter budget and keeps its outcome only when it beats st.beat (the tighter
// bypass: tighterBypass), and the link bound (swapBound) shows that no swap-only plan of
// st's problem can: each is slower than st.beat. Such a plan is costly too (its overhead is
// above tupleOrderOverhead), so that the recompute pass reruns every strategy on the
// recomputed graph with or without it (rerunStrategies). Auto must recompute there (mode
// auto, not bounded by the effort rule), the graph must have no accumulators the rewrite can
// place on the host (passAccumulators, between the two, then does nothing either way), the
// state must be a re-plan (the swap-only pass keeps no snapshot of it: snapshotSwapOnly),
// and no explanation is asked for (it names every strategy's plan).
func (st *planState) deferSwapOnly() bool {
	b := st.beat
	if !DeferSwapOnly || b == nil || !b.Fits || st.input != nil || st.planner != autoStrategy || st.mode != "auto" || st.effort.bounded() || st.po.Explain ||
		st.retrySkip["recompute"] || !st.pr.linkBoundSkips(b) {
		return false
	}
	bound := st.pr.swapBound()
	base := st.pr.Base.StepTime
	if bound <= b.StepTime || base <= 0 || float64(bound-base)/float64(base) <= tupleOrderOverhead {
		return false
	}
	if len(st.a.HostAccumulators(-1)) > 0 {
		return false
	}
	st.deferred = &deferredSwap{bound: bound}
	return true
}

// recomputeDeferred is passRecompute where passStrategy deferred the swap-only planning
// (deferSwapOnly). It plans the recomputed level first, as passRecompute would with the
// swap-only plan as ev0: planRecomputeLevel reads ev0 only to skip a level whose link bound
// is no shorter than ev0's step when ev0 fits, and the strategies to rerun from ev0's
// problem's fitting plans, which are all costly here (rerunStrategies: every strategy).
// When the recomputed plan fits and is faster than the swap-only bound, it is better than
// any swap-only plan and the swap-only planning is left out: the re-plan's outcome is the
// same, and that planning could not have given a plan that beats st.beat. Otherwise the
// swap-only planning runs now and the outcome is passRecompute's: the level skipped where
// ev0 would have skipped it, the better of the two kept. At ResNet-50 batch 740 on
// v100-16gb (`--strategy auto --budget 16078864384 --fetch train`, simulated at 2d48c87) the
// bypassed graph's re-plan at 95% of the budget recomputes a plan of 2.173 s, which fits and
// wins, where no swap-only plan is faster than the best so far (2.522 s); its swap-only
// planning (49 simulations, a plan of 8.016 s) is left out: 512 simulations in all, 463.
func (st *planState) recomputeDeferred() error {
	d := st.deferred
	st.deferred = nil
	pr := st.pr
	before := pr.sims
	var rs *stage
	var est int64
	best, err := pr.screenRecomputes(st.mode, false, false)
	if err == nil && best != nil {
		est = best.est
		// As in passRecompute, a recomputation that cannot be planned leaves the
		// swap-only plan.
		rs, _ = pr.planRecomputeLevel(st.planner, st.mode, nil, best)
	}
	recomputeSims := pr.sims - before
	if rs == nil || !rs.ev.Fits || rs.ev.StepTime >= d.bound {
		if err := st.planSwapOnly(); err != nil {
			return err
		}
		ev := st.ev
		switch {
		case rs != nil && ev != nil && ev.Fits && est >= ev.StepTime:
			rs = nil
		case rs != nil && pr.rerunStrategies(st.planner) != nil:
			// Not reached while the link bound holds; planned again as passRecompute
			// would, so that the outcome stays its own.
			rs, _ = pr.planRecomputeLevel(st.planner, st.mode, ev, best)
		}
	}
	st.recomputing = true
	st.sims = pr.sims - recomputeSims
	st.keepRecomputed(rs, false)
	return nil
}
