package triggers

import (
	"sync"

	"github.com/tfswap/tfswap/graphdef"
)

// maxVisits bounds one ancestor search, so that a pathological graph cannot make a single
// trigger choice quadratic. Searches that hit it return the best node seen so far.
const maxVisits = 1 << 16

// Latest returns the eligible ancestor of first (through data and control inputs,
// transitively; first itself excluded) that descends from producer (see descent; the
// producer itself excluded) with the
// greatest key that is still at or below limit, or nil when there is none. key must never decrease from an ancestor to its descendant (a
// predicted end time, a position in an execution order); nodes with a negative key did not
// run and are walked through but never returned. notAfter, when set, rejects nodes that would
// make a cycle or are otherwise unusable (for example a node that is not before every
// consumer of the swap-in). Ties are broken by the higher topological position, then the
// lower graph index, so the result is deterministic.
//
// The search walks back from first and stops at the first eligible node at or below the
// limit on each path (its ancestors cannot have a greater key) and at nodes that do not
// descend from producer (nor do their ancestors).
func Latest(producer, first *graphdef.Node, key func(*graphdef.Node) int64, limit int64, eligible Eligible, notAfter func(*graphdef.Node) bool) *graphdef.Node {
	v := pooledVisits()
	defer visitsPool.Put(v)
	return latest(v, newDescent(producer), first, key, limit, eligible, notAfter)
}

// visits marks the nodes one search has seen, by node index; a new generation forgets them
// all at once, so that a memo's searches share one slice.
type visits struct {
	stamp []uint32
	gen   uint32
}

func (v *visits) reset() {
	v.gen++
	if v.gen == 0 {
		// The generations wrapped around: the marks of old searches could match again.
		clear(v.stamp)
		v.gen = 1
	}
}

// visitsPool keeps the marks of the one-off searches (Latest, EarliestAfter, ByTime) for the
// next: a search's marks are as long as the graph's largest node index it meets, and
// allocating them for every search made choosing the triggers of a large graph's plans
// quadratic in its size.
var visitsPool = sync.Pool{New: func() any { return &visits{} }}

// pooledVisits returns marks from visitsPool (put them back when done).
func pooledVisits() *visits { return visitsPool.Get().(*visits) }

// see marks n and reports whether it was already marked in this generation.
func (v *visits) see(n *graphdef.Node) bool {
	if n.Index >= len(v.stamp) {
		v.stamp = append(v.stamp, make([]uint32, n.Index+1-len(v.stamp)+len(v.stamp)/2)...)
	}
	if v.stamp[n.Index] == v.gen {
		return true
	}
	v.stamp[n.Index] = v.gen
	return false
}

func latest(v *visits, d *descent, first *graphdef.Node, key func(*graphdef.Node) int64, limit int64, eligible Eligible, notAfter func(*graphdef.Node) bool) *graphdef.Node {
	v.reset()
	var best *graphdef.Node
	var bestKey int64
	better := func(n *graphdef.Node, k int64) bool {
		if best == nil || k > bestKey {
			return true
		}
		if k < bestKey {
			return false
		}
		if n.TopoIndex != best.TopoIndex {
			return n.TopoIndex > best.TopoIndex
		}
		return n.Index < best.Index
	}
	v.see(first)
	stack := []*graphdef.Node{first}
	count := 0
	push := func(p *graphdef.Node) {
		if p.Op == "NextIteration" || p.Op == "RefNextIteration" || v.see(p) {
			return
		}
		stack = append(stack, p)
	}
	for len(stack) > 0 && count < maxVisits {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		count++
		if n != first {
			if n == d.producer || !d.of(n) {
				continue // neither it nor its ancestors descend from the producer
			}
			k := key(n)
			ok := k >= 0 && (eligible == nil || eligible(n)) && (notAfter == nil || !notAfter(n))
			if ok && k <= limit {
				if better(n, k) {
					best, bestKey = n, k
				}
				continue // its ancestors cannot do better
			}
			if k >= 0 && k <= limit && best != nil && k < bestKey {
				continue // neither it nor its ancestors can beat the best
			}
		}
		for _, in := range n.Inputs {
			push(in.Node)
		}
		for _, c := range n.ControlInputs {
			push(c)
		}
	}
	return best
}

// EarliestAfter returns the eligible ancestor of first (first excluded) that descends from
// producer with the smallest key above floor, or nil: the earliest op on first's ancestry
// that still runs after floor (for example after the producer of a swapped tensor has
// finished). Nodes with a key at or below floor, and nodes that do not descend from
// producer, are not walked through. It is the fallback when no ancestor meets a deadline.
func EarliestAfter(producer, first *graphdef.Node, key func(*graphdef.Node) int64, floor int64, eligible Eligible, notAfter func(*graphdef.Node) bool) *graphdef.Node {
	v := pooledVisits()
	defer visitsPool.Put(v)
	return earliestAfter(v, newDescent(producer), first, key, floor, eligible, notAfter)
}

func earliestAfter(v *visits, d *descent, first *graphdef.Node, key func(*graphdef.Node) int64, floor int64, eligible Eligible, notAfter func(*graphdef.Node) bool) *graphdef.Node {
	v.reset()
	var best *graphdef.Node
	var bestKey int64
	v.see(first)
	stack := []*graphdef.Node{first}
	count := 0
	for len(stack) > 0 && count < maxVisits {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		count++
		if n != first {
			if n == d.producer || !d.of(n) {
				continue
			}
			k := key(n)
			if k >= 0 && k <= floor {
				continue
			}
			if k >= 0 && (eligible == nil || eligible(n)) && (notAfter == nil || !notAfter(n)) {
				if best == nil || k < bestKey || (k == bestKey && (n.TopoIndex < best.TopoIndex || (n.TopoIndex == best.TopoIndex && n.Index < best.Index))) {
					best, bestKey = n, k
				}
			}
		}
		for _, in := range n.Inputs {
			if p := in.Node; p.Op != "NextIteration" && p.Op != "RefNextIteration" && !v.see(p) {
				stack = append(stack, p)
			}
		}
		for _, p := range n.ControlInputs {
			if p.Op != "NextIteration" && p.Op != "RefNextIteration" && !v.see(p) {
				stack = append(stack, p)
			}
		}
	}
	return best
}

// beforeAll returns a filter that rejects nodes not strictly before every one of consumers in
// topological order (such a node could be a consumer's descendant, and gating the swap-in on
// it would make a cycle), and the consumers themselves.
func beforeAll(consumers []*graphdef.Node) func(*graphdef.Node) bool {
	minTopo := -1
	for _, c := range consumers {
		if minTopo < 0 || c.TopoIndex < minTopo {
			minTopo = c.TopoIndex
		}
	}
	return func(n *graphdef.Node) bool { return n.TopoIndex >= minTopo }
}
