// Package rewrite performs the graph surgery a plan describes: it analyses which tensors may
// be swapped (Analysis), writes the swaps, waits and recomputations of a Plan into the graph
// (one builder behind Apply and DeriveGraph, ApplyRecomputes) and checks the result (Verify).
// Choosing the plan is package rewrite/plan's, which imports this one, never the reverse.
//
// A swap moves a tensor that sits idle on a compute device (a GPU) between its forward use
// and its backward use out to host memory, and brings it back just before it is needed:
//
//	producer (GPU) ──> swap_out Identity (CPU) ──> swap_in Identity (CPU) ──> far consumer (GPU)
//	                                                     ^
//	                                     trigger (GPU) ──┘ control edge
//
// TensorFlow turns each cross-device data edge into a _Send on the source device and a
// _Recv on the destination device, and a _Recv of an ordinary tensor starts copying as soon
// as the sending side has sent. So the gate must sit on the host side of the host-to-device
// edge: the swap-in Identity is pinned to the host CPU and carries the trigger's control
// edge, and the host's _Send of its output cannot run before the trigger has finished. (A
// control edge on a device-side swap-in would delay only that Identity; the copy would already
// have happened right after the swap-out. GateDevice builds that pattern, for experiments
// that show the difference.) Near consumers keep reading the original tensor.
//
// Swap nodes are Identity ops named under the "tfswap/" scope, with the attr
// _grappler_do_not_remove = true so that Grappler's dependency optimizer keeps them, and
// _tfswap_role = "swap_out" or "swap_in" so that a rewritten graph is recognised.
//
// The auto planner may also recompute tensors instead of swapping them (recompute.go, planned
// in rewrite/plan): their backward readers read a copy made by running a chain of
// deterministic ops again, gated the same way, with the role "recompute"; ApplyRecomputes adds
// them before the swaps are planned.
//
// Planners (package rewrite/plan) produce a Plan; Apply performs it. Build is the one builder
// of rewritten graphs: Apply writes the GraphDef of the graph it builds (Built.Write), and
// DeriveGraph hands that graph to a simulator. Apply never changes
// a node's device, and replaces (never mutates) the NodeDefs it changes, so untouched nodes
// are written back byte for byte.
package rewrite
