package triggers

import "github.com/tfswap/tfswap/graphdef"

// descent answers whether nodes descend from one producer: whether they are reachable from
// it through data and control edges (while loops' back edges not followed, as in
// graphdef.Graph.Topo). A trigger must descend from the producer of the tensor whose swap-in
// it gates: only then does the gate fire after the producer has run, so after the swap-out
// has its input. A trigger merely later in the step, on a sibling branch (the other output of
// a gradient's tuple, say), may fire before the producer and release the swap-in at once.
//
// Most answers come from the graph's reachability labels (graphdef.Node.Reaches) in constant
// time; the others are found by walking back from the node asked about over inputs that come
// after the producer in topological order, and remembered. Every ancestor of a node that
// does not descend from the producer does not either, so the searches of this package stop
// at such nodes.
type descent struct {
	producer *graphdef.Node
	memo     map[*graphdef.Node]bool
}

func newDescent(producer *graphdef.Node) *descent {
	return &descent{producer: producer, memo: map[*graphdef.Node]bool{}}
}

// of reports whether n is the producer or descends from it.
func (d *descent) of(n *graphdef.Node) bool {
	if n == d.producer {
		return true
	}
	if n.TopoIndex <= d.producer.TopoIndex || isBackEdge(n) {
		return false
	}
	if v, ok := d.producer.Reaches(n); ok {
		return v
	}
	if v, ok := d.memo[n]; ok {
		return v
	}
	d.memo[n] = false // no cycles outside back edges; this only guards the recursion
	v := false
	for _, in := range n.Inputs {
		if !isBackEdge(in.Node) && d.of(in.Node) {
			v = true
			break
		}
	}
	if !v {
		for _, c := range n.ControlInputs {
			if !isBackEdge(c) && d.of(c) {
				v = true
				break
			}
		}
	}
	d.memo[n] = v
	return v
}

// isBackEdge reports whether edges out of n are while loops' back edges.
func isBackEdge(n *graphdef.Node) bool { return n.Op == "NextIteration" || n.Op == "RefNextIteration" }

// Ancestry returns the walk ByDistance takes back from the earliest of consumers (the one
// with the lowest level, ties broken by graph order) towards producer, the earliest
// consumer excluded and the producer not reached: at each step the input (data or control)
// of the highest level among those that descend from the producer, ties broken by graph
// order. Every node of it descends from the producer; the levels decrease along it (by one
// per step where the graph allows).
func Ancestry(producer *graphdef.Node, consumers []*graphdef.Node) []*graphdef.Node {
	if len(consumers) == 0 {
		return nil
	}
	d := newDescent(producer)
	var out []*graphdef.Node
	for n := criticalInput(Earliest(consumers), d); n != nil && n.Level > producer.Level; n = criticalInput(n, d) {
		out = append(out, n)
	}
	return out
}
