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
	trig = Latest(producer, first, seq.PosOf, int64(pos)-1, eligible, notAfter)
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
