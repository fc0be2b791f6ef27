package plan

import (
	"slices"
	"testing"

	"github.com/tfswap/tfswap/internal/testgraph"
	"github.com/tfswap/tfswap/rewrite"
)

// TestAcyclicOrderEdges checks the edges the reorder pass adds to its input graph: an edge
// whose After descends from its Node (found on a recomputed graph, where the reader read a
// recomputed copy) is dropped, and so is one that closes a cycle only with an edge kept
// before it; an edge naming a missing node or a node itself is dropped; the others stay in
// order.
func TestAcyclicOrderEdges(t *testing.T) {
	_, g := testgraph.Parse(t, `
node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "a" op: "Relu" input: "p" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "b" op: "Relu" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "c" op: "Relu" input: "p" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "d" op: "Relu" input: "p" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "e" op: "NoOp" input: "^d" }
`, "edges.pbtxt")
	found := []rewrite.OrderEdge{
		{Node: "a", After: "b"},       // b reads a: a cycle
		{Node: "c", After: "a"},       // kept
		{Node: "a", After: "c"},       // c now waits for a: a cycle with the edge kept
		{Node: "d", After: "missing"}, // no such node
		{Node: "d", After: "d"},       // itself
		{Node: "c", After: "e"},       // kept (e waits for d by a control edge)
		{Node: "d", After: "c"},       // c waits for e, which waits for d: a cycle
		{Node: "b", After: "d"},       // kept
	}
	got := acyclicOrderEdges(g, found)
	want := []rewrite.OrderEdge{found[1], found[5], found[7]}
	if !slices.Equal(got, want) {
		t.Errorf("acyclicOrderEdges = %v, want %v", got, want)
	}
}
