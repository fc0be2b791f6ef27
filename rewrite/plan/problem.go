package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/triggers"
)

// DefaultDevice is the device profile planning assumes when none is given: the 16 GB V100 on
// PCIe 3.0, the GPU of the example and the class of GPU most of the swapping papers
// measured on.
const DefaultDevice = "v100-16gb"

// DefaultReserve returns the device memory a plan leaves unused by default: what TensorFlow
// 2.18's GPU device keeps out of its allocator's reach on the profile's GPU
// (cost.MinSystemMemory: 500 MiB up to compute capability 6.x, 1050 MiB on 7.x, 1536 MiB on
// 8.x, 1800 MiB from 9.0; tensorflow/core/common_runtime/gpu/gpu_device.cc, MinSystemMemory
// and SingleVirtualDeviceMemoryLimit).
func DefaultReserve(p *cost.Profile) int64 { return p.MemoryBytes - cost.TFMemoryLimit(p) }

// DefaultBudget returns the per-device budget planning aims at by default: the memory
// TensorFlow 2.18's allocator may hand out on the profile's GPU, cost.TFMemoryLimit (14.97 GiB
// on the 16 GiB V100, compute capability 7.0).
func DefaultBudget(p *cost.Profile) int64 { return cost.TFMemoryLimit(p) }

// PlanOptions control budget-driven planning (see PlanBudget).
type PlanOptions struct {
	// Strategy names the planner (see Strategies); empty means "auto".
	Strategy string
	// Profile is the GPU planned for; nil means DefaultDevice.
	Profile *cost.Profile
	// Budget is the most memory each compute device may use (bytes, as the simulator counts
	// peaks: activations, resident variables, workspace); 0 means DefaultBudget(Profile).
	Budget int64
	// DeviceBudgets override Budget for single compute devices, keyed by a device
	// specification that matches the device ("/device:GPU:1" matches
	// "/job:worker/replica:0/task:0/device:GPU:1"; graphdef.Device.Matches). Every key must
	// match a compute device of the step, and no device may match two keys.
	DeviceBudgets map[string]int64
	// Sim are the simulation options (batch scale, measured times, shared host links, TF32);
	// Timeline and TopLive are set by the planner.
	Sim cost.Options
	// Explain records the reasoning per tensor (Planned.Explain).
	Explain bool
	// BOIterations is how many weight vectors the Bayesian optimisation of AutoSwap's priority
	// score weights evaluates; 0 means the default (DefaultBOIterations), negative turns it
	// off (the four plain scores are still tried).
	BOIterations int
	// Window fixes the window strategy's schedule-window in bytes; 0 tunes it.
	Window int64
	// Seed seeds the Bayesian optimisation; 0 means a fixed default, so that planning is
	// deterministic.
	Seed uint64
	// FixedLMS makes the "lms" strategy keep the LMS distances of Options (swapout threshold,
	// swap-in ahead, group-by) instead of tuning them.
	FixedLMS bool
	// FitAccounting names the accountings by which a plan's peak must fit the budget
	// (ParseFitAccounting): "all" (the default: tfswap's model of the runtime, and Grappler's
	// VirtualCluster's GraphMemory peak both from its trace's nanoseconds and, as TensorFlow's
	// own Cluster.DeterminePeakMemoryUsage reads it, its microseconds), "tfswap",
	// "grappler-ns", "grappler-us", a comma-separated list of those, or "both" (tfswap's and
	// the nanosecond figure, with the 2% margin for recomputations of earlier versions).
	FitAccounting string
	// Recompute says where recomputation may replace swaps (RecomputeModes; "" means
	// "auto": the auto strategy weighs it against swapping alone).
	Recompute string
	// Offload says which variables live on the host (OffloadModes; "" means none).
	Offload rewrite.OffloadMode
	// OffloadVariables names variables whose groups live on the host, whatever the budget
	// (with Offload none): names the graph does not hold are ignored.
	OffloadVariables []string
	// SearchCandidates is auto's effort rule: on a graph with more swap candidates than
	// this, auto runs only its searches that grow about linearly with the graph
	// (DefaultSearchCandidates says which and why; Planned.Effort reports it). 0 means
	// DefaultSearchCandidates; negative turns the rule off.
	SearchCandidates int

	// memo holds the simulations the problems of one planning share (simMemo): the planning's
	// first pass (passAnalyze) sets it, and the problems the planning makes copy it with the
	// options. Nil shares none.
	memo *simMemo
}

// FitAccountings are the names PlanOptions.FitAccounting accepts, alone or (the first three)
// in a comma-separated list.
var FitAccountings = []string{"tfswap", "grappler-ns", "grappler-us", "all", "both"}

// fitSet is the set of accountings a plan's peak must fit the budget by.
type fitSet struct {
	// tfswap: tfswap's model of the runtime (cost.Conventions{}); ns and us: GraphMemory's
	// peak of Grappler's trace from its nanosecond and its microsecond timestamps
	// (cost.GrapplerConventions: DeviceResult.PeakBytes and MicrosecondPeakBytes).
	tfswap, ns, us bool
	// legacy keeps recomputeGrapplerMargin on the nanosecond figure ("both").
	legacy bool
}

func (f fitSet) grappler() bool { return f.ns || f.us }

// ParseFitAccounting parses a PlanOptions.FitAccounting value ("" is "all") and returns the
// accountings it names, in the order tfswap, grappler-ns, grappler-us.
func ParseFitAccounting(s string) ([]string, error) {
	f, err := parseFitAccounting(s)
	if err != nil {
		return nil, err
	}
	return f.names(), nil
}

func (f fitSet) names() []string {
	var out []string
	for _, x := range []struct {
		on   bool
		name string
	}{{f.tfswap, "tfswap"}, {f.ns, "grappler-ns"}, {f.us, "grappler-us"}} {
		if x.on {
			out = append(out, x.name)
		}
	}
	return out
}

func parseFitAccounting(s string) (fitSet, error) {
	switch strings.TrimSpace(s) {
	case "", "all":
		return fitSet{tfswap: true, ns: true, us: true}, nil
	case "both":
		return fitSet{tfswap: true, ns: true, legacy: true}, nil
	}
	var f fitSet
	for _, x := range strings.Split(s, ",") {
		switch strings.TrimSpace(x) {
		case "tfswap":
			f.tfswap = true
		case "grappler-ns":
			f.ns = true
		case "grappler-us":
			f.us = true
		default:
			return f, fmt.Errorf("fit accounting %q: want one of %s, or a comma-separated list of tfswap, grappler-ns and grappler-us", s, strings.Join(FitAccountings, ", "))
		}
	}
	return f, nil
}

// Evaluation is a plan's simulated outcome.
type Evaluation struct {
	Plan *rewrite.Plan
	// Result is the simulation of the planned graph.
	Result *cost.Result
	// StepTime is the simulated step time (ns); Overhead the fraction it exceeds the unswapped
	// graph's step time by.
	StepTime int64
	Overhead float64
	// Devices are the compute devices' peaks and budgets, by name.
	Devices []DevicePeak
	// Fits says whether every compute device's peak is within its budget; Excess is the
	// largest peak minus budget (negative or zero when it fits).
	Fits   bool
	Excess int64
	// Transferred is the number of bytes moved between host and devices per step.
	Transferred int64
	// Strategy names the planner that made the plan.
	Strategy string
	// unjudged is set when Grappler's accountings, which the plan was required to fit by
	// too, were left out because a plan that fits was already faster (evaluateBeaten): Fits
	// then says only that tfswap's accounting fits.
	unjudged bool
}

// DevicePeak is one compute device's simulated peak and its budget.
type DevicePeak struct {
	// Name is the device's name in the graph (a compute device that is not a GPU keeps its
	// own name, though the simulator runs it as a GPU).
	Name         string
	Peak, Budget int64
	// GrapplerPeak and GrapplerPeakUS are the device's peaks by Grappler's accounting
	// (cost.GrapplerConventions, which reproduce the VirtualCluster's trace): GraphMemory's
	// rule on the trace's nanosecond timestamps, and on its microsecond ones (what
	// Cluster.DeterminePeakMemoryUsage returns; never less). They are set when the plan was
	// judged by them (only plans that fit by the other accountings required are), and for the
	// plan planning returns; 0 otherwise.
	GrapplerPeak, GrapplerPeakUS int64
	// GrapplerMargin is added to GrapplerPeak when judging a fit with the "both" accounting
	// on a graph with recomputations (recomputeGrapplerMargin).
	GrapplerMargin int64
	// fit are the accountings the device's peak must fit by (fitSet{} means tfswap's).
	fit            fitSet
	PeakTime       int64
	ResidentBytes  int64
	SwapInStall    int64
	MemoryLimit    int64
	ComputeDevice  bool
	SimulatedIndex int
	// simName is the device's name in the simulation (see Problem.deviceName).
	simName string
}

// Over returns by how much the device's peak exceeds its budget (negative when it fits), by
// the strictest of the accountings it must fit by that it was judged with.
func (d DevicePeak) Over() int64 {
	worst := int64(-1 << 62)
	if d.fit.tfswap || d.fit == (fitSet{}) {
		worst = d.Peak
	}
	if d.fit.ns && d.GrapplerPeak > 0 {
		worst = max(worst, d.GrapplerPeak+d.GrapplerMargin)
	}
	if d.fit.us && d.GrapplerPeakUS > 0 {
		worst = max(worst, d.GrapplerPeakUS)
	}
	if worst == -1<<62 {
		worst = d.Peak // not judged by a Grappler figure yet
	}
	return worst - d.Budget
}

// Judged returns the accountings the device's peak was required to fit by and was judged
// with ("tfswap", "grappler-ns", "grappler-us").
func (d DevicePeak) Judged() []string {
	f := d.fit
	if f == (fitSet{}) {
		f.tfswap = true
	}
	f.ns = f.ns && d.GrapplerPeak > 0
	f.us = f.us && d.GrapplerPeakUS > 0
	return f.names()
}

// better reports whether a is a better outcome than b: a plan that fits beats one that does
// not; among plans that fit the shorter step wins, then fewer bytes moved, then the lower
// peak; among plans that do not fit the smaller excess wins.
func better(a, b *Evaluation) bool {
	if b == nil {
		return a != nil
	}
	if a == nil {
		return false
	}
	if a.Fits != b.Fits {
		return a.Fits
	}
	if !a.Fits {
		if a.Excess != b.Excess {
			return a.Excess < b.Excess
		}
		return a.StepTime < b.StepTime
	}
	if a.StepTime != b.StepTime {
		return a.StepTime < b.StepTime
	}
	if a.Transferred != b.Transferred {
		return a.Transferred < b.Transferred
	}
	return a.Excess < b.Excess
}

// Problem is one planning task: a graph, a device, budgets, and the unswapped graph's
// simulation. It is read-only once made, apart from memos: strategies read it, and a
// planning run (planRun) carries what a search changes.
//
// Its fields are of two kinds:
//   - the inputs, set by the constructors and not changed after: Model, Analysis, Opts,
//     Profile, Base, original, simOpts, shapes, timing, buffers, bufOf, fast, relabel,
//     realType, fit, grappler, latency, hostIdent, grapplerMargin, accumulators and the
//     constructors' simulation counts (release drops the large ones and the memos once the
//     plan is chosen);
//   - memos, filled on first use, whose answers depend on the inputs alone, not on what was
//     searched before or by which strategy: seqs, budgets, lms, elig, memos and floor.
//
// The search state (every plan evaluated, the best and lowest so far, the simulations run,
// the strategy running, the builder output kept, the explanations) is a planRun's, made by
// newRun for each planning of the problem. Two runs on one problem plan as two runs on two
// problems made alike would (TestProblemSharedByRuns), and a run leaves the problem's fields
// as they were, memos aside (TestProblemReadOnly).
type Problem struct {
	Model    *graphdef.Model
	Analysis *rewrite.Analysis
	Opts     PlanOptions
	Profile  *cost.Profile
	// Base is the simulation of the unswapped graph, with its timeline.
	Base *Evaluation

	simOpts   cost.Options
	shapes    *cost.Shapes
	timing    *timing // of the unswapped graph
	buffers   []*buffer
	bufOf     map[graphdef.Tensor]*buffer // by tensor (roots and their aliases)
	fast      *fastModel
	seqs      map[int]*triggers.Sequence
	relabel   bool             // simulate the compute device as a GPU (see newProblem)
	realType  string           // the compute device's own type when relabel is set
	budgets   map[string]int64 // budgetOf's answers, by simulated device name
	lms       *lmsCache
	elig      []int8
	memos     map[*timing]*triggers.Memo
	fit       fitSet // the accountings a plan must fit by
	grappler  bool   // Grappler's figures can be computed (the simulation uses tfswap's rules)
	latency   int64
	hostIdent int64
	// baseSims and baseGsims are the simulations the constructor ran for Base (of which by
	// Grappler's accounting): every run of the problem counts them first.
	baseSims, baseGsims int
	// original is the unswapped step of the graph before recomputation, when this problem
	// plans a graph with recomputations (its Base).
	original *Evaluation
	// grapplerMargin is the share of a device's budget (in thousandths) kept free by
	// Grappler's nanosecond accounting when judging fits ("both" on graphs with
	// recomputations: recomputeGrapplerMargin).
	grapplerMargin int64
	// accumulators are the while loops' accumulators every plan of this problem places on
	// the host (Plan.Accumulators; its Base too): the problem passAccumulators plans.
	accumulators []*graphdef.Node
	// floor is the lower bounds on a plan's peak and step (peakFloorOf), nil when none;
	// floorDone says it was worked out.
	floor     *peakFloor
	floorDone bool
}

// planRun is one planning of a Problem: the search state that strategies change as they
// run, on top of the problem they read. The passes of one planning share a run per problem
// planned (planState's, and the stages'); the strategies a strategy requires run on its run,
// so that their plans are evaluated once and credited to the strategy that made each.
type planRun struct {
	*Problem
	// Explain collects the reasoning per tensor when Opts.Explain is set.
	Explain *Explainer
	// cache holds every plan evaluated, by planKey.
	cache  map[string]*Evaluation
	best   *Evaluation // best evaluated so far (any strategy)
	lowest *Evaluation // lowest excess evaluated so far
	// lowBy is, per accounting (tfswap's, Grappler's nanosecond and microsecond figures),
	// the smallest excess over the budget among the plans evaluated that were judged by it.
	lowBy    [3]accountingLow
	sims     int
	gsims    int    // of which by Grappler's accounting
	strategy string // the planner running, for Evaluation.Strategy
	// keep asks graphFor to keep the builder's output for the last plan it builds (kept, for
	// keptPlan), so that a rewrite writing the very plan it predicted builds its graph once
	// (rewriteFixedLMS). Never set where compute devices are relabelled.
	keep     bool
	kept     *rewrite.Built
	keptPlan *rewrite.Plan
	// beaten, when above 0, is the step time of a plan that fits (evaluateBeaten): a plan
	// slower than it by tfswap's accounting is not judged by Grappler's.
	beaten int64
	// noted, when set, collects the outcomes note sees (runRequired replays them in the
	// order of the strategies required).
	noted *[]*Evaluation
}

// newRun starts a planning of pr by strategy: its cache holds the unswapped step, which is
// the best and lowest plan so far, and its simulation count starts at the constructor's.
func (pr *Problem) newRun(strategy string) *planRun {
	r := &planRun{Problem: pr, cache: map[string]*Evaluation{planKey(&rewrite.Plan{}): pr.Base}, sims: pr.baseSims, gsims: pr.baseGsims, strategy: strategy}
	if pr.Opts.Explain {
		r.Explain = newExplainer()
	}
	r.note(pr.Base)
	return r
}

// placed returns plan with the problem's accumulators on the host (Problem.accumulators)
// where it names none itself: the plan this problem simulates and writes.
func (pr *Problem) placed(plan *rewrite.Plan) *rewrite.Plan {
	if len(pr.accumulators) == 0 || len(plan.Accumulators) > 0 {
		return plan
	}
	p := *plan
	p.Accumulators = pr.accumulators
	return &p
}

// newProblem prepares a planning problem: simulates the unswapped graph and indexes its
// tensors.
func newProblem(model *graphdef.Model, a *rewrite.Analysis, po PlanOptions) (*Problem, error) {
	return newProblemFor(model, a, po, 0, nil, true, nil)
}

// newDerived prepares a problem planned in place of pr's, with pr's options: the graph of
// model and a (pr's, or one with recomputations), keeping grapplerMargin thousandths of each
// budget free by Grappler's accounting, and with its plans all placing accumulators (some of
// a.HostAccumulators, or none) on the host, its unswapped step too. Its original is pr's
// unswapped step, which the no-fit report refers to.
func (pr *Problem) newDerived(model *graphdef.Model, a *rewrite.Analysis, grapplerMargin int64, accumulators []*graphdef.Node) (*Problem, error) {
	return newProblemFor(model, a, pr.Opts, grapplerMargin, accumulators, true, pr.Base)
}

// newPredictionProblem is newProblem for a problem that only predicts the plans it is given
// (lms-fixed's rewrite) and never plans: the unswapped step is simulated for the peak and
// step time that predictions are compared with, without the timeline, the buffer indices and
// the fast model that only planners read (on a large graph they are a tenth of the live heap
// while the plan's graph is simulated).
func newPredictionProblem(model *graphdef.Model, a *rewrite.Analysis, po PlanOptions) (*Problem, error) {
	return newProblemFor(model, a, po, 0, nil, false, nil)
}

// newProblemFor makes the problems of newProblem, newDerived and newPredictionProblem: the
// unswapped step's timeline and the indices that planning needs are made only when planning
// is set, and original is the unswapped step of the graph a derived problem plans in place
// of (nil for the others).
func newProblemFor(model *graphdef.Model, a *rewrite.Analysis, po PlanOptions, grapplerMargin int64, accumulators []*graphdef.Node, planning bool, original *Evaluation) (*Problem, error) {
	if po.Profile == nil {
		p, err := cost.LookupProfile(DefaultDevice)
		if err != nil {
			return nil, err
		}
		po.Profile = p
	}
	if po.Budget == 0 {
		po.Budget = DefaultBudget(po.Profile)
	}
	if po.Budget < 0 {
		return nil, fmt.Errorf("budget must be positive, not %d", po.Budget)
	}
	fit, err := parseFitAccounting(po.FitAccounting)
	if err != nil {
		return nil, err
	}
	if !fit.legacy {
		// The simulation reproduces the VirtualCluster's trace exactly, recomputations
		// included, so only the legacy accounting keeps a margin.
		grapplerMargin = 0
	}
	pr := &Problem{Model: model, Analysis: a, Opts: po, Profile: po.Profile, grapplerMargin: grapplerMargin,
		accumulators: accumulators, original: original}
	// Grappler's figures exist for graphs simulated by tfswap's rules (not for what-if
	// simulations with other conventions, which are then judged by those alone).
	pr.grappler = po.Sim.Conventions == (cost.Conventions{})
	pr.fit = fit
	if !pr.grappler {
		pr.fit = fitSet{tfswap: true}
	}
	pr.simOpts = po.Sim
	pr.simOpts.Timeline = false
	pr.simOpts.TopLive = -1
	// The planned graphs' original nodes are set up once for all simulations of the
	// problems of one analysis (the tighter re-plans, the screened settings).
	if !a.Setup.Serves(po.Profile) {
		a.Setup = cost.NewSetupCache(a.Graph, po.Profile)
	}
	pr.simOpts.Setup = a.Setup
	if pr.simOpts.ComputeDevice == "" && a.ComputeSpec.Type != "" {
		// Nodes without a device run on the first compute device (Analysis.Device); the
		// others are named by the graph's nodes, and all share one type (CheckDevices).
		if d := a.ComputeSpec; d.Type != "" {
			pr.simOpts.ComputeDevice = rewrite.SplitComputeDevices(a.Opts.ComputeDevice)[0]
			if d.Type != "GPU" {
				// A compute device that is not a GPU (the two-device CPU emulation of the
				// runtime tests) is simulated as the GPU of the same index.
				pr.relabel = true
				pr.realType = d.Type
				d.Type = "GPU"
				pr.simOpts.ComputeDevice = d.String()
			}
		}
	}
	if pr.simOpts.BatchScale == 0 {
		pr.simOpts.BatchScale = 1
	}
	pr.latency = ceilNS(po.Profile.TransferLatency)
	pr.hostIdent = cost.MinOpTime
	shp, err := cost.NewShapes(a.Graph, pr.simOpts.BatchScale)
	if err != nil {
		return nil, err
	}
	pr.shapes = shp
	// The unswapped step is simulated by a run of its own, whose counts every run starts
	// from (newRun).
	r0 := &planRun{Problem: pr}
	g0, err := r0.graphFor(&rewrite.Plan{})
	if err != nil {
		return nil, err
	}
	base, tm, err := r0.simulate(&rewrite.Plan{}, g0, planning)
	if err != nil {
		return nil, err
	}
	pr.Base = base
	pr.timing = tm
	base.Overhead = 0
	pr.baseSims, pr.baseGsims = r0.sims, r0.gsims
	if planning {
		pr.indexBuffers()
		pr.fast = newFastModel(pr)
	}
	return pr, nil
}

// ceilNS converts seconds to whole nanoseconds, rounding up, saturated at cost.MaxDuration.
func ceilNS(seconds float64) int64 {
	ns := seconds * 1e9
	if !(ns < float64(cost.MaxDuration)) {
		return cost.MaxDuration
	}
	n := int64(ns)
	if float64(n) < ns-1e-6 {
		n++
	}
	return n
}

// deviceName returns the graph's name of the simulated device simName: the simulator runs a
// compute device that is not a GPU (the CPU:1 of the two-device CPU emulation) as the GPU of
// the same index, and messages, reports and budgets must name the device the graph has.
func (pr *Problem) deviceName(simName string) string {
	if !pr.relabel {
		return simName
	}
	d, err := graphdef.ParseDevice(simName)
	if err != nil || d.Type != "GPU" {
		return simName
	}
	d.Type = pr.realType
	if !pr.Analysis.ComputeSpec.IsZero() && !pr.Analysis.IsComputeDevice(d) {
		return simName
	}
	return d.String()
}

// budgetOf returns the budget of the simulated device simName: the DeviceBudgets entry whose
// key matches the device's name in the graph (keys in sorted order), or the default budget.
func (pr *Problem) budgetOf(simName string) int64 {
	if b, ok := pr.budgets[simName]; ok {
		return b
	}
	b := pr.Opts.Budget
	if k := pr.budgetKey(simName); k != "" {
		b = pr.Opts.DeviceBudgets[k]
	}
	if pr.budgets == nil {
		pr.budgets = map[string]int64{}
	}
	pr.budgets[simName] = b
	return b
}

// budgetKeys returns the DeviceBudgets keys that match the simulated device simName, sorted.
func (pr *Problem) budgetKeys(simName string) []string {
	if len(pr.Opts.DeviceBudgets) == 0 {
		return nil
	}
	dev, err := graphdef.ParseDevice(pr.deviceName(simName))
	if err != nil {
		return nil
	}
	var out []string
	for k := range pr.Opts.DeviceBudgets {
		if spec, err := graphdef.ParseDevice(k); err == nil && spec.Type != "" && dev.Matches(spec) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (pr *Problem) budgetKey(simName string) string {
	if ks := pr.budgetKeys(simName); len(ks) > 0 {
		return ks[0]
	}
	return ""
}

// checkDeviceBudgets fails when a DeviceBudgets key matches no compute device of the
// unswapped step, or a compute device matches two keys.
func (pr *Problem) checkDeviceBudgets() error {
	used := map[string]bool{}
	var names []string
	for _, d := range pr.Base.Result.Devices {
		if !d.GPU {
			continue
		}
		names = append(names, pr.deviceName(d.Name))
		ks := pr.budgetKeys(d.Name)
		if len(ks) > 1 {
			return fmt.Errorf("device budget: %s matches both %s and %s", pr.deviceName(d.Name), ks[0], ks[1])
		}
		for _, k := range ks {
			used[k] = true
		}
	}
	keys := make([]string, 0, len(pr.Opts.DeviceBudgets))
	for k := range pr.Opts.DeviceBudgets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !used[k] {
			return fmt.Errorf("device budget: no compute device of the graph matches %s (the step's compute devices: %s)", k, strings.Join(names, ", "))
		}
	}
	return nil
}

// Evaluate simulates plan and returns its outcome; results are cached by plan.
func (pr *planRun) Evaluate(plan *rewrite.Plan) (*Evaluation, error) {
	key := planKey(plan)
	if ev, ok := pr.cache[key]; ok {
		return ev, nil
	}
	ev, _, err := pr.evaluateNew(plan, key)
	return ev, err
}

// evaluateNew builds plan's graph, simulates it and caches the outcome under key (plan's
// planKey). It returns the outcome and the plan's graph, for callers that judge the same graph
// by another accounting.
func (pr *planRun) evaluateNew(plan *rewrite.Plan, key string) (*Evaluation, *graphdef.Graph, error) {
	ev, _, g, err := pr.simulateGraph(plan, nil, false)
	if err != nil {
		return nil, nil, err
	}
	pr.cache[key] = ev
	pr.note(ev)
	return ev, g, nil
}

// skipBeatenGrappler says whether evaluateBeaten leaves out Grappler's accountings for a
// plan a plan that fits is already faster than. Tests turn it off to compare.
var skipBeatenGrappler = true

// evaluateBeaten is Evaluate for a plan that is kept only if it is better than bar, a plan
// that fits, judged in full, and is compared with it under better (auto's budget-independent
// strategies on a graph past its effort bound, runRequired): when the plan fits by tfswap's
// accounting but its step is longer than bar's, Grappler's accountings, which could only
// make it not fit, cannot make it better than bar, so they are left out and the outcome is
// marked unjudged, neither cached nor noted (another search could read its Fits). Its
// figures by tfswap's accounting are those Evaluate returns. With bar nil (or not fitting),
// or no Grappler accounting required besides tfswap's, it is Evaluate.
func (pr *planRun) evaluateBeaten(plan *rewrite.Plan, bar *Evaluation) (*Evaluation, error) {
	if !skipBeatenGrappler || bar == nil || !bar.Fits || bar.unjudged || bar.StepTime <= 0 || !pr.fit.tfswap || !pr.fit.grappler() {
		return pr.Evaluate(plan)
	}
	key := planKey(plan)
	if ev, ok := pr.cache[key]; ok {
		return ev, nil
	}
	if ev := pr.floorBeaten(plan, bar); ev != nil {
		return ev, nil
	}
	pr.beaten = bar.StepTime
	ev, _, _, err := pr.simulateGraph(plan, nil, false)
	pr.beaten = 0
	if err != nil {
		return nil, err
	}
	if !ev.unjudged {
		pr.cache[key] = ev
		pr.note(ev)
	}
	return ev, nil
}

// skipFloorBeaten says whether evaluateBeaten leaves out the simulation of a plan that its
// lower bounds (peakFloor) show cannot beat the bar. Tests turn it off to compare.
var skipFloorBeaten = true

// floorBeaten returns the outcome of plan, held to bar, a plan that fits and was judged in
// full, when plan cannot be better than bar under better whatever its simulation would show
// (peakFloor): its peak by tfswap's accounting is over the budget, so it does not fit, or its
// step is longer than bar's. It is then not simulated: the outcome is marked unjudged,
// neither cached nor noted, as evaluateBeaten's, and marked as not fitting (the bar beats it
// either way); it names the plan and its strategy, and its figures are the bounds (the
// peak's, as its one device figure, or the step's), not simulated ones. It returns nil when
// the bounds do not rule the plan out.
func (pr *planRun) floorBeaten(plan *rewrite.Plan, bar *Evaluation) *Evaluation {
	if !skipFloorBeaten || !pr.fit.tfswap {
		return nil
	}
	f := pr.peakFloorOf()
	if f == nil {
		return nil
	}
	d := pr.Base.Result.Devices[f.dev]
	peak := f.bytes(plan)
	step := int64(0)
	if peak <= f.budget {
		if step = f.stepFloor(pr.Problem, plan); step <= bar.StepTime {
			return nil
		}
	}
	return &Evaluation{Plan: pr.placed(plan), Strategy: pr.strategy, unjudged: true, StepTime: step, Excess: peak - f.budget,
		Devices: []DevicePeak{{Name: pr.deviceName(d.Name), Peak: peak, Budget: f.budget, ComputeDevice: true, SimulatedIndex: f.dev, simName: d.Name, fit: pr.fit}}}
}

// evaluateTimed simulates plan with its timeline and returns the outcome and the timing of
// the original nodes in the planned graph.
func (pr *planRun) evaluateTimed(plan *rewrite.Plan) (*Evaluation, *timing, error) {
	g, err := pr.graphFor(plan)
	if err != nil {
		return nil, nil, err
	}
	ev, tm, err := pr.simulate(plan, g, true)
	if err != nil {
		return nil, nil, err
	}
	key := planKey(plan)
	if _, ok := pr.cache[key]; !ok {
		pr.cache[key] = ev
		pr.note(ev)
	}
	return ev, tm, nil
}

// note remembers the best and the lowest-peak outcomes seen.
func (pr *planRun) note(ev *Evaluation) {
	if pr.noted != nil {
		*pr.noted = append(*pr.noted, ev)
	}
	if better(ev, pr.best) {
		pr.best = ev
	}
	if pr.lowest == nil || ev.Excess < pr.lowest.Excess {
		pr.lowest = ev
	}
	pr.noteAccountings(ev)
}

// accountingLow is the smallest excess over the budget by one accounting among the plans
// evaluated that were judged by it, and how many those were.
type accountingLow struct {
	excess int64
	plans  int
}

// noteAccountings remembers, per accounting, the smallest excess of ev over the budget by
// its figures: the largest over the compute devices of that figure less the device's budget.
// Grappler's figures count only where they were computed (for plans that fit tfswap's
// accounting when that is required too); the margin of the "both" accounting is not added.
func (pr *planRun) noteAccountings(ev *Evaluation) {
	if len(ev.Devices) == 0 {
		return
	}
	var x [3]int64
	var judged [3]bool
	for i := range x {
		x[i] = -1 << 62
	}
	for _, d := range ev.Devices {
		for i, peak := range [3]int64{d.Peak, d.GrapplerPeak, d.GrapplerPeakUS} {
			if i == 0 || peak > 0 {
				judged[i] = true
				x[i] = max(x[i], peak-d.Budget)
			}
		}
	}
	for i := range x {
		if !judged[i] {
			continue
		}
		l := &pr.lowBy[i]
		if l.plans == 0 || x[i] < l.excess {
			l.excess = x[i]
		}
		l.plans++
	}
}

// simulate simulates plan, whose graph is g, and judges it by pr's budgets and accountings.
func (pr *planRun) simulate(plan *rewrite.Plan, g *graphdef.Graph, timeline bool) (*Evaluation, *timing, error) {
	ev, tm, _, err := pr.simulateGraph(plan, g, timeline)
	return ev, tm, err
}

// graphOf returns g, or plan's graph (graphFor) when g is nil.
func (pr *planRun) graphOf(plan *rewrite.Plan, g *graphdef.Graph) (*graphdef.Graph, error) {
	if g != nil {
		return g, nil
	}
	return pr.graphFor(plan)
}

// simulateGraph is simulate where g may be nil: plan's graph is then built only if the
// planning's memo (simMemo) does not hold the simulations needed. It returns the graph too,
// or nil when it was not built.
func (pr *planRun) simulateGraph(plan *rewrite.Plan, g *graphdef.Graph, timeline bool) (*Evaluation, *timing, *graphdef.Graph, error) {
	opts := pr.simOpts
	opts.Timeline = timeline
	if timeline {
		opts.TopLive = 0
	}
	res, mk, memo := pr.memoLookup(plan, opts, false)
	if res == nil {
		var err error
		if g, err = pr.graphOf(plan, g); err != nil {
			return nil, nil, nil, err
		}
		if res, err = cost.Simulate(g, pr.Profile, opts); err != nil {
			return nil, nil, nil, err
		}
		pr.sims++
		pr.Opts.memo.store(mk, memo, res)
	}
	ev := &Evaluation{Plan: pr.placed(plan), Result: res, StepTime: res.StepTime, Fits: true, Strategy: pr.strategy}
	if len(plan.Swaps) == 0 {
		ev.Strategy = "none"
		if len(pr.placed(plan).Accumulators) > 0 {
			ev.Strategy = "accumulators"
		}
	}
	ev.Excess = -1 << 62
	for i, d := range res.Devices {
		if !d.GPU {
			continue
		}
		if pr.Base != nil {
			// Swap nodes go to the host and gates and recomputations to their original's
			// device: a plan never adds a compute device, and the planners index devices
			// by their place in the unswapped step.
			if bd := pr.Base.Result.Devices; i >= len(bd) || bd[i].Name != d.Name || !bd[i].GPU {
				return nil, nil, nil, fmt.Errorf("internal error: the planned graph runs compute device %s, which the unswapped step does not run at index %d", pr.deviceName(d.Name), i)
			}
		}
		b := pr.budgetOf(d.Name)
		ev.Devices = append(ev.Devices, DevicePeak{Name: pr.deviceName(d.Name), Peak: d.PeakBytes, Budget: b, PeakTime: d.PeakTime,
			ResidentBytes: d.ResidentBytes, SwapInStall: d.SwapInStall, MemoryLimit: d.MemoryLimit, ComputeDevice: true, SimulatedIndex: i, simName: d.Name,
			fit: pr.fit})
		if x := d.PeakBytes - b; x > ev.Excess {
			ev.Excess = x
		}
		if d.PeakBytes > b && pr.fit.tfswap {
			ev.Fits = false
		}
	}
	// Grappler's figures are computed for plans that fit by tfswap's accounting (the cheaper
	// judge first), or for every plan when that is not required.
	// A plan slower than pr.beaten, a plan that fits, is left unjudged (evaluateBeaten).
	ev.unjudged = pr.fit.grappler() && pr.fit.tfswap && ev.Fits && pr.beaten > 0 && ev.StepTime > pr.beaten
	if pr.fit.grappler() && (ev.Fits || !pr.fit.tfswap) && !ev.unjudged {
		if !pr.fit.tfswap {
			ev.Excess = -1 << 62
		}
		var err error
		if g, err = pr.checkGrapplerGraph(ev, g); err != nil {
			return nil, nil, nil, err
		}
	}
	ev.Transferred = res.D2H.Bytes + res.H2D.Bytes
	if pr.Base != nil && pr.Base.StepTime > 0 {
		ev.Overhead = float64(ev.StepTime-pr.Base.StepTime) / float64(pr.Base.StepTime)
	}
	var tm *timing
	if timeline {
		tm = newTiming(pr.Analysis.Graph, res)
	}
	// The evaluation outlives the derived graph (planners cache it): its shapes keep only
	// what reports show, not the graph.
	res.Shapes = res.Shapes.Summary()
	return ev, tm, g, nil
}

// checkGrappler simulates g, the graph of ev's plan, by Grappler's accounting and records
// each compute device's two peaks in ev; the plan fits only if those required are within the
// budgets too. The VirtualCluster judges a rewritten graph by these rules (docs/SIMULATOR.md
// shows the simulation reproduces its trace), and they differ from tfswap's: they count
// every ReadVariableOp output and Identity copy, never forward buffers, see no transfer time,
// and (the microsecond figure) count together tensors freed and allocated within the same
// microsecond.
func (pr *planRun) checkGrappler(ev *Evaluation, g *graphdef.Graph) error {
	_, err := pr.checkGrapplerGraph(ev, g)
	return err
}

// checkGrapplerGraph is checkGrappler where g may be nil: the graph of ev's plan is then
// built only if the planning's memo does not hold its simulation. It returns the graph, or
// nil when it was not built.
func (pr *planRun) checkGrapplerGraph(ev *Evaluation, g *graphdef.Graph) (*graphdef.Graph, error) {
	res, g, err := pr.grapplerResult(ev.Plan, g)
	if err != nil {
		return nil, err
	}
	for i := range ev.Devices {
		d := &ev.Devices[i]
		if gd := res.Device(d.simName); gd != nil {
			d.GrapplerPeak, d.GrapplerPeakUS = gd.PeakBytes, gd.MicrosecondPeakBytes
			d.GrapplerMargin = pr.grapplerMargin * d.Budget / 1000
		}
		if x := d.Over(); x > ev.Excess {
			ev.Excess = x
		}
		if d.Over() > 0 {
			ev.Fits = false
		}
	}
	return g, nil
}

// grapplerResult returns the simulation by Grappler's accounting of plan, whose graph is g
// (nil to build it if the planning's memo does not hold the simulation), and the graph when
// it was given or built.
func (pr *planRun) grapplerResult(plan *rewrite.Plan, g *graphdef.Graph) (*cost.Result, *graphdef.Graph, error) {
	opts := pr.grapplerOpts()
	res, mk, memo := pr.memoLookup(plan, opts, true)
	if res != nil {
		return res, g, nil
	}
	g, err := pr.graphOf(plan, g)
	if err != nil {
		return nil, nil, err
	}
	res, err = pr.simulateGrappler(g)
	if err != nil {
		return nil, nil, err
	}
	pr.gsims++
	// Its devices' peaks are all that is read of it: the shapes are not kept.
	res.Shapes = res.Shapes.Summary()
	pr.Opts.memo.store(mk, memo, res)
	return res, g, nil
}

// grapplerOpts are pr's simulation options for Grappler's accounting.
func (pr *Problem) grapplerOpts() cost.Options {
	opts := pr.simOpts
	opts.Timeline = false
	opts.TopLive = -1
	opts.Conventions = cost.GrapplerConventions()
	return opts
}

// simulateGrappler simulates g by Grappler's accounting.
func (pr *planRun) simulateGrappler(g *graphdef.Graph) (*cost.Result, error) {
	res, err := cost.Simulate(g, pr.Profile, pr.grapplerOpts())
	if err != nil {
		return nil, fmt.Errorf("simulating by Grappler's accounting: %v", err)
	}
	pr.sims++
	return res, nil
}

// reportGrappler fills in Grappler's figures of ev's devices where the plan was not judged
// by them, so that every figure can be reported; they do not change whether it fits.
func (pr *planRun) reportGrappler(ev *Evaluation) error {
	if !pr.grappler || len(ev.Devices) == 0 || ev.Devices[0].GrapplerPeakUS > 0 {
		return nil
	}
	res, _, err := pr.grapplerResult(ev.Plan, nil)
	if err != nil {
		return err
	}
	for i := range ev.Devices {
		if gd := res.Device(ev.Devices[i].Name); gd != nil {
			ev.Devices[i].GrapplerPeak, ev.Devices[i].GrapplerPeakUS = gd.PeakBytes, gd.MicrosecondPeakBytes
		}
	}
	return nil
}

// planKey is a canonical string of a plan, for caching evaluations: its swaps and its
// waits (two plans with the same swaps but different ops held back are different graphs).
// It is written into a buffer kept between calls (planKeyBuf) and copied out once: a
// million-node graph's plan has a key of megabytes, which a growing builder allocated about
// twice over and kept with its spare room in the caches.
func planKey(plan *rewrite.Plan) string {
	swaps := rewrite.OrderSwaps(plan)
	bp := planKeyBuf.Get().(*[]byte)
	b := (*bp)[:0]
	num := func(x int) { b = strconv.AppendInt(b, int64(x), 10) }
	for _, s := range swaps {
		num(s.Tensor.Node.Index)
		b = append(b, ':')
		num(s.Tensor.Port)
		for _, g := range s.Groups {
			b = append(b, '[')
			num(g.Trigger.Index)
			if g.TriggerWaits {
				b = append(b, '!')
			}
			for _, u := range g.Uses {
				b = append(b, ' ')
				num(u.Node.Index)
				b = append(b, '.')
				num(u.Input)
			}
			b = append(b, ']')
		}
		b = append(b, ';')
	}
	if len(plan.Waits) > 0 {
		ws := make([]string, len(plan.Waits))
		for i, w := range plan.Waits {
			ws[i] = strconv.Itoa(w.Node.Index) + "<" + strconv.Itoa(w.After.Node.Index) + ":" + strconv.Itoa(w.After.Port)
		}
		sort.Strings(ws)
		b = append(b, "|waits"...)
		for _, w := range ws {
			b = append(b, ' ')
			b = append(b, w...)
		}
	}
	if len(plan.Accumulators) > 0 {
		ks := make([]int, len(plan.Accumulators))
		for i, n := range plan.Accumulators {
			ks[i] = n.Index
		}
		sort.Ints(ks)
		b = append(b, "|accumulators"...)
		for _, k := range ks {
			b = append(b, ' ')
			num(k)
		}
	}
	key := string(b)
	*bp = b
	planKeyBuf.Put(bp)
	return key
}

// planKeyBuf holds planKey's buffers.
var planKeyBuf = sync.Pool{New: func() any { return new([]byte) }}

// timing is what a simulation with a timeline says about the original nodes.
type timing struct {
	res   *cost.Result
	times triggers.Times
	// dev is the simulated device (index into res.Devices) of each original node, -1 when
	// it did not run.
	dev []int
	// order lists the original nodes run on each device in order of start.
	order [][]*graphdef.Node
	// early marks, by node index, the original nodes that start before one of their
	// ancestors (see isEarly); nil until first asked.
	early []bool
}

// pruned reports whether n ran in tm as a NoOp, its value dead (cost.Result.Pruned): it
// reads none of its inputs, so a buffer's life ends at its last other reader.
func (tm *timing) pruned(n *graphdef.Node) bool {
	p := tm.res.Pruned
	return n.Index < len(p) && p[n.Index]
}

// isEarly reports whether n (a node of g, the graph tm was simulated from) starts in tm
// before one of its ancestors (through data and control edges, while loops' back edges not
// followed) starts. The simulator runs one branch of each v1 conditional: a Merge runs once
// the branch taken delivers, so a Merge whose other input comes from the branch not taken
// (a Switch's gradient: the gradient itself against the other side's zeros), and ops after
// it, may run before ops they depend on through that input. Time order is then not graph
// order, and an edge added forward in time out of such a node (a trigger's, or a swap-out's
// that an op waits for) can close a cycle through the untaken input (issue 12: cond_v1's
// planned rewrite had one). Nodes that did not run are never early.
func (tm *timing) isEarly(g *graphdef.Graph, n *graphdef.Node) bool {
	if tm.early == nil {
		tm.early = make([]bool, len(tm.times.Start))
		anc := make([]int64, len(tm.times.Start)) // latest start among the ancestors
		for i := range anc {
			anc[i] = -1
		}
		see := func(n, p *graphdef.Node) {
			if isBackEdgeOp(p.Op) || p.Index >= len(anc) {
				return
			}
			anc[n.Index] = max(anc[n.Index], anc[p.Index], tm.times.Start[p.Index])
		}
		for _, n := range g.Topo {
			if n.Index >= len(anc) {
				continue
			}
			for _, in := range n.Inputs {
				see(n, in.Node)
			}
			for _, c := range n.ControlInputs {
				see(n, c)
			}
			if s := tm.times.Start[n.Index]; s >= 0 && anc[n.Index] > s {
				tm.early[n.Index] = true
			}
		}
	}
	return n.Index < len(tm.early) && tm.early[n.Index]
}

func newTiming(g *graphdef.Graph, res *cost.Result) *timing {
	n := len(g.Nodes)
	tm := &timing{res: res, dev: make([]int, n), order: make([][]*graphdef.Node, len(res.Devices))}
	tm.times.Start = make([]int64, n)
	tm.times.End = make([]int64, n)
	for i := range tm.dev {
		tm.dev[i] = -1
		tm.times.Start[i] = -1
		tm.times.End[i] = -1
	}
	for _, op := range res.Timeline.Ops {
		i := op.Node.Index
		if i >= n {
			continue
		}
		tm.dev[i] = op.Device
		tm.times.Start[i] = op.Start
		tm.times.End[i] = op.End
		tm.order[op.Device] = append(tm.order[op.Device], g.Nodes[i])
	}
	for _, o := range tm.order {
		sort.SliceStable(o, func(a, b int) bool {
			sa, sb := tm.times.Start[o[a].Index], tm.times.Start[o[b].Index]
			if sa != sb {
				return sa < sb
			}
			return tm.times.End[o[a].Index] < tm.times.End[o[b].Index]
		})
	}
	return tm
}

// eligible is Analysis.TriggerEligible, remembered per node.
func (pr *Problem) eligible(n *graphdef.Node) bool {
	if pr.elig == nil {
		pr.elig = make([]int8, len(pr.Analysis.Graph.Nodes))
	}
	if n.Index >= len(pr.elig) {
		return false
	}
	switch pr.elig[n.Index] {
	case 1:
		return true
	case 2:
		return false
	}
	ok := pr.Analysis.TriggerEligible(n)
	pr.elig[n.Index] = 2
	if ok {
		pr.elig[n.Index] = 1
	}
	return ok
}

// memo returns the trigger-search memo of timing tm.
func (pr *Problem) memo(tm *timing) *triggers.Memo {
	if pr.memos == nil {
		pr.memos = map[*timing]*triggers.Memo{}
	}
	m := pr.memos[tm]
	if m == nil {
		m = triggers.NewMemo(&tm.times)
		pr.memos[tm] = m
	}
	return m
}

// graphFor returns the graph the simulator runs for plan: the derived graph, with the
// compute device shown as a GPU when it is not one.
func (pr *planRun) graphFor(plan *rewrite.Plan) (*graphdef.Graph, error) {
	plan = pr.placed(plan)
	if len(plan.Swaps) == 0 && len(plan.Waits) == 0 && len(plan.Accumulators) == 0 && !pr.relabel {
		// The empty plan's graph is the original (the builder would copy it unchanged).
		return pr.Analysis.Graph, nil
	}
	b, err := rewrite.Build(pr.Analysis, plan)
	if err != nil {
		return nil, err
	}
	if len(plan.Accumulators) > 0 {
		// The accumulators' placement changes the devices of original nodes, which the
		// builder's graph does not: the graph simulated is the one written, indexed again
		// (original nodes first, at their indices, as the builder keeps them).
		res := b.Write(pr.Model)
		g, err := graphdef.NewGraph(res.Model.Graph, pr.Model.Source)
		if err != nil {
			return nil, fmt.Errorf("internal error: the rewrite placing accumulators on the host: %v", err)
		}
		if pr.relabel {
			relabelCompute(pr.Analysis, g)
		}
		return g, nil
	}
	if pr.keep && !pr.relabel {
		pr.kept, pr.keptPlan = b, plan
	}
	if pr.relabel {
		relabelCompute(pr.Analysis, b.Graph)
	}
	return b.Graph, nil
}

// takeBuilt returns the builder's output for plan when graphFor kept it (keep), and
// forgets it; nil otherwise.
func (pr *planRun) takeBuilt(plan *rewrite.Plan) *rewrite.Built {
	b := pr.kept
	if pr.keptPlan != plan {
		b = nil
	}
	pr.kept, pr.keptPlan = nil, nil
	return b
}

// relabelCompute shows the compute device of a's nodes as a GPU in g, whose first nodes are
// a's graph's (the two-device CPU emulation's compute device is simulated as a GPU); a node
// the rewrite moved to another device (an accumulator's, placed on the host) stays there.
// The nodes the rewrite added on a compute device (gates and recomputations, on their
// trigger's or original's device) are shown on the same GPU: left on the CPU, they ran on a
// device of their own, and every tensor a gate or a recomputation read crossed the
// simulated device-to-host link.
func relabelCompute(a *rewrite.Analysis, g *graphdef.Graph) {
	gpu := map[graphdef.Device]graphdef.Device{}
	for i, orig := range a.Graph.Nodes {
		if a.OnCompute(orig) && g.Nodes[i].Device == orig.Device {
			d := a.Device(orig)
			d.Type = "GPU"
			g.Nodes[i].Device = d
			gpu[orig.Device] = d
		}
	}
	for _, n := range g.Nodes[len(a.Graph.Nodes):] {
		if d, ok := gpu[n.Device]; ok {
			n.Device = d
		}
	}
}

// release ends the run and its problem's planning: it drops the run's cache of evaluated
// plans and what only planning needs of the problem (Problem.release), so that a large
// graph's planning memory is garbage before its rewrite is built and written. Neither may
// plan or evaluate afterwards.
func (pr *planRun) release() {
	pr.cache, pr.best, pr.lowest = nil, nil, nil
	pr.Problem.release()
}

// release drops what only planning needs (the indices of the unswapped step, the fast
// model, the memos and the unswapped step's timeline), so that a large graph's planning
// memory is garbage before its rewrite is built and written. The problem must not plan or
// evaluate afterwards; Base and the evaluations handed out stay valid, without Base's
// timeline.
func (pr *Problem) release() {
	pr.timing, pr.buffers, pr.bufOf, pr.fast, pr.seqs, pr.lms, pr.memos, pr.floor = nil, nil, nil, nil, nil, nil, nil, nil
	// The evaluations' results keep the set-up cache in their options: its tables are let go.
	pr.simOpts.Setup.Release()
	pr.Analysis.Setup.Release()
	pr.simOpts.Setup, pr.Analysis.Setup = nil, nil
	if pr.Base != nil && pr.Base.Result != nil {
		r := *pr.Base.Result
		r.Timeline = nil
		b := *pr.Base
		b.Result = &r
		pr.Base = &b
	}
}
