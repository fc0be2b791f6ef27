package rewrite

import (
	"github.com/tfswap/tfswap/graphdef"
)

// Plan is what a planner decides: which tensors to swap, which consumers read the
// swapped-in copies, which op triggers each swap-in, and which ops wait for a swap-out to
// complete. Apply performs it.
type Plan struct {
	Swaps []PlannedSwap
	// Waits hold ops back until a swap-out has reached the host, so that the device does not
	// run ahead of its copy engine and fill its memory with tensors waiting to be copied out
	// (vDNN's synchronisation after an offload, AutoSwap's delayed allocation, the
	// schedule-window's completed swap-outs).
	Waits []Wait
	// Accumulators are the while loops' accumulators the plan places on the host
	// (Analysis.HostAccumulators' nodes; placeAccumulators): every iteration's pushed tensor
	// is copied to the host as the forward loop makes it and back as the gradient loop pops
	// it. Nil on a graph without loops.
	Accumulators []*graphdef.Node
}

// Wait makes Node wait for the swap-out of After (a tensor the plan swaps): Apply gives Node
// a control input on the host-side swap-out Identity, which runs once the copy is on the host.
// Node must not be an ancestor of After's producer.
type Wait struct {
	Node  *graphdef.Node
	After graphdef.Tensor
}

// PlannedSwap swaps one tensor out once and in once per group.
type PlannedSwap struct {
	Tensor graphdef.Tensor
	Bytes  int64
	Groups []SwapInGroup
}

// SwapInGroup is one swap-in: the consumers (data inputs) that read it, and its trigger.
type SwapInGroup struct {
	Uses    []graphdef.Use
	Trigger *graphdef.Node
	// TriggerWaits makes the trigger wait for the swap-out (as a Wait would): Apply gives it
	// a control input on the host-side swap-out Identity. A trigger that does not descend
	// from the swapped tensor's producer (a sibling branch's op, as for a gradient swapped
	// out as soon as it is made and read only by the sum that accumulates it) could
	// otherwise run before the swap-out and release the copy back at once; the wait orders
	// it after the swap-out, and holds the trigger until the tensor has left the device.
	TriggerWaits bool
}

// PlanWaits returns the plan's waits and the waits of its triggers (SwapInGroup.TriggerWaits).
func PlanWaits(plan *Plan) []Wait {
	ws := plan.Waits
	extra := false
	for _, ps := range plan.Swaps {
		for _, g := range ps.Groups {
			if g.TriggerWaits {
				if !extra {
					ws = append([]Wait(nil), plan.Waits...)
					extra = true
				}
				ws = append(ws, Wait{Node: g.Trigger, After: ps.Tensor})
			}
		}
	}
	return ws
}

// OrderEdge is a control edge the planner added: Node waits for After.
type OrderEdge struct {
	Node, After string
}
