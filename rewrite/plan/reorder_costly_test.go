package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	"github.com/tfswap/tfswap/rewrite"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
)

// branchesKeptGraph is branchesGraph with l, an activation made from x and read with
// b_main's output by e, live across the branches: four activations at b_main unswapped (d,
// a_short waiting for c_filter, b_main's output and l), three with c_filter before b_main.
func branchesKeptGraph() *gpb.GraphDef {
	b := &builder{Builder: &testgraph.Builder{Graph: branchesGraph()}}
	b.g = b.Graph
	b.op("l", "Softmax", "", big, "x")
	for _, n := range b.g.Node {
		if n.Name == "e" {
			n.Op, n.Input = "AddV2", append(n.Input, "l")
		}
	}
	return b.g
}

// TestReorderWhereCostly: on branchesKeptGraph within three and a half activations on the
// slow-link profile, the plan the passes before reorder keep fits by swapping l, at more than
// +50% (the copies wait on the link). Given a recompute stage whose lowest plan missed the
// budget at b_main (planState.rcMiss; here the unswapped step, which peaks there with a_short
// waiting for the ready c_filter), the reorder pass adds c_filter before b_main and keeps the
// plan on that graph, which fits without swapping l at no overhead. With ReorderCostly off,
// or without rcMiss, it leaves the costly plan.
func TestReorderWhereCostly(t *testing.T) {
	act := int64(512 * 1024 * 4)
	setup := func() *planState {
		t.Helper()
		m := graphdef.NewModel(branchesKeptGraph())
		m.Source = "branches"
		po := PlanOptions{Profile: slowLinkProfile(), Budget: 7 * act / 2, FitAccounting: "tfswap"}
		opts, g, err := rewrite.PrepareGraph(m, nil, rewrite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st := &planState{model: m, g: g, opts: opts, po: po, planner: autoStrategy, mode: "auto"}
		for _, p := range planPasses {
			if p.name == "tuple-order" {
				break
			}
			if err := p.fn(st); err != nil {
				t.Fatal(err)
			}
		}
		if ev := st.final.ev; ev == nil || !costly(ev) || len(ev.Plan.Swaps) == 0 {
			t.Fatalf("before reorder: plan %v; the test needs a swapping plan that fits at more than %+.0f%%", ev, 100*tupleOrderOverhead)
		}
		return st
	}
	withMiss := func(st *planState) {
		t.Helper()
		pr2 := st.pr.Problem.newRun("auto")
		ev0, err := pr2.Evaluate(&rewrite.Plan{})
		if err != nil {
			t.Fatal(err)
		}
		if ev0.Fits {
			t.Fatal("the unswapped step fits: the test checks nothing")
		}
		st.rcMiss = &stage{pr: pr2, ev: ev0}
	}

	st := setup()
	before := st.final.ev
	if err := passReorder(st); err != nil {
		t.Fatal(err)
	}
	if st.final.ev != before || len(st.orders) != 0 {
		t.Errorf("without a recompute stage that missed: plan %s with orders %v, want the costly plan kept", st.final.ev.Strategy, st.orders)
	}

	st = setup()
	withMiss(st)
	ReorderCostly = false
	err := passReorder(st)
	ReorderCostly = true
	if err != nil {
		t.Fatal(err)
	}
	if st.final.ev != before && st.final.ev.StepTime != before.StepTime || len(st.orders) != 0 {
		t.Errorf("with ReorderCostly off: plan %s with orders %v, want the costly plan kept", st.final.ev.Strategy, st.orders)
	}

	st = setup()
	withMiss(st)
	if err := passReorder(st); err != nil {
		t.Fatal(err)
	}
	want := rewrite.OrderEdge{Node: "b_main", After: "c_filter"}
	ev := st.final.ev
	if !slices.Equal(st.orders, []rewrite.OrderEdge{want}) || !ev.Fits || ev.Overhead >= before.Overhead || !strings.HasSuffix(ev.Strategy, "+order") {
		t.Fatalf("reorder: plan %s, fits %v, %+.1f%% (before %+.1f%%), orders %v; want [%v] and a faster plan that fits",
			ev.Strategy, ev.Fits, 100*ev.Overhead, 100*before.Overhead, st.orders, want)
	}
	t.Logf("before: %s %+.1f%%; reordered: %s %+.1f%%", before.Strategy, 100*before.Overhead, ev.Strategy, 100*ev.Overhead)
}

// TestNoteRecomputeMiss: the recompute stage kept for the reorder pass is the one whose lowest
// plan misses the budget by least; stages whose lowest plan fits are not kept.
func TestNoteRecomputeMiss(t *testing.T) {
	mk := func(excess int64) *stage {
		return &stage{pr: &planRun{lowest: &Evaluation{Excess: excess}}}
	}
	var st planState
	fit := mk(-5)
	st.noteRecomputeMiss(fit)
	if st.rcMiss != nil {
		t.Fatal("a stage whose lowest plan fits was kept")
	}
	far, near := mk(9), mk(3)
	st.noteRecomputeMiss(far)
	st.noteRecomputeMiss(near)
	st.noteRecomputeMiss(mk(7))
	if st.rcMiss != near {
		t.Fatalf("kept the stage missing by %d, want the one missing by 3", st.rcMiss.pr.lowest.Excess)
	}
}
