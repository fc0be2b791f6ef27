package graphdef

import (
	"fmt"
	"math/rand"
	"testing"

	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// reachesBySearch is Reaches by a plain search over consumers and control outputs.
func reachesBySearch(from, to *Node) bool {
	seen := map[*Node]bool{from: true}
	stack := []*Node{from}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == to {
			return true
		}
		if isLoopBackEdge(n.Op) {
			continue
		}
		var next []*Node
		for _, uses := range n.Consumers {
			for _, u := range uses {
				next = append(next, u.Node)
			}
		}
		next = append(next, n.ControlOutputs...)
		for _, c := range next {
			if !seen[c] {
				seen[c] = true
				stack = append(stack, c)
			}
		}
	}
	return false
}

// randomControlDAG returns n NoOps n0..n{n-1} in topological order, node i with a control
// input from each earlier node with probability fanIn/i.
func randomControlDAG(rng *rand.Rand, n int, fanIn float64) *gpb.GraphDef {
	def := &gpb.GraphDef{}
	for i := 0; i < n; i++ {
		nd := &npb.NodeDef{Name: fmt.Sprintf("n%d", i), Op: "NoOp"}
		for j := 0; j < i; j++ {
			if rng.Float64() < fanIn/float64(i) {
				nd.Input = append(nd.Input, fmt.Sprintf("^n%d", j))
			}
		}
		def.Node = append(def.Node, nd)
	}
	return def
}

// TestReaches checks Reaches against a search on random DAGs (data and control edges): every
// answer it gives is right, and it gives most of them.
func TestReaches(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	known, total := 0, 0
	for trial := 0; trial < 30; trial++ {
		n := 5 + rng.Intn(60)
		def := randomControlDAG(rng, n, 2.5)
		// Shuffle the GraphDef order so that it is not topological.
		rng.Shuffle(len(def.Node), func(i, j int) { def.Node[i], def.Node[j] = def.Node[j], def.Node[i] })
		g, err := NewGraph(def, "random")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range g.Nodes {
			for _, b := range g.Nodes {
				want := reachesBySearch(a, b)
				got, ok := a.Reaches(b)
				total++
				if !ok {
					continue
				}
				known++
				if got != want {
					t.Fatalf("trial %d: %s reaches %s: %v, want %v", trial, a.Name, b.Name, got, want)
				}
			}
		}
	}
	if known*10 < total*7 {
		t.Errorf("Reaches decided only %d of %d pairs", known, total)
	}
	t.Logf("decided %d of %d pairs", known, total)
}

// TestReachable checks Reachable against Descendants on random DAGs with data edges.
func TestReachable(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := 0; trial < 20; trial++ {
		n := 5 + rng.Intn(80)
		def := &gpb.GraphDef{}
		for i := 0; i < n; i++ {
			nd := &npb.NodeDef{Name: fmt.Sprintf("n%d", i), Op: "NoOp"}
			for j := 0; j < i; j++ {
				if rng.Float64() < 1.5/float64(i) {
					nd.Input = append(nd.Input, fmt.Sprintf("^n%d", j))
				}
			}
			def.Node = append(def.Node, nd)
		}
		g, err := NewGraph(def, "random")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range g.Nodes {
			d := g.Descendants(a)
			for _, b := range g.Nodes {
				if got, want := g.Reachable(a, b), a == b || d[b.Index]; got != want {
					t.Fatalf("trial %d: Reachable(%s, %s) = %v, want %v", trial, a.Name, b.Name, got, want)
				}
			}
		}
	}
}

// TestSortTopoLeastIndexFirst checks SortTopo's order on random DAGs whose GraphDef order is
// partly shuffled (nodes readied both after and before the scan's position) against Kahn's
// algorithm taking the least ready index by a plain search, and each node's Level against
// the longest path to it.
func TestSortTopoLeastIndexFirst(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := 0; trial < 60; trial++ {
		n := 2 + rng.Intn(80)
		def := randomControlDAG(rng, n, 2)
		// Move some nodes to the end (as a planner appends its nodes), or shuffle all.
		if trial%2 == 0 {
			rng.Shuffle(len(def.Node), func(i, j int) { def.Node[i], def.Node[j] = def.Node[j], def.Node[i] })
		} else {
			for k := 0; k < n/4; k++ {
				i := rng.Intn(len(def.Node))
				nd := def.Node[i]
				def.Node = append(append(def.Node[:i:i], def.Node[i+1:]...), nd)
			}
		}
		g, err := NewGraph(def, "random")
		if err != nil {
			t.Fatal(err)
		}
		indeg := make([]int, n)
		for _, nd := range g.Nodes {
			indeg[nd.Index] = len(nd.ControlInputs)
		}
		done := make([]bool, n)
		level := make([]int, n)
		for k := 0; k < n; k++ {
			next := -1
			for i := 0; i < n; i++ {
				if !done[i] && indeg[i] == 0 {
					next = i
					break
				}
			}
			if next < 0 {
				t.Fatalf("trial %d: no ready node at step %d", trial, k)
			}
			if got := g.Topo[k].Index; got != next {
				t.Fatalf("trial %d: Topo[%d] is node %d, want %d (least ready index)", trial, k, got, next)
			}
			done[next] = true
			for _, c := range g.Nodes[next].ControlOutputs {
				indeg[c.Index]--
				level[c.Index] = max(level[c.Index], level[next]+1)
			}
		}
		for _, nd := range g.Nodes {
			if nd.Level != level[nd.Index] || g.Topo[nd.TopoIndex] != nd {
				t.Fatalf("trial %d: node %s has level %d and topo index %d, want level %d", trial, nd.Name, nd.Level, nd.TopoIndex, level[nd.Index])
			}
		}
	}
}
