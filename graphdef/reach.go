package graphdef

import "sync"

// reachIndex answers most reachability questions of one graph in constant time, with the
// labels of one depth-first search over its data and control edges (edges out of while
// loops' NextIteration nodes not followed, as in Topo): the search's preorder and postorder
// numbers, and low, the least postorder number among a node's descendants. A node inside
// another's subtree of the search tree descends from it; a node whose [low, post] interval
// does not lie within another's does not (Yildirim et al.'s GRAIL labels). Other pairs are
// left to the caller's search.
type reachIndex struct {
	once           sync.Once
	g              *Graph
	pre, post, low []int32
}

func (r *reachIndex) build() {
	g := r.g
	n := len(g.Nodes)
	r.pre, r.post, r.low = make([]int32, n), make([]int32, n), make([]int32, n)
	for i := range r.pre {
		r.pre[i] = -1
	}
	type frame struct {
		n         *Node
		port, use int // the next consumer to visit; port == len(Consumers): control outputs
	}
	var pre, post int32
	var stack []frame
	children := func(f *frame) *Node {
		nd := f.n
		if isLoopBackEdge(nd.Op) {
			return nil
		}
		for f.port < len(nd.Consumers) {
			if f.use < len(nd.Consumers[f.port]) {
				c := nd.Consumers[f.port][f.use].Node
				f.use++
				return c
			}
			f.port++
			f.use = 0
		}
		if f.use < len(nd.ControlOutputs) {
			c := nd.ControlOutputs[f.use]
			f.use++
			return c
		}
		return nil
	}
	visit := func(nd *Node) {
		r.pre[nd.Index] = pre
		pre++
		r.low[nd.Index] = int32(n)
		stack = append(stack, frame{n: nd})
	}
	for _, root := range g.Topo {
		if r.pre[root.Index] >= 0 {
			continue
		}
		visit(root)
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if c := children(f); c != nil {
				if r.pre[c.Index] < 0 {
					visit(c)
				} else if r.low[c.Index] < r.low[f.n.Index] {
					r.low[f.n.Index] = r.low[c.Index]
				}
				continue
			}
			nd := f.n
			r.post[nd.Index] = post
			if post < r.low[nd.Index] {
				r.low[nd.Index] = post
			}
			post++
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				if p := stack[len(stack)-1].n; r.low[nd.Index] < r.low[p.Index] {
					r.low[p.Index] = r.low[nd.Index]
				}
			}
		}
	}
}

// Reaches reports whether m is reachable from n through data and control edges (while loops'
// back edges not followed; n reaches itself), when the graph's labels decide it in constant
// time: known is false when they do not, and the caller must search. Nodes of different
// graphs, or of a graph whose nodes and edges were built without NewGraph or SortTopo, are
// never known.
func (n *Node) Reaches(m *Node) (reach, known bool) {
	r := n.reach
	if r == nil || m.reach != r {
		return false, false
	}
	r.once.Do(r.build)
	a, b := n.Index, m.Index
	if a >= len(r.pre) || b >= len(r.pre) {
		return false, false
	}
	if r.pre[a] <= r.pre[b] && r.post[b] <= r.post[a] {
		return true, true
	}
	if r.post[b] > r.post[a] || r.low[b] < r.low[a] {
		return false, true
	}
	return false, false
}

// Reachable reports whether to is reachable from from through data and control edges (while
// loops' back edges not followed, as in Topo and Descendants; a node reaches itself). The
// graph's labels (Reaches) answer most questions at once; the others are searched from from,
// pruned by the labels and by topological order. Both nodes must be g's.
func (g *Graph) Reachable(from, to *Node) bool {
	if v, ok := from.Reaches(to); ok {
		return v
	}
	if from == to {
		return true
	}
	if to.TopoIndex < from.TopoIndex {
		return false
	}
	seen := map[*Node]bool{from: true}
	stack := []*Node{from}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if isLoopBackEdge(p.Op) {
			continue
		}
		visit := func(c *Node) bool {
			if c == to {
				return true
			}
			if seen[c] || c.TopoIndex > to.TopoIndex {
				return false
			}
			seen[c] = true
			if v, ok := c.Reaches(to); ok {
				return v
			}
			stack = append(stack, c)
			return false
		}
		for _, uses := range p.Consumers {
			for _, u := range uses {
				if visit(u.Node) {
					return true
				}
			}
		}
		for _, c := range p.ControlOutputs {
			if visit(c) {
				return true
			}
		}
	}
	return false
}
