package testgraph

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// LoopPushes is a functional while loop of a test graph and the TensorListPushBack nodes of its
// body that push onto a loop variable (an _Arg of the body), its accumulators' pushes.
type LoopPushes struct {
	// While is the While or StatelessWhile node.
	While *graphdef.Node
	// Pushes are the body's pushes whose list input is one of the body's arguments.
	Pushes []*graphdef.Node
}

// WhilePushes returns, for every While and StatelessWhile of g in g.Nodes order, the pushes its
// body (from g's function library) makes onto its loop variables, failing the test when a
// body cannot be read.
func WhilePushes(t testing.TB, g *graphdef.Graph) []LoopPushes {
	t.Helper()
	var out []LoopPushes
	for _, w := range g.Nodes {
		if w.Op != "While" && w.Op != "StatelessWhile" {
			continue
		}
		body, err := graphdef.FunctionGraph(g.Def.GetLibrary(), w.Def.GetAttr()["body"].GetFunc().GetName())
		if err != nil {
			t.Fatal(err)
		}
		lp := LoopPushes{While: w}
		for _, p := range body.Nodes {
			if p.Op == "TensorListPushBack" && p.Inputs[0].Node.Op == "_Arg" {
				lp.Pushes = append(lp.Pushes, p)
			}
		}
		out = append(out, lp)
	}
	return out
}
