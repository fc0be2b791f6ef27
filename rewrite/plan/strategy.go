package plan

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Strategy is one swap-planning strategy, a value in the style of golang.org/x/tools/go/analysis's
// Analyzer: it states its name, what it does, which strategies it starts from, and how it
// plans. Run receives a Pass (the strategy, the read-only Problem: the graph, the device, the
// budgets and the unswapped step's simulation, and the planning run it searches in) and
// returns the strategy's best plan, evaluated by the simulator. A strategy that finds nothing that fits returns its plan of least memory; the
// driver reports that no plan fits.
type Strategy struct {
	// Name is the strategy's name for --strategy.
	Name string
	// Doc says what the strategy does and where it comes from, in one line (--list-strategies).
	Doc string
	// Requires are the strategies whose plans this one starts from. Pass.runRequired runs them,
	// in this order, in the same planning run: they share its cache of simulated plans, and each
	// plan is credited to the strategy that made it (Evaluation.Strategy). Every required
	// strategy is in Strategies, and the requirements have no cycle (TestStrategyRegistry).
	Requires []*Strategy
	// Run plans for pass.Problem's budgets.
	Run func(pass *Pass) (*Evaluation, error)
	// budgetFree says the strategy makes one plan whatever the budget and returns it as its
	// outcome (vdnn-all, vdnn-conv): on a graph past auto's effort bound runRequired runs it
	// after the others, with the best of theirs that fits as Pass.bar.
	budgetFree bool
}

// Pass is one run of a Strategy on a Problem.
type Pass struct {
	// Strategy is the strategy running.
	Strategy *Strategy
	// Problem is the planning problem it runs on (read-only), shared with the strategies it
	// requires.
	Problem *Problem
	// run is the planning of Problem the pass searches in: the strategies a strategy requires
	// run on its run, and their plans (run.cache) are its starting points.
	run *planRun
	// only, when set, limits the required strategies run (runRequired) to these: planning
	// again on a graph with recomputations or for a tighter budget runs only those that did
	// best at first.
	only map[string]bool
	// scale is set when auto's effort rule bounds the search (DefaultSearchCandidates): a
	// strategy with a cheaper form runs that (window: one window size, the budget, instead
	// of tuning the size). runRequired hands it to the strategies it runs.
	scale bool
	// bar, when set, is the best plan that fits of the required strategies run before this
	// one (Pass.scale only): a budget-free strategy's plan slower than it cannot be chosen, so
	// it is not judged by Grappler's accountings (planRun.evaluateBeaten).
	bar *Evaluation
}

// plan runs s in the planning run r.
func (s *Strategy) plan(r *planRun) (*Evaluation, error) {
	return s.planOnly(r, nil)
}

// planOnly runs s in the planning run r, running only the required strategies in only (all
// when nil).
func (s *Strategy) planOnly(r *planRun, only map[string]bool) (*Evaluation, error) {
	return s.Run(&Pass{Strategy: s, Problem: r.Problem, run: r, only: only})
}

// runRequired runs the strategies pass's strategy requires, in order, in its planning run,
// and returns their evaluations. A pass that limits the strategies to run before a search of
// its own (Pass.only) skips the others. Each runs with its own name as the run's
// planner (so that its plans are credited to it); the name is left at the last one's.
// Each is timed and dumped as pass NAME:STRATEGY (requiredPassName).
func (pass *Pass) runRequired() ([]*Evaluation, error) {
	pr := pass.run
	dbg := readPassDebug() // its names checked by planPrepared
	req := pass.Strategy.Requires
	evs := make([]*Evaluation, len(req))
	var bar *Evaluation
	order, moved := pass.requiredOrder()
	// Moved strategies change the order of the evaluations, and the best and lowest outcomes
	// so far keep the first of equals: each strategy's are collected and noted again below in
	// the order of Requires.
	var noted [][]*Evaluation
	best0, lowest0 := pr.best, pr.lowest
	if moved {
		noted = make([][]*Evaluation, len(req))
		defer func() { pr.noted = nil }()
	}
	for _, i := range order {
		s := req[i]
		if moved {
			pr.noted = &noted[i]
		}
		t0, sims := time.Now(), pr.sims
		pr.strategy = s.Name
		sub := &Pass{Strategy: s, Problem: pr.Problem, run: pr, scale: pass.scale}
		if pass.scale && s.budgetFree {
			sub.bar = bar
		}
		ev, err := s.Run(sub)
		if err != nil {
			return nil, err
		}
		dbg.report(requiredPassName(pass.Strategy, s), t0, pr.sims-sims, func(w io.Writer) { dumpEvaluation(w, ev, 0, pr.sims) })
		evs[i] = ev
		if ev != nil && ev.Fits && !ev.unjudged && better(ev, bar) {
			bar = ev
		}
	}
	if moved {
		pr.noted = nil
		pr.best, pr.lowest = best0, lowest0
		for _, l := range noted {
			for _, ev := range l {
				if better(ev, pr.best) {
					pr.best = ev
				}
				if pr.lowest == nil || ev.Excess < pr.lowest.Excess {
					pr.lowest = ev
				}
			}
		}
	}
	var out []*Evaluation
	for i, s := range req {
		if pass.only != nil && !pass.only[s.Name] {
			continue
		}
		out = append(out, evs[i])
		pr.strategy = s.Name
	}
	return out, nil
}

// requiredOrder returns the indices in pass.Strategy.Requires of the strategies runRequired
// runs (those in pass.only, when set), in the order it runs them, and whether that differs
// from Requires' order: on a graph past auto's effort bound (pass.scale) the budget-free
// strategies run last, so that they can be held to the best plan of the others (Pass.bar).
// The outcomes are returned, and so compared, in Requires' order all the same.
func (pass *Pass) requiredOrder() ([]int, bool) {
	var first, last []int
	for i, s := range pass.Strategy.Requires {
		if pass.only != nil && !pass.only[s.Name] {
			continue
		}
		if pass.scale && s.budgetFree {
			last = append(last, i)
		} else {
			first = append(first, i)
		}
	}
	order := append(first, last...)
	for k, i := range order {
		if k > 0 && i < order[k-1] {
			return order, true
		}
	}
	return order, false
}

// requiredPassName names the run of required strategy r within s for timing and
// TFSWAP_DEBUG_PASS: "auto.required:lms".
func requiredPassName(s, r *Strategy) string {
	return s.Name + ".required:" + r.Name
}

// strategies is the registry, in the order --strategy and --list-strategies give them: the
// default ("auto") first.
var strategies = []*Strategy{autoStrategy, lmsStrategy, lmsFixedStrategy, vdnnAllStrategy, vdnnConvStrategy, vdnnDynStrategy, autoSwapStrategy, windowStrategy}

// Strategies returns the planning strategies in a fixed order, the default ("auto") first.
// The values are shared: callers must not change them.
func Strategies() []*Strategy {
	return append([]*Strategy(nil), strategies...)
}

// StrategyNames returns the names of the strategies, in Strategies' order.
func StrategyNames() []string {
	var out []string
	for _, s := range strategies {
		out = append(out, s.Name)
	}
	return out
}

// LookupStrategy returns the strategy called name ("" means "auto"). An unknown name is an
// error that lists the strategies.
func LookupStrategy(name string) (*Strategy, error) {
	if name == "" {
		name = "auto"
	}
	for _, s := range strategies {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown strategy %q (strategies: %s)", name, strings.Join(StrategyNames(), ", "))
}
