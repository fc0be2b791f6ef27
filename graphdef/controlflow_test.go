package graphdef

import (
	"testing"

	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// TestConds: a conditional nested in the true side of another, with a node after the inner
// Merge still inside the outer branch, a Merge outside both, and a while loop's Switch that
// is no conditional. Each branch holds exactly the nodes TensorFlow's executor would mark
// dead when the predicate has the other value.
func TestConds(t *testing.T) {
	nd := func(name, op string, in ...string) *npb.NodeDef { return &npb.NodeDef{Name: name, Op: op, Input: in} }
	def := &gpb.GraphDef{Node: []*npb.NodeDef{
		nd("x", "Placeholder"), nd("p", "Placeholder"), nd("q", "Placeholder"),
		nd("p_id", "Identity", "p"),
		nd("sw", "Switch", "x", "p_id"),
		nd("f", "Neg", "sw"),   // false side of p
		nd("t", "Neg", "sw:1"), // true side of p
		nd("isw", "Switch", "t", "q"),
		nd("it", "Relu", "isw:1"),
		nd("if", "Relu", "isw"),
		nd("im", "Merge", "it", "if"),
		nd("after", "Neg", "im"), // after the inner Merge, still in p's true side
		nd("ctl", "NoOp", "^f"),  // dead through a control edge
		nd("m", "Merge", "f", "after"),
		nd("out", "Neg", "m"),
		// A loop: its Switch's predicate is a LoopCond.
		nd("lc", "LoopCond", "p"),
		nd("lsw", "Switch", "x", "lc"),
		nd("body", "Neg", "lsw:1"),
	}}
	g, err := NewGraph(def, "conds")
	if err != nil {
		t.Fatal(err)
	}
	conds := g.Conds()
	if len(conds) != 2 {
		t.Fatalf("found %d conditionals, want 2 (p and q)", len(conds))
	}
	names := func(ns []*Node) map[string]bool {
		m := map[string]bool{}
		for _, n := range ns {
			m[n.Name] = true
		}
		return m
	}
	want := map[string][2][]string{
		"p:0": {{"f", "ctl"}, {"t", "isw", "it", "if", "im", "after"}},
		"q:0": {{"if"}, {"it"}},
	}
	for _, c := range conds {
		w, ok := want[c.Pred.String()]
		if !ok {
			t.Fatalf("unexpected predicate %s", c.Pred)
		}
		for side := 0; side < 2; side++ {
			b := c.Branches[side]
			if b.Taken != (side == 1) {
				t.Errorf("%s: branch %d has Taken %v", c.Pred, side, b.Taken)
			}
			got := names(b.Nodes)
			if len(got) != len(w[side]) {
				t.Errorf("%s side %v: got %v, want %v", c.Pred, b.Taken, got, w[side])
			}
			for _, n := range w[side] {
				if !got[n] {
					t.Errorf("%s side %v: %s missing (got %v)", c.Pred, b.Taken, n, got)
				}
			}
		}
	}
	in := g.InCondBranch()
	for _, n := range []string{"x", "p", "sw", "m", "out", "lsw", "body"} {
		if in[g.Node(n).Index] {
			t.Errorf("%s is marked inside a conditional branch", n)
		}
	}
}
