package plan

import "slices"

// The swap-only pass keeps auto's swap-only planning (`--recompute off`) as a candidate of
// auto. Auto's later passes are gated by the best plan so far: the tuple passes, the reorder
// pass and the written bypass run only where nothing fits or the plan costs more than +50%
// (costly). Where the recompute passes found a better plan than the swap-only one, those gates
// read that plan, so auto skipped passes that, run on the swap-only plan, found a better plan
// than auto's: in the benchmark run at e086c2b (simulated for h100, every accounting) ResNet-50
// batch 5832 gave +975.1% by auto and +965.1% with `--recompute off`, VGG-16 batch 1942
// +249.9% and +248.1%, U-Net batch 1002 +568.6% and +506.7%, and Inception-v3 batch 168 at
// 2.98 GiB (v100-16gb) no plan by auto and +308.7% with `--recompute off`, each of the latter
// a written bypass of a swap-only plan.

// SwapOnlyCandidate says whether auto, where the recompute pass ran, also continues planning
// from its swap-only plan as `--recompute off` would (passSwapOnly). Tests turn it off to
// compare.
var SwapOnlyCandidate = true

// snapshotSwapOnly records st, as it is before the recompute pass changes it, as the state
// the swap-only pass continues from: set on the planning asked for alone (st.input), auto
// strategy and recompute mode "auto", unbounded effort.
func (st *planState) snapshotSwapOnly() {
	if !SwapOnlyCandidate || st.input == nil || st.planner != autoStrategy || st.mode != "auto" || st.effort.bounded() {
		return
	}
	snap := *st
	snap.mode = "off"
	snap.dropped = slices.Clone(st.dropped)
	snap.orders = slices.Clone(st.orders)
	snap.tupleOrders = slices.Clone(st.tupleOrders)
	snap.bypassed = slices.Clone(st.bypassed)
	st.swapOnly = &snap
}

// swapOnlyMayWin reports whether ev, a plan, leaves room for the swap-only pass: it does not
// fit or is costly. Where the swap-only plan fits under +50%, planning on from it without
// recomputation keeps it or a tighter budget's swap-only plan, both of which auto's passes had
// as candidates, since the gated passes do not run on it. Where auto's own plan fits under
// +50%, the pass runs only when that plan is slower than the swap-only link bound
// (swapOnlyBelow): the pass plans the whole problem a second time (on ResNet-50 at 4x B0 on
// v100-16gb, the benchmark's planning-time target, 252 more simulations, doubling the
// planning time, where auto's plan is below the bound).
func swapOnlyMayWin(ev *Evaluation) bool {
	return ev == nil || !ev.Fits || costly(ev)
}

// swapOnlyBelow reports whether a swap-only plan of pr's problem could be faster than ev, a
// plan that fits: pr judges by tfswap's accounting, whose excess over the budget every plan
// must move to the host before the unswapped step's peak and back after it (swapBound), and
// that bound is below ev's step. The tuple bypass and spacers change only Grappler's
// accountings, so the bound holds for the written bypass's plans too.
func swapOnlyBelow(pr *planRun, ev *Evaluation) bool {
	if !SwapOnlyBelowBound {
		return false
	}
	return pr.fit.tfswap && len(pr.Base.Devices) == 1 && pr.swapBound() < ev.StepTime
}

// SwapOnlyBelowBound says whether the swap-only pass also runs where auto's plan fits under
// +50% but its step is above the swap-only link bound (swapOnlyBelow). Tests turn it off to
// compare.
var SwapOnlyBelowBound = true

// passSwapOnly: where the recompute pass ran, the swap-only plan does not fit or is costly,
// and auto's plan does not fit, is costly or is slower than any swap-only plan need be
// (swapOnlyBelow), the passes after the strategy's run again from the swap-only plan without
// recomputation (every pass from recompute to tighter-wbypass, as `--recompute off` runs
// them), and that outcome replaces auto's when it fits and is better (auto never worse than
// its own swap-only planning).
func passSwapOnly(st *planState) error {
	snap := st.swapOnly
	st.swapOnly = nil
	if snap == nil || !swapOnlyMayWin(snap.ev) || !(swapOnlyMayWin(st.final.ev) || swapOnlyBelow(snap.pr, st.final.ev)) {
		return nil
	}
	sub := *snap
	sub.dropped = slices.Clone(snap.dropped)
	err := runPassesFrom(&sub, "recompute", "swap-only")
	// The simulations spent and the candidates dropped count whether or not the planning
	// failed, as they do for every other pass.
	sims := st.sims + sub.sims - snap.sims
	dropped := append(st.dropped, sub.dropped[len(snap.dropped):]...)
	if err != nil {
		st.sims, st.dropped = sims, dropped
		return st.dropPass("auto's swap-only planning", err)
	}
	if f := sub.final; f != nil && f.ev != nil && f.ev.Fits && better(f.ev, st.final.ev) {
		mode := st.mode
		*st = sub
		st.mode = mode
	}
	st.sims, st.dropped = sims, dropped
	return nil
}
