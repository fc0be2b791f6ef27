package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// simMemo holds the simulations of planned graphs that the problems of one planning share:
// the tighter budgets' problems plan the analysis the budget asked for plans, judgeRecomputed
// judges again a plan its stage simulated, and strategies whose plans do not depend on the
// budget (vdnn-all's, vdnn-conv's) make the same plan at every budget. A simulation depends on
// the graph simulated and the simulation options, never on the budget, so a plan's graph
// simulated by one problem need not be built and simulated again by another of the same
// analysis. The problems share it through their PlanOptions (PlanOptions.memo), as they share
// the options themselves; ResNet-50 batch 740 on v100-16gb (`tfswap rewrite --strategy auto
// --budget 16078864384`, at 2e3e8ce) simulated 195 of its 852 graphs more than once without
// it (a content hash of every graph simulated).
type simMemo struct {
	results    map[simMemoKey]*cost.Result
	recomputed map[rcGraphKey]*rcGraph
	// lmsPeaks are the fast model's predicted peaks of LMS plans (lmsCache.peaks), by the
	// problem's inputs (problemKey): they do not depend on the budget, and the problems of
	// one analysis (the tighter budgets', a graph with recomputations planned at several)
	// ask for the same. The rest of an lmsCache, much larger, is dropped with its search.
	lmsPeaks map[simMemoKey]map[[3]int][]int64
	// hits, when not nil, records every simulation and recomputed graph the memo answered
	// (tests check each against a fresh one).
	hits *[]memoHit
}

// memoHit is an answer of a simMemo: the simulation res of plan by pr with opts, the
// recomputed graph of sel by pr (model and descs), or the LMS peaks lmsPeaks another problem
// predicted, handed to pr.
type memoHit struct {
	pr       *Problem
	plan     *rewrite.Plan
	opts     cost.Options
	res      *cost.Result
	sel      []*rewrite.PlannedRecompute
	model    *graphdef.Model
	descs    []rewrite.Recompute
	lmsPeaks map[[3]int][]int64
}

// simMemoKey names one simulation in a simMemo: the analysis whose graph the plan changes,
// the profile and the simulation options that can differ between problems, the accounting
// (tfswap's or Grappler's) and the plan placed as the problem places it (simMemoPlanKey).
type simMemoKey struct {
	a        *rewrite.Analysis
	profile  *cost.Profile
	opts     simMemoOpts
	grappler bool
	plan     string
}

// simMemoOpts are the comparable simulation options of a problem (its simOpts without the
// set-up cache, which changes no result, and without Fetch and SharedLinks, which every
// problem of a planning takes from the same PlanOptions.Sim unchanged).
type simMemoOpts struct {
	batchScale    int
	computeDevice string
	measured      *cost.Measured
	scaleMeasured bool
	noTF32        bool
	conventions   cost.Conventions
	topLive       int
	relabel       bool
}

// newSimMemo returns an empty simMemo.
func newSimMemo() *simMemo {
	return &simMemo{results: map[simMemoKey]*cost.Result{}, recomputed: map[rcGraphKey]*rcGraph{}, lmsPeaks: map[simMemoKey]map[[3]int][]int64{}}
}

// simMemoPlanKey is planKey of plan placed by pr (Problem.placed), with the accumulators it
// places on the host: what the builder makes the graph of, given pr's analysis.
func (pr *Problem) simMemoPlanKey(plan *rewrite.Plan) string {
	plan = pr.placed(plan)
	k := planKey(plan)
	if len(plan.Accumulators) == 0 {
		return k
	}
	var b strings.Builder
	b.WriteString(k)
	b.WriteString("|acc")
	for _, n := range plan.Accumulators {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(n.Index))
	}
	return b.String()
}

// memoKey returns the key of plan's simulation by opts (Grappler's accounting when grappler
// is set) in pr's memo, and false when pr has no memo or the simulation keeps a timeline
// (those are not shared).
func (pr *Problem) memoKey(plan *rewrite.Plan, opts cost.Options, grappler bool) (simMemoKey, bool) {
	if pr.Opts.memo == nil || opts.Timeline {
		return simMemoKey{}, false
	}
	return simMemoKey{a: pr.Analysis, profile: pr.Profile, grappler: grappler, plan: pr.simMemoPlanKey(plan),
		opts: pr.memoOpts(opts)}, true
}

// memoOpts returns the comparable part of opts, simulation options of pr.
func (pr *Problem) memoOpts(opts cost.Options) simMemoOpts {
	return simMemoOpts{batchScale: opts.BatchScale, computeDevice: opts.ComputeDevice, measured: opts.Measured,
		scaleMeasured: opts.ScaleMeasured, noTF32: opts.NoTF32, conventions: opts.Conventions, topLive: opts.TopLive,
		relabel: pr.relabel}
}

// memoLookup returns pr's planning's simulation of plan with opts (by Grappler's accounting
// when grappler is set), or nil when it holds none; and the key to store it under, with false
// when it is not to be stored (memoKey).
func (pr *Problem) memoLookup(plan *rewrite.Plan, opts cost.Options, grappler bool) (*cost.Result, simMemoKey, bool) {
	k, ok := pr.memoKey(plan, opts, grappler)
	if !ok {
		return nil, k, false
	}
	m := pr.Opts.memo
	res := m.results[k]
	if res != nil && m.hits != nil {
		*m.hits = append(*m.hits, memoHit{pr: pr, plan: plan, opts: opts, res: res})
	}
	return res, k, true
}

// store holds res under k when m is not nil and ok is set. The results it holds are read,
// never changed, by the evaluations that share them.
func (m *simMemo) store(k simMemoKey, ok bool, res *cost.Result) {
	if m != nil && ok {
		m.results[k] = res
	}
}

// rcGraph is a graph with recomputations added to a problem's graph (screenRecomputes): the
// model, the recomputations' descriptions, and, made on first use, its unswapped step's
// simulation and its analysis. The problems of one planning that select the same
// recomputations on the same analysis (the recompute passes and the tighter budgets') share
// one (simMemo.recomputed), so that the plans they make for it are simulated once
// (simMemo.results is keyed by analysis).
type rcGraph struct {
	model *graphdef.Model
	descs []rewrite.Recompute
	res   *cost.Result
	a     *rewrite.Analysis
	// index is model's graph indexed as rewrite.ApplyRecomputesIndexed checked it, named as
	// the problem's graph (Source): the unswapped step is simulated on it and the analysis
	// made of it, rather than indexing the graph twice more (at ResNet-50 4x its batch the
	// three indexings were 5% of the planning's CPU profile).
	index *graphdef.Graph
}

// applyRecomputes makes rg's model, descriptions and index for the recomputations sel of pr's
// graph.
func (rg *rcGraph) applyRecomputes(pr *planRun, sel []*rewrite.PlannedRecompute) error {
	m, index, descs, err := rewrite.ApplyRecomputesIndexed(pr.Model, pr.Analysis, sel)
	if err != nil {
		return err
	}
	index.Source = pr.Model.Source
	rg.model, rg.index, rg.descs = m, index, descs
	return nil
}

// rcGraphKey names an rcGraph in a simMemo: the analysis recomputed in, the profile and
// simulation options its unswapped step is simulated with (as simMemoKey's), and the
// recomputations (rcSelectionKey).
type rcGraphKey struct {
	a       *rewrite.Analysis
	profile *cost.Profile
	opts    simMemoOpts
	sel     string
}

// recomputedGraph returns the graph with the recomputations sel added to pr's
// (rewrite.ApplyRecomputes), the planning's (simMemo) when a problem of its analysis made it.
func (pr *planRun) recomputedGraph(sel []*rewrite.PlannedRecompute) (*rcGraph, error) {
	var k rcGraphKey
	if m := pr.Opts.memo; m != nil {
		k = rcGraphKey{a: pr.Analysis, profile: pr.Profile, opts: pr.memoOpts(pr.simOpts), sel: rcSelectionKey(sel)}
		if rg := m.recomputed[k]; rg != nil {
			if rg.model == nil {
				// Released after its screening (release): made again, alike.
				if err := rg.applyRecomputes(pr, sel); err != nil {
					return nil, err
				}
			}
			if m.hits != nil {
				*m.hits = append(*m.hits, memoHit{pr: pr.Problem, sel: sel, model: rg.model, descs: rg.descs})
			}
			return rg, nil
		}
	}
	rg := &rcGraph{}
	if err := rg.applyRecomputes(pr, sel); err != nil {
		return nil, err
	}
	if m := pr.Opts.memo; m != nil {
		m.recomputed[k] = rg
	}
	return rg, nil
}

// unswapped returns the simulation of rg's graph without swaps as pr simulates it
// (simulateModel), simulated on first use: every problem of one analysis simulates alike.
func (rg *rcGraph) unswapped(pr *planRun) (*cost.Result, error) {
	if rg.res != nil {
		return rg.res, nil
	}
	var res *cost.Result
	var err error
	if rg.index != nil && !pr.relabel {
		// Simulated as simulateModel would its graph (relabelled graphs are made apart).
		pr.sims++
		res, err = cost.Simulate(rg.index, pr.Profile, pr.simOpts)
	} else {
		res, err = pr.simulateModel(rg.model)
	}
	if err != nil {
		return nil, err
	}
	// Its devices' peaks and the step are all that is read of it.
	res.Shapes = res.Shapes.Summary()
	rg.res = res
	return res, nil
}

// release lets go of rg's model when no problem plans its graph (it has no analysis): a
// level screened and not chosen keeps only its unswapped simulation, and recomputedGraph
// makes the model again if a later screening chooses it. A large graph's planning does not
// hold a copy of the graph for every level screened.
func (rg *rcGraph) release() {
	if rg != nil && rg.a == nil {
		rg.model, rg.descs, rg.index = nil, nil, nil
	}
}

// analysis returns the analysis of rg's graph, made on first use with the options of pr's.
func (rg *rcGraph) analysis(pr *planRun) (*rewrite.Analysis, error) {
	if rg.a != nil {
		return rg.a, nil
	}
	g2 := rg.index
	if g2 == nil {
		var err error
		if g2, err = graphdef.NewGraph(rg.model.Graph, pr.Model.Source); err != nil {
			return nil, fmt.Errorf("internal error: the recomputed graph is invalid: %v", err)
		}
	}
	a2 := rewrite.Analyze(g2, pr.Analysis.Opts)
	// The recomputed graph's plans are set up from a cache of its own, made by the first
	// problem of the analysis (newProblem): the original's would serve only the nodes whose
	// NodeDefs and inputs the recomputations leave unchanged, and at ResNet-50 4x its batch
	// about 300 original nodes of each plan's graph (and every recomputation node) were set
	// up again in each simulation.
	rg.a = a2
	return a2, nil
}

// rcSelectionKey is a canonical string of recomputations: every field ApplyRecomputes reads.
func rcSelectionKey(sel []*rewrite.PlannedRecompute) string {
	var b strings.Builder
	tensor := func(t graphdef.Tensor, bytes int64) {
		b.WriteString(strconv.Itoa(t.Node.Index))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(t.Port))
		b.WriteByte('/')
		b.WriteString(strconv.FormatInt(bytes, 10))
	}
	uses := func(us []graphdef.Use) {
		for _, u := range us {
			b.WriteByte(' ')
			b.WriteString(strconv.Itoa(u.Node.Index))
			b.WriteByte('.')
			b.WriteString(strconv.Itoa(u.Input))
		}
	}
	for _, rc := range sel {
		tensor(rc.Tensor, rc.Bytes)
		b.WriteString(" c")
		b.WriteString(strconv.FormatInt(rc.Cost, 10))
		b.WriteString(" t")
		if rc.Trigger != nil {
			b.WriteString(strconv.Itoa(rc.Trigger.Index))
		}
		b.WriteString(" [")
		for _, n := range rc.Chain {
			b.WriteByte(' ')
			b.WriteString(strconv.Itoa(n.Index))
		}
		b.WriteString("] u")
		uses(rc.Uses)
		for _, al := range rc.Also {
			b.WriteString(" a")
			tensor(al.Tensor, al.Bytes)
			uses(al.Uses)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// problemKey names pr's inputs other than its budgets in pr's memo: its analysis, profile,
// simulation options and the accumulators its plans place on the host (the key of its
// unswapped step's simulation). Problems of one planning with the same key have the same
// unswapped step, buffers and fast model.
func (pr *Problem) problemKey() simMemoKey {
	return simMemoKey{a: pr.Analysis, profile: pr.Profile, plan: pr.simMemoPlanKey(&rewrite.Plan{}), opts: pr.memoOpts(pr.simOpts)}
}
