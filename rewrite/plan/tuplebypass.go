package plan

import (
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/tfswap/tfswap/rewrite"
)

// TupleBypass says whether auto bypasses tf.gradients tuple Identities where Grappler's
// accountings are required (passTupleBypass); tests turn it off to compare.
var TupleBypass = true

// passTupleBypass bypasses tf.gradients tuple Identities where Grappler's accountings bind
// (grapplerBinds) and the step's fetches are known (an Identity named by them stays): it
// adds the tuple ordering edges (tupleOrderEdges, found through the Identities), bypasses
// every tuple Identity the rewrite may (rewrite.TupleIdentities,
// rewrite.BypassTupleIdentities), plans the graph again from the start (the reorder pass
// included) and keeps the better outcome, as passTupleOrder does. It does not run on the
// tuple-order pass's graph, whose plans it would repeat. TensorFlow's Identity kernel
// forwards its input's buffer and its default Grappler passes remove these Identities before
// the graph runs, so tfswap's accounting barely changes; Grappler's VirtualCluster counts
// each as a buffer of its own beside its input, and its microsecond reading counts a 1 ns
// Identity together with what is allocated in the same microsecond. When nothing fits the
// bypassed graph, its plan that fitted tfswap's accounting is spaced (spaceForGrappler)
// before the outcomes are compared.
func passTupleBypass(st *planState) error {
	if !bypassMay(st) || !bypassWanted(st.pr.Problem.fit, st.final) {
		return nil
	}
	sub, err := st.bypassAt(st.po, tighterPlanned{model: st.model, g: st.g, a: st.a, orders: st.orders, tupleOrders: st.tupleOrders})
	if err != nil || sub == nil {
		return err
	}
	st.keepReplanned(sub, sub.model, "+bypass")
	return nil
}

// bypassMay reports whether the tuple-bypass passes may run on st: auto's planning of the
// input graph (not a graph the tuple-order, tuple-bypass or reorder passes made), not bounded
// by the effort rule, with a plan so far and the step's fetches known.
func bypassMay(st *planState) bool {
	return TupleBypass && st.planner == autoStrategy && !st.tupleBypassed && !st.tupleOrdered && st.depth == 0 && !st.effort.bounded() &&
		st.final != nil && st.pr != nil && len(st.opts.Fetch) > 0
}

// bypassWanted reports whether the bypass may lower the cost of f, the best stage planned
// for a budget whose plans must fit by the accountings of fit: Grappler's accountings bind
// (grapplerBinds), or tfswap's accounting alone is required and f's plan is costly
// (tfswapCostly).
func bypassWanted(fit fitSet, f *stage) bool {
	return grapplerBinds(fit, f) || tfswapCostly(fit, f)
}

// bypassAt plans, with st's planner and the options po (st.po, or a tighter budget's), the
// graph of on (its model, graph, analysis and ordering edges) with the tuple ordering edges
// added (tupleOrderEdges, found through the Identities) and every tuple Identity the rewrite
// may bypass bypassed, and spaces its plan when nothing fits there (spaceForGrappler). It
// returns the state planned, nil when the graph has no such Identity. Its simulations count
// in st.sims.
func (st *planState) bypassAt(po PlanOptions, on tighterPlanned) (*planState, error) {
	ids := rewrite.TupleIdentities(on.g, on.a, st.opts.Fetch)
	if len(ids) == 0 {
		return nil, nil
	}
	names := make([]string, len(ids))
	for i, n := range ids {
		names[i] = n.Name
	}
	// The tuple ordering edges are found through the Identities, so they are added first.
	edges := tupleOrderEdges(on.g, on.a, largestOutput(st.pr.Problem))
	m1, _ := withOrderEdges(on.model, edges)
	m2 := rewrite.BypassTupleIdentities(m1, on.g, ids)
	sub := &planState{depth: st.depth, tupleOrdered: true, tupleBypassed: true, bypassed: names,
		orders: appendNew(on.orders, edges), tupleOrders: appendNew(on.tupleOrders, edges)}
	if po.Budget != st.po.Budget {
		// A tighter budget is planned as the tighter pass plans one: the strategies and
		// the recompute pass, without their retries.
		sub.retrySkip = tighterRetrySkips
		sub.beat = st.final.ev
	}
	host := *st
	host.model, host.po, host.sims = on.model, po, 0
	if err := host.replan(sub, m2, "graph with the tuple Identities bypassed"); err != nil {
		return nil, err
	}
	st.sims += host.sims
	if err := spaceForGrappler(sub); err != nil {
		return nil, err
	}
	if debugOrder {
		if ev := sub.final.ev; ev != nil && ev.Fits {
			fmt.Fprintf(os.Stderr, "order: %d tuple Identities bypassed (budget %d): fits, step %+.1f%%\n", len(ids), po.Budget, 100*ev.Overhead)
		} else if l := sub.final.pr.lowest; l != nil {
			lb := sub.final.pr.lowBy
			fmt.Fprintf(os.Stderr, "order: %d tuple Identities bypassed (budget %d): lowest peak %d; least excess by accounting %d (%d plans), %d (%d), %d (%d)\n", len(ids), po.Budget, maxPeak(l),
				lb[0].excess, lb[0].plans, lb[1].excess, lb[1].plans, lb[2].excess, lb[2].plans)
		}
	}
	return sub, nil
}

// TighterBypass says whether auto bypasses the tuple Identities at the tighter budgets
// (planState.tighterBypass) and spaces the tighter budgets' plans of the bypassed graph
// (spaceForGrappler); tests turn it off to compare.
var TighterBypass = true

// tighterBypass keeps auto monotone in the budget where the bypass pays at a tighter budget
// only: after the tighter pass planned r, the plans of one tighter budget, on the graph of
// on, where the tuple-bypass pass would run at that budget (bypassWanted of the better of
// its swap-only and recomputed plans), it plans the bypassed graph for that budget as the
// tighter pass plans one (bypassAt, without the passes in tighterRetrySkips) and keeps its
// plan when it fits and beats the best so far: a plan within a tighter budget by every
// accounting is within the budget asked for (passTighterBypass, after the tuple passes). It
// reports whether that plan beats the best so far. U-Net batch 63
// on v100-16gb (the af99bb3 benchmark's curve, simulated): auto fitted +23.0% at 5.20 GiB with
// the bypass, which ran there because the plan without it cost more than +50%, and +25.1% at
// 6.50 GiB, where that plan kept the bypass from running; the bypassed graph at 90% of 6.50
// GiB has a plan at +19.4%.
func (st *planState) tighterBypass(r tighterRun, on tighterPlanned) (bool, error) {
	if !TighterBypass || !bypassMay(st) || r.at == nil || r.at.ev == nil || !bypassWanted(st.pr.Problem.fit, r.at) {
		return false, nil
	}
	sub, err := st.bypassAt(r.pr.Opts, on)
	if err != nil || sub == nil {
		return false, err
	}
	ev := sub.final.ev
	if ev == nil || !ev.Fits {
		return false, nil
	}
	// Judged by the budgets asked for: the peaks, by every accounting, are the plan's.
	e := withBudgets(ev, st.pr.Problem)
	if !e.Fits {
		return false, nil
	}
	if !better(e, st.final.ev) || (st.tighterSub != nil && !better(e, st.tighterSub.final.ev)) {
		return false, nil
	}
	f := *sub.final
	f.ev = e
	sub.final = &f
	st.tighterSub = sub
	return true, nil
}

// passTighterBypass keeps the plan the tighter pass found on the bypassed graph at a tighter
// budget (tighterBypass) when it beats the best plan so far. It runs after the tuple-order
// and tuple-bypass passes, which plan the input graph as they would without it.
func passTighterBypass(st *planState) error {
	if st.tighterSub != nil {
		st.keepReplanned(st.tighterSub, st.tighterSub.model, "+bypass")
	}
	return nil
}

// tighterRetrySkips are the passes a re-plan of the bypassed graph for a tighter budget
// leaves out (tighterBypass): as the tighter pass plans a tighter budget, by the strategies
// and the recompute pass only.
var tighterRetrySkips = map[string]bool{"recompute-single": true, "recompute-apart": true, "tighter": true, "reorder": true}

// withBudgets returns a copy of ev, evaluated for another budget of pr's graph, with pr's
// budgets and its excess over them. A device's Grappler margin (a share of its budget:
// recomputeGrapplerMargin under the legacy "both" accounting) is scaled to the new budget,
// so that a plan of a tighter budget is judged with the margin of the budget asked for.
func withBudgets(ev *Evaluation, pr *Problem) *Evaluation {
	e := *ev
	e.Devices = slices.Clone(ev.Devices)
	e.Excess = -1 << 62
	for i := range e.Devices {
		d := &e.Devices[i]
		b := pr.budgetOf(d.simName)
		if d.GrapplerMargin != 0 && d.Budget > 0 && b != d.Budget {
			d.GrapplerMargin = int64(math.Round(float64(d.GrapplerMargin) * float64(b) / float64(d.Budget)))
		}
		d.Budget = b
		e.Excess = max(e.Excess, d.Over())
	}
	e.Fits = e.Excess <= 0
	return &e
}

// appendNew returns a copy of to with the edges of add it does not hold appended.
func appendNew(to, add []rewrite.OrderEdge) []rewrite.OrderEdge {
	out := append([]rewrite.OrderEdge(nil), to...)
	for _, e := range add {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// tfswapCostly reports whether tfswap's accounting alone is required (fit) and f's plan,
// auto's best so far for a budget, fits at more than tupleOrderOverhead. The bypass changes no buffer by
// tfswap's accounting (it models the Identities' forwarding), but the re-plan of the bypassed
// graph with the tuple ordering edges is one more search, and the plan it finds also fits
// every accounting a wider requirement adds: without it, asking for tfswap's accounting
// alone gave a slower plan than asking for all three (ResNet-50 6x B0 on v100-16gb, --gate-kind
// reduce: +72.0% against +60.6%, simulated).
func tfswapCostly(fit fitSet, f *stage) bool {
	return fit.tfswap && !fit.ns && !fit.us && f != nil && costly(f.ev)
}

// grapplerBinds reports whether Grappler's accountings are what keeps f's plan (auto's best
// so far for a budget whose plans must fit by the accountings of fit) from fitting or from
// being cheaper: one of them is required and either tfswap's is not, or no plan fits and a
// plan of f's problem fitted tfswap's accounting, or f's plan costs more than
// tupleOrderOverhead and a faster plan fitted tfswap's accounting but not Grappler's
// (grapplerBound).
func grapplerBinds(fit fitSet, f *stage) bool {
	if !fit.ns && !fit.us {
		return false
	}
	if !fit.tfswap {
		return true
	}
	ev := f.ev
	if ev != nil && ev.Fits {
		return costly(ev) && grapplerBound(ev, f.pr, nil)
	}
	l := f.pr.lowBy[0]
	return l.plans > 0 && l.excess <= 0
}
