package rewrite

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// Planner is one swap-planning strategy. Plan receives a Problem (the graph, the device, the
// budgets and the unswapped step's simulation) and returns its best plan, evaluated by the
// simulator. A strategy that finds nothing that fits returns its plan of least memory; the
// driver reports that no plan fits.
type Planner interface {
	// Name is the strategy's name for --strategy.
	Name() string
	// Doc says what the strategy does and where it comes from.
	Doc() string
	// Plan plans for pr's budgets.
	Plan(pr *Problem) (*Evaluation, error)
}

// Strategies returns the planners in a fixed order, the default ("auto") first.
func Strategies() []Planner {
	return []Planner{autoPlanner{}, lmsPlanner{}, vdnnPlanner{policy: vdnnAll}, vdnnPlanner{policy: vdnnConv}, vdnnPlanner{policy: vdnnDyn}, autoSwapPlanner{}, windowPlanner{}}
}

// StrategyNames returns the names of the planners, in Strategies' order.
func StrategyNames() []string {
	var out []string
	for _, p := range Strategies() {
		out = append(out, p.Name())
	}
	return out
}

// LookupStrategy returns the planner called name ("" means "auto").
func LookupStrategy(name string) (Planner, error) {
	if name == "" {
		name = "auto"
	}
	for _, p := range Strategies() {
		if p.Name() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("unknown strategy %q (strategies: %s)", name, strings.Join(StrategyNames(), ", "))
}

// Planned is the outcome of budget-driven planning.
type Planned struct {
	// Result is the rewritten model and its swaps, as Rewrite returns them.
	*Result
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
	// Explanation is the reasoning per tensor (PlanOptions.Explain), in producer order.
	Explanation []TensorExplanation
}

// RewriteWithPlanner validates model, plans its swaps for the budget with the strategy in
// po, applies the plan and checks the rewrite's invariants (Verify). opts carries the
// analysis options (exclusions, minimum tensor size, compute and host devices, gate); its
// LMS distances are used by the "lms" strategy only as a starting point. When no plan keeps
// every compute device within its budget it returns a *NoFitError. The same input and
// options give the same plan and byte-identical output.
func RewriteWithPlanner(model *graphdef.Model, opts Options, po PlanOptions) (*Planned, error) {
	opts, g, err := prepare(model, opts)
	if err != nil {
		return nil, err
	}
	planner, err := LookupStrategy(po.Strategy)
	if err != nil {
		return nil, err
	}
	a := Analyze(g, opts)
	pr, err := newProblem(model, a, po)
	if err != nil {
		return nil, err
	}
	if err := pr.checkSharedLinks(); err != nil {
		return nil, err
	}
	pr.strategy = planner.Name()
	ev, err := planner.Plan(pr)
	if err != nil {
		return nil, err
	}
	if ev == nil || !ev.Fits {
		return nil, pr.noFit(planner.Name(), ev)
	}
	res, err := Apply(model, a, ev.Plan)
	if err != nil {
		return nil, err
	}
	_, unsized := a.Candidates()
	res.Skipped = unsized
	if err := Verify(g, res, opts.Gate); err != nil {
		return nil, fmt.Errorf("internal error: the planned rewrite breaks an invariant: %v", err)
	}
	out := &Planned{Result: res, Strategy: planner.Name(), Eval: ev, Base: pr.Base, Profile: pr.Profile, Budget: pr.Opts.Budget, Simulations: pr.sims}
	if po.Explain {
		out.Explanation = pr.explain(ev)
	}
	return out, nil
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
func (pr *Problem) fitted(rounds int, sel func(target []int64) *Plan) (*Evaluation, error) {
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
func (pr *Problem) screened(n, keep int, sel func(i int, target []int64) *Plan) (*Evaluation, int, error) {
	type scored struct {
		i             int
		excess, stall int64
	}
	target := pr.targets()
	var ss []scored
	for i := 0; i < n; i++ {
		r := pr.fast.predict(sel(i, target))
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
		ev, err := pr.fitted(3, func(target []int64) *Plan { return sel(i, target) })
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
