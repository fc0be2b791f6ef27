package triggers

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// randomDAG builds a graph of n nodes, each reading up to three earlier ones (data inputs)
// and sometimes one more by a control edge.
func randomDAG(t *testing.T, rng *rand.Rand, n int) *graphdef.Graph {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "node { name: \"n%d\" op: %q", i, map[bool]string{true: "Placeholder", false: "AddN"}[i == 0])
		if i > 0 {
			for k := 0; k < 1+rng.Intn(3); k++ {
				fmt.Fprintf(&b, " input: \"n%d\"", rng.Intn(i))
			}
			if rng.Intn(4) == 0 {
				fmt.Fprintf(&b, " input: \"^n%d\"", rng.Intn(i))
			}
		}
		b.WriteString(` attr { key: "T" value { type: DT_FLOAT } } attr { key: "dtype" value { type: DT_FLOAT } } }` + "\n")
	}
	return parsedGraph(t, b.String(), "random")
}

// TestLatestInOrderMatchesTheWalk: on random graphs, with a random topological order of a
// random subset of the nodes (the ops of one device), the scan of positions finds the same
// trigger as Latest's walk for every producer, consumer, limit, eligibility and notAfter it
// decides, and it decides most of them.
func TestLatestInOrderMatchesTheWalk(t *testing.T) {
	rng := rand.New(rand.NewSource(14))
	decided, asked, found := 0, 0, 0
	for trial := 0; trial < 40; trial++ {
		g := randomDAG(t, rng, 20+rng.Intn(60))
		// A topological order: Topo, shuffled where no edge forbids it, by taking a random
		// ready node at each step.
		indeg := make([]int, len(g.Nodes))
		for _, n := range g.Nodes {
			indeg[n.Index] = len(n.Inputs) + len(n.ControlInputs)
		}
		var ready, order []*graphdef.Node
		for _, n := range g.Nodes {
			if indeg[n.Index] == 0 {
				ready = append(ready, n)
			}
		}
		onDevice := map[*graphdef.Node]bool{}
		for len(ready) > 0 {
			k := rng.Intn(len(ready))
			n := ready[k]
			ready = append(ready[:k], ready[k+1:]...)
			if rng.Intn(5) > 0 {
				order = append(order, n)
				onDevice[n] = true
			}
			for _, cs := range n.Consumers {
				for _, c := range cs {
					if indeg[c.Node.Index]--; indeg[c.Node.Index] == 0 {
						ready = append(ready, c.Node)
					}
				}
			}
			for _, c := range n.ControlOutputs {
				if indeg[c.Index]--; indeg[c.Index] == 0 {
					ready = append(ready, c)
				}
			}
		}
		seq := &Sequence{Pos: make([]int, len(g.Nodes)), Cum: make([]int64, len(order)+1)}
		for i := range seq.Pos {
			seq.Pos[i] = -1
		}
		for p, n := range order {
			seq.Pos[n.Index] = p
		}
		if !seq.UseOrder(g, order) {
			t.Fatalf("trial %d: a topological order was refused", trial)
		}
		ineligible := map[*graphdef.Node]bool{}
		for _, n := range g.Nodes {
			if rng.Intn(3) == 0 {
				ineligible[n] = true
			}
		}
		eligible := func(n *graphdef.Node) bool { return !ineligible[n] }
		for q := 0; q < 30; q++ {
			producer := g.Nodes[rng.Intn(len(g.Nodes))]
			first := order[rng.Intn(len(order))]
			late := order[rng.Intn(len(order))]
			notAfter := func(n *graphdef.Node) bool { return seq.PosOf(n) > seq.PosOf(late) }
			for _, na := range []func(*graphdef.Node) bool{nil, notAfter} {
				for _, el := range []Eligible{nil, eligible} {
					for limit := int64(-1); limit <= seq.PosOf(first); limit++ {
						asked++
						got, ok := latestInOrder(producer, first, seq, limit, el, na)
						if !ok {
							continue
						}
						decided++
						want := Latest(producer, first, seq.PosOf, limit, el, na)
						if got != want {
							t.Fatalf("trial %d: producer %s, first %s, limit %d: the scan found %v, the walk %v", trial, producer.Name, first.Name, limit, got, want)
						}
						if got != nil {
							found++
						}
					}
				}
			}
		}
	}
	if decided < asked/2 || found == 0 {
		t.Errorf("the scan decided %d of %d searches, %d with a trigger", decided, asked, found)
	}
	t.Logf("the scan decided %d of %d searches, %d with a trigger", decided, asked, found)
}

// TestUseOrderRefusesAnOrderAgainstTheGraph: an order in which a node comes before one of
// its ancestors (through a node off the order) is not used.
func TestUseOrderRefusesAnOrderAgainstTheGraph(t *testing.T) {
	g := chain(t, 3) // x -> c1 -> c2 -> c3
	order := []*graphdef.Node{g.Node("c3"), g.Node("x")}
	seq := &Sequence{Pos: make([]int, len(g.Nodes)), Cum: make([]int64, len(order)+1)}
	for i := range seq.Pos {
		seq.Pos[i] = -1
	}
	for p, n := range order {
		seq.Pos[n.Index] = p
	}
	if seq.UseOrder(g, order) || seq.Order != nil {
		t.Fatal("an order against the graph's edges was used")
	}
	order[0], order[1] = order[1], order[0]
	seq.Pos[g.Node("x").Index], seq.Pos[g.Node("c3").Index] = 0, 1
	if !seq.UseOrder(g, order) {
		t.Fatal("a topological order was refused")
	}
}
