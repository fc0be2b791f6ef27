package rewrite

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
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
	_, orig := testgraph.Parse(t, ordersGraph(false), "orders")
	m2, g2 := testgraph.Parse(t, ordersGraph(true), "orders")
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

// TestVerifyLostWaitBesideOrderingEdges: in chainOrdersResult, Verify accepts the swap-ins
// ordered after their swap-outs through an ordering edge or a wait, and rejects, naming it,
// the first whose ordering edge or wait was lost, while the other swap-ins' ordering edges
// remain in Result.Orders (the search between them must not reach a trigger they do not
// order).
func TestVerifyLostWaitBesideOrderingEdges(t *testing.T) {
	const k, lost = 12, 5
	for _, ordered := range []bool{true, false} {
		orig, res, gate := chainOrdersResult(t, k, ordered, 0)
		if err := Verify(orig, res, gate); err != nil {
			t.Errorf("ordered %v: Verify of the chain: %v", ordered, err)
		}
		orig, res, gate = chainOrdersResult(t, k, ordered, lost)
		err := Verify(orig, res, gate)
		want := fmt.Sprintf(`is triggered by "s%d", which is not reachable from the producer "a%d"`, lost, lost)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ordered %v: Verify with the ordering edges or waits of s%d..s%d lost: %v, want %q", ordered, lost, k-1, err, want)
		}
	}
}

// reachableBySearch is reachability.reachable as a search of the original graph from from
// (every edge, back edges too) with the ordering edges orders (by the node that runs first).
func reachableBySearch(orig *graphdef.Graph, orders map[string][]string, from, to *graphdef.Node) bool {
	seen := map[*graphdef.Node]bool{from: true}
	stack := []*graphdef.Node{from}
	push := func(n *graphdef.Node) {
		if n != nil && !seen[n] {
			seen[n] = true
			stack = append(stack, n)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == to {
			return true
		}
		for _, uses := range n.Consumers {
			for _, u := range uses {
				push(u.Node)
			}
		}
		for _, c := range n.ControlOutputs {
			push(c)
		}
		for _, next := range orders[n.Name] {
			push(orig.Node(next))
		}
	}
	return false
}

// TestVerifyReachabilityMatchesSearch checks reachability.reachable against a search of the
// graph with the ordering edges, for every pair of nodes of random DAGs of control edges with
// NextIteration nodes (whose edges out Graph.Reachable does not follow, and the search does)
// and random ordering edges, some of which close cycles; and, without ordering edges, against
// Graph.Reachable.
func TestVerifyReachabilityMatchesSearch(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	jumped := 0
	for trial := 0; trial < 40; trial++ {
		n := 5 + rng.Intn(50)
		def := &gpb.GraphDef{}
		for i := 0; i < n; i++ {
			nd := &npb.NodeDef{Name: fmt.Sprintf("n%d", i), Op: "NoOp"}
			if rng.Intn(8) == 0 && i > 0 {
				nd.Op = "NextIteration"
			}
			for j := 0; j < i; j++ {
				if rng.Float64() < 1.5/float64(i) {
					nd.Input = append(nd.Input, fmt.Sprintf("^n%d", j))
				}
			}
			def.Node = append(def.Node, nd)
		}
		// Back edges: nodes reading a later NextIteration.
		for i, nd := range def.Node {
			if nd.Op == "NextIteration" && i > 1 && rng.Intn(2) == 0 {
				back := def.Node[rng.Intn(i)]
				back.Input = append(back.Input, "^"+nd.Name)
			}
		}
		orig, err := graphdef.NewGraph(def, "random")
		if err != nil {
			t.Fatal(err)
		}
		var orders []OrderEdge
		byAfter := map[string][]string{}
		for e := rng.Intn(4); e > 0 || (trial%4 != 0 && len(orders) == 0); e-- {
			o := OrderEdge{Node: fmt.Sprintf("n%d", rng.Intn(n)), After: fmt.Sprintf("n%d", rng.Intn(n))}
			orders = append(orders, o)
			byAfter[o.After] = append(byAfter[o.After], o.Node)
		}
		r := newReachability(orig, orders)
		for _, a := range orig.Nodes {
			for _, b := range orig.Nodes {
				want := orig.Reachable(a, b)
				if len(orders) > 0 {
					want = reachableBySearch(orig, byAfter, a, b)
				}
				got := r.reachable(a, b)
				if got != want {
					t.Fatalf("trial %d, orders %v: %s reaches %s: %v, want %v", trial, orders, a.Name, b.Name, got, want)
				}
				if got && !orig.Reachable(a, b) {
					jumped++
				}
			}
		}
	}
	if jumped == 0 {
		t.Error("no pair was reachable through an ordering edge or a back edge alone")
	}
	t.Logf("%d pairs reachable through an ordering edge or a back edge alone", jumped)
}

// chainOrdersGraph is a synthetic training chain of k steps for Verify's reachability: a
// forward chain a1..ak from x, a side chain sk..s1 from x that no a descends from, and a
// backward chain bk..b1 where b_i reads b_(i+1) and a_i. With ordered, s_i (i < k) also
// waits for b_(i+1) (the ordering edge "s_i after b_(i+1)"); else s1 waits for x alone.
// Without edges, the graph has none of these control inputs: the original graph the
// planner's edges were added to. With lost > 0, the ordering edges of s_lost..s_(k-1) are
// left out.
func chainOrdersGraph(k int, ordered, edges bool, lost int) string {
	shape := `attr { key: "T" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { shape { dim { size: 64 } dim { size: 256 } } } } }`
	var b strings.Builder
	b.WriteString(`node { name: "x" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { shape { dim { size: 64 } dim { size: 256 } } } } } }` + "\n")
	prev := "x"
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&b, "node { name: \"a%d\" op: \"Relu\" input: %q device: \"/device:GPU:0\" %s }\n", i, prev, shape)
		prev = fmt.Sprintf("a%d", i)
	}
	side := "x"
	for i := k; i >= 1; i-- {
		wait := ""
		if edges && ordered && i < k && (lost == 0 || i < lost) {
			wait = fmt.Sprintf(" input: \"^b%d\"", i+1)
		} else if edges && !ordered && i == 1 {
			wait = ` input: "^x"`
		}
		fmt.Fprintf(&b, "node { name: \"s%d\" op: \"Relu\" input: %q%s device: \"/device:GPU:0\" %s }\n", i, side, wait, shape)
		side = fmt.Sprintf("s%d", i)
	}
	fmt.Fprintf(&b, "node { name: \"b%d\" op: \"Relu\" input: \"a%d\" device: \"/device:GPU:0\" %s }\n", k, k, shape)
	for i := k - 1; i >= 1; i-- {
		fmt.Fprintf(&b, "node { name: \"b%d\" op: \"Mul\" input: \"b%d\" input: \"a%d\" device: \"/device:GPU:0\" %s }\n", i, i+1, i, shape)
	}
	return b.String()
}

// chainOrdersResult rewrites chainOrdersGraph(k): a1..a(k-1) swapped out, each read back by
// b_i and triggered by s_i, which follows a_i only through the ordering edge
// "s_i after b_(i+1)" (ordered) or waits for the swap-out (SwapInGroup.TriggerWaits, with
// the one ordering edge "s1 after x", so that Result.Orders is not empty). With lost > 0, the ordering edges or the
// waits of s_lost..s_(k-1) are left out, and the swap-ins of a_lost..a_(k-1) are not ordered
// after their swap-outs. It returns the original graph and the rewrite.
func chainOrdersResult(tb testing.TB, k int, ordered bool, lost int) (*graphdef.Graph, *Result, Gate) {
	_, orig := testgraph.Parse(tb, chainOrdersGraph(k, ordered, false, 0), "chain")
	m2, g2 := testgraph.Parse(tb, chainOrdersGraph(k, ordered, true, lost), "chain")
	opts, g2, err := Prepare(m2, Options{MinTensorBytes: -1})
	if err != nil {
		tb.Fatal(err)
	}
	a := Analyze(g2, opts)
	plan := &Plan{}
	for i := 1; i < k; i++ {
		plan.Swaps = append(plan.Swaps, PlannedSwap{Tensor: graphdef.Tensor{Node: g2.Node(fmt.Sprintf("a%d", i))}, Bytes: 64 * 256 * 4,
			Groups: []SwapInGroup{{Uses: []graphdef.Use{{Node: g2.Node(fmt.Sprintf("b%d", i)), Input: 1}}, Trigger: g2.Node(fmt.Sprintf("s%d", i)), TriggerWaits: !ordered && (lost == 0 || i < lost)}}})
	}
	res, err := Apply(m2, a, plan)
	if err != nil {
		tb.Fatal(err)
	}
	if ordered {
		for i := 1; i < k && (lost == 0 || i < lost); i++ {
			res.Orders = append(res.Orders, OrderEdge{Node: fmt.Sprintf("s%d", i), After: fmt.Sprintf("b%d", i+1)})
		}
	} else {
		res.Orders = []OrderEdge{{Node: "s1", After: "x"}}
	}
	return orig, res, opts.Gate
}
