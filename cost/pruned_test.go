package cost

import (
	"reflect"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
)

// constGradGraph is the gradient of y = s * c for a constant c, as tf.gradients builds it:
// Mul_grad/Mul = g2 * c (g2 = -g, so that Mul_1 runs late) is the gradient of the scores s, Mul_grad/Mul_1 = s * g (reduced here
// by a Neg) the gradient of the constant, whose tuple member (tuple/control_dependency_1)
// nothing reads. group_deps ties both halves to the step through control edges, so the
// executor would run Mul_1 and keep s alive until the backward pass reaches it; Grappler's
// dependency optimizer turns Mul_1 and the Neg into NoOps instead. Every tensor but the
// constants is 256 float32 (1 KiB).
func constGradGraph(t *testing.T) *graphdef.Graph {
	b := newBuilder()
	v := []int64{256}
	b.op("x", "Placeholder", "", v)
	b.variable("w", "", v)
	b.op("s", "Mul", "", v, "x", "w/read")
	b.op("c", "Const", "", []int64{})
	b.op("y", "Mul", "", v, "s", "c")
	b.op("g", "Neg", "", v, "y")
	b.op("g2", "Neg", "", v, "g")
	b.op("Mul_grad/Mul", "Mul", "", v, "g2", "c")
	b.op("Mul_grad/Mul_1", "Mul", "", v, "s", "g", "^Mul_grad/Mul")
	b.op("Mul_grad/Sum_1", "Neg", "", v, "Mul_grad/Mul_1")
	b.op("Mul_grad/tuple/group_deps", "NoOp", "", nil, "^Mul_grad/Mul", "^Mul_grad/Sum_1")
	b.op("Mul_grad/tuple/control_dependency", "Identity", "", v, "Mul_grad/Mul", "^Mul_grad/tuple/group_deps")
	b.op("Mul_grad/tuple/control_dependency_1", "Identity", "", v, "Mul_grad/Sum_1", "^Mul_grad/tuple/group_deps")
	b.op("lr", "Const", "", []int64{})
	b.op("update", "ResourceApplyGradientDescent", "", nil, "w", "lr", "Mul_grad/tuple/control_dependency")
	b.op("train", "NoOp", "", nil, "^update")
	return b.graph(t)
}

// TestValueDeadReadersRunAsNoOps checks that a reader whose value nothing reads neither runs
// nor holds what it reads, in both accountings, once the fetches are known: the scores s
// are freed after y, their last live reader, not kept until Mul_1 in the backward pass.
// It fails with Conventions.RunValueDead, the behaviour before.
func TestValueDeadReadersRunAsNoOps(t *testing.T) {
	g := constGradGraph(t)
	for _, conv := range []Conventions{{}, GrapplerConventions()} {
		run := func(runDead bool) *Result {
			t.Helper()
			c := conv
			c.RunValueDead = runDead
			r, err := Simulate(g, unitProfile(), Options{Fetch: []string{"train"}, Conventions: c, Timeline: true})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		r, old := run(false), run(true)
		var pruned []string
		for i, p := range r.Pruned {
			if p {
				pruned = append(pruned, g.Nodes[i].Name)
			}
		}
		if want := []string{"Mul_grad/Mul_1", "Mul_grad/Sum_1"}; !reflect.DeepEqual(pruned, want) || r.PrunedNodes != 2 {
			t.Fatalf("grappler=%v: pruned %v (%d), want %v", conv.GrapplerTimes, pruned, r.PrunedNodes, want)
		}
		if old.PrunedNodes != 0 || old.Pruned != nil {
			t.Errorf("grappler=%v: RunValueDead pruned %d nodes", conv.GrapplerTimes, old.PrunedNodes)
		}
		if sp := spans(r)["Mul_grad/Mul_1"]; sp[1] != sp[0] {
			t.Errorf("grappler=%v: pruned Mul_1 ran %v, want no time", conv.GrapplerTimes, sp)
		}
		// When Mul_1 starts, s and Mul_1's output are live only if Mul_1 runs.
		at := func(r *Result) int64 {
			start := spans(r)["Mul_grad/Mul_1"][0]
			var b int64
			for _, p := range r.Timeline.Memory[0] {
				if p.T <= start {
					b = p.Bytes
				}
			}
			return b
		}
		if a, oa := at(r), at(old); a+2048 > oa {
			t.Errorf("grappler=%v: %d bytes allocated when Mul_1 starts, %d when it runs: want s (1 KiB) and its output (1 KiB) less", conv.GrapplerTimes, a, oa)
		}
		if d, od := r.Device(gpu0), old.Device(gpu0); d.PeakBytes > od.PeakBytes {
			t.Errorf("grappler=%v: peak %d with Mul_1 pruned, %d with it run", conv.GrapplerTimes, d.PeakBytes, od.PeakBytes)
		}
		// Without known fetches Grappler converts nothing.
		all, err := Simulate(g, unitProfile(), Options{Conventions: conv})
		if err != nil {
			t.Fatal(err)
		}
		if all.PrunedNodes != 0 {
			t.Errorf("grappler=%v: %d nodes pruned without fetches", conv.GrapplerTimes, all.PrunedNodes)
		}
	}
}

// TestPreservedNodesAreNotPruned checks that a node carrying _grappler_do_not_remove, as
// tfswap's gates, swap and recompute nodes do, is never run as a NoOp, nor are the nodes
// whose values it reads: Grappler keeps it (GrapplerItem::NodesToPreserve), so it runs and
// reads its inputs even when nothing reads its value. constGradGraph's Sum_1 so marked keeps
// itself and Mul_1 running; without the attr both are pruned (TestValueDeadReadersRunAsNoOps).
func TestPreservedNodesAreNotPruned(t *testing.T) {
	g := constGradGraph(t)
	g.Node("Mul_grad/Sum_1").Def.Attr[doNotRemoveAttr] = &apb.AttrValue{Value: &apb.AttrValue_B{B: true}}
	for _, conv := range []Conventions{{}, GrapplerConventions()} {
		r, err := Simulate(g, unitProfile(), Options{Fetch: []string{"train"}, Conventions: conv})
		if err != nil {
			t.Fatal(err)
		}
		if r.PrunedNodes != 0 {
			var pruned []string
			for i, p := range r.Pruned {
				if p {
					pruned = append(pruned, g.Nodes[i].Name)
				}
			}
			t.Errorf("grappler=%v: pruned %v, want none (Sum_1 is preserved and reads Mul_1)", conv.GrapplerTimes, pruned)
		}
	}
	p, err := PrunedNodes(g, []string{"train"})
	if err != nil {
		t.Fatal(err)
	}
	if p != nil {
		t.Errorf("PrunedNodes marks nodes of a graph whose only value-dead chain ends in a preserved node")
	}
}

// TestSetupCacheSharesGraphFacts checks that two simulations of one graph with one
// SetupCache, by tfswap's accounting and then by Grappler's (a planner's judgement of a plan),
// work out the fan-in, the nodes run as NoOps and the check of the tensors' total bytes
// once: the second result's Pruned is the first's, and both results are those of simulations without the cache. Another graph, or
// the same graph with other fetches, is worked out afresh.
func TestSetupCacheSharesGraphFacts(t *testing.T) {
	g := constGradGraph(t)
	p := unitProfile()
	c := NewSetupCache(g, p)
	sim := func(g *graphdef.Graph, conv Conventions, fetch []string, cache *SetupCache) *Result {
		t.Helper()
		r, err := Simulate(g, p, Options{Fetch: fetch, Conventions: conv, Timeline: true, Setup: cache})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	train := []string{"train"}
	var first *Result
	for i, conv := range []Conventions{{}, GrapplerConventions()} {
		r := sim(g, conv, train, c)
		if fresh := sim(g, conv, train, nil); !reflect.DeepEqual(r, fresh) {
			t.Fatalf("%s: the simulation with the cache differs from one without", ConventionsName(conv))
		}
		if r.PrunedNodes != 2 {
			t.Fatalf("%s: %d nodes pruned, want 2", ConventionsName(conv), r.PrunedNodes)
		}
		if i == 0 {
			first = r
		} else if &r.Pruned[0] != &first.Pruned[0] {
			t.Errorf("Grappler's accounting of the same graph worked out the pruned nodes again")
		}
	}
	if c.facts.checkedScale != 1 {
		t.Errorf("the graph's tensor bytes checked at batch scale %d, want 1 (checked once for both accountings)", c.facts.checkedScale)
	}
	if all := sim(g, Conventions{}, nil, c); all.PrunedNodes != 0 || all.Simulated != len(g.Nodes) {
		t.Errorf("without fetches: %d pruned, %d of %d simulated: the fetches' facts were reused",
			all.PrunedNodes, all.Simulated, len(g.Nodes))
	}
	again := sim(g, Conventions{}, train, c)
	other := constGradGraph(t)
	if r := sim(other, GrapplerConventions(), train, c); r.PrunedNodes != 2 || &r.Pruned[0] == &again.Pruned[0] {
		t.Errorf("another graph took the facts of the first")
	}
}

// TestSetupCacheRelease checks that Release empties a warmed cache's tables (estimates by
// both accountings, NoOp answers, name order, graph facts) and that simulations with the
// released cache still match those without one.
func TestSetupCacheRelease(t *testing.T) {
	g := constGradGraph(t)
	p := unitProfile()
	c := NewSetupCache(g, p)
	train := []string{"train"}
	for i := 0; i < cacheUsesBefore+2; i++ {
		for _, conv := range []Conventions{{}, GrapplerConventions()} {
			if _, err := Simulate(g, p, Options{Fetch: train, Conventions: conv, Setup: c}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c.est[0] == nil || c.est[1] == nil || c.byName == nil || c.facts.g.Value() == nil {
		t.Fatalf("the cache was not warmed: estimates %v/%v, names %v, facts %v", c.est[0] != nil, c.est[1] != nil, c.byName != nil, c.facts.g.Value() != nil)
	}
	c.Release()
	if c.est[0] != nil || c.est[1] != nil || c.convertible != nil || c.byName != nil || c.facts.g.Value() != nil || c.facts.fanin != nil {
		t.Fatal("Release left a table of the graph's size")
	}
	for _, conv := range []Conventions{{}, GrapplerConventions()} {
		r, err := Simulate(g, p, Options{Fetch: train, Conventions: conv, Setup: c})
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := Simulate(g, p, Options{Fetch: train, Conventions: conv})
		if err != nil {
			t.Fatal(err)
		}
		r.Options.Setup = nil
		if !reflect.DeepEqual(r, fresh) {
			t.Fatalf("%s: the simulation with the released cache differs from one without", ConventionsName(conv))
		}
	}
}

// TestSetupCacheSpare checks that a spare cache (Spare) makes no estimate table however many
// simulations use it, drops the tables it has, takes no estimate from the cache, and gives
// the results of simulations without a cache.
func TestSetupCacheSpare(t *testing.T) {
	g := constGradGraph(t)
	p := unitProfile()
	train := []string{"train"}
	warmed := NewSetupCache(g, p)
	spare := NewSetupCache(g, p)
	spare.Spare()
	for i := 0; i < cacheUsesBefore+2; i++ {
		for _, conv := range []Conventions{{}, GrapplerConventions()} {
			fresh, err := Simulate(g, p, Options{Fetch: train, Conventions: conv})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []*SetupCache{warmed, spare} {
				r, err := Simulate(g, p, Options{Fetch: train, Conventions: conv, Setup: c})
				if err != nil {
					t.Fatal(err)
				}
				r.Options.Setup = nil
				if !reflect.DeepEqual(r, fresh) {
					t.Fatalf("%s, spare %v: the simulation with the cache differs from one without", ConventionsName(conv), c.spare)
				}
			}
		}
	}
	if spare.est[0] != nil || spare.est[1] != nil || spare.Hits() != 0 {
		t.Errorf("the spare cache made tables (%v/%v) or took %d estimates from them", spare.est[0] != nil, spare.est[1] != nil, spare.Hits())
	}
	if warmed.est[0] == nil || warmed.est[1] == nil || warmed.Hits() == 0 {
		t.Fatalf("the cache was not warmed: estimates %v/%v, %d hits", warmed.est[0] != nil, warmed.est[1] != nil, warmed.Hits())
	}
	warmed.Spare()
	if warmed.est[0] != nil || warmed.est[1] != nil {
		t.Errorf("Spare kept the tables the cache had")
	}
}
