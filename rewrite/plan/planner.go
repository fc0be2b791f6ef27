package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"slices"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// Planned is the outcome of budget-driven planning.
type Planned struct {
	// Result is the rewritten model and its swaps, as Rewrite returns them.
	*rewrite.Result
	// Strategy is the planner asked for; Eval the chosen plan's simulation (its Strategy
	// names the planner that produced the plan) and Base the unswapped graph's.
	Strategy string
	Eval     *Evaluation
	Base     *Evaluation
	// Profile and Budget are the device and default budget planned for.
	Profile *cost.Profile
	Budget  int64
	// Simulations counts the full simulations planning ran.
	Simulations int
	// Effort says how auto's effort rule bounded the search (PlanOptions.SearchCandidates),
	// in a sentence; empty when it did not.
	Effort string `json:",omitempty"`
	// Dropped says which optional candidates planning dropped on an internal error (see
	// StrictPasses), each with its error; the plan is the best found without them.
	Dropped []string `json:",omitempty"`
	// Accountings are those the plan was required to fit by (ParseFitAccounting); Eval's
	// devices carry the figures of all three.
	Accountings []string
	// Explanation is the reasoning per tensor (PlanOptions.Explain), in producer order.
	Explanation []TensorExplanation
	// Offload is the variable offload the plan was made on (PlanOptions.Offload), or nil.
	// Base is then the simulation of the original graph (nothing offloaded, nothing
	// swapped), and Eval's overhead is against it.
	Offload *rewrite.OffloadResult `json:",omitempty"`
}

// Unchanged reports whether the rewrite changed nothing: no variable offloaded, no swap, no
// wait, no recomputation, no ordering edge, no tuple Identity bypassed, no spacer and no
// widened gate (the graph fits its budget as it is, or fixed thresholds found nothing to
// swap). A plan made of a bypass and spacers alone changes the graph: written unchanged, it
// would not fit by Grappler's accountings.
func (p *Planned) Unchanged() bool {
	return len(p.Swaps) == 0 && len(p.Waits) == 0 && len(p.Recomputes) == 0 && len(p.Accumulators) == 0 && (p.Offload == nil || len(p.Offload.Variables) == 0) &&
		len(p.Orders) == 0 && len(p.Bypassed) == 0 && len(p.Spacers) == 0 && len(p.WideGates) == 0
}

// RewriteWithPlanner validates model, plans its swaps for the budget with the strategy in
// po, applies the plan and checks the rewrite's invariants (Verify). opts carries the
// analysis options (exclusions, minimum tensor size, compute and host devices, gate); its
// LMS distances are used by the "lms" strategy only as a starting point, and as they are by
// "lms-fixed". When no plan keeps every compute device within its budget it returns a
// *NoFitError, except with "lms-fixed", whose rewrite (Rewrite's, byte for byte) does not
// depend on the budget: it is returned with its prediction whether it fits or not, and
// po.Recompute does not apply to it. The same input and options give the same plan and
// byte-identical output.
func RewriteWithPlanner(model *graphdef.Model, opts rewrite.Options, po PlanOptions) (*Planned, error) {
	return RewriteGraphWithPlanner(model, nil, opts, po)
}

// RewriteGraphWithPlanner is RewriteWithPlanner given g, the graph graphdef.NewGraph builds
// of model (model.Graph, model.Source), so that a caller that has built it already (to find
// the step's fetch) does not build it again; a nil g is built here. g must not have been
// changed since it was built.
func RewriteGraphWithPlanner(model *graphdef.Model, g *graphdef.Graph, opts rewrite.Options, po PlanOptions) (*Planned, error) {
	if len(opts.Fetch) == 0 {
		opts.Fetch = po.Sim.Fetch
	}
	opts, g, err := rewrite.PrepareGraph(model, g, opts)
	if err != nil {
		return nil, err
	}
	if planner, err := LookupStrategy(po.Strategy); err == nil && planner != lmsFixedStrategy {
		opts.GateSmallestOutput = true // a planned rewrite's gates (see Options)
	}
	mode, err := rewrite.ParseOffloadMode(string(po.Offload))
	if err != nil {
		return nil, err
	}
	if len(po.OffloadVariables) > 0 {
		if mode != rewrite.OffloadNone {
			return nil, fmt.Errorf("offload %s and named variables to offload: give one or the other", mode)
		}
		mode = rewrite.OffloadNamed
	}
	if mode != rewrite.OffloadNone {
		return planOffloaded(model, g, opts, po, mode)
	}
	return planPrepared(model, g, opts, po)
}

// planPrepared is RewriteWithPlanner on a model prepare has checked (g is its graph, opts
// has its defaults). It runs planPasses in order (passes.go).
func planPrepared(model *graphdef.Model, g *graphdef.Graph, opts rewrite.Options, po PlanOptions) (*Planned, error) {
	planner, err := LookupStrategy(po.Strategy)
	if err != nil {
		return nil, err
	}
	if planner == lmsFixedStrategy {
		return rewriteFixedLMS(model, g, opts, po)
	}
	mode, err := recomputeMode(po.Recompute)
	if err != nil {
		return nil, err
	}
	dbg, err := passDebugFromEnv()
	if err != nil {
		return nil, err
	}
	st := &planState{model: model, g: g, opts: opts, po: po, planner: planner, mode: mode, input: model}
	if err := runPlanPasses(st, dbg); err != nil {
		return nil, err
	}
	return st.out, nil
}

// grapplerBound reports whether Grappler's accounting is what kept a faster plan than best
// from fitting: a plan evaluated by pr or by the recomputation stage rs fits by tfswap's
// accounting, not by Grappler's, and is faster than best (or best does not fit).
func grapplerBound(best *Evaluation, pr *planRun, rs *stage) bool {
	prs := []*planRun{pr}
	if rs != nil {
		prs = append(prs, rs.pr)
	}
	for _, p := range prs {
		for _, ev := range p.cache {
			if ev.Fits || len(ev.Devices) == 0 || (best != nil && best.Fits && ev.StepTime >= best.StepTime) {
				continue
			}
			tf := true
			for _, d := range ev.Devices {
				tf = tf && d.Peak <= d.Budget && d.GrapplerPeak > 0
			}
			if tf {
				return true
			}
		}
	}
	return false
}

// stage is one planning of a graph: the model planned (the input, or the input with
// recomputations), its analysis and problem, the chosen evaluation and the recomputations.
type stage struct {
	model *graphdef.Model
	a     *rewrite.Analysis
	pr    *planRun
	ev    *Evaluation
	descs []rewrite.Recompute
	// spacers are the spacers ev's plan is written with (spaceForGrappler, spaceWritten),
	// nil for none.
	spacers []rewrite.Spacer
	// written are the tuple Identities bypassed in the rewrite of ev's plan
	// (passWrittenBypass, rewrite.BypassWritten), nil for none.
	written []string
	// wide are the triggers whose gates the rewrite of ev's plan widens (spaceWritten,
	// rewrite.WidenGates), nil for none.
	wide []string
	// replaced is the other level's stage where planRecomputeLevel planned two levels (the
	// link's and the byte level beside it) and kept this one, nil otherwise: the written
	// bypass tries its plan too (writtenCandidates), since the plan that is better by
	// tfswap's accounting may be the one it finds no spacing of.
	replaced *stage
}

// TighterBudgets are the budgets, in thousandths of the budget asked for, at which the auto
// strategy plans again once it has a plan: a plan that fits a tighter budget fits the budget
// asked for, and the planner's search, being greedy, sometimes finds a faster plan when the
// budget is tighter (ResNet-50 batch 280 on v100-16gb: +9.0% at 15.04 GiB, +5.8% at 13.55
// GiB, a plan that also fits 15.04 GiB). Where auto may recompute, each tighter budget is
// planned with recomputations too (TighterRecompute).
var TighterBudgets = []int64{950, 900}

// TighterRecompute says whether planTighter plans each tighter budget with recomputations as
// well as by swapping alone, when the recompute pass ran. The recompute pass screens its
// levels of recomputation by the excess over the budget, so a tighter budget tries larger
// levels: ResNet-50 batch 100 on gtx1080ti got +13.3% at 4.04 GiB but +10.4% at 3.84 GiB
// (95%), +12.6% at 3.23 GiB, all with recomputations.
var TighterRecompute = true

// ShareSimulations says whether the problems of one planning share their simulations of
// the same graphs (simMemo) instead of each building and simulating them again. Tests turn it
// off to compare.
var ShareSimulations = true

// LinkBoundSkip says whether auto skips a planning whose plans cannot beat the best plan so
// far by their link bounds (linkBoundStep), instead of running it to find out: a tighter
// budget (planTighter: swapBound, and the screened level's bound when recomputing) and the
// recomputed retries with chains of one output or apart (planRecomputedToBeat). Tests turn
// it off to compare.
var LinkBoundSkip = true

// planTighter plans with planner for each of TighterBudgets and returns, as a stage judged by
// pr's budgets, the best plan found that fits and beats cur, the problem that planned it (for
// its explanation), and the simulations spent. Each tighter budget is planned by swapping
// alone (every strategy auto runs before its own search) and, when recompute is set (auto's recompute pass ran) and TighterRecompute,
// on the graph with recomputations as the recompute pass plans it (pr.planRecomputed), whose
// plan is then judged again on that graph by pr's budgets. A tighter budget is not planned
// when cur fits and its link bounds show that neither plan could beat cur
// (LinkBoundSkip). It returns a nil stage when the
// unswapped step fits, when cur fits without overhead, or when no tighter plan beats it.
// model and a are pr's graph and analysis, for the swap-only stages. It also returns, per
// tighter budget planned, what was planned there (tighterRun), which it passes to after (nil
// for none) once planned; when after returns true, the tighter budgets left are not planned.
func (pr *planRun) planTighter(planner *Strategy, cur *Evaluation, recompute bool, model *graphdef.Model, a *rewrite.Analysis, after func(tighterRun) (bool, error)) (*stage, *planRun, int, []tighterRun, error) {
	if pr.Base.Fits || (cur != nil && cur.Fits && cur.StepTime <= pr.Base.StepTime) {
		return nil, nil, 0, nil, nil
	}
	// A recomputed plan at a tighter budget is tried only once a plan fits: where none
	// does, the swap-only retries are the cheaper search.
	recompute = recompute && TighterRecompute && cur != nil && cur.Fits
	var best *stage
	var bestPr *planRun
	var runs []tighterRun
	sims := 0
	keep := func(s *stage, xpr *planRun) {
		if s.ev.Fits && better(s.ev, cur) && (best == nil || better(s.ev, best.ev)) {
			best, bestPr = s, xpr
		}
	}
	one := func(th int64) error {
		po := pr.Opts
		po.Budget = pr.Opts.Budget * th / 1000
		if len(pr.Opts.DeviceBudgets) > 0 {
			po.DeviceBudgets = map[string]int64{}
			for k, v := range pr.Opts.DeviceBudgets {
				po.DeviceBudgets[k] = v * th / 1000
			}
		}
		p2, err := newProblem(pr.Model, pr.Analysis, po)
		if err != nil {
			return err
		}
		pr2 := p2.newRun(planner.Name)
		// A plan at this budget is kept only if it is faster than cur (or as fast and moves
		// fewer bytes), and no plan's step is shorter than its link bound. When neither a
		// swap-only plan (bounded on the unswapped step) nor the recomputed one (bounded on
		// the level planRecomputed would plan) can beat cur, the budget is not planned.
		var screened *rcLevel
		if pr2.linkBoundSkips(cur) && pr2.swapBound() > cur.StepTime {
			if !recompute {
				sims += pr2.sims
				return nil
			}
			screened, err = pr2.screenRecomputes("auto", false, false)
			if err != nil {
				return err
			}
			if screened == nil || screened.est > cur.StepTime {
				sims += pr2.sims
				return nil
			}
		}
		// Every strategy runs again before auto's own search: one that did not do best at
		// the budget asked for may at the tighter one (U-Net batch 63 on v100-16gb, simulated
		// with --fit-accounting all in the 2add593 benchmark run and at c41923b: +0.6% at
		// 9.75 GiB with the two best alone, +0.0% with every strategy at 95% of it).
		ev, err := planner.planOnly(pr2, nil)
		sims += pr2.sims
		if err != nil {
			return err
		}
		runs = append(runs, tighterRun{pr: pr2, at: &stage{model: model, a: a, pr: pr2, ev: ev}})
		tr := &runs[len(runs)-1]
		if ev != nil && ev.Fits && len(ev.Plan.Swaps) > 0 {
			// Judged by this problem's budgets and accountings (the plan fits them: its
			// peaks are within tighter budgets by the same accountings).
			before := pr.sims
			pr.strategy = ev.Strategy
			e, err := pr.Evaluate(ev.Plan)
			pr.strategy = planner.Name
			sims += pr.sims - before
			if err != nil {
				return err
			}
			keep(&stage{model: model, a: a, pr: pr, ev: e}, pr2)
		}
		if !recompute {
			return nil
		}
		before := pr2.sims
		var rs *stage
		if screened != nil {
			// Screened above: the level does not depend on the swap-only planning.
			rs, err = pr2.planRecomputeLevel(planner, "auto", ev, screened)
		} else {
			rs, err = pr2.planRecomputed(planner, "auto", ev, false, false)
		}
		sims += pr2.sims - before
		if err != nil || rs == nil {
			// As in the recompute pass, a recomputation that cannot be planned leaves the
			// swap-only plans.
			return nil
		}
		sims += rs.pr.sims
		tr.rs = rs
		if better(rs.ev, tr.at.ev) {
			tr.at = rs
		}
		if !rs.ev.Fits {
			return nil
		}
		js, n, err := pr.judgeRecomputed(rs)
		sims += n
		if err != nil {
			return err
		}
		keep(js, rs.pr)
		return nil
	}
	for _, th := range TighterBudgets {
		n := len(runs)
		if err := one(th); err != nil {
			return nil, nil, sims, nil, err
		}
		if after == nil || len(runs) == n {
			continue
		}
		stop, err := after(runs[n])
		if err != nil {
			return nil, nil, sims, nil, err
		}
		if stop {
			break
		}
	}
	return best, bestPr, sims, runs, nil
}

// tighterRun is what planTighter planned at one tighter budget: the problem (pr, the
// swap-only plans), the recomputed stage (rs, nil when none was planned) and the better of
// the two by that budget (at: its ev nil when no plan was made), as the recompute pass
// would have kept it there.
type tighterRun struct {
	pr *planRun
	rs *stage
	at *stage
}

// linkBoundSkips reports whether a planning of pr may be skipped by its link bound when its
// plan is kept only if it beats cur: LinkBoundSkip is set, cur fits, and the step has one
// compute device (linkBoundStep takes the peak's time of the device with the largest peak and
// the largest excess of any device, which bound the step only when they are one device's).
func (pr *Problem) linkBoundSkips(cur *Evaluation) bool {
	return LinkBoundSkip && cur != nil && cur.Fits && len(pr.Base.Devices) == 1
}

// swapBound is the shortest step a swap-only plan of pr can reach: the link bound
// (linkBoundStep) of its unswapped step with the worst device's excess over its budget.
func (pr *Problem) swapBound() int64 {
	var excess int64
	for _, d := range pr.Base.Devices {
		excess = max(excess, d.Peak-d.Budget)
	}
	return linkBoundStep(pr.Base.Result, pr.Profile, excess)
}

// judgeRecomputed judges rs, a stage planned with recomputations for another budget than
// pr's, by pr's budgets: its plan evaluated on its graph by a problem with pr's options, the
// overhead against pr's unswapped step. It returns that stage and the simulations spent.
func (pr *planRun) judgeRecomputed(rs *stage) (*stage, int, error) {
	p3, err := pr.newDerived(rs.model, rs.a, recomputeGrapplerMargin, nil)
	if err != nil {
		return nil, 0, err
	}
	pr3 := p3.newRun(rs.pr.strategy)
	ev, err := pr3.Evaluate(rs.ev.Plan)
	if err != nil {
		return nil, pr3.sims, err
	}
	e := *ev
	if pr.Base.StepTime > 0 {
		e.Overhead = float64(e.StepTime-pr.Base.StepTime) / float64(pr.Base.StepTime)
	}
	e.Strategy = rs.ev.Strategy
	return &stage{model: rs.model, a: rs.a, pr: pr3, ev: &e, descs: rs.descs}, pr3.sims, nil
}

// recomputeMode checks PlanOptions.Recompute ("" means "auto").
func recomputeMode(m string) (string, error) {
	if m == "" {
		return "auto", nil
	}
	for _, x := range rewrite.RecomputeModes {
		if m == x {
			return m, nil
		}
	}
	return "", fmt.Errorf("recompute %q: want one of %s", m, strings.Join(rewrite.RecomputeModes, ", "))
}

// planRecomputed plans with planner on pr's graph with recomputations added. With mode
// "auto" it screens levels of recomputation (cheapest per byte first, up to half the excess,
// the excess, one and a half times it, everything): each level's graph is simulated without
// swaps, and the least step a swap-only plan could reach on top of it (the host link's bound,
// linkBoundStep) ranks the levels. The best level is planned in full unless that bound is
// no shorter than ev0's step, which swapping alone reached. It returns nil when nothing is
// recomputed. With single, every recomputation chain makes one large output
// (rcPlanner.single); with apart, no chain serves another target (rcPlanner.apart). The
// outcome's overhead is against pr's unswapped step.
func (pr *planRun) planRecomputed(planner *Strategy, mode string, ev0 *Evaluation, single, apart bool) (*stage, error) {
	best, err := pr.screenRecomputes(mode, single, apart)
	if err != nil || best == nil {
		return nil, err
	}
	return pr.planRecomputeLevel(planner, mode, ev0, best)
}

// planRecomputedToBeat is planRecomputed for a pass that keeps its outcome only when it
// beats cur: when cur fits and the screened level's link bound is longer than cur's step (no
// plan on that graph is faster than its bound), it returns nil without planning the level
// (LinkBoundSkip).
func (pr *planRun) planRecomputedToBeat(planner *Strategy, mode string, ev0, cur *Evaluation, single, apart bool) (*stage, error) {
	best, err := pr.screenRecomputes(mode, single, apart)
	if err != nil || best == nil {
		return nil, err
	}
	if mode == "auto" && pr.linkBoundSkips(cur) && best.est > cur.StepTime {
		return nil, nil
	}
	return pr.planRecomputeLevel(planner, mode, ev0, best)
}

// rcLevel is a level of recomputation screened by screenRecomputes: the recomputations
// selected, the graph with them and their descriptions, and (mode "auto") the link bound of a
// swap-only plan on that graph (linkBoundStep).
type rcLevel struct {
	sel   []*rewrite.PlannedRecompute
	model *graphdef.Model
	descs []rewrite.Recompute
	est   int64
	// graph is the graph with the level's recomputations, shared by the problems of one
	// planning that select the same recomputations (rcGraph).
	graph *rcGraph
	// alt is the byte level planned beside the link's level when the latter screened
	// better (planRecomputeLevel keeps the better plan), nil otherwise.
	alt *rcLevel
}

// LinkLevel lets auto's screening of recomputation levels try the link's level
// (rcPlanner.linkLevel) beside the byte levels (switched off only by tests, to compare).
var LinkLevel = true

// screenRecomputes is planRecomputed's screening of the levels of recomputation: it returns
// the level planRecomputed plans (the least link bound with mode "auto", the only level
// otherwise), or nil when nothing is recomputed. Its simulations count in pr.sims.
func (pr *planRun) screenRecomputes(mode string, single, apart bool) (*rcLevel, error) {
	rp := pr.newRCPlanner(single)
	rp.apart = apart
	if len(rp.order) == 0 {
		return nil, nil
	}
	levels := []int64{-1}
	if mode == "auto" {
		var excess int64
		for _, d := range pr.Base.Devices {
			excess = max(excess, d.Peak-d.Budget)
		}
		levels = recomputeLevels(excess)
	}
	ks := make([]int, 0, len(levels)+1)
	for _, want := range levels {
		ks = append(ks, rp.level(want))
	}
	link := -1
	if mode == "auto" && len(levels) > 0 && LinkLevel {
		if k := rp.linkLevel(1e9/pr.Profile.D2H + 1e9/pr.Profile.H2D); !slices.Contains(ks, k) {
			link = k
			ks = append(ks, k)
		}
	}
	var best, linkLv *rcLevel
	var screened []*rcLevel
	seen := map[int]bool{}
	for _, k := range ks {
		if seen[k] {
			continue
		}
		seen[k] = true
		sel := rp.plan(k)
		if len(sel) == 0 {
			continue
		}
		rg, err := pr.recomputedGraph(sel)
		if err != nil {
			return nil, err
		}
		lv := &rcLevel{sel: sel, model: rg.model, descs: rg.descs, graph: rg}
		if mode == "auto" {
			res, err := rg.unswapped(pr)
			if err != nil {
				return nil, err
			}
			var excess int64
			for _, d := range res.Devices {
				if d.GPU {
					excess = max(excess, d.PeakBytes-pr.budgetOf(d.Name))
				}
			}
			lv.est = linkBoundStep(res, pr.Profile, excess)
		}
		if k == link {
			linkLv = lv
		} else if best == nil || lv.est < best.est {
			best = lv
		}
		screened = append(screened, lv)
	}
	if linkLv != nil {
		switch {
		case best == nil:
			best = linkLv
		case linkLv.est < best.est:
			// The link's level screens better; it is planned first and the byte level
			// beside it (rcLevel.alt), the better plan kept: the estimate is tfswap's model
			// of a swap-only plan, and where Grappler's accountings are required the byte
			// level's plan can still be the better one (ResNet-50 6x B0, all accountings).
			linkLv.alt, best = best, linkLv
		}
	}
	for _, lv := range screened {
		if lv != best && lv != best.alt {
			lv.graph.release()
		}
	}
	return best, nil
}

// planRecomputeLevel is planRecomputed's planning of best, the level its screening chose.
func (pr *planRun) planRecomputeLevel(planner *Strategy, mode string, ev0 *Evaluation, best *rcLevel) (*stage, error) {
	st, err := pr.planOneLevel(planner, mode, ev0, best)
	if err != nil || best.alt == nil {
		return st, err
	}
	alt, err := pr.planOneLevel(planner, mode, ev0, best.alt)
	if err != nil {
		return nil, err
	}
	if alt != nil && (st == nil || better(alt.ev, st.ev)) {
		alt.replaced = st
		return alt, nil
	}
	if st != nil {
		st.replaced = alt
	}
	return st, nil
}

// planOneLevel plans one screened level for planRecomputeLevel.
func (pr *planRun) planOneLevel(planner *Strategy, mode string, ev0 *Evaluation, best *rcLevel) (*stage, error) {
	if mode == "auto" && ev0 != nil && ev0.Fits && best.est >= ev0.StepTime {
		return nil, nil
	}
	a2, err := best.graph.analysis(pr)
	if err != nil {
		return nil, err
	}
	p2, err := pr.newDerived(best.model, a2, recomputeGrapplerMargin, nil)
	if err != nil {
		return nil, err
	}
	pr2 := p2.newRun(planner.Name)
	var only map[string]bool
	if mode == "auto" && !RerunEveryStrategy {
		// The strategies that did best without recomputation are run again; the others
		// are unlikely to win on the same graph with fewer tensors to swap.
		only = pr.rerunStrategies(planner)
	}
	ev, err := planner.planOnly(pr2, only)
	if err != nil || ev == nil {
		return nil, err
	}
	e := *ev
	if pr.Base.StepTime > 0 {
		e.Overhead = float64(e.StepTime-pr.Base.StepTime) / float64(pr.Base.StepTime)
	}
	e.Strategy = ev.Strategy + "+recompute"
	if len(ev.Plan.Swaps) == 0 {
		e.Strategy = "recompute"
	}
	return &stage{model: best.model, a: a2, pr: pr2, ev: &e, descs: best.descs}, nil
}

// rerunStrategies returns the strategies planner requires that a pass planning a changed
// problem (recomputations added) runs again before planner's own search:
// those of the two best plans that fit pr (fittingByStrategy). It returns nil, every one,
// when none of those two is a strategy planner requires: when nothing fits, or when only
// planner's own fallbacks fit (auto's lowest-memory plan, which swaps every gap of every
// tensor). A set naming none of them would skip them all and leave the changed problem to
// those fallbacks; at ResNet-50 6x B0 on v100-16gb the window plan missed the budget by
// 0.16 GiB without recomputation, so the recomputed graph was planned by auto's fallbacks
// alone (+1001.7%). It returns nil too when the best plan that fits is costly (more than
// +50%): a strategy that did best at that cost says little about the recomputed graph. At
// ResNet-50 8x B0 on v100-16gb (tfswap's accounting, simulated) window+order fitted at
// +503.7%; on the graph with every candidate recomputed (chains apart), with window alone
// run again the best plan fitted at +925.9%, with every strategy at +479.7%.
func (pr *planRun) rerunStrategies(planner *Strategy) map[string]bool {
	var only map[string]bool
	required := false
	for i, e := range pr.fittingByStrategy() {
		if i == 0 && costly(e) {
			return nil
		}
		if i >= 2 {
			break
		}
		if only == nil {
			only = map[string]bool{}
		}
		only[e.Strategy] = true
		for _, r := range planner.Requires {
			if r.Name == e.Strategy {
				required = true
			}
		}
	}
	if !required {
		return nil
	}
	return only
}

// simulateModel simulates model without swaps as pr simulates its plans (the compute
// device shown as a GPU when it is not one).
func (pr *planRun) simulateModel(m *graphdef.Model) (*cost.Result, error) {
	g, err := graphdef.NewGraph(m.Graph, pr.Model.Source)
	if err != nil {
		return nil, err
	}
	if pr.relabel {
		relabelCompute(rewrite.Analyze(g, pr.Analysis.Opts), g)
	}
	pr.sims++
	return cost.Simulate(g, pr.Profile, pr.simOpts)
}

// checkSharedLinks fails when a shared link group names a device the step does not use.
func (pr *Problem) checkSharedLinks() error {
	for _, group := range pr.simOpts.SharedLinks {
		for _, m := range group {
			spec, err := graphdef.ParseDevice(m)
			if err != nil || spec.Type == "" {
				return fmt.Errorf("shared link: %q is not a device", m)
			}
			found := false
			for _, d := range pr.Base.Result.Devices {
				if dev, err := graphdef.ParseDevice(d.Name); err == nil && d.GPU && dev.Matches(spec) {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("shared link: no GPU of the graph matches %q", m)
			}
		}
	}
	return nil
}

// gpuDevices returns the simulated indices of the compute devices, in result order.
func (pr *Problem) gpuDevices() []int {
	var out []int
	for i, d := range pr.timing.res.Devices {
		if d.GPU {
			out = append(out, i)
		}
	}
	return out
}

// targets returns the per-device budgets by simulated device index (0 for hosts).
func (pr *Problem) targets() []int64 {
	out := make([]int64, len(pr.timing.res.Devices))
	for i, d := range pr.timing.res.Devices {
		if d.GPU {
			out[i] = pr.budgetOf(d.Name)
		}
	}
	return out
}

// fitted plans with sel for per-device memory targets (fast-model bytes, by simulated device
// index), simulates the plan, and while it does not fit lowers the target of every device over
// budget by its excess (twice as much after a round that did not help) and plans again, at
// most rounds times. It returns the best outcome.
func (pr *planRun) fitted(rounds int, sel func(target []int64) *rewrite.Plan) (*Evaluation, error) {
	target := pr.targets()
	var best *Evaluation
	var prevExcess int64
	scale := int64(1)
	for r := 0; r < rounds; r++ {
		plan := sel(target)
		ev, err := pr.Evaluate(plan)
		if err != nil {
			return best, err
		}
		if better(ev, best) {
			best = ev
		}
		if ev.Fits {
			break
		}
		// The fast model was optimistic somewhere; lower the targets by the excess, doubling
		// the correction each round in which the simulated excess did not shrink.
		if r > 0 && ev.Excess >= prevExcess {
			scale *= 2
		}
		prevExcess = ev.Excess
		lowered := false
		for _, d := range ev.Devices {
			if x := d.Over(); x > 0 {
				target[d.SimulatedIndex] -= scale * (x + d.Budget/200)
				lowered = true
			}
		}
		if !lowered {
			break
		}
	}
	return best, nil
}

// screened chooses among n parameter settings of a strategy: sel(i, target) plans setting i
// for per-device targets. Every setting is first judged by the fast model alone (does it fit,
// and how long is the predicted stall); the keep best are then planned with simulation in
// the loop (fitted), and the best simulated outcome is returned with the index of its
// setting.
func (pr *planRun) screened(n, keep int, sel func(i int, target []int64) *rewrite.Plan) (*Evaluation, int, error) {
	type scored struct {
		i             int
		excess, stall int64
	}
	target := pr.targets()
	var ss []scored
	// The plans screened are kept for the first round of the kept settings' fitting, which
	// plans them again for the same targets.
	plans := make([]*rewrite.Plan, n)
	for i := 0; i < n; i++ {
		plans[i] = sel(i, target)
		r := pr.fast.predict(plans[i])
		x, _ := pr.fastExcess(r, target)
		ss = append(ss, scored{i, x, r.stall})
	}
	sort.SliceStable(ss, func(a, b int) bool {
		fa, fb := ss[a].excess <= 0, ss[b].excess <= 0
		if fa != fb {
			return fa
		}
		if !fa {
			return ss[a].excess < ss[b].excess
		}
		return ss[a].stall < ss[b].stall
	})
	var best *Evaluation
	bestI := -1
	for k := 0; k < len(ss) && k < keep; k++ {
		i := ss[k].i
		ev, err := pr.fitted(3, func(t []int64) *rewrite.Plan {
			if p := plans[i]; p != nil && slices.Equal(t, target) {
				plans[i] = nil
				return p
			}
			return sel(i, t)
		})
		if err != nil {
			return best, bestI, err
		}
		if better(ev, best) {
			best, bestI = ev, i
		}
	}
	return best, bestI, nil
}

// fastExcess returns the fast model's largest predicted peak minus target, over the devices.
func (pr *Problem) fastExcess(r *fastResult, target []int64) (int64, int) {
	worst, dev := int64(-1<<62), -1
	for i, t := range r.base {
		if t == nil {
			continue
		}
		p, _ := r.peak(i)
		if x := p - target[i]; x > worst {
			worst, dev = x, i
		}
	}
	return worst, dev
}

// sortedBuffers returns the buffers of device dev (all devices when dev < 0) in order.
func (pr *Problem) sortedBuffers(dev int) []*buffer {
	var out []*buffer
	for _, b := range pr.buffers {
		if dev < 0 || b.dev == dev {
			out = append(out, b)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}
