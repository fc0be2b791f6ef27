package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/triggers"
)

// NoFitError says that no plan keeps every compute device within its budget: the smallest
// peak any plan reached, what is live at that moment, and what would have to change.
type NoFitError struct {
	// Strategy is the planner asked for.
	Strategy string
	// Device is the device that does not fit, Budget its budget, Peak the smallest peak any
	// evaluated plan reached there (the lowest-memory plan tfswap can make included), at
	// PeakTime (ns into the step; the time of GrapplerPeak when only that is over), and
	// Unswapped the unswapped step's peak.
	Device                  string
	Budget, Peak, Unswapped int64
	// GrapplerPeak and GrapplerPeakUS are that plan's peaks by Grappler's accounting, from
	// the nanosecond and the microsecond timestamps of its trace, when it was judged by them
	// (PlanOptions.FitAccounting): a plan whose Peak fits but whose Grappler figures do not
	// fails only by the VirtualCluster's rules.
	GrapplerPeak, GrapplerPeakUS int64
	// Accountings are those the plan had to fit by (ParseFitAccounting).
	Accountings []string
	// Lowest is, for each of Accountings, the smallest excess over the budget by its figure
	// among the plans evaluated that were judged by it: how far that accounting alone is
	// from fitting, which may be another plan than the one Peak is of. Grappler's figures
	// are computed only for plans that fit tfswap's accounting when that is required too.
	Lowest                    []AccountingExcess
	PeakTime                  int64
	Weights, Slots, Constants int64
	Workspace, Activations    int64
	Copies                    int64
	// Accumulators are the bytes while loops' stack and TensorList accumulators hold then
	// on the device (every iteration's element; cost's accumulators): those the planned
	// strategies could not place on the host (passAccumulators), or whose placement did no
	// better.
	Accumulators int64
	// Largest are the largest activations live at that moment.
	Largest []cost.LiveTensor
	// Advice says what would have to change.
	Advice []string
	// Fetch are the nodes whose fan-in was simulated as the step (cost.Options.Fetch); empty
	// means every node of the graph. Simulated counts the nodes simulated.
	Fetch     []string
	Simulated int
	// Orders are the ordering edges the reorder and tuple-order passes added to the graph of
	// that plan; TupleOrders are those of the tuple-order pass among them.
	Orders      []rewrite.OrderEdge
	TupleOrders []rewrite.OrderEdge
	// Dropped says which optional candidates planning dropped on an internal error
	// (Planned.Dropped).
	Dropped []string
}

// AccountingExcess is how far one accounting is from fitting: the smallest excess over the
// budget by its figure among Plans plans judged by it (negative: one of them fits by it).
// With no plan judged by it, Plans is 0 and Excess means nothing.
type AccountingExcess struct {
	// Accounting is "tfswap", "grappler-ns" or "grappler-us".
	Accounting string
	// Excess is the least excess over the budget by its figure, in bytes.
	Excess int64
	// Plans is how many plans were judged by it.
	Plans int
}

// lowestLine says how far each accounting is from fitting (NoFitError.Lowest), or nothing
// when tfswap's alone is required (the first line says it then).
func (e *NoFitError) lowestLine() string {
	if len(e.Lowest) < 2 {
		return ""
	}
	var parts []string
	for _, l := range e.Lowest {
		switch {
		case l.Plans == 0:
			parts = append(parts, fmt.Sprintf("%s: no plan judged by it", l.Accounting))
		case l.Excess > 0:
			parts = append(parts, fmt.Sprintf("%s: %s over (%s)", l.Accounting, units.FormatBytes(l.Excess), plans(l.Plans)))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s under (%s)", l.Accounting, units.FormatBytes(-l.Excess), plans(l.Plans)))
		}
	}
	return fmt.Sprintf("  lowest excess over the budget by each accounting among the plans judged by it (Grappler's figures are computed only for plans that fit tfswap's accounting, when both are required): %s\n", strings.Join(parts, "; "))
}

// plans is "n plans", or "1 plan".
func plans(n int) string {
	if n == 1 {
		return "1 plan"
	}
	return fmt.Sprintf("%d plans", n)
}

// grapplerOver says whether only Grappler's figures keep the plan from fitting: tfswap's
// peak is within the budget (or not required) and a required Grappler figure is not.
func (e *NoFitError) grapplerOver() bool {
	return (e.Peak <= e.Budget || !e.requires("tfswap")) &&
		(e.requires("grappler-ns") && e.GrapplerPeak > e.Budget || e.requires("grappler-us") && e.GrapplerPeakUS > e.Budget)
}

// microsecondOnly says whether the microsecond figure alone is over the budget.
func (e *NoFitError) microsecondOnly() bool {
	return e.grapplerOver() && !(e.requires("grappler-ns") && e.GrapplerPeak > e.Budget)
}

func (e *NoFitError) requires(acc string) bool {
	if len(e.Accountings) == 0 {
		return acc == "tfswap"
	}
	for _, a := range e.Accountings {
		if a == acc {
			return true
		}
	}
	return false
}

// Error says which device does not fit by how much, what is live at the lowest peak, and
// what would have to change, on several lines.
func (e *NoFitError) Error() string {
	b := units.FormatBytes
	var w strings.Builder
	if e.grapplerOver() {
		fmt.Fprintf(&w, "no plan fits %s within %s (strategy %s) by the accountings %s: the best plan's peak is %s by tfswap's model of the runtime but %s by Grappler's VirtualCluster (%s from its trace's microseconds, as DeterminePeakMemoryUsage reads it), at %s into the step (unswapped: %s)\n",
			e.Device, b(e.Budget), e.Strategy, strings.Join(e.Accountings, ","), b(e.Peak), b(e.GrapplerPeak), b(e.GrapplerPeakUS), cost.FormatDuration(e.PeakTime), b(e.Unswapped))
	} else {
		fmt.Fprintf(&w, "no plan fits %s within %s (strategy %s): the smallest peak any plan reached is %s at %s into the step (unswapped: %s)\n",
			e.Device, b(e.Budget), e.Strategy, b(e.Peak), cost.FormatDuration(e.PeakTime), b(e.Unswapped))
	}
	w.WriteString(e.lowestLine())
	tuple := map[rewrite.OrderEdge]bool{}
	var ts []string
	for _, o := range e.TupleOrders {
		tuple[o] = true
		ts = append(ts, o.Node+" after "+o.After)
	}
	var es []string
	for _, o := range e.Orders {
		if !tuple[o] {
			es = append(es, o.Node+" after "+o.After)
		}
	}
	if len(es) > 0 {
		fmt.Fprintf(&w, "  on the graph with %d ordering edges (control edges running a waiting reader before the op at a lowest peak): %s\n", len(es), strings.Join(es, ", "))
	}
	if len(ts) > 0 {
		fmt.Fprintf(&w, "  on the graph with %d tuple ordering edges (the other members of a tf.gradients tuple before its largest): %s\n", len(ts), strings.Join(ts, ", "))
	}
	if len(e.Fetch) == 0 {
		fmt.Fprintf(&w, "  simulated step: every node of the graph (%d nodes): no fetch was given, so initialisers and reads outside the training step count as part of it\n", e.Simulated)
	}
	fmt.Fprintf(&w, "  live at that moment: weights %s, optimizer slots %s, constants %s, kernel workspace %s, activations %s, swapped-in copies %s\n",
		b(e.Weights), b(e.Slots), b(e.Constants), b(e.Workspace), b(e.Activations), b(e.Copies))
	if e.Accumulators > 0 {
		fmt.Fprintf(&w, "  and while loops' accumulators %s (every iteration's pushed tensors, kept for the backward loop)\n", b(e.Accumulators))
	}
	if len(e.Largest) > 0 {
		w.WriteString("  largest activations live then:\n")
		for _, l := range e.Largest {
			fmt.Fprintf(&w, "    %-60s %10s  %s\n", l.Name, b(l.Bytes), l.Op)
		}
	}
	for _, d := range e.Dropped {
		fmt.Fprintf(&w, "  planning: %s (an internal error of tfswap, please report it; the figures are of the plans found without that candidate)\n", d)
	}
	w.WriteString("  what would have to change:\n")
	for _, a := range e.Advice {
		fmt.Fprintf(&w, "    - %s\n", a)
	}
	return strings.TrimRight(w.String(), "\n")
}

// lowestMemoryPlan plans the least memory tfswap can reach: every buffer swapped across every
// gap between its reads, each copy brought back by the op just before its reader.
func (pr *planRun) lowestMemoryPlan() *rewrite.Plan {
	var cs []*choice
	for _, b := range pr.buffers {
		var ks []int
		for _, k := range b.splitsFromProduction(0) {
			if _, ok := redirects(b.tree, b.accesses[k].start, 1<<62); ok {
				ks = append(ks, k)
			}
		}
		if len(ks) > 0 {
			cs = append(cs, &choice{b: b, splits: ks, why: "lowest-memory plan: every gap of every tensor"})
		}
	}
	plan, _ := pr.buildPlan(cs, func(pr *Problem, groups []*pendingGroup) error {
		for _, g := range groups {
			if t, err := triggers.ByDistance(g.t.Node, rewrite.SwapInReaders(g.uses), 1, pr.eligible); err == nil {
				g.trigger = t
			}
		}
		return nil
	})
	return plan
}

// noFit builds the NoFitError after planner strategy found nothing that fits.
func (pr *planRun) noFit(strategy string, ev *Evaluation) error {
	// The least memory tfswap can reach at all.
	saved := pr.strategy
	pr.strategy = "lowest-memory"
	lp, err := pr.Evaluate(pr.lowestMemoryPlan())
	pr.strategy = saved
	if err != nil {
		lp = nil
	}
	low := pr.lowest
	if strategy != "auto" && ev != nil {
		// Report what this strategy reached.
		low = ev
	}
	// The device furthest over its budget in the lowest plan.
	var dp DevicePeak
	worst := int64(-1 << 62)
	for _, d := range low.Devices {
		if x := d.Over(); x > worst {
			worst, dp = x, d
		}
	}
	e := &NoFitError{Strategy: strategy, Device: dp.Name, Budget: dp.Budget, Peak: dp.Peak, GrapplerPeak: dp.GrapplerPeak,
		GrapplerPeakUS: dp.GrapplerPeakUS, Accountings: pr.fit.names(), PeakTime: dp.PeakTime,
		Fetch: pr.simOpts.Fetch, Simulated: pr.Base.Result.Simulated}
	for i, acc := range []string{"tfswap", "grappler-ns", "grappler-us"} {
		if e.requires(acc) {
			e.Lowest = append(e.Lowest, AccountingExcess{Accounting: acc, Excess: pr.lowBy[i].excess, Plans: pr.lowBy[i].plans})
		}
	}
	base := pr.Base
	if pr.original != nil {
		base = pr.original // the graph before recomputation
	}
	for _, d := range base.Devices {
		if d.Name == dp.Name {
			e.Unswapped = d.Peak
		}
	}
	// Simulate the lowest plan again with everything live at its peaks listed.
	g, err := pr.graphFor(low.Plan)
	if err == nil {
		opts := pr.simOpts
		opts.TopLive = 1 << 30
		grappler := e.grapplerOver()
		if grappler {
			// Grappler's accounting is the one over budget: list what it counts at its peak.
			opts.Conventions = cost.GrapplerConventions()
		}
		if res, err := cost.Simulate(g, pr.Profile, opts); err == nil {
			if d := res.Device(dp.simName); d != nil {
				live := d.Live
				if grappler {
					e.PeakTime = d.PeakTime
					if e.microsecondOnly() {
						e.PeakTime, live = d.MicrosecondPeakTime, d.MicrosecondLive
					}
				}
				slots := pr.optimizerSlots()
				var acts []cost.LiveTensor
				for _, l := range live {
					switch l.Kind {
					case "variable":
						if slots[l.Name] {
							e.Slots += l.Bytes
						} else {
							e.Weights += l.Bytes
						}
					case "constant":
						e.Constants += l.Bytes
					case "workspace":
						e.Workspace += l.Bytes
					case "copy":
						e.Copies += l.Bytes
					case "accumulator":
						e.Accumulators += l.Bytes
					default:
						e.Activations += l.Bytes
						acts = append(acts, l)
					}
				}
				sort.SliceStable(acts, func(i, j int) bool { return acts[i].Bytes > acts[j].Bytes })
				if len(acts) > 8 {
					acts = acts[:8]
				}
				e.Largest = acts
			}
		}
	}
	b := units.FormatBytes
	fixed := e.Weights + e.Slots + e.Constants
	if strategy != "auto" && pr.best != nil && pr.best.Fits {
		e.Advice = append(e.Advice, fmt.Sprintf("another strategy: a plan that fits exists (found while planning, by %s: peak %s); --strategy auto looks for the best of them, or", pr.best.Strategy, b(maxPeak(pr.best))))
	} else if strategy != "auto" && lp != nil && lp.Fits {
		e.Advice = append(e.Advice, fmt.Sprintf("another strategy: swapping every gap of every tensor fits (peak %s); try --strategy auto, or", b(maxPeak(lp))))
	}
	if e.microsecondOnly() {
		e.Advice = append(e.Advice, "--fit-accounting tfswap,grappler-ns, to accept plans that fit by tfswap's model of the runtime and the VirtualCluster's trace timed to the nanosecond (TensorFlow's own DeterminePeakMemoryUsage reads that trace in microseconds and counts tensors freed and allocated within the same microsecond together), or")
	} else if e.grapplerOver() {
		e.Advice = append(e.Advice, "--fit-accounting tfswap, to accept plans that fit by tfswap's model of the runtime alone (the VirtualCluster would judge them over budget: it counts every ReadVariableOp output and Identity copy, never forwards buffers, and DeterminePeakMemoryUsage counts tensors of the same microsecond together), or")
	}
	// The memory a GPU like this one needs for this peak after the default reserve
	// (DefaultReserve: TensorFlow's, which depends on the memory only below 2 GiB).
	peak := e.Peak
	if e.requires("grappler-ns") {
		peak = max(peak, e.GrapplerPeak)
	}
	if e.requires("grappler-us") {
		peak = max(peak, e.GrapplerPeakUS)
	}
	need := gpuMemoryFor(pr.Profile, peak)
	e.Advice = append(e.Advice, fmt.Sprintf("a budget of at least %s on %s (a GPU with about %s of memory), or", b(peak), e.Device, b(need)))
	if fixed >= e.Budget {
		e.Advice = append(e.Advice, fmt.Sprintf("the weights and optimizer slots alone (%s) exceed the budget; tfswap does not swap variables, so the model needs a larger GPU or model parallelism", b(fixed)))
	} else if peak > fixed {
		f := float64(e.Budget-fixed) / float64(peak-fixed)
		e.Advice = append(e.Advice, fmt.Sprintf("less activation memory: activations and workspace scale with the batch, so a batch of about %.0f%% of this one would fit (the weights and optimizer slots, %s, do not shrink)", 100*f, b(fixed)))
	}
	if e.Accumulators > 0 {
		e.Advice = append(e.Advice, fmt.Sprintf("or the while loops' accumulators (%s at that moment) on the host: planned strategies place a v1 loop's stacks and a lowered v2 loop's TensorLists there where that does better, but not a preserved one's, one in a conditional branch or one read by other ops; a functional While's TensorLists move only where TensorFlow lowers the loop, through the Grappler bridge", b(e.Accumulators)))
	}
	if pr.Analysis.Opts.MinTensorBytes > 0 || len(pr.Analysis.Opts.ExcludeOps) > 0 || len(pr.Analysis.Opts.ExcludeScopes) > 0 {
		e.Advice = append(e.Advice, "or fewer restrictions on what may be swapped (--min-bytes, --exclude-op, --exclude-scope) if tensors live at the peak were excluded")
	}
	return e
}

// optimizerSlots returns the names of the variables that are optimizer slots: resources an
// optimizer's apply op takes after the variable it updates (momentum accumulators, Adam's m
// and v).
func (pr *Problem) optimizerSlots() map[string]bool {
	out := map[string]bool{}
	for _, n := range pr.Analysis.Graph.Nodes {
		if !strings.Contains(n.Op, "Apply") {
			continue
		}
		for i, in := range n.Inputs {
			if i == 0 {
				continue
			}
			v := in.Node
			for (v.Op == "Identity" || v.Op == "RefIdentity") && len(v.Inputs) > 0 {
				v = v.Inputs[0].Node
			}
			if v.Op == "VarHandleOp" || v.Op == "VariableV2" || v.Op == "Variable" {
				out[v.Name] = true
			}
		}
	}
	return out
}

// maxPeak returns the largest compute-device peak of an evaluation.
func maxPeak(ev *Evaluation) int64 {
	var m int64
	for _, d := range ev.Devices {
		m = max(m, d.Peak)
	}
	return m
}

// gpuMemoryFor returns the memory a GPU of p's compute capability needs for TensorFlow's
// allocator to hand out limit bytes: limit plus TensorFlow's reserve (cost.MinSystemMemory)
// for a GPU of that size.
func gpuMemoryFor(p *cost.Profile, limit int64) int64 {
	maj, ok := p.CCMajor()
	if !ok {
		maj = 9 // as cost.TFMemoryLimit
	}
	return limit + cost.MinSystemMemory(limit+cost.MinSystemMemory(limit, maj), maj)
}
