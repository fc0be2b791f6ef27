package rewrite

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// ordersGraph has a swapped in the original graph and its reader e triggered by c, which
// does not descend from a; with ordered, c also waits for a (the ordering edge "c after a"
// planning adds).
func ordersGraph(ordered bool) string {
	shape := `attr { key: "T" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { shape { dim { size: 64 } dim { size: 256 } } } } }`
	c := `node { name: "c" op: "Relu" input: "x" `
	if ordered {
		c += `input: "^a" `
	}
	return `node { name: "x" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { shape { dim { size: 64 } dim { size: 256 } } } } } }
node { name: "a" op: "Relu" input: "x" device: "/device:GPU:0" ` + shape + ` }
` + c + `device: "/device:GPU:0" ` + shape + ` }
node { name: "d" op: "Relu" input: "c" device: "/device:GPU:0" ` + shape + ` }
node { name: "e" op: "Mul" input: "d" input: "a" device: "/device:GPU:0" ` + shape + ` }
`
}

// TestVerifyTriggerReachedByOrderingEdge: a swap-in whose trigger follows the swapped
// tensor's producer only through an ordering edge planning added (Result.Orders) is ordered
// after the swap-out, and Verify accepts it against the input graph; without the edge in
// Result.Orders, Verify rejects the added control input.
func TestVerifyTriggerReachedByOrderingEdge(t *testing.T) {
	parse := func(ordered bool) (*graphdef.Model, *graphdef.Graph) {
		m, err := graphdef.Parse([]byte(ordersGraph(ordered)), graphdef.FormatPBTXT, "orders")
		if err != nil {
			t.Fatal(err)
		}
		g, err := graphdef.NewGraph(m.Graph, "orders")
		if err != nil {
			t.Fatal(err)
		}
		return m, g
	}
	_, orig := parse(false)
	m2, g2 := parse(true)
	opts, g2, err := Prepare(m2, Options{MinTensorBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(g2, opts)
	x := graphdef.Tensor{Node: g2.Node("a"), Port: 0}
	plan := &Plan{Swaps: []PlannedSwap{{Tensor: x, Bytes: 64 * 256 * 4, Groups: []SwapInGroup{{
		Uses: []graphdef.Use{{Node: g2.Node("e"), Input: 1}}, Trigger: g2.Node("c")}}}}}
	res, err := Apply(m2, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(orig, res, opts.Gate); err == nil || !strings.Contains(err.Error(), "added control input") {
		t.Errorf("Verify without the ordering edge in Result.Orders: %v, want the added control input rejected", err)
	}
	res, err = Apply(m2, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	res.Orders = []OrderEdge{{Node: "c", After: "a"}}
	if err := Verify(orig, res, opts.Gate); err != nil {
		t.Errorf("Verify with the ordering edge: %v", err)
	}
}
