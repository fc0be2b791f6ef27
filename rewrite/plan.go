package rewrite

import (
	"github.com/tfswap/tfswap/graphdef"
)

// Plan is what a planner decides: which tensors to swap, which consumers read the
// swapped-in copies, and which op triggers each swap-in. Apply performs it.
type Plan struct {
	Swaps []PlannedSwap
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
}
