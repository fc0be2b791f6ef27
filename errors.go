package tfswap

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"strings"
	"time"

	"github.com/tfswap/tfswap/graphdef"
)

// The kinds of error this package returns. Every error from Load, Read, Plan and Write
// matches exactly one of them with errors.Is, and keeps the error it wraps for errors.As
// (a *graphdef.Error names the file and node of a bad graph, a *graphdef.OutputError the
// refused path). The tfswap command exits with status 1 for ErrBadInput, ErrNoFit and
// ErrWriteFailed, 2 for ErrBadOptions and ErrRefusedOutput, and 3 for ErrInternal.
var (
	// ErrBadInput says that a graph, or a file the options name (a device profile, a
	// measured op profile), cannot be read or used: unreadable, empty, invalid, without
	// nodes, already rewritten by tfswap, or a step the options cannot apply to (a device
	// budget or shared link naming a device the graph does not run).
	ErrBadInput = errors.New("tfswap: bad input")
	// ErrBadOptions says that Options hold a value that cannot be used, whatever the graph:
	// an unknown strategy or device profile, a negative budget, a host device that is not a
	// CPU, planning options given to fixed LMS thresholds.
	ErrBadOptions = errors.New("tfswap: bad options")
	// ErrNoFit says that no plan keeps every compute device within its budget. The error is
	// a *NoFitError, which says what is live at the lowest peak any plan reached.
	ErrNoFit = errors.New("tfswap: no plan fits the budget")
	// ErrRefusedOutput says that an output path may not be written: it is an input, a
	// directory where a file is expected, a non-empty directory for a SavedModel, or a
	// SavedModel named like a GraphDef file. Nothing was written.
	ErrRefusedOutput = errors.New("tfswap: output refused")
	// ErrWriteFailed says that writing an output failed (a full disk, a permission); the
	// previous file at the path is left as it was, and no half-written file remains.
	ErrWriteFailed = errors.New("tfswap: write failed")
	// ErrInternal says that tfswap has a bug: a panic recovered inside this package, or a
	// rewrite that breaks one of the invariants every rewrite is checked against. The
	// error is an *InternalError.
	ErrInternal = errors.New("tfswap: internal error")
)

// ErrNoRuntime says that there is no TensorFlow runtime to ask: a program built without the
// "tensorflow" build tag. The session package's functions return it in such a build; a
// VisibleGPUs function (Options.VisibleGPUs) may return it, wrapped with the reason, and Plan
// then plans for the default device and says why.
var ErrNoRuntime = errors.New("no TensorFlow runtime")

// Error is an error of this package: Kind is one of the Err values above and Err the error
// it wraps, whose message it keeps. errors.Is matches Kind, and errors.As finds Err and what
// Err wraps.
type Error struct {
	// Kind is ErrBadInput, ErrBadOptions, ErrRefusedOutput or ErrWriteFailed (ErrNoFit and
	// ErrInternal come as *NoFitError and *InternalError).
	Kind error
	// Err is what went wrong, in words that name the file, node, option or path at fault.
	Err error
}

// Error returns the wrapped error's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns Kind and Err, for errors.Is and errors.As.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// badOptions returns an ErrBadOptions error with the message of format and args.
func badOptions(format string, args ...any) error {
	return &Error{Kind: ErrBadOptions, Err: fmt.Errorf(format, args...)}
}

// classify wraps an error of the packages below as one of this package's kinds: errors
// already classified are returned as they are; a *rewrite.NoFitError becomes a
// *NoFitError; an output the graphdef package refused is ErrRefusedOutput; a message that
// says "internal error" (the rewrite's invariant checks) is ErrInternal; anything else is
// about the input.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	var ne *NoFitError
	var ie *InternalError
	if errors.As(err, &e) || errors.As(err, &ne) || errors.As(err, &ie) {
		return err
	}
	var rn *plan.NoFitError
	if errors.As(err, &rn) {
		return newNoFitError(rn)
	}
	var oe *graphdef.OutputError
	if errors.As(err, &oe) {
		return &Error{Kind: ErrRefusedOutput, Err: err}
	}
	if strings.HasPrefix(err.Error(), "internal error") {
		return &InternalError{Err: err}
	}
	return &Error{Kind: ErrBadInput, Err: err}
}

// writeError classifies an error of writing an output: a refused path is ErrRefusedOutput,
// a graph too large to write is ErrBadInput, anything else ErrWriteFailed.
func writeError(err error) error {
	if err == nil {
		return nil
	}
	var oe *graphdef.OutputError
	if errors.As(err, &oe) {
		return &Error{Kind: ErrRefusedOutput, Err: err}
	}
	if strings.Contains(err.Error(), "over protobuf's limit") {
		return &Error{Kind: ErrBadInput, Err: err}
	}
	return &Error{Kind: ErrWriteFailed, Err: err}
}

// InternalError is a bug in tfswap: a panic recovered by this package (Value and Stack
// set) or a rewrite that breaks an invariant (Err set). It matches ErrInternal.
type InternalError struct {
	// Value is what the code panicked with, and Stack the goroutine's stack at the panic;
	// both are nil for an invariant the rewrite broke.
	Value any
	Stack []byte
	// Err is the invariant check's error, nil for a panic.
	Err error
}

// Error says what went wrong, beginning "internal error: ".
func (e *InternalError) Error() string {
	if e.Err != nil {
		msg := e.Err.Error()
		if !strings.HasPrefix(msg, "internal error") {
			msg = "internal error: " + msg
		}
		return msg
	}
	return fmt.Sprintf("internal error: %v", e.Value)
}

// Is reports whether target is ErrInternal.
func (e *InternalError) Is(target error) bool { return target == ErrInternal }

// Unwrap returns Err.
func (e *InternalError) Unwrap() error { return e.Err }

// NoFitError says that no plan keeps every compute device within its budget: the device
// furthest over its budget in the plan of least memory, its peak by each accounting, what is
// live at that moment, and what would have to change. It matches ErrNoFit.
type NoFitError struct {
	// Strategy is the strategy asked for.
	Strategy string
	// Device is the compute device that does not fit and Budget its budget.
	Device string
	Budget int64
	// Peak is the smallest peak any plan reached on Device, by tfswap's model of the
	// runtime, at PeakTime into the step; GrapplerPeak and GrapplerPeakUS are that plan's
	// peaks by the rules of Grappler's VirtualCluster, from its trace's nanoseconds and
	// microseconds, when it was judged by them (0 otherwise). Unswapped is the unswapped
	// step's peak.
	Peak           int64
	GrapplerPeak   int64
	GrapplerPeakUS int64
	PeakTime       time.Duration
	Unswapped      int64
	// Accountings are those the plans had to fit by ("tfswap", "grappler-ns",
	// "grappler-us"; Options.FitAccounting).
	Accountings []string
	// Lowest says, for each of Accountings, how far it alone is from fitting: the smallest
	// excess over the budget by its figure among the plans judged by it (Grappler's figures
	// are computed only for plans that fit tfswap's accounting when both are required).
	Lowest []AccountingExcess
	// Weights, Slots (optimizer slots), Constants, Workspace (kernel workspace), Activations
	// and Copies (swapped-in or recomputed copies) are the bytes live at the peak, by kind.
	Weights, Slots, Constants, Workspace, Activations, Copies int64
	// Largest are the largest activations live at the peak, largest first.
	Largest []LiveTensor
	// Advice says what would have to change, one suggestion each; they name the tfswap
	// command's options, each of which is the Options field of the same name.
	Advice []string
	// Fetch are the nodes whose fan-in was simulated as the step (empty: every node), and
	// SimulatedNodes how many nodes that is.
	Fetch          []string
	SimulatedNodes int

	msg string
}

// AccountingExcess is how far one accounting ("tfswap", "grappler-ns", "grappler-us") is
// from fitting: the smallest excess over the budget by its figure among Plans plans judged
// by it, negative where one of them fits by it; with Plans 0 no plan was judged by it.
type AccountingExcess struct {
	// Accounting is the accounting's name, as --fit-accounting spells it.
	Accounting string
	// Excess is the least excess over the budget by its figure, in bytes.
	Excess int64
	// Plans is how many plans were judged by it.
	Plans int
}

// LiveTensor is a buffer live on a device at its peak.
type LiveTensor struct {
	// Name is the tensor ("node:port"), or the node for variables, constants and workspace.
	Name string
	// Op is the type of the op that made it.
	Op string
	// Kind is "activation", "variable", "constant", "copy" (received from another device)
	// or "workspace".
	Kind string
	// Bytes is its size.
	Bytes int64
	// Since is when it was allocated, from the start of the step.
	Since time.Duration
}

// newNoFitError converts the rewrite package's error.
func newNoFitError(e *plan.NoFitError) *NoFitError {
	out := &NoFitError{Strategy: e.Strategy, Device: e.Device, Budget: e.Budget, Peak: e.Peak, GrapplerPeak: e.GrapplerPeak,
		GrapplerPeakUS: e.GrapplerPeakUS, Accountings: clone(e.Accountings), PeakTime: time.Duration(e.PeakTime), Unswapped: e.Unswapped,
		Weights: e.Weights, Slots: e.Slots, Constants: e.Constants, Workspace: e.Workspace, Activations: e.Activations, Copies: e.Copies,
		Advice: clone(e.Advice), Fetch: clone(e.Fetch), SimulatedNodes: e.Simulated, msg: e.Error()}
	for _, l := range e.Lowest {
		out.Lowest = append(out.Lowest, AccountingExcess{Accounting: l.Accounting, Excess: l.Excess, Plans: l.Plans})
	}
	for _, l := range e.Largest {
		out.Largest = append(out.Largest, LiveTensor{Name: l.Name, Op: l.Op, Kind: l.Kind, Bytes: l.Bytes, Since: time.Duration(l.Since)})
	}
	return out
}

// Error says which device does not fit by how much, what is live at the peak, and what would
// have to change, on several lines.
func (e *NoFitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("no plan fits %s within %d bytes (strategy %s): the smallest peak any plan reached is %d bytes", e.Device, e.Budget, e.Strategy, e.Peak)
}

// Is reports whether target is ErrNoFit.
func (e *NoFitError) Is(target error) bool { return target == ErrNoFit }

// clone copies a slice, keeping nil nil and empty empty (the JSON of the two differs).
func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
