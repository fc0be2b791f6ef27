package plan

import (
	"fmt"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
)

// TestPruneKeptCap: autoPruneKept bounds the drops improve's pruning keeps for free. On
// planChain(n) on the slow-link profile with room for every activation (as in
// TestPruneCountsOnlyRejectedDrops), a plan swapping each of f1..fn, n = autoPruneKept +
// autoPruneTries + 4, has every swap droppable, one per simulation with PruneHalves off. The
// first autoPruneKept drops cost no try, the next autoPruneTries use up the tries, and four
// swaps are left: improve's work is bounded by the two constants, not by the plan's size.
// Checked by mutation: with improve's cap raised to 1000, improve drops all n and the test
// fails.
func TestPruneKeptCap(t *testing.T) {
	const n = autoPruneKept + autoPruneTries + 4
	act := int64(512 * 1024 * 4)
	defer func(v bool) { PruneHalves = v }(PruneHalves)
	PruneHalves = false
	pr, ev0 := chainSwapStart(t, n, act)
	ev, err := pr.improve(ev0)
	if err != nil {
		t.Fatal(err)
	}
	if want := n - autoPruneKept - autoPruneTries; !ev.Fits || len(ev.Plan.Swaps) != want {
		t.Fatalf("after improve: fits %v, %d swaps left (%+.1f%%, from %+.1f%%); want %d, pruning bounded by autoPruneKept (%d) and autoPruneTries (%d)",
			ev.Fits, len(ev.Plan.Swaps), 100*ev.Overhead, 100*ev0.Overhead, want, autoPruneKept, autoPruneTries)
	}
}

// screenGraph is a chain x, a, c1, d0..d13, c2 whose c2 feeds five ops at once (p1, p2, p4,
// p5 and their AddN p3, five activations live), then e0..e13, c3, c4; u1 reads c4 and a, c5
// and c6 follow, and u2 reads c6 and a. a is read by c1 and, after the five-wide point, by u1
// and u2.
func screenGraph() *gpb.GraphDef {
	b := newBuilder()
	b.op("x", "Placeholder", "", big)
	b.op("a", "Relu", "", big, "x")
	prev := b.op("c1", "Relu", "", big, "a").Name
	for i := 0; i < 14; i++ {
		prev = b.op(fmt.Sprintf("d%d", i), "Relu", "", big, prev).Name
	}
	b.op("c2", "Relu", "", big, prev)
	for _, p := range []string{"p1", "p2", "p4", "p5"} {
		b.op(p, "Relu", "", big, "c2")
	}
	prev = b.op("p3", "AddN", "", big, "p1", "p2", "p4", "p5", "c2").Name
	for i := 0; i < 14; i++ {
		prev = b.op(fmt.Sprintf("e%d", i), "Relu", "", big, prev).Name
	}
	b.op("c3", "Relu", "", big, prev)
	b.op("c4", "Relu", "", big, "c3")
	b.op("u1", "Maximum", "", big, "c4", "a")
	b.op("c5", "Relu", "", big, "u1")
	b.op("c6", "Relu", "", big, "c5")
	b.op("u2", "Maximum", "", big, "c6", "a")
	b.op("train", "NoOp", "", nil, "^u2")
	return b.g
}

// TestMergeSwapInsScreensDrops: mergeSwapIns simulates dropping a tensor's first swap-in
// only when the fast model says the plan without it fits (fastFits). On screenGraph on the
// slow-link profile within five activations, a plan swapping a out after c1 (the slow link
// has the copy out before the five-wide point) and in twice, for u1 (triggered by e0) and for
// u2 (by c5), fits; without the first swap-in a stays on the device until u1, through the
// five-wide point, and does not fit (simulated after mergeSwapIns, to check the screen was
// right). mergeSwapIns must not have simulated that plan: it is not in the problem's cache.
// Checked by mutation: with mergeSwapIns's screen made always true, the test fails.
func TestMergeSwapInsScreensDrops(t *testing.T) {
	act := int64(512 * 1024 * 4)
	m := graphdef.NewModel(screenGraph())
	m.Source = "screen"
	g, err := graphdef.NewGraph(m.Graph, "screen")
	if err != nil {
		t.Fatal(err)
	}
	plan := &rewrite.Plan{Swaps: []rewrite.PlannedSwap{{Tensor: graphdef.Tensor{Node: g.Node("a")}, Bytes: act, Groups: []rewrite.SwapInGroup{
		{Uses: []graphdef.Use{{Node: g.Node("u1"), Input: 1}}, Trigger: g.Node("e0")},
		{Uses: []graphdef.Use{{Node: g.Node("u2"), Input: 1}}, Trigger: g.Node("c5")},
	}}}}
	pr, err := newProblemRun(m, rewrite.Analyze(g, rewrite.Options{}), PlanOptions{Profile: slowLinkProfile(), Budget: 5 * act, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	ev0, err := pr.Evaluate(plan)
	if err != nil {
		t.Fatal(err)
	}
	if !ev0.Fits {
		t.Fatalf("the plan with two swap-ins of a does not fit (peak %d of %d); the test needs one that does", ev0.Devices[0].Peak, 5*act)
	}
	if _, _, err := pr.mergeSwapIns(ev0, autoMergeTries); err != nil {
		t.Fatal(err)
	}
	drop := withGroups(plan, 0, plan.Swaps[0].Groups[1:])
	if _, ok := pr.cache[planKey(drop)]; ok {
		t.Errorf("mergeSwapIns simulated the plan without a's first swap-in, which the fast model says does not fit")
	}
	ev, err := pr.Evaluate(drop)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Fits {
		t.Errorf("the plan without a's first swap-in fits (peak %d of %d): the fast model's screen rejected a plan that fits, or the case no longer tests it", ev.Devices[0].Peak, 5*act)
	}
}
