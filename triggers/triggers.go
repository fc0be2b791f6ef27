// Package triggers chooses the op that gates each swap-in.
//
// A swap-in copies a tensor back from host memory to the device before its consumer runs. It
// must not start too early (the tensor would occupy device memory for no reason, undoing the
// swap) nor too late (the consumer would stall waiting for the copy). The trigger is an op on
// the consumer's ancestry: the swap-in gets a control dependency on it, so the copy starts
// once the trigger has finished. Every trigger this package returns is an ancestor of the
// consumers it serves and never a descendant of any of them, so gating the swap-in on it
// cannot create a cycle; and it descends from the producer of the swapped tensor, so it
// cannot finish before the producer has run (see descent).
//
// Where the trigger's control edge goes (the host-side swap-in, so that the host-to-device
// copy itself waits) is the rewriter's business: see package rewrite.
package triggers

import (
	"fmt"

	"github.com/tfswap/tfswap/graphdef"
)

// Eligible reports whether a node may serve as a trigger (for example: on a compute device,
// outside while loops and conditional branches).
type Eligible func(*graphdef.Node) bool

// ByDistance returns the trigger for a swap-in of a tensor made by producer and read by
// consumers, chosen as TensorFlow Large Model Support chooses it: the op ahead topological
// levels before the earliest consumer, on that consumer's ancestry. It walks back from the
// earliest consumer (the one with the lowest level; ties broken by graph order) along its
// critical path among the producer's descendants — at each step the input (data or control)
// with the highest level among those that descend from the producer, ties broken by graph
// order (see Ancestry) — which goes back one level per step where the graph allows.
// Ineligible nodes are walked through. The walk stops at the last node no more than ahead
// levels back, or at the last eligible node whose level is still above the producer's: a
// trigger at or before the producer would release the swap-in at once.
//
// It returns an error when no eligible node lies strictly between the producer and the
// earliest consumer.
func ByDistance(producer *graphdef.Node, consumers []*graphdef.Node, ahead int, eligible Eligible) (*graphdef.Node, error) {
	if len(consumers) == 0 {
		return nil, fmt.Errorf("no consumers")
	}
	if ahead < 1 {
		ahead = 1
	}
	d := newDescent(producer)
	first := Earliest(consumers)
	var best *graphdef.Node
	cur := first
	for {
		next := criticalInput(cur, d)
		if next == nil || next.Level <= producer.Level || next.Level < first.Level-ahead {
			break
		}
		cur = next
		if eligible == nil || eligible(cur) {
			best = cur
		}
	}
	if best == nil {
		// Nothing eligible within ahead levels: take the nearest eligible node further back
		// that is still after the producer.
		for next := criticalInput(cur, d); next != nil && next.Level > producer.Level; next = criticalInput(next, d) {
			if eligible == nil || eligible(next) {
				best = next
				break
			}
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no eligible op between producer %q (level %d) and consumer %q (level %d)", producer.Name, producer.Level, first.Name, first.Level)
	}
	return best, nil
}

// Earliest returns the consumer with the lowest level, ties broken by graph order.
func Earliest(nodes []*graphdef.Node) *graphdef.Node {
	var first *graphdef.Node
	for _, c := range nodes {
		if first == nil || c.Level < first.Level || (c.Level == first.Level && c.Index < first.Index) {
			first = c
		}
	}
	return first
}

// criticalInput returns the input (data or control) of n with the highest level among those
// that are d's producer or descend from it, ties broken by graph order, or nil when there is
// none. Its level is n.Level-1 when the input of the highest level descends from the
// producer and n is not the target of a while loop's back edge.
func criticalInput(n *graphdef.Node, d *descent) *graphdef.Node {
	var best *graphdef.Node
	consider := func(p *graphdef.Node) {
		if isBackEdge(p) || !d.of(p) {
			return
		}
		if best == nil || p.Level > best.Level || (p.Level == best.Level && p.Index < best.Index) {
			best = p
		}
	}
	for _, in := range n.Inputs {
		consider(in.Node)
	}
	for _, c := range n.ControlInputs {
		consider(c)
	}
	return best
}
