package plan

import (
	"fmt"
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
	if !TupleBypass || st.planner != autoStrategy || st.tupleBypassed || st.tupleOrdered || st.depth > 0 || st.effort.bounded() || st.final == nil || st.pr == nil {
		return nil
	}
	if !(grapplerBinds(st) || tfswapCostly(st)) || len(st.opts.Fetch) == 0 {
		return nil
	}
	ids := rewrite.TupleIdentities(st.g, st.a, st.opts.Fetch)
	if len(ids) == 0 {
		return nil
	}
	names := make([]string, len(ids))
	for i, n := range ids {
		names[i] = n.Name
	}
	// The tuple ordering edges are found through the Identities, so they are added first.
	edges := tupleOrderEdges(st.g, st.a, largestOutput(st.pr.Problem))
	m1, _ := withOrderEdges(st.model, edges)
	m2 := rewrite.BypassTupleIdentities(m1, st.g, ids)
	sub := &planState{depth: st.depth, tupleOrdered: true, tupleBypassed: true, bypassed: names,
		orders: appendNew(st.orders, edges), tupleOrders: appendNew(st.tupleOrders, edges)}
	if err := st.replan(sub, m2, "graph with the tuple Identities bypassed"); err != nil {
		return err
	}
	if err := spaceForGrappler(sub); err != nil {
		return err
	}
	if debugOrder {
		if ev := sub.final.ev; ev != nil && ev.Fits {
			fmt.Fprintf(os.Stderr, "order: %d tuple Identities bypassed: fits, step %+.1f%%\n", len(ids), 100*ev.Overhead)
		} else if l := sub.final.pr.lowest; l != nil {
			lb := sub.final.pr.lowBy
			fmt.Fprintf(os.Stderr, "order: %d tuple Identities bypassed: lowest peak %d; least excess by accounting %d (%d plans), %d (%d), %d (%d)\n", len(ids), maxPeak(l),
				lb[0].excess, lb[0].plans, lb[1].excess, lb[1].plans, lb[2].excess, lb[2].plans)
		}
	}
	st.keepReplanned(sub, sub.model, "+bypass")
	return nil
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

// tfswapCostly reports whether tfswap's accounting alone is required and auto's best plan so
// far (st.final) fits at more than tupleOrderOverhead. The bypass changes no buffer by
// tfswap's accounting (it models the Identities' forwarding), but the re-plan of the bypassed
// graph with the tuple ordering edges is one more search, and the plan it finds also fits
// every accounting a wider requirement adds: without it, asking for tfswap's accounting
// alone gave a slower plan than asking for all three (ResNet-50 6x B0 on v100-16gb, --gate-kind
// reduce: +72.0% against +60.6%, simulated).
func tfswapCostly(st *planState) bool {
	fit := st.pr.Problem.fit
	return fit.tfswap && !fit.ns && !fit.us && st.final != nil && costly(st.final.ev)
}

// grapplerBinds reports whether Grappler's accountings are what keeps auto's best plan so
// far (st.final) from fitting or from being cheaper: one of them is required and either
// tfswap's is not, or no plan fits and a plan of st.final's problem fitted tfswap's
// accounting, or the best plan costs more than tupleOrderOverhead and a faster plan fitted
// tfswap's accounting but not Grappler's (grapplerBound).
func grapplerBinds(st *planState) bool {
	fit := st.pr.Problem.fit
	if !fit.ns && !fit.us {
		return false
	}
	if !fit.tfswap {
		return true
	}
	ev := st.final.ev
	if ev != nil && ev.Fits {
		return costly(ev) && grapplerBound(ev, st.final.pr, nil)
	}
	l := st.final.pr.lowBy[0]
	return l.plans > 0 && l.excess <= 0
}
