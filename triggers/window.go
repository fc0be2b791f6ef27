package triggers

import (
	"fmt"

	"github.com/tfswap/tfswap/graphdef"
)

// Sequence is one device's execution order with the bytes each op touches: the
// variable-sequence of the out-of-core paper (Sony, "Out-of-core training for extremely
// large-scale neural networks with adaptive window-based scheduling"), flattened to byte
// counts per op.
type Sequence struct {
	// Pos is each node's position in the order, indexed by Node.Index; -1 for nodes not in it
	// (other devices, nodes that did not run).
	Pos []int
	// Cum[p] is the number of bytes touched (inputs read and outputs written) by the ops at
	// positions before p; len(Cum) is the number of positions plus one.
	Cum []int64
	// Order is the node at each position, when known (nil otherwise): with it, ByWindow finds
	// its trigger by scanning positions down from the window's start (latestInOrder) instead
	// of walking the consumer's ancestry.
	Order []*graphdef.Node
}

// UseOrder sets s.Order to order, the node at each of s.Pos's positions, when the positions
// increase along every path of g between two nodes of the order (while loops' back edges not
// followed), as latestInOrder's scan requires; it reports whether it did. A simulated order
// by start time may break this where an op runs before one of its ancestors (a v1
// conditional's Merge fed by the branch not taken).
func (s *Sequence) UseOrder(g *graphdef.Graph, order []*graphdef.Node) bool {
	s.Order = nil
	for p, n := range order {
		if s.PosOf(n) != int64(p) {
			return false
		}
	}
	anc := make([]int64, len(g.Nodes)) // the latest position among each node's ancestors
	for i := range anc {
		anc[i] = -1
	}
	for _, n := range g.Topo {
		a := int64(-1)
		see := func(m *graphdef.Node) {
			if !isBackEdge(m) && m.Index < len(anc) {
				a = max(a, anc[m.Index], s.PosOf(m))
			}
		}
		for _, in := range n.Inputs {
			see(in.Node)
		}
		for _, c := range n.ControlInputs {
			see(c)
		}
		if p := s.PosOf(n); p >= 0 && a >= p {
			return false
		}
		anc[n.Index] = a
	}
	s.Order = order
	return true
}

// PosOf returns n's position, or -1.
func (s *Sequence) PosOf(n *graphdef.Node) int64 {
	if n.Index >= len(s.Pos) {
		return -1
	}
	return int64(s.Pos[n.Index])
}

// WindowStart returns the first position from which a look-ahead of window bytes reaches
// position p: the smallest q with Cum[p] - Cum[q] <= window.
func (s *Sequence) WindowStart(p int, window int64) int {
	lo, hi := 0, p
	for lo < hi {
		mid := (lo + hi) / 2
		if s.Cum[p]-s.Cum[mid] <= window {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// ByWindow returns the trigger of the adaptive schedule-window: a swap-in is issued at the
// first op from which the look-ahead along the variable-sequence, accumulating the bytes each
// op touches, reaches the earliest consumer within window bytes. The trigger is the latest
// eligible op on that consumer's ancestry at or before the op preceding the issuing op
// (a trigger gates the swap-in when it ends), or, when the ancestry has nothing there after the
// producer, the earliest eligible op after the producer; either descends from the producer.
// pos is the position the swap-in is issued at.
func ByWindow(producer *graphdef.Node, consumers []*graphdef.Node, window int64, seq *Sequence, eligible Eligible) (trig *graphdef.Node, pos int, err error) {
	if len(consumers) == 0 {
		return nil, 0, fmt.Errorf("no consumers")
	}
	var first *graphdef.Node
	for _, c := range consumers {
		p := seq.PosOf(c)
		if p < 0 {
			return nil, 0, fmt.Errorf("consumer %q is not in the sequence", c.Name)
		}
		if first == nil || p < seq.PosOf(first) {
			first = c
		}
	}
	j := int(seq.PosOf(first))
	pos = seq.WindowStart(j, window)
	notAfter := beforeAll(consumers)
	prodPos := seq.PosOf(producer)
	trig, found := latestInOrder(producer, first, seq, int64(pos)-1, eligible, notAfter)
	if !found {
		trig = Latest(producer, first, seq.PosOf, int64(pos)-1, eligible, notAfter)
	}
	if trig != nil && seq.PosOf(trig) > prodPos {
		return trig, pos, nil
	}
	if e := EarliestAfter(producer, first, seq.PosOf, prodPos, eligible, notAfter); e != nil {
		return e, pos, nil
	}
	if trig != nil {
		return trig, pos, nil
	}
	return nil, pos, fmt.Errorf("no eligible op on the ancestry of %q after producer %q", first.Name, producer.Name)
}

// maxOrderScan bounds latestInOrder's scan: the positions it looks at before it leaves the
// search to Latest's walk.
const maxOrderScan = 256

// latestInOrder returns what Latest(producer, first, seq.PosOf, limit, eligible, notAfter)
// returns, found by scanning seq's positions down from limit: the first node there that
// descends from producer (producer excluded), is an ancestor of first by the graph's
// reachability labels, is eligible and passes notAfter is the answer, since positions are
// distinct and increase from an ancestor to its descendant (an ancestor of first that Latest's
// walk does not reach lies behind a node the scan meets first). found is false when the scan
// cannot decide (no Order, a pair the labels do not decide, or more than maxOrderScan
// positions looked at): the caller walks instead. Latest's walk looks at every ancestor of
// first between limit and first, which for a window the size of the step made choosing a
// plan's triggers quadratic in the graph; the scan stops at the first position that answers.
// Unlike the walk, it is not cut off after maxVisits nodes, so on graphs larger than that it
// finds the latest ancestor where the walk returned the best node seen before the cut.
func latestInOrder(producer, first *graphdef.Node, seq *Sequence, limit int64, eligible Eligible, notAfter func(*graphdef.Node) bool) (trig *graphdef.Node, found bool) {
	if seq.Order == nil {
		return nil, false
	}
	d := newDescent(producer)
	scanned := 0
	for p := min(limit, int64(len(seq.Order))-1); p >= 0; p-- {
		if scanned++; scanned > maxOrderScan {
			return nil, false
		}
		n := seq.Order[p]
		if n == first || n == producer || isBackEdge(n) || !d.of(n) {
			continue
		}
		reach, known := n.Reaches(first)
		if !known {
			return nil, false
		}
		if reach && (eligible == nil || eligible(n)) && (notAfter == nil || !notAfter(n)) {
			return n, true
		}
	}
	return nil, true
}
