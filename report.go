package tfswap

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"sort"
	"time"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
)

// Report is what a plan changed in the graph and what it predicts for the device. Its JSON
// form is that of the report tfswap rewrite --report writes (which adds the input and output
// paths): durations are integer nanoseconds, sizes bytes.
type Report struct {
	// Swaps are the swapped tensors, in topological order of their producers.
	Swaps []Swap `json:"swaps"`
	// Skipped are the tensors on compute devices that could not be swapped (their size is
	// unknown), and the consumer groups left without a trigger, with the reasons.
	Skipped []Skipped `json:"skipped"`
	// BytesOut are the bytes the swaps move to the host per step, and BytesIn back to the
	// device (a tensor swapped in twice counts twice).
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
	// Waits are the ops that wait for a swap-out to reach the host before they run.
	Waits []Wait `json:"waits,omitempty"`
	// Recomputes are the tensors whose later readers read a recomputed copy.
	Recomputes []Recompute `json:"recomputes,omitempty"`
	// Orders are the control edges planning added so that an op waits for a reader that was
	// ready (freeing that reader's input before the op allocates): Node runs after After.
	Orders []Order `json:"orders,omitempty"`
	// Bypassed are the tf.gradients tuple Identities planning bypassed where Grappler's
	// accountings bound the plan: each is a NoOp with the Identity's control inputs in the
	// rewrite, and its readers read the Identity's input and wait for that NoOp.
	Bypassed []string `json:"bypassed,omitempty"`
	// Spaced are the ops planning held back by a spacer where Grappler's accountings bound
	// the plan: each waits for an L2Loss of one of its inputs (tfswap/spacer/NAME), so that
	// it starts a microsecond after the op before it ends and the VirtualCluster's trace does
	// not count that op's freed inputs beside its outputs.
	Spaced []string `json:"spaced,omitempty"`
	// WidenedGates are the triggers whose L2Loss gates read their largest output instead of
	// their smallest (rewrite.WidenGates), so that the VirtualCluster's one-nanosecond
	// swap-in copy lands more than a microsecond after its trigger ends.
	WidenedGates []string `json:"widened_gates,omitempty"`
	// Offloaded are the variable groups kept in host memory (Options.Offload), largest
	// first, and OffloadCopies the number of gated copies of their reads to the device.
	Offloaded     []OffloadedVariable `json:"offloaded,omitempty"`
	OffloadCopies int                 `json:"offload_copies,omitempty"`
	// OffloadSchedule says how the copies' triggers were chosen (rewrite.OffloadResult.Schedule).
	OffloadSchedule string `json:"offload_schedule,omitempty"`
	// Accumulators are the while loops' stack and TensorList accumulators the LMS rewrite
	// placed on the host, stacks then lists, each in graph order: their pushed tensors go to the host every forward
	// iteration and come back when the gradient loop pops them (rewrite.Accumulator).
	Accumulators []Accumulator `json:"accumulators,omitempty"`
	// FunctionalLoops are the functional While loops whose accumulators the LMS rewrite left
	// on the device (rewrite.UnloweredLoopLimit says why).
	FunctionalLoops []FunctionalLoop `json:"functional_loops,omitempty"`
	// Prediction is what the simulator predicts for the rewritten graph on the device.
	Prediction Prediction `json:"plan"`
	// Shapes says how completely the input graph's tensor sizes were known after shape
	// inference (Model.Shapes); tensors of unknown size count as 0 bytes in Prediction.
	Shapes *graphdef.ShapeStats `json:"shapes,omitempty"`
}

// OffloadedVariable is a variable kept in host memory with its optimizer slots: they, the
// ops on their handles and their update run on the host; its reads are copied to the device
// through gated copies, and its gradient is copied to the host as it is produced.
type OffloadedVariable struct {
	// Name is the variable and Variables it with its slots.
	Name      string
	Variables []string
	// Bytes is the size of the variables, Host where they live, Copies the gated copies of
	// their reads, and Reason why they were moved.
	Bytes  int64
	Host   string
	Copies int
	Reason string
}

// Swap is one swapped tensor: it is copied to the host after its producer runs, and back
// before its far consumers read it.
type Swap struct {
	// Tensor is the swapped tensor ("producer:port") and Producer the node that makes it.
	Tensor   string
	Producer string
	// DType and Shape describe it and Bytes is its size.
	DType string
	Shape []int64
	Bytes int64
	// Host is the device the tensor is kept on while swapped out.
	Host string
	// SwapOut is the node that copies it to the host.
	SwapOut string
	// SwapIns are its swap-ins, in order of their earliest consumer.
	SwapIns []SwapIn
}

// SwapIn is one swap-in of a swapped tensor.
type SwapIn struct {
	// Node is the swap-in node and Device its device (the host: the copy back starts when
	// the trigger has run).
	Node   string
	Device string
	// Trigger is the op whose completion releases the swap-in, and Gate the preserved
	// Identity (or L2Loss, Options.ReduceGates) reading the trigger's output that the
	// swap-in's control edge comes from.
	Trigger string
	Gate    string
	// Consumers are the nodes that read the swapped-in copy.
	Consumers []string
	// Distance is the topological distance (levels) from the producer to the earliest
	// consumer.
	Distance int
}

// Skipped is a tensor, or a group of consumers, that was not swapped, and why.
type Skipped struct {
	// Tensor is the tensor ("node:port").
	Tensor string
	// Reason says why it was not swapped.
	Reason string
}

// FunctionalLoop is a functional While loop (control flow v2, not lowered) whose body pushes
// Pushes tensors per iteration onto accumulators left on the device.
type FunctionalLoop struct {
	// While is the loop's node.
	While string `json:"while"`
	// Pushes is the number of accumulator pushes of its body, one element each per iteration.
	Pushes int `json:"pushes"`
}

// Accumulator is a while loop's stack accumulator placed on the host.
type Accumulator struct {
	// Stack is the accumulator's StackV2 node, or for a TensorList accumulator (List) the
	// Enter carrying its empty list into the forward loop.
	Stack string `json:"stack"`
	List  bool   `json:"list,omitempty"`
	// Host is the device it was placed on.
	Host string `json:"host"`
	// Pushed are the tensors pushed onto it, "producer:port".
	Pushed []string `json:"pushed"`
	// Bytes is the size of one iteration's pushes (the loop's trip count is not known
	// before it runs).
	Bytes int64 `json:"bytes"`
}

// Order is a control edge planning added: an op made to run after a reader that was ready,
// so that the reader's input is freed before the op allocates.
type Order struct {
	// Node is the op that waits and After the op it runs after.
	Node  string
	After string
}

// Wait is an op held back until a swap-out has copied its tensor to the host, so that the
// device copy can be freed before the op allocates.
type Wait struct {
	// Node is the op that waits and SwapOut the swap-out it waits for.
	Node    string
	SwapOut string
}

// Recompute is a tensor whose later readers read a copy made by running the ops that made
// it again, just before they need it, instead of a swapped-in copy.
type Recompute struct {
	// Tensor is the recomputed tensor and Bytes its size.
	Tensor string
	Bytes  int64
	// Ops are the original ops run again, producers first, and Copies their copies' names.
	Ops    []string
	Copies []string
	// Trigger is the op whose completion releases the copies, and Gate the node their
	// control inputs come from.
	Trigger string
	Gate    string
	// Consumers are the nodes that read the recomputed copy.
	Consumers []string
	// Also are other tensors the copies make that their own later readers read.
	Also []RecomputeServed `json:",omitempty"`
	// Cost is the predicted time of the copies (in the unswapped step).
	Cost time.Duration `json:"cost_ns"`
}

// RecomputeServed is a tensor a recomputation's copies make for its own later readers.
type RecomputeServed struct {
	// Tensor is the tensor and Bytes its size.
	Tensor string
	Bytes  int64
	// Consumers are the nodes that read the copy.
	Consumers []string
}

// Prediction is what the simulator predicts for a rewritten graph on the device planned for.
// The JSON keys are those of the "plan" object of tfswap rewrite --report.
type Prediction struct {
	// Strategy is the strategy asked for and PlanStrategy the one whose plan was chosen
	// ("none" when nothing was changed; "window+recompute" for a plan of the window
	// strategy on a graph with recomputations).
	Strategy     string `json:"strategy"`
	PlanStrategy string `json:"plan_strategy"`
	// Device is the device profile planned for, and DeviceSource where it comes from
	// (DeviceGiven, DeviceRuntime or DeviceDefault).
	Device       string `json:"device"`
	DeviceSource string `json:"device_source"`
	// Budget is each compute device's budget unless DeviceBudgets set another.
	Budget int64 `json:"budget"`
	// Accountings are those the plan had to fit by ("tfswap", "grappler-ns",
	// "grappler-us"; Options.FitAccounting).
	Accountings []string `json:"-"`
	// Fits says whether every compute device's predicted peak is within its budget by
	// every accounting it was required to fit by. Only fixed LMS thresholds write plans that do not.
	Fits bool `json:"fits"`
	// Unchanged says that the graph was written as it was read: it fits as it is (or fixed
	// thresholds found nothing to swap).
	Unchanged bool `json:"unchanged"`
	// Devices are the compute devices' predicted peaks.
	Devices []DevicePrediction `json:"devices"`
	// StepTime is the predicted step time of the rewritten graph and UnswappedStepTime that
	// of the graph as read; Overhead is the fraction the first exceeds the second by.
	StepTime          time.Duration `json:"step_time_ns"`
	UnswappedStepTime time.Duration `json:"unswapped_step_time_ns"`
	Overhead          float64       `json:"overhead"`
	// SwapInStall is how long compute waits for swap-ins to arrive in the step.
	SwapInStall time.Duration `json:"swap_in_stall_ns"`
	// Transferred are the bytes over the host link per step, ToHost of them to the host
	// and ToDevice back.
	Transferred int64 `json:"bytes_transferred"`
	ToHost      int64 `json:"bytes_to_host"`
	ToDevice    int64 `json:"bytes_to_device"`
	// Waits counts the ops that wait for a swap-out.
	Waits int `json:"waits"`
	// Simulations counts the simulations planning ran.
	Simulations int `json:"simulations"`
	// Effort says how auto's effort rule bounded the search (Options.SearchCandidates), in
	// a sentence; empty when it did not.
	Effort string `json:"effort,omitempty"`
	// BatchScale is Options.BatchScale (1 when not scaled).
	BatchScale int `json:"batch_scale"`
	// Warnings say what is wrong with the prediction and what to change: a peak over the
	// budget, or a step-time overhead above 50%.
	Warnings []string `json:"warnings,omitempty"`
	// Fetch are the nodes whose fan-in was simulated as the step (empty: every node) and
	// SimulatedNodes how many nodes ran in the simulated step. FetchFound is true when no
	// fetch was given and Fetch is the training step tfswap found (graphdef.DefaultFetch);
	// FetchReason says how Fetch was chosen.
	Fetch          []string `json:"fetch"`
	FetchFound     bool     `json:"fetch_found"`
	FetchReason    string   `json:"fetch_reason"`
	SimulatedNodes int      `json:"simulated_nodes"`
	// Explanation is the plan's reasoning for every swap candidate; it is not nil when
	// Options.Explain asked for it.
	Explanation []TensorExplanation `json:"explanation,omitempty"`

	// DeviceReason and BudgetReason say in words why the plan is for this device and
	// budget, as the tfswap command prints them.
	DeviceReason string `json:"-"`
	BudgetReason string `json:"-"`
	// Link describes the device's host link: "PCIe 3.0 x16, 12.8 GB/s each way".
	Link string `json:"-"`
}

// DevicePrediction is one compute device's predicted peak, by each accounting.
type DevicePrediction struct {
	// Name is the device, as the graph names it.
	Name string `json:"name"`
	// Peak is the predicted peak by tfswap's model of TensorFlow's runtime.
	Peak int64 `json:"peak"`
	// GrapplerPeak and GrapplerPeakUS are the peaks by the rules of Grappler's
	// VirtualCluster, from its trace's nanosecond and microsecond timestamps (the second is
	// what TensorFlow's DeterminePeakMemoryUsage returns); 0 when the plan was not checked by
	// them. GrapplerMargin is what the "both" accounting keeps free besides, on a graph with
	// recomputations.
	GrapplerPeak   int64 `json:"grappler_peak,omitempty"`
	GrapplerPeakUS int64 `json:"grappler_peak_us,omitempty"`
	GrapplerMargin int64 `json:"-"`
	// Judged names the accountings the peak was required to fit by and was judged with:
	// "tfswap", "grappler-ns", "grappler-us" (Options.FitAccounting).
	Judged []string `json:"fit_accountings,omitempty"`
	// Budget is the device's budget.
	Budget int64 `json:"budget"`
	// UnswappedPeak is the peak of the graph as read.
	UnswappedPeak int64 `json:"unswapped_peak"`
	// PeakTime is when the peak is reached, from the start of the step.
	PeakTime time.Duration `json:"peak_time_ns"`
}

// Over returns by how much the device's peak exceeds its budget by the strictest of the
// accountings it was judged by (negative or zero when it fits).
func (d DevicePrediction) Over() int64 {
	worst, judged := d.Peak, false
	for _, a := range d.Judged {
		var v int64
		switch a {
		case "tfswap":
			v = d.Peak
		case "grappler-ns":
			v = d.GrapplerPeak + d.GrapplerMargin
		case "grappler-us":
			v = d.GrapplerPeakUS
		default:
			continue
		}
		if !judged || v > worst {
			worst, judged = v, true
		}
	}
	return worst - d.Budget
}

// TensorExplanation is the plan's reasoning about one swap candidate (Options.Explain).
type TensorExplanation struct {
	// Tensor is the candidate ("node:port") and Bytes its simulated size.
	Tensor string
	Bytes  int64
	// Swapped says whether the plan swaps it and Recomputed whether its later readers read
	// a recomputed copy; Reason says why, or why not.
	Swapped    bool
	Recomputed bool `json:",omitempty"`
	Reason     string
	// Reads are its reads in the unswapped step.
	Reads int
	// Out is when its device copy is predicted to be given up in the planned step.
	Out time.Duration
	// SwapIns are the predicted timings of its swap-ins in the planned step.
	SwapIns []SwapInExplanation
}

// SwapInExplanation is the predicted timing of one swap-in in the planned step, each time
// from the start of the step.
type SwapInExplanation struct {
	// Node is the swap-in, Trigger its trigger and Consumer its first consumer.
	Node     string
	Trigger  string
	Consumer string
	// TriggerEnd is when the trigger ends, CopyStart and CopyEnd the copy to the device,
	// ConsumerStart when the first consumer starts, and Wait how long it waited for the
	// copy (0 when the copy arrived in time).
	TriggerEnd, CopyStart, CopyEnd, ConsumerStart, Wait time.Duration
}

// maxOverhead is the predicted step-time overhead above which a rewrite is warned about.
const maxOverhead = 0.5

// reportOf builds the report of a planned rewrite for the target t.
func reportOf(p *plan.Planned, t target, explain bool) *Report {
	r := p.Result
	rep := &Report{BytesOut: r.BytesOut(), BytesIn: r.BytesIn()}
	if r.Swaps != nil {
		rep.Swaps = make([]Swap, 0, len(r.Swaps))
	}
	for _, s := range r.Swaps {
		sw := Swap{Tensor: s.Tensor, Producer: s.Producer, DType: s.DType, Shape: clone(s.Shape), Bytes: s.Bytes, Host: s.Host, SwapOut: s.SwapOut}
		if s.SwapIns != nil {
			sw.SwapIns = make([]SwapIn, 0, len(s.SwapIns))
		}
		for _, si := range s.SwapIns {
			sw.SwapIns = append(sw.SwapIns, SwapIn{Node: si.Node, Device: si.Device, Trigger: si.Trigger, Gate: si.Gate, Consumers: clone(si.Consumers), Distance: si.Distance})
		}
		rep.Swaps = append(rep.Swaps, sw)
	}
	if r.Skipped != nil {
		rep.Skipped = make([]Skipped, 0, len(r.Skipped))
	}
	for _, s := range r.Skipped {
		rep.Skipped = append(rep.Skipped, Skipped{Tensor: s.Tensor, Reason: s.Reason})
	}
	for _, w := range r.Waits {
		rep.Waits = append(rep.Waits, Wait{Node: w.Node, SwapOut: w.SwapOut})
	}
	for _, rc := range r.Recomputes {
		c := Recompute{Tensor: rc.Tensor, Bytes: rc.Bytes, Ops: clone(rc.Ops), Copies: clone(rc.Copies), Trigger: rc.Trigger, Gate: rc.Gate,
			Consumers: clone(rc.Consumers), Cost: time.Duration(rc.CostNS)}
		for _, a := range rc.Also {
			c.Also = append(c.Also, RecomputeServed{Tensor: a.Tensor, Bytes: a.Bytes, Consumers: clone(a.Consumers)})
		}
		rep.Recomputes = append(rep.Recomputes, c)
	}
	for _, o := range r.Orders {
		rep.Orders = append(rep.Orders, Order{Node: o.Node, After: o.After})
	}
	rep.Bypassed = clone(r.Bypassed)
	for _, sp := range r.Spacers {
		rep.Spaced = append(rep.Spaced, sp.Node)
	}
	rep.WidenedGates = clone(r.WideGates)
	for _, l := range r.FunctionalLoops {
		rep.FunctionalLoops = append(rep.FunctionalLoops, FunctionalLoop{While: l.While, Pushes: l.Pushes})
	}
	for _, a := range r.Accumulators {
		rep.Accumulators = append(rep.Accumulators, Accumulator{Stack: a.Stack, List: a.List, Host: a.Host, Pushed: clone(a.Pushed), Bytes: a.Bytes})
	}
	if p.Offload != nil {
		copies := map[string]int{}
		for _, c := range p.Offload.Copies {
			copies[c.Variable]++
		}
		rep.OffloadCopies = len(p.Offload.Copies)
		rep.OffloadSchedule = p.Offload.Schedule
		for _, v := range p.Offload.Variables {
			rep.Offloaded = append(rep.Offloaded, OffloadedVariable{Name: v.Name, Variables: clone(v.Variables), Bytes: v.Bytes, Host: v.Host, Copies: copies[v.Name], Reason: v.Reason})
		}
		sort.SliceStable(rep.Offloaded, func(i, j int) bool { return rep.Offloaded[i].Bytes > rep.Offloaded[j].Bytes })
	}
	rep.Prediction = predictionOf(p, t, explain)
	return rep
}

// predictionOf builds the prediction of a planned rewrite for the target t; with explain,
// its Explanation is not nil.
func predictionOf(p *plan.Planned, t target, explain bool) Prediction {
	pr := Prediction{Strategy: p.Strategy, PlanStrategy: p.Eval.Strategy, Device: p.Profile.Name, DeviceSource: t.source, Budget: p.Budget,
		Fits: p.Eval.Fits, Unchanged: p.Unchanged(), StepTime: time.Duration(p.Eval.StepTime), UnswappedStepTime: time.Duration(p.Base.StepTime),
		Overhead: p.Eval.Overhead, SwapInStall: time.Duration(p.Eval.Result.SwapInStall()), Transferred: p.Eval.Transferred,
		ToHost: p.Eval.Result.D2H.Bytes, ToDevice: p.Eval.Result.H2D.Bytes, Waits: len(p.Waits), Simulations: p.Simulations, Effort: p.Effort,
		BatchScale: max(1, p.Eval.Result.Options.BatchScale), Fetch: append([]string{}, p.Base.Result.Options.Fetch...),
		SimulatedNodes: p.Base.Result.Simulated, Accountings: clone(p.Accountings), DeviceReason: t.deviceReason, BudgetReason: t.budgetReason, Link: linkOf(p.Profile)}
	for _, d := range p.Eval.Devices {
		dp := DevicePrediction{Name: d.Name, Peak: d.Peak, GrapplerPeak: d.GrapplerPeak, GrapplerPeakUS: d.GrapplerPeakUS, GrapplerMargin: d.GrapplerMargin,
			Judged: d.Judged(), Budget: d.Budget, PeakTime: time.Duration(d.PeakTime)}
		for _, b := range p.Base.Devices {
			if b.Name == d.Name {
				dp.UnswappedPeak = b.Peak
			}
		}
		pr.Devices = append(pr.Devices, dp)
	}
	if explain {
		pr.Explanation = make([]TensorExplanation, 0, len(p.Explanation))
	}
	for _, e := range p.Explanation {
		te := TensorExplanation{Tensor: e.Tensor, Bytes: e.Bytes, Swapped: e.Swapped, Recomputed: e.Recomputed, Reason: e.Reason, Reads: e.Reads, Out: time.Duration(e.Out)}
		if e.SwapIns != nil {
			te.SwapIns = make([]SwapInExplanation, 0, len(e.SwapIns))
		}
		for _, s := range e.SwapIns {
			te.SwapIns = append(te.SwapIns, SwapInExplanation{Node: s.Node, Trigger: s.Trigger, Consumer: s.Consumer, TriggerEnd: time.Duration(s.TriggerEnd),
				CopyStart: time.Duration(s.CopyStart), CopyEnd: time.Duration(s.CopyEnd), ConsumerStart: time.Duration(s.ConsumerStart), Wait: time.Duration(s.Wait)})
		}
		pr.Explanation = append(pr.Explanation, te)
	}
	pr.Warnings = warnings(&pr)
	for _, d := range p.Dropped {
		pr.Warnings = append(pr.Warnings, "planning: "+d+" (an internal error of tfswap, please report it; the plan is the best found without that candidate)")
	}
	return pr
}

// warnings says what is wrong with a prediction, and what to change: a peak over the budget
// (possible only with fixed LMS thresholds, which ignore the budget) or a step-time overhead
// above maxOverhead.
func warnings(p *Prediction) []string {
	var ws []string
	b := units.FormatBytes
	fixed := p.Strategy == "lms-fixed"
	for _, d := range p.Devices {
		if d.Over() <= 0 {
			continue
		}
		by := fmt.Sprintf("predicted peak %s by tfswap's accounting", b(d.Peak))
		if d.GrapplerPeak > 0 {
			by += fmt.Sprintf(", %s by Grappler's VirtualCluster rules (its trace in nanoseconds)", b(d.GrapplerPeak))
		}
		if d.GrapplerPeakUS > 0 {
			by += fmt.Sprintf(", %s by DeterminePeakMemoryUsage (in microseconds)", b(d.GrapplerPeakUS))
		}
		w := fmt.Sprintf("the rewritten graph does not fit %s's budget of %s on %s: %s. ", d.Name, b(d.Budget), p.Device, by)
		if fixed {
			w += "Fixed LMS thresholds ignore the budget: drop them to plan for it (--strategy auto), or swap more (a smaller --swapout-threshold); "
		}
		ws = append(ws, w+"a smaller batch or a GPU with more memory (--device) also fits")
	}
	if p.Overhead > maxOverhead {
		w := fmt.Sprintf("predicted step-time overhead %+.0f%% (more than %.0f%%): %s a step over %s's host link (%s). ",
			100*p.Overhead, 100*maxOverhead, b(p.Transferred), p.Device, p.Link)
		if fixed {
			w += "Fixed LMS thresholds ignore the cost: drop them to plan for the budget at the least overhead (--strategy auto); "
		} else {
			w += "This is the least the strategy found for the budget; "
		}
		ws = append(ws, w+"a smaller batch, a larger budget or a GPU with more memory or a faster host link (--device) costs less")
	}
	return ws
}

// linkOf describes a profile's host link: "PCIe 3.0 x16, 12.8 GB/s each way".
func linkOf(p *cost.Profile) string {
	rate := fmt.Sprintf("%.1f GB/s each way", p.H2D/1e9)
	if p.D2H != p.H2D {
		rate = fmt.Sprintf("%.1f GB/s to the host, %.1f GB/s back", p.D2H/1e9, p.H2D/1e9)
	}
	if p.Link == "" {
		return rate
	}
	return p.Link + ", " + rate
}
