// Package tfswap plans and rewrites TensorFlow training graphs so that they train in less GPU
// memory: tensors that sit idle on the GPU between their forward use and their backward use
// are swapped out to host memory and swapped back in just before they are needed (or, where
// the host link is the bottleneck, recomputed), chosen for a device and a memory budget.
//
// It is the Go face of the tfswap command: Load reads a graph in any format the command
// reads (.pb, .pbtxt, a SavedModel directory), Plan plans and rewrites it, and the Result's
// Model.Write writes it by the command's output rules. Two lines do what tfswap rewrite does:
//
//	m, err := tfswap.Load("model.pb")
//	res, err := tfswap.Plan(m, tfswap.Options{Budget: 14 << 30, Fetch: []string{"train"}})
//	err = res.Model.Write("model.swap.pb", tfswap.WriteOptions{})
//
// The Report says what was swapped and recomputed and what the simulator predicts: the peak
// of every compute device by tfswap's model of TensorFlow's runtime and by the rules of
// Grappler's VirtualCluster, the step time against the unswapped graph's, the bytes over the
// host link each way, and warnings. Its JSON form is the report of tfswap rewrite --report,
// and Report.WriteText prints what the command prints: the command is built on this package,
// so both say the same for the same graph and options.
//
// Options are a struct whose zero value means what the command does with no options; each
// field is the command's option of the same name, which messages name. Errors match one of
// ErrBadInput, ErrBadOptions, ErrNoFit (a *NoFitError with what is live at the lowest peak any
// plan reached), ErrRefusedOutput, ErrWriteFailed and ErrInternal with errors.Is.
//
// Package session (github.com/tfswap/tfswap/session, built with the "tensorflow" tag, which
// needs cgo and the TensorFlow C library) runs a rewritten graph in a TensorFlow session:
// training steps, and per-device peak memory and host-device transfers read from the step
// stats.
//
// Nothing here needs cgo or TensorFlow: the planner, the simulator and the graph rewrite are
// pure Go.
package tfswap
