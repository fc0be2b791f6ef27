package plan

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	"github.com/tfswap/tfswap/rewrite"
)

// retriggerCycleGraph has two branches from p: a (swapped for r) and b (swapped for r2).
// r's branch goes on to t2, which also reads c (of b) and triggers b's swap-in; n reads r2
// and x (of a), so it descends from a's producer and from r2 but not from r.
const retriggerCycleGraph = `
node { name: "p" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "a" op: "Relu" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "b" op: "Tanh" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "x" op: "Exp" input: "a" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "c" op: "Exp" input: "b" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "r" op: "Neg" input: "a" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "t2" op: "AddV2" input: "r" input: "c" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "r2" op: "Square" input: "b" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "n" op: "AddV2" input: "r2" input: "x" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
node { name: "out" op: "AddV2" input: "t2" input: "n" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_output_shapes" value { list { shape { dim { size: 8 } dim { size: 4 } } } } } }
`

// TestRetriggerRefusesCycle: with a swapped in for r (triggered by x) and b swapped in for
// r2 by t2, which descends from r, the rewrite orders a's copy before r, r before t2, t2's
// gate before b's copy and that copy before r2 and so before n. n descends from a's
// producer and from no reader of a's copy in the graph planned, but triggering a's copy by
// n would close a cycle in the rewrite (a's copy -> r -> t2 -> b's copy -> r2 -> n -> a's
// copy): retrigger must refuse it.
func TestRetriggerRefusesCycle(t *testing.T) {
	m, g := testgraph.Parse(t, retriggerCycleGraph, "retrigger-cycle")
	opts, err := rewrite.Options{GateKind: rewrite.GateReduce}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	swap := func(tensor, use, trigger string) rewrite.PlannedSwap {
		return rewrite.PlannedSwap{Tensor: graphdef.Tensor{Node: g.Node(tensor)}, Bytes: 128,
			Groups: []rewrite.SwapInGroup{{Uses: []graphdef.Use{{Node: g.Node(use), Input: 0}}, Trigger: g.Node(trigger)}}}
	}
	// try retriggers a's copy by n in the rewrite of the plan whose b is swapped in by
	// bTrigger, and returns whether retrigger accepted it and the rewrite of the plan it made.
	try := func(bTrigger string) (bool, error) {
		plan := &rewrite.Plan{Swaps: []rewrite.PlannedSwap{swap("a", "r", "x"), swap("b", "r2", bTrigger)}}
		res, err := rewrite.Apply(m, a, plan)
		if err != nil {
			t.Fatal(err)
		}
		if err := rewrite.Verify(g, res, opts.Gate); err != nil {
			t.Fatalf("the plan's rewrite: %v", err)
		}
		w, err := graphdef.NewGraph(res.Model.Graph, "written")
		if err != nil {
			t.Fatal(err)
		}
		si := ""
		for _, s := range res.Swaps {
			if s.Tensor == "a:0" {
				si = s.SwapIns[0].Node
			}
		}
		s, ok := retrigger(&stage{a: a}, res, w, writtenState{plan: plan}, si, g.Node("n"))
		if !ok {
			return false, nil
		}
		_, err = rewrite.Apply(m, a, s.plan)
		return true, err
	}
	if ok, err := try("t2"); ok {
		t.Errorf("retrigger of a's copy by n with b's copy triggered by t2: accepted, its rewrite: %v; want it refused (it closes a cycle)", err)
	}
	// With b's copy triggered by c, which does not descend from r, nothing closes a cycle.
	if ok, err := try("c"); !ok || err != nil {
		t.Errorf("retrigger of a's copy by n with b's copy triggered by c: accepted %v, its rewrite: %v; want it accepted", ok, err)
	}
}
