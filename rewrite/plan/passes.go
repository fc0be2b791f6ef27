package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// Planning with a strategy (RewriteWithPlanner, for every strategy but lms-fixed) is one
// ordered list of passes, in the style of Go's cmd/compile/internal/ssa/compile.go: each pass
// reads and updates a planState, the order is written down in planPasses, and the ordering
// constraints between passes, each with its reason, are in passOrder and checked when the
// package is initialised (checkPassOrder). The passes up to nofit plan; apply is the graph
// surgery, which consumes the chosen plan and changes nothing the planning passes decided.
//
// The auto strategy's Run is itself an ordered list of passes (autoPasses in
// strategy_auto.go, named "auto.NAME" for debugging) with its own checked constraints.
//
// TFSWAP_PASSTIME=1 prints each pass's wall time and simulations to standard error;
// TFSWAP_DEBUG_PASS=NAME[,NAME...] (or "all") prints the best plan after each named pass
// (tfswap rewrite --pass-time and --debug-pass set them). Neither changes the plan.

// planPass is one pass of planning.
type planPass struct {
	// name is the pass's name for TFSWAP_DEBUG_PASS and the timing lines.
	name string
	// doc says what the pass does, in one line.
	doc string
	// fn runs the pass; an error stops planning.
	fn func(st *planState) error
}

// planPasses are the passes in the order they run.
var planPasses = []planPass{
	{"analyze", "index the graph's tensors and simulate the unswapped step (the problem every pass shares)", passAnalyze},
	{"strategy", "run the strategy asked for (auto runs the strategies it requires first): the swap-only plan", passStrategy},
	{"accumulators", "where the plan does not fit and while loops have accumulators the rewrite can place on the host, plan again with them there and keep the better outcome", passAccumulators},
	{"recompute", "plan again on the graph with recomputations and keep the better outcome (auto, or --recompute max)", passRecompute},
	{"recompute-single", "where Grappler's accounting kept a faster plan from fitting, recompute chains of one large output each", passRecomputeSingle},
	{"recompute-apart", "auto, when nothing fits, the plan stalls on the host link or costs more than 50%: recompute every tensor by its own chain, released just before its reads, and keep the better outcome", passRecomputeApart},
	{"tighter", "auto: plan again for tighter budgets (where the tuple-bypass pass would run there, on the bypassed graph too) and keep a plan that fits and beats the best so far (monotone in the budget)", passTighter},
	{"tuple-order", "auto, when nothing fits or the plan costs more than 50%: run each tf.gradients tuple's largest member after the others, and plan again", passTupleOrder},
	{"tuple-bypass", "auto, where Grappler's accountings bind (nothing fits and a plan fitted tfswap's accounting, or the plan costs more than 50% and a faster one fitted tfswap's accounting only): add the tuple ordering edges, bypass the tf.gradients tuple Identities, which the VirtualCluster counts as buffers of their own, and plan again; when nothing fits there either, hold ops back by spacers where the VirtualCluster's trace counts an op's freed inputs with the next op's outputs", passTupleBypass},
	{"tighter-bypass", "auto: keep the plan the tighter pass found on the bypassed graph at a tighter budget where it beats the best so far", passTighterBypass},
	{"reorder", "auto, when nothing fits (or the plan costs more than 50% and a recomputing plan missed): order a ready reader before the op at the lowest plan's peak where that frees a buffer, and plan again", passReorder},
	{"written-bypass", "auto, where Grappler's accountings are required too and the plan costs more than 50% or nothing fits: plan by tfswap's accounting alone, bypass the tuple Identities in that plan's rewrite and space it; keep it when it fits by every accounting and is better", passWrittenBypass},
	{"tighter-wbypass", "auto, where the written-bypass pass did not run: try the written bypass at the tighter budgets where its gate holds, spaced by the budget asked for, and keep its plan when it fits and beats the best so far (monotone in the budget)", passTighterWritten},
	{"swap-only", "auto, where the recompute pass ran and neither the swap-only plan nor the best plan fits under +50%: run the passes from recompute on again from the swap-only plan without recomputation, as --recompute off does, and keep that outcome when it fits and is better", passSwapOnly},
	{"nofit", "fail with what is live at the lowest peak when no plan fits", passNoFit},
	{"grappler-report", "simulate the chosen plan by every accounting, those it was not judged by too", passGrapplerReport},
	{"apply", "graph surgery: build the rewritten graph from the chosen plan and its recomputations", passApply},
	{"verify", "check the rewrite's invariants (and, where the tuple-bypass pass bypassed the input's Identities, the graph planned against the input)", passVerify},
	{"explain", "the reasoning per tensor (--explain)", passExplain},
}

// passConstraint is an ordering constraint between passes: before runs before after, for
// reason.
type passConstraint struct{ before, after, reason string }

// passOrder are the ordering constraints between planPasses. checkPassOrder checks them.
var passOrder = []passConstraint{
	{"analyze", "strategy", "every strategy plans on the problem analyze builds (the unswapped step's simulation and budgets)"},
	{"strategy", "accumulators", "the accumulators are placed on the host only when the strategy's plan does not fit without"},
	{"accumulators", "recompute", "recomputation is kept only when it beats the plan so far, the one placing accumulators included"},
	{"strategy", "recompute", "recomputation is kept only when it beats the swap-only plan, and auto screens its levels against that plan's step"},
	{"strategy", "tighter", "tighter plans run again only the two strategies that did best at the budget asked for, read from the strategy pass's plans"},
	{"recompute", "recompute-single", "single chains are tried only when a plan of the recompute pass fitted by tfswap's accounting and not Grappler's"},
	{"recompute-single", "recompute-apart", "chains apart are tried only when no plan fits, single chains' included"},
	{"recompute-apart", "tighter", "a tighter plan is kept only when it beats the best plan so far, recomputed plans included"},
	{"tighter", "reorder", "ordering edges are tried only when no plan fits, tighter budgets' plans included"},
	{"tighter", "tuple-order", "tuple ordering edges are tried only when the best plan so far, tighter budgets' plans included, does not fit or is costly"},
	{"tuple-order", "reorder", "the reorder pass adds its edges at the lowest peak of the plans on the graph with the tuple ordering edges too"},
	{"tuple-order", "tuple-bypass", "the tuple ordering edges are found through the tuples' Identities, which the bypass turns into NoOps"},
	{"tuple-bypass", "reorder", "the reorder pass adds its edges at the lowest peak of the plans on the bypassed graph too"},
	{"tuple-bypass", "tighter-bypass", "the tuple passes plan the input graph as they would without the tighter budgets' bypassed plan"},
	{"tighter-bypass", "reorder", "ordering edges are tried only when no plan fits, the tighter budgets' bypassed plan included"},
	{"reorder", "nofit", "a plan on the reordered graph may be the only one that fits"},
	{"reorder", "written-bypass", "the written bypass is tried only when the best plan so far, the reordered graph's included, does not fit or is costly"},
	{"written-bypass", "nofit", "the written bypass's plan may be the only one that fits"},
	{"written-bypass", "tighter-wbypass", "the tighter budgets' written bypass runs only where the written-bypass pass did not, and its plan must beat that pass's outcome"},
	{"tighter", "tighter-wbypass", "the tighter budgets' written bypass runs at the budgets the tighter pass planned"},
	{"tighter-wbypass", "nofit", "the tighter budgets' written bypass's plan fits the budget asked for"},
	{"recompute", "swap-only", "the swap-only planning continues from the state the recompute pass found (snapshotSwapOnly)"},
	{"tighter-wbypass", "swap-only", "the swap-only outcome replaces auto's only when it beats every pass before, the written bypass's included"},
	{"swap-only", "nofit", "the swap-only planning's plan may be the only one that fits"},
	{"nofit", "grappler-report", "only a plan that fits is reported and written"},
	{"nofit", "apply", "the surgery performs only a plan that fits"},
	{"apply", "verify", "verify checks the graph apply built"},
	{"apply", "explain", "the explanation lists the recomputations the surgery made"},
}

func init() {
	if err := checkPassOrder(PlanPassNames(), passOrder); err != nil {
		panic(err)
	}
}

// checkPassOrder returns an error when a constraint names a pass that is not in names (the
// passes in the order they run) or when that order breaks one.
func checkPassOrder(names []string, order []passConstraint) error {
	at := map[string]int{}
	for i, n := range names {
		if _, dup := at[n]; dup {
			return fmt.Errorf("planning pass %q listed twice", n)
		}
		at[n] = i
	}
	for _, c := range order {
		i, ok1 := at[c.before]
		j, ok2 := at[c.after]
		if !ok1 || !ok2 {
			return fmt.Errorf("pass ordering constraint %s before %s names a pass that does not exist", c.before, c.after)
		}
		if i >= j {
			return fmt.Errorf("planning pass %s must run before %s: %s", c.before, c.after, c.reason)
		}
	}
	return nil
}

// PlanPassNames returns the names of the planning passes, in the order they run.
func PlanPassNames() []string {
	var out []string
	for _, p := range planPasses {
		out = append(out, p.name)
	}
	return out
}

// DebugPassNames returns the names TFSWAP_DEBUG_PASS accepts: the planning passes, then the
// auto strategy's own passes (prefixed "auto."), which run within the strategy pass and
// again wherever auto plans again (recompute, tighter), then the runs of the strategies it
// requires ("auto.required:lms").
func DebugPassNames() []string {
	out := PlanPassNames()
	for _, p := range autoPasses {
		out = append(out, autoPassPrefix+p.name)
	}
	for _, r := range autoStrategy.Requires {
		out = append(out, requiredPassName(autoStrategy, r))
	}
	return out
}

// planState is what the planning passes share: the input, the problem planned, the
// swap-only plan, the stages compared, and the outcome.
type planState struct {
	model   *graphdef.Model
	g       *graphdef.Graph
	opts    rewrite.Options
	po      PlanOptions
	planner *Strategy
	mode    string // the recompute mode (recomputeMode)

	a  *rewrite.Analysis
	pr *planRun
	// ev is the strategy's swap-only plan; final the best stage so far and xpr the problem
	// that planned it (for its explanation).
	ev    *Evaluation
	final *stage
	xpr   *planRun
	// recomputing is set when the recompute pass ran; rs is its stage (nil when nothing was
	// recomputed).
	recomputing bool
	rs          *stage
	// rcMiss is the stage of the recompute passes (recompute, recompute-single,
	// recompute-apart) whose lowest plan is lowest among those that miss the budget (nil
	// when each stage's lowest plan fits): where the best plan fits but is costly, the
	// reorder pass adds its edges at that plan's peak (noteRecomputeMiss).
	rcMiss *stage
	// orders are the control edges the reorder pass added to the input graph to make model;
	// depth counts the reorder rounds that led to model.
	orders []rewrite.OrderEdge
	depth  int
	// tupleOrdered is set on the state the tuple-order pass plans its graph with, so that
	// planning it does not add the edges again; tupleOrders are the edges among orders that
	// the tuple-order pass added.
	tupleOrdered bool
	tupleOrders  []rewrite.OrderEdge
	// tupleBypassed is set on the state the tuple-bypass pass plans its graph with, so that
	// planning it does not bypass again; bypassed are the tuple Identities it bypassed.
	tupleBypassed bool
	bypassed      []string
	// retrySkip names the planning passes a re-plan for a tighter budget leaves out
	// (tighterBypass), nil for none.
	retrySkip map[string]bool
	// beat is the plan a re-plan for a tighter budget must beat to be kept (tighterBypass:
	// the best so far of the state that re-plans), nil for none; deferred is set while
	// passStrategy's swap-only planning waits for the recompute pass (deferSwapOnly).
	beat     *Evaluation
	deferred *deferredSwap
	// tighter is what the tighter pass planned at the tighter budgets, and on which graph.
	tighter tighterPlanned
	// tighterSub is the state the tighter pass planned the bypassed graph with at a tighter
	// budget (tighterBypass), whose plan, judged by this budget, passTighterBypass keeps
	// when it beats the best so far; nil for none.
	tighterSub *planState
	// swapOnly is the state before the recompute pass, from which the swap-only pass plans
	// on without recomputation (snapshotSwapOnly); nil for none.
	swapOnly *planState
	// writtenRan is set where the written-bypass pass planned the input by tfswap's
	// accounting at the budget asked for (the tighter-wbypass pass then does not run).
	writtenRan bool
	// input is the model planning was asked for, set on the top state alone (the written
	// bypass plans it again: passWrittenBypass).
	input *graphdef.Model
	// sims counts the simulations of every problem planned so far.
	sims int
	// dropped says which optional candidates were dropped on an internal error (dropPass).
	dropped []string
	// effort is auto's effort rule's reading of the problem (the zero value for the other
	// strategies): when bounded, auto does not plan again for recomputations or tighter
	// budgets.
	effort searchEffort

	res *rewrite.Result
	out *Planned
}

// passDebug is what TFSWAP_PASSTIME and TFSWAP_DEBUG_PASS ask for.
type passDebug struct {
	time bool
	dump map[string]bool // pass names; "all" for every pass
	w    io.Writer
}

// passDebugOut is where timing lines and dumps go.
var passDebugOut io.Writer = os.Stderr

// report writes pass's timing line (started at t0, sims simulations) and its dump (by dump)
// as d asks.
func (d passDebug) report(pass string, t0 time.Time, sims int, dump func(w io.Writer)) {
	if d.time {
		fmt.Fprintf(d.w, "tfswap: pass %-28s %10.1f ms %5d simulations\n", pass, float64(time.Since(t0).Microseconds())/1000, sims)
	}
	if d.dump[pass] || d.dump["all"] {
		fmt.Fprintf(d.w, "tfswap: after pass %s:", pass)
		dump(d.w)
	}
}

// passDebugFromEnv reads TFSWAP_PASSTIME and TFSWAP_DEBUG_PASS. An unknown pass name is an
// error that lists the passes.
func passDebugFromEnv() (passDebug, error) {
	d := readPassDebug()
	names := DebugPassNames()
	for _, n := range slices.Sorted(maps.Keys(d.dump)) {
		if n != "all" && !slices.Contains(names, n) {
			return d, fmt.Errorf("TFSWAP_DEBUG_PASS: unknown planning pass %q (passes: all, %s)", n, strings.Join(names, ", "))
		}
	}
	return d, nil
}

// readPassDebug reads TFSWAP_PASSTIME and TFSWAP_DEBUG_PASS without checking the names
// (passDebugFromEnv checks them before planning starts).
func readPassDebug() passDebug {
	d := passDebug{w: passDebugOut}
	if v := os.Getenv("TFSWAP_PASSTIME"); v != "" && v != "0" {
		d.time = true
	}
	if v := os.Getenv("TFSWAP_DEBUG_PASS"); v != "" {
		d.dump = map[string]bool{}
		for _, n := range strings.Split(v, ",") {
			d.dump[strings.TrimSpace(n)] = true
		}
	}
	return d
}

// runPlanPasses runs planPasses on st in order, timing and dumping them as dbg asks.
func runPlanPasses(st *planState, dbg passDebug) error {
	for _, p := range planPasses {
		t0 := time.Now()
		sims := st.sims
		if err := p.fn(st); err != nil {
			return err
		}
		dbg.report(p.name, t0, st.sims-sims, st.dump)
	}
	return nil
}

// runPassesFrom runs on st the planning passes from the one named from (the first when from
// is empty) up to, not including, the one named until, leaving out those st.retrySkip names:
// a re-plan of another graph (replan) or of the same problem from a later pass (passSwapOnly).
func runPassesFrom(st *planState, from, until string) error {
	on := from == ""
	for _, p := range passesToReplan() {
		if p.name == until {
			break
		}
		on = on || p.name == from
		if !on || st.retrySkip[p.name] {
			continue
		}
		if err := p.fn(st); err != nil {
			return err
		}
	}
	return nil
}

// keepRecomputed records rs, the stage the recompute pass planned (nil when nothing was
// recomputed), on st and makes it the best plan when force is set or it beats the swap-only
// plan st.ev.
func (st *planState) keepRecomputed(rs *stage, force bool) {
	st.rs = rs
	if rs == nil {
		return
	}
	st.sims += rs.pr.sims
	st.noteRecomputeMiss(rs)
	if force || better(rs.ev, st.ev) {
		st.final = rs
		st.xpr = rs.pr
	}
}

// dump writes the best plan so far to w.
func (st *planState) dump(w io.Writer) {
	if st.final != nil {
		dumpEvaluation(w, st.final.ev, len(st.final.descs), st.sims)
		for _, r := range st.final.descs {
			fmt.Fprintf(w, "  recompute %s\n", r.Tensor)
		}
		return
	}
	dumpEvaluation(w, st.ev, 0, st.sims)
}

// dumpEvaluation writes ev (with recomputes recomputations, after sims simulations) to w:
// its strategy, fit, step, peak per device and swaps.
func dumpEvaluation(w io.Writer, ev *Evaluation, recomputes, sims int) {
	if ev == nil {
		fmt.Fprintf(w, " no plan yet (%d simulations)\n", sims)
		return
	}
	fit := "fits"
	if !ev.Fits {
		fit = "does not fit"
	}
	if ev.unjudged && ev.Result == nil {
		// floorBeaten's outcome: its step and peak are lower bounds.
		fit = "not simulated (its lower bounds cannot beat the bar), step and peak at least"
	}
	nsw := 0
	if ev.Plan != nil {
		nsw = len(ev.Plan.Swaps)
	}
	fmt.Fprintf(w, " plan by %s, %s, step %s (%+.1f%%), %d swaps, %d recomputations, %d simulations\n",
		ev.Strategy, fit, cost.FormatDuration(ev.StepTime), 100*ev.Overhead, nsw, recomputes, sims)
	for _, d := range ev.Devices {
		fmt.Fprintf(w, "  device %s peak %d of budget %d\n", d.Name, d.Peak, d.Budget)
	}
	if ev.Plan != nil {
		for _, s := range ev.Plan.Swaps {
			fmt.Fprintf(w, "  swap %s %d bytes, %d swap-ins\n", s.Tensor, s.Bytes, len(s.Groups))
		}
	}
}

// passAnalyze builds the problem: the analysis of the graph and the unswapped step.
func passAnalyze(st *planState) error {
	if st.po.memo == nil && ShareSimulations {
		// The problems of this planning (re-plans included, which copy st.po) share their
		// simulations.
		st.po.memo = newSimMemo()
	}
	st.a = rewrite.Analyze(st.g, st.opts)
	pr, err := newProblem(st.model, st.a, st.po)
	if err != nil {
		return err
	}
	if err := pr.checkSharedLinks(); err != nil {
		return err
	}
	if err := pr.checkDeviceBudgets(); err != nil {
		return err
	}
	st.pr = pr.newRun("")
	st.sims = st.pr.sims
	return nil
}

// passStrategy runs the strategy asked for; in a re-plan for a tighter budget whose swap-only
// plans cannot win (deferSwapOnly) it leaves that planning to the recompute pass.
func passStrategy(st *planState) error {
	pr := st.pr
	pr.strategy = st.planner.Name
	if st.planner == autoStrategy {
		st.effort = searchEffortOf(pr.Problem)
	}
	if st.deferSwapOnly() {
		st.final = &stage{model: st.model, a: st.a, pr: pr}
		st.xpr = pr
		st.sims = pr.sims
		return nil
	}
	if err := st.planSwapOnly(); err != nil {
		return err
	}
	st.sims = pr.sims
	return nil
}

// planSwapOnly plans st's problem with its planner, swapping alone, and makes that plan
// st's swap-only plan and best stage.
func (st *planState) planSwapOnly() error {
	ev, err := st.planner.plan(st.pr)
	if err != nil {
		return err
	}
	st.ev = ev
	st.final = &stage{model: st.model, a: st.a, pr: st.pr, ev: ev}
	st.xpr = st.pr
	return nil
}

// passAccumulators: where the strategy's plan does not fit and the graph's while loops have
// accumulators the rewrite can place on the host (Analysis.HostAccumulators: every
// iteration's pushed tensor kept for the gradient loop; of any size, as they hold every
// iteration's), the strategy plans again on a problem whose plans all place them there (the
// unswapped step too: Problem.newDerived), and the better outcome is kept. Placing an accumulator is a swap of every iteration's pushed
// tensor, out as the forward loop pushes it and in as the gradient loop pops it; its
// transfers are simulated as the graph written runs them. On a graph without loops, or
// when the plan fits without, nothing changes. The plan kept is then the swap-only plan the
// later passes start from (Planned.Base stays the unswapped step as given).
func passAccumulators(st *planState) error {
	if st.ev != nil && st.ev.Fits {
		return nil
	}
	accs := st.a.HostAccumulators(-1)
	if len(accs) == 0 {
		return nil
	}
	pr := st.pr
	p2, err := pr.newDerived(st.model, st.a, pr.grapplerMargin, accs)
	if err != nil {
		return err
	}
	if err := p2.checkDeviceBudgets(); err != nil {
		return err
	}
	pr2 := p2.newRun(st.planner.Name)
	ev, err := st.planner.plan(pr2)
	st.sims += pr2.sims
	if err != nil || ev == nil {
		return err
	}
	e := *ev
	if pr.Base.StepTime > 0 {
		e.Overhead = float64(e.StepTime-pr.Base.StepTime) / float64(pr.Base.StepTime)
	}
	if st.ev == nil || better(&e, st.ev) {
		st.ev = &e
		st.final = &stage{model: st.model, a: st.a, pr: pr2, ev: &e}
		st.xpr = pr2
	}
	return nil
}

// passRecompute plans again on the graph with recomputations, where the strategy may
// recompute, and keeps the better outcome ("max" keeps the recomputed one whatever it costs).
func passRecompute(st *planState) error {
	if st.deferred != nil {
		return st.recomputeDeferred()
	}
	pr, ev, mode := st.pr, st.ev, st.mode
	if !(mode == "max" || (mode == "auto" && st.planner == autoStrategy && !st.effort.bounded() && (ev == nil || !ev.Fits || ev.StepTime > pr.Base.StepTime))) {
		return nil
	}
	st.snapshotSwapOnly()
	st.recomputing = true
	rs, err := pr.planRecomputed(st.planner, mode, ev, false, false)
	if err != nil && mode == "max" {
		return err
	}
	// In auto mode a recomputation that cannot be planned leaves the swap-only plan, always
	// a safe answer.
	st.keepRecomputed(rs, mode == "max")
	return nil
}

// passRecomputeSingle: where Grappler's accounting kept a faster plan from fitting (a
// recomputation chain's outputs, which TensorFlow writes into one buffer, count each as its
// own there), auto plans recomputations again with chains of one large output each and keeps
// the better outcome.
func passRecomputeSingle(st *planState) error {
	pr := st.pr
	if !st.recomputing || !(st.mode == "auto" && pr.fit.grappler() && pr.fit.tfswap && grapplerBound(st.final.ev, pr, st.rs)) {
		return nil
	}
	rs2, err := pr.planRecomputedToBeat(st.planner, st.mode, st.ev, st.final.ev, true, false)
	if err != nil {
		return err
	}
	if rs2 != nil {
		st.sims += rs2.pr.sims
		st.noteRecomputeMiss(rs2)
		if better(rs2.ev, st.final.ev) {
			st.final = rs2
			st.xpr = rs2.pr
		}
	}
	return nil
}

// passRecomputeApart: where no plan fits, recomputed ones included, the best is slower
// than moving the whole excess over the host link would be (linkBoundStep of the unswapped
// step: the plans left stall on the link), or the best costs more than +50% (costly), auto plans recomputations again with every target
// made by its own chain, released by its own trigger just before its first later read
// (rcPlanner.apart), and keeps the better outcome. By default a chain that runs early serves
// the later reads of the other targets it makes too, which keeps those copies on the device
// from the chain's release to their reads: on ResNet-50 at 8x B0 (v100-16gb, every
// candidate recomputed) the chain of a block's output, released for the next block's
// gradients, keeps the block's recomputed convolution and batch-norm outputs (4.43 GiB each)
// live across them, until the block's own gradient reads them. At 5x B0 by all accountings
// (simulated) the plan with chains apart is +41.3% where the best before was +383.1%. On
// ResNet-50 at 6x B0 by tfswap's accounting the tuple-order pass's graph has a plan with
// served chains at +317.8% that is not link-bound; with chains apart there its window plan
// fits at +72.0% (the served copy of a block's recomputed conv3 output no longer waits
// beside the next block's input gradient).
func passRecomputeApart(st *planState) error {
	if !RecomputeApart || !st.recomputing || st.mode != "auto" || !(linkBound(st.final.ev, st.pr.Problem) || costly(st.final.ev)) {
		return nil
	}
	rs, err := st.pr.planRecomputedToBeat(st.planner, st.mode, st.ev, st.final.ev, false, true)
	if err != nil {
		return err
	}
	if rs != nil {
		st.sims += rs.pr.sims
		st.noteRecomputeMiss(rs)
		// A plan that does not fit either replaces the best only when it comes lower, so
		// that the no-fit diagnosis stays the one of the plans before where it gains nothing.
		cur := st.final.ev
		if cur == nil || rs.ev.Fits && better(rs.ev, cur) || !rs.ev.Fits && !cur.Fits && rs.ev.Excess < cur.Excess {
			st.final = rs
			st.xpr = rs.pr
		}
	}
	return nil
}

// noteRecomputeMiss records rs, a stage a recompute pass planned, as st.rcMiss when the
// lowest plan on its graph misses the budget and by less than rcMiss's.
func (st *planState) noteRecomputeMiss(rs *stage) {
	l := rs.pr.lowest
	if l == nil || l.Excess <= 0 {
		return
	}
	if st.rcMiss == nil || l.Excess < st.rcMiss.pr.lowest.Excess {
		st.rcMiss = rs
	}
}

// costly reports whether ev fits with an overhead above tupleOrderOverhead, the overhead
// above which rewrite warns that a plan is costly.
func costly(ev *Evaluation) bool {
	return ev != nil && ev.Fits && ev.Overhead > tupleOrderOverhead
}

// RecomputeApart says whether auto plans recomputations with chains apart where its plans
// stall on the host link (passRecomputeApart); tests turn it off to compare.
var RecomputeApart = true

// linkBound reports whether ev does not fit or is slower than the shortest step a swap-only
// plan could reach by moving pr's whole excess over the host link (linkBoundStep).
func linkBound(ev *Evaluation, pr *Problem) bool {
	if ev == nil || !ev.Fits {
		return true
	}
	var excess int64
	for _, d := range pr.Base.Devices {
		excess = max(excess, d.Peak-d.Budget)
	}
	return excess > 0 && pr.Base.Result != nil && ev.StepTime > linkBoundStep(pr.Base.Result, pr.Profile, excess)
}

// passTighter: a plan found for a tighter budget fits this one too; auto plans again for
// tighter budgets, with recomputations too where the recompute pass ran, and keeps such a
// plan when it is better (issue 14 item 3: auto monotone in the budget). After each tighter
// budget's plans it bypasses the tuple Identities there where the tuple-bypass pass would
// run (tighterBypass); once that beats the best plan so far, the tighter budgets after it
// are not planned.
func passTighter(st *planState) error {
	if st.planner != autoStrategy || st.effort.bounded() {
		return nil
	}
	st.tighter = tighterPlanned{model: st.model, g: st.g, a: st.a, orders: st.orders, tupleOrders: st.tupleOrders}
	base := st.tighter
	rs, rpr, n, runs, err := st.pr.planTighter(st.planner, st.final.ev, st.recomputing && st.mode == "auto", st.model, st.a,
		func(r tighterRun) (bool, error) { return st.tighterBypass(r, base) })
	if err != nil {
		return err
	}
	st.sims += n
	st.tighter.runs = runs
	if rs != nil {
		st.final, st.xpr = rs, rpr
	}
	return nil
}

// tighterPlanned is what the tighter pass planned (runs, one per tighter budget planned)
// and the graph it planned them on, with its ordering edges.
type tighterPlanned struct {
	runs                []tighterRun
	model               *graphdef.Model
	g                   *graphdef.Graph
	a                   *rewrite.Analysis
	orders, tupleOrders []rewrite.OrderEdge
}

// passNoFit fails when the best plan does not fit.
func passNoFit(st *planState) error {
	if ev := st.final.ev; ev == nil || !ev.Fits {
		err := st.final.pr.noFit(st.planner.Name, ev)
		if e, ok := err.(*NoFitError); ok {
			e.Orders, e.TupleOrders, e.Dropped = st.orders, st.tupleOrders, st.dropped
		}
		return err
	}
	return nil
}

// passGrapplerReport gives every figure of the plan, those it was not judged by too.
func passGrapplerReport(st *planState) error {
	before := st.final.pr.sims
	if err := st.final.pr.reportGrappler(st.final.ev); err != nil {
		return err
	}
	st.sims += st.final.pr.sims - before
	return nil
}

// passApply performs the chosen plan on the graph planned (the input, or the input with
// the chosen recomputations).
func passApply(st *planState) error {
	if !st.po.Explain {
		// Planning is over: its indices, fast model and set-up caches are garbage before the
		// rewritten graph is built and written (on a large graph the end of the rewrite held
		// the most live memory). The explanation reads them after this pass.
		st.pr.release()
		if st.final.pr != st.pr {
			st.final.pr.release()
		}
	}
	res, err := rewrite.Apply(st.final.model, st.final.a, st.final.pr.placed(st.final.ev.Plan))
	if err != nil {
		return err
	}
	_, unsized := st.a.Candidates()
	res.Skipped = unsized
	res.Recomputes = st.final.descs
	res.Orders = st.orders
	res.Bypassed = st.bypassed
	if len(st.final.written) > 0 {
		done, err := rewrite.BypassWritten(res, st.final.written)
		if err != nil || len(done) != len(st.final.written) {
			return fmt.Errorf("internal error: the written bypass changed: %v", err)
		}
	}
	if err := rewrite.WidenGates(res, st.final.wide); err != nil {
		return fmt.Errorf("internal error: %v", err)
	}
	if err := rewrite.AddSpacers(res, st.final.spacers); err != nil {
		return fmt.Errorf("internal error: %v", err)
	}
	st.res = res
	return nil
}

// passVerify checks the rewrite's invariants and makes the outcome.
func passVerify(st *planState) error {
	res := st.res
	if err := rewrite.Verify(st.g, res, st.opts.Gate); err != nil {
		return fmt.Errorf("internal error: the planned rewrite breaks an invariant: %v", err)
	}
	if err := verifyInputBypass(st); err != nil {
		return fmt.Errorf("internal error: the planned graph breaks an invariant: %v", err)
	}
	pr := st.pr
	st.out = &Planned{Result: res, Strategy: st.planner.Name, Eval: st.final.ev, Base: pr.Base, Profile: pr.Profile, Budget: pr.Opts.Budget, Simulations: st.sims,
		Accountings: pr.fit.names(), Effort: st.effort.note(), Dropped: st.dropped}
	return nil
}

// verifyInputBypass checks the graph planned (st.model) against the input where the
// tuple-bypass pass bypassed tuple Identities in the input before planning (st.bypassed):
// Verify, which checks the rewrite against the graph planned, would otherwise take those
// NoOps as given. The graph planned is the input with the ordering edges planning added
// (st.orders) and those Identities bypassed, and nothing else: Verify of it as a rewrite of
// the input that records them (and adds no node) checks each bypassed Identity's NoOp and
// each reader's wait, every other node unchanged but for the ordering edges.
func verifyInputBypass(st *planState) error {
	if len(st.bypassed) == 0 || st.input == nil {
		return nil
	}
	g0, err := graphdef.NewGraph(st.input.Graph, st.input.Source)
	if err != nil {
		return err
	}
	planned := &rewrite.Result{Model: st.model, Orders: st.orders, Bypassed: st.bypassed}
	if len(st.model.Graph.GetNode()) != len(g0.Nodes) {
		return fmt.Errorf("the graph planned has %d nodes, the input %d", len(st.model.Graph.GetNode()), len(g0.Nodes))
	}
	return rewrite.Verify(g0, planned, st.opts.Gate)
}

// passExplain records the reasoning per tensor when PlanOptions.Explain asks for it.
func passExplain(st *planState) error {
	if st.po.Explain {
		st.out.Explanation = withRecomputes(st.xpr.explain(st.final.ev), st.res.Recomputes, st.mode)
	}
	return nil
}
