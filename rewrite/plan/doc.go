// Package plan chooses what package rewrite writes into a graph: the tensors to swap, the ops
// that trigger their swap-ins, the waits, the ordering edges, the recomputations and the
// variables kept on the host, so that every compute device stays within its budget at the
// least simulated step time.
//
// A Problem is the planning input (the graph, its Analysis, the options, the device profile
// and the simulated unswapped step); each Strategy is a value with a Name, a Doc, the
// strategies it Requires and a Run, and planning is one ordered list of passes over a
// Problem (passes.go). The plans are written in rewrite's types (rewrite.Plan,
// rewrite.PlannedSwap, rewrite.Wait) and performed by rewrite's builder; this package
// imports rewrite, never the reverse.
package plan
