package tfswap

import (
	"github.com/tfswap/tfswap/rewrite/plan"
	"runtime/debug"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// Result is a planned rewrite: the rewritten model and the report.
type Result struct {
	// Model is the rewritten model. When nothing was changed (Report.Prediction.Unchanged)
	// it is the model given to Plan, written back byte for byte.
	Model *Model
	// Report says what was swapped and recomputed and what the simulator predicts.
	Report *Report
}

// Plan plans m's swaps (and recomputations) for a device and budget with a strategy, as
// opts say, rewrites the graph, checks the rewrite's invariants and predicts its peak memory
// and step time. With the zero Options it does what tfswap rewrite does with no options:
// the "auto" strategy for DefaultDevice at its default budget (or the GPU opts.VisibleGPUs
// lists). A graph that already fits is returned unchanged. The same model and options give
// the same plan and byte-identical output. m is not changed.
//
// When no plan keeps every compute device within its budget, the error is a *NoFitError
// (errors.Is(err, ErrNoFit)) saying what is live at the lowest peak any plan reached; fixed
// LMS thresholds (strategy "lms-fixed") are the exception: their rewrite does not depend on
// the budget and is returned with its prediction and a warning. Other errors match
// ErrBadOptions, ErrBadInput or ErrInternal (a panic inside planning is recovered and
// returned as an *InternalError).
func Plan(m *Model, opts Options) (res *Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, &InternalError{Value: v, Stack: debug.Stack()}
		}
	}()
	if m == nil {
		return nil, badOptions("no model given")
	}
	ro, po, err := opts.rewriteOptions()
	if err != nil {
		return nil, err
	}
	t, err := chooseTarget(&opts)
	if err != nil {
		return nil, err
	}
	fetch, g, err := resolveFetch(m, opts.Fetch)
	if err != nil {
		return nil, err
	}
	po.Sim.Fetch = clone(fetch.Nodes)
	po.Profile = t.profile
	po.Budget = t.budget
	if opts.MeasuredProfile != "" {
		ms, err := cost.LoadMeasured(opts.MeasuredProfile)
		if err != nil {
			return nil, &Error{Kind: ErrBadInput, Err: err}
		}
		po.Sim.Measured = ms
	}
	planned, err := plan.RewriteGraphWithPlanner(m.gm, g, ro, po)
	if err != nil {
		return nil, classify(err)
	}
	out := m
	if !planned.Unchanged() {
		out = &Model{gm: planned.Result.Model, path: m.path}
	}
	rep := reportOf(planned, t, opts.Explain)
	if m.shapes.Outputs > 0 {
		st := m.shapes
		rep.Shapes = &st
	}
	rep.Prediction.FetchFound, rep.Prediction.FetchReason = fetch.Found, fetch.Reason
	return &Result{Model: out, Report: rep}, nil
}

// resolveFetch returns the step Plan simulates: the fetch given, or, when none is, the
// training step graphdef.DefaultFetch finds in m. It also returns the index of m's graph,
// shape inference's if the model still holds it (takeIndex), for the planner to use rather
// than build it again; nil when a fetch is given and the model holds none.
func resolveFetch(m *Model, given []string) (graphdef.Fetch, *graphdef.Graph, error) {
	if len(given) > 0 {
		return graphdef.UserFetch(nil, given), m.takeIndex(), nil
	}
	g := m.takeIndex()
	if g == nil {
		var err error
		if g, err = graphdef.NewGraph(m.gm.Graph, m.gm.Source); err != nil {
			return graphdef.Fetch{}, nil, classify(err)
		}
	}
	return graphdef.DefaultFetch(g), g, nil
}
