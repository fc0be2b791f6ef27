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

// TestReaches checks Reaches against a search on random DAGs (data and control edges): every
// answer it gives is right, and it gives most of them.
func TestReaches(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	known, total := 0, 0
	for trial := 0; trial < 30; trial++ {
		n := 5 + rng.Intn(60)
		def := &gpb.GraphDef{}
		for i := 0; i < n; i++ {
			nd := &npb.NodeDef{Name: fmt.Sprintf("n%d", i), Op: "NoOp"}
			var ctl []string
			for j := 0; j < i; j++ {
				if rng.Float64() < 2.5/float64(i) {
					ctl = append(ctl, fmt.Sprintf("^n%d", j))
				}
			}
			nd.Input = ctl
			def.Node = append(def.Node, nd)
		}
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
