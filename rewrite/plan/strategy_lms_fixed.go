package plan

import (
	"github.com/tfswap/tfswap/rewrite"
)

import "github.com/tfswap/tfswap/graphdef"

// lmsFixedPlanner is TensorFlow Large Model Support with its thresholds as given: Options'
// SwapoutThreshold, SwapinAhead and SwapinGroupBy (LMS's defaults, 10, 2 and 5, where unset),
// as TFLMS users set them by hand. Its plan does not depend on the budget: RewriteWithPlanner
// writes Rewrite's output byte for byte and only predicts it against the budget, whether it
// fits or not (Planned.Eval.Fits says).
type lmsFixedPlanner struct{}

// lmsFixedStrategy is the lms-fixed strategy (lmsFixedPlanner). RewriteWithPlanner and the
// offload planner recognise it by identity: it does not plan for the budget.
var lmsFixedStrategy = &Strategy{
	Name: "lms-fixed",
	Doc: "TensorFlow Large Model Support with fixed thresholds (--swapout-threshold, --swapin-ahead, --swapin-groupby; defaults 10, 2, 5): " +
		"the rewrite does not depend on the budget, which it is only checked against; written even when it does not fit",
	Run: func(pass *Pass) (*Evaluation, error) { return lmsFixedPlanner{}.Plan(pass.run) },
}

func (lmsFixedPlanner) Plan(pr *planRun) (*Evaluation, error) {
	plan, _ := PlanLMS(pr.Analysis)
	return pr.predict(plan)
}

// rewriteFixedLMS is RewriteWithPlanner for the lms-fixed strategy: Rewrite's output, with
// the prediction of that very plan for po's device and budget. opts has its defaults applied
// and g is model's graph.
func rewriteFixedLMS(model *graphdef.Model, g *graphdef.Graph, opts rewrite.Options, po PlanOptions) (*Planned, error) {
	// The rewrite writes exactly the plan lmsFixedPlanner evaluates (PlanLMS, then predict),
	// on the same graph and analysis (Rewrite's, without indexing the graph again), and the
	// graph the prediction simulated is the one written: the builder runs once. The
	// planning problem's indices and simulations are released before the GraphDef is made
	// (on large graphs the peak memory is the rewritten graph and either of them).
	a := rewrite.Analyze(g, opts)
	p, err := newPredictionProblem(model, a, po)
	if err != nil {
		return nil, err
	}
	if err := p.checkSharedLinks(); err != nil {
		return nil, err
	}
	pr := p.newRun(lmsFixedStrategy.Name)
	plan, skipped := PlanLMS(a)
	pr.keep = true
	ev, err := pr.predict(plan)
	if err != nil {
		return nil, err
	}
	b := pr.takeBuilt(plan)
	pr.release()
	if b == nil {
		if b, err = rewrite.Build(a, plan); err != nil {
			return nil, err
		}
	}
	res, err := b.WriteVerified(model, skipped)
	if err != nil {
		return nil, err
	}
	return &Planned{Result: res, Strategy: pr.strategy, Eval: ev, Base: pr.Base, Profile: pr.Profile, Budget: pr.Opts.Budget, Simulations: pr.sims}, nil
}

// predict evaluates plan and, where a plan is judged by Grappler's accounting too, gives its
// Grappler peaks even when it does not fit by tfswap's (Evaluate checks those only for
// plans that do): a prediction shows the peak by every accounting planning uses.
func (pr *planRun) predict(plan *rewrite.Plan) (*Evaluation, error) {
	key := planKey(plan)
	if ev, ok := pr.cache[key]; ok {
		return pr.predictGrappler(ev, nil)
	}
	// The plan's graph is built once, for both accountings (on a large graph it is most of
	// the prediction's memory).
	ev, g, err := pr.evaluateNew(plan, key)
	if err != nil {
		return nil, err
	}
	return pr.predictGrappler(ev, g)
}

// predictGrappler returns ev with its Grappler peaks where the plan is judged by Grappler's
// accounting and they are not known yet; g is the plan's graph, or nil to build it again.
func (pr *planRun) predictGrappler(ev *Evaluation, g *graphdef.Graph) (*Evaluation, error) {
	if !pr.grappler || ev.Fits {
		return ev, nil
	}
	for _, d := range ev.Devices {
		if d.GrapplerPeak > 0 {
			return ev, nil // checked already
		}
	}
	if g == nil {
		var err error
		if g, err = pr.graphFor(ev.Plan); err != nil {
			return nil, err
		}
	}
	e := *ev // the cached evaluation stays as it was
	e.Devices = append([]DevicePeak(nil), ev.Devices...)
	if err := pr.checkGrappler(&e, g); err != nil {
		return nil, err
	}
	return &e, nil
}
