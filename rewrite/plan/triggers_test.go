package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestVerifyRefusesTriggerOffTheProducersDescent: Verify fails a swap-in gated by an op
// that is not reachable from the swapped tensor's producer (here on a sibling branch that
// runs first), and accepts one gated by a descendant (issue 11, item 8).
func TestVerifyRefusesTriggerOffTheProducersDescent(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", act)
	b.op("p", "Relu", "", act, "x")
	prev := "x"
	for i := 1; i <= 6; i++ {
		prev = b.op(fmt.Sprintf("s%d", i), "Relu", "", act, prev).Name
	}
	b.op("d1", "Relu", "", act, "p")
	b.op("d2", "Relu", "", act, "d1")
	b.op("c", "Pack", "", act, "p", "d2", prev) // not AddN: a sum of three terms keeps its inputs
	m := graphdef.NewModel(b.g)
	opts, g, err := rewrite.Prepare(m, rewrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	p := graphdef.Tensor{Node: g.Node("p")}
	for trig, ok := range map[string]bool{"s5": false, "x": false, "p": false, "d2": true, "d1": true} {
		plan := &rewrite.Plan{Swaps: []rewrite.PlannedSwap{{Tensor: p, Bytes: 64 << 10, Groups: []rewrite.SwapInGroup{{Uses: []graphdef.Use{{Node: g.Node("c"), Input: 0}}, Trigger: g.Node(trig)}}}}}
		res, err := rewrite.Apply(m, a, plan)
		if err != nil {
			t.Fatal(err)
		}
		err = rewrite.Verify(g, res, rewrite.GateHost)
		if ok != (err == nil) || !ok && !strings.Contains(err.Error(), "not reachable from the producer \"p\"") {
			t.Errorf("trigger %s: Verify = %v", trig, err)
		}
	}
	// Rewrite finds the descendant d2, not the sibling s5 on c's critical path.
	res, err := Rewrite(m, rewrite.Options{SwapoutThreshold: 2, SwapinAhead: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Swaps) != 1 || res.Swaps[0].SwapIns[0].Trigger != "d2" {
		t.Errorf("swaps %+v", res.Swaps)
	}
}

// checkTriggersReachable fails t when a swap-in of res is triggered by an op that is not
// reachable from its tensor's producer in g; it returns the number of swap-ins checked.
func checkTriggersReachable(t *testing.T, what string, g *graphdef.Graph, res *rewrite.Result) int {
	t.Helper()
	n := 0
	for _, s := range res.Swaps {
		d := g.Descendants(g.Node(s.Producer))
		for _, si := range s.SwapIns {
			n++
			if tr := g.Node(si.Trigger); tr == nil || !d[tr.Index] {
				t.Errorf("%s: swap-in %s of %s is triggered by %s, not reachable from %s", what, si.Node, s.Tensor, si.Trigger, s.Producer)
			}
		}
	}
	return n
}

// TestFixtureTriggersReachable: under the default LMS options, and planned by every
// strategy, every swap-in of the committed fixtures is triggered by a descendant of the
// tensor's producer. The lstm fixture's nine swap-ins and two of resnet's used to be
// triggered from sibling branches (the other output of a gradient's tuple); checked here
// independently of Verify.
func TestFixtureTriggersReachable(t *testing.T) {
	prof, err := cost.LookupProfile(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	fetch := cost.Options{Fetch: []string{"train"}}
	total := 0
	for _, name := range []string{"mlp", "cnn", "resnet", "lstm"} {
		m, err := graphdef.Load("../../testmodels/fixtures/"+name+".pb", graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := graphdef.NewGraph(m.Graph, name)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Rewrite(m, rewrite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		total += checkTriggersReachable(t, name+" lms defaults", g, res)
		base, err := cost.Simulate(g, prof, fetch)
		if err != nil {
			t.Fatal(err)
		}
		budget := base.Compute().PeakBytes * 9 / 10
		for _, s := range StrategyNames() {
			p, err := RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: -1}, PlanOptions{Strategy: s, Budget: budget, Sim: fetch})
			if err != nil {
				continue // no fit: nothing to check (the plan goldens cover those)
			}
			total += checkTriggersReachable(t, name+" "+s, g, p.Result)
		}
	}
	if total == 0 {
		t.Fatal("no swap-in was checked")
	}
}
