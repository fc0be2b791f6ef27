package plan

import (
	"cmp"
	"github.com/tfswap/tfswap/rewrite"
	"slices"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/radix"
)

// The fast memory model: the memory pass planners use between full simulations.
//
// It takes the unswapped step's memory curve per device (from the simulation) and predicts a
// plan's curve by editing it: a swapped buffer is freed when its last read before the gap has
// ended and its swap-out copy has reached the host, and each swapped-in copy occupies memory
// from the moment the host releases it (its trigger's end, the control message, the host's
// Identity) to the end of its last read. Copies queue on the copy engines one at a time, in
// the order they are issued, as in the simulator. Op times are not shifted by stalls, so the
// model is exact only while the plan adds no stall; planners confirm every plan they keep with
// a full simulation (Problem.Evaluate) and correct for the difference.
//
// The model itself is cost.SwapStep, the incremental swap simulator: a plan's sweep is
// prepared here (preparedSweep: its events in order and each swap's, buffer's and swap-in's
// static part) and handed to it as a cost.SwapStepSpec, for one prediction, for the throttle
// (ops held until swap-outs reach the host) or for the drop-one loops' incremental changes.

// bufSwaps are a plan's swaps of one buffer.
type bufSwaps struct {
	b     *buffer
	swaps []*rewrite.PlannedSwap
}

// fastModel predicts plans' memory curves from the unswapped step.
type fastModel struct {
	pr    *Problem
	trees []*cost.LoadTree // the unswapped curve per simulated device; nil for hosts
	// d2h and h2d are the copy engines of each device (shared links and non-duplex links
	// share them), as in the simulator.
	d2h, h2d []int
	engines  int
	// nextStart is, per node, the start of the next op on its device (its own end when last).
	nextStart []int64
	// scratch holds the working lists of the steps' peaks, reused from step to step
	// (planning is sequential).
	scratch cost.StepScratch
	// opEvents are the op events of a throttled sweep without waits (opEventsAll), made on
	// first use, and opEventsOrdered whether they are in order by time (one compute device).
	opEvents        []sweepEv
	opEventsOrdered bool
	// stepOps and stepOpNodes are the steps' ops of those events and their nodes
	// (stepOpsAll), made on first use; stepOpsOK is false when an event has no op.
	stepOps     []cost.StepOp
	stepOpNodes []int32
	stepOpsOK   bool
}

// opEventsAll returns an event for every op of every compute device, in device order and
// then the order the ops start, none with waits: the op events prepare gives a throttled
// sweep whose plan has no waits, made once for all of them.
func (fm *fastModel) opEventsAll() []sweepEv {
	if fm.opEvents == nil {
		tm := fm.pr.timing
		evs := []sweepEv{}
		for _, dev := range fm.pr.gpuDevices() {
			for _, n := range tm.order[dev] {
				evs = append(evs, sweepEv{t: tm.times.Start[n.Index], kind: evOp, id: int32(n.Index), w: -1})
			}
		}
		fm.opEvents, fm.opEventsOrdered = evs, inTimeOrder(evs)
	}
	return fm.opEvents
}

func newFastModel(pr *Problem) *fastModel {
	res := pr.timing.res
	fm := &fastModel{pr: pr, trees: make([]*cost.LoadTree, len(res.Devices)), d2h: make([]int, len(res.Devices)), h2d: make([]int, len(res.Devices))}
	group := func(name string) int {
		dev, err := graphdef.ParseDevice(name)
		if err != nil {
			return -1
		}
		for i, g := range pr.simOpts.SharedLinks {
			for _, m := range g {
				if spec, err := graphdef.ParseDevice(m); err == nil && spec.Type != "" && dev.Matches(spec) {
					return i
				}
			}
		}
		return -1
	}
	engines := 0
	shared := map[int][2]int{}
	for i, d := range res.Devices {
		fm.d2h[i], fm.h2d[i] = -1, -1
		if !d.GPU {
			continue
		}
		fm.trees[i] = cost.NewLoadTree(res.Timeline.Memory[i])
		g := group(d.Name)
		if e, ok := shared[g]; ok && g >= 0 {
			fm.d2h[i], fm.h2d[i] = e[0], e[1]
			continue
		}
		fm.d2h[i] = engines
		engines++
		if pr.Profile.Duplex {
			fm.h2d[i] = engines
			engines++
		} else {
			fm.h2d[i] = fm.d2h[i]
		}
		if g >= 0 {
			shared[g] = [2]int{fm.d2h[i], fm.h2d[i]}
		}
	}
	fm.engines = engines
	fm.nextStart = make([]int64, len(pr.Analysis.Graph.Nodes))
	for i := range fm.nextStart {
		fm.nextStart[i] = pr.timing.times.End[i] + 1
	}
	for _, order := range pr.timing.order {
		for k, n := range order {
			if k+1 < len(order) {
				fm.nextStart[n.Index] = max(pr.timing.times.Start[order[k+1].Index], pr.timing.times.Start[n.Index]+1)
			}
		}
	}
	return fm
}

// xferTime returns the copy time of bytes in one direction.
func (fm *fastModel) xferTime(bytes int64, h2d bool) int64 {
	bw := fm.pr.Profile.D2H
	if h2d {
		bw = fm.pr.Profile.H2D
	}
	return ceilNS(float64(bytes) / bw)
}

// fastResult is a plan's prediction: the incremental simulator swept for it (its peaks),
// the waits the sweep added to hold ops back (throttling), and stall, the longest total
// delay of a device (waits and late copies), an estimate of the step-time overhead.
type fastResult struct {
	base  []*cost.LoadTree
	step  *cost.SwapStep
	waits []rewrite.Wait
	stall int64
}

// peak returns the predicted peak of device dev and its time.
func (r *fastResult) peak(dev int) (int64, int64) {
	if r.base[dev] == nil {
		return 0, 0
	}
	return r.step.Peak(dev)
}

// excess returns the largest predicted peak minus budget over the compute devices, and the
// device where it occurs.
func (pr *Problem) excessOf(r *fastResult) (int64, int) {
	worst, dev := int64(-1<<62), -1
	for i, t := range r.base {
		if t == nil {
			continue
		}
		p, _ := r.peak(i)
		if x := p - pr.budgetOf(pr.timing.res.Devices[i].Name); x > worst {
			worst, dev = x, i
		}
	}
	return worst, dev
}

// Sweep event kinds, in the order they are handled at one instant.
const (
	evOut     = iota // a swapped tensor's producer ends: its swap-out joins the copy queue
	evCtl            // a trigger ends: its control message joins the copy queue
	evNear           // a swapped buffer's last read before its gap ends
	evOp             // an op starts on a compute device (waits, throttling)
	evDue            // a swap-in's first reader is due
	evCopyEnd        // a swap-in copy's last read ends
	evOrigEnd        // a swapped buffer's unswapped end
)

type sweepEv struct {
	t    int64
	kind uint8
	id   int32
	seq  int32
	// w is, for an op's event, the index of its waits in preparedSweep.opWaits (-1: none).
	w int32
}

// sortEvents returns evs ordered by time, then kind, then position in evs (the order the
// sweep handles them in). It numbers the events (seq) and sorts them by a stable counting sort
// on the kind followed by a stable radix sort on the time, linear in the number of events;
// short lists are sorted by comparison.
func sortEvents(evs []sweepEv) []sweepEv {
	for i := range evs {
		evs[i].seq = int32(i)
	}
	var hi int64
	neg := false
	for _, e := range evs {
		hi = max(hi, e.t)
		neg = neg || e.t < 0
	}
	if len(evs) < 256 || neg {
		slices.SortFunc(evs, cmpSweepEv)
		return evs
	}
	buf := make([]sweepEv, len(evs))
	// By kind (stable: each kind keeps the events' order).
	var kinds [8]int
	for _, e := range evs {
		kinds[e.kind&7]++
	}
	for k, sum := 0, 0; k < len(kinds); k++ {
		kinds[k], sum = sum, sum+kinds[k]
	}
	for _, e := range evs {
		buf[kinds[e.kind&7]] = e
		kinds[e.kind&7]++
	}
	// By time, stably.
	return radix.Sort(buf, hi, func(e sweepEv) int64 { return e.t })
}

// outState is one planned swap-out of a prepared sweep: its swap, its index in the plan's
// swaps and the index of its buffer.
type outState struct {
	ps   *rewrite.PlannedSwap
	swap int32
	bs   int32
}

// bufState is one swapped buffer of a prepared sweep: its swap-outs and the end of its last
// read before the gap (the last read no swap-in redirects).
type bufState struct {
	b        *buffer
	outs     []int32
	lastNear int64
}

// grpState is one planned swap-in of a prepared sweep: its swap-out, its trigger, its first
// reader's start (-1: none found) and the end of its last read.
type grpState struct {
	out       int32
	trig      *graphdef.Node
	due, last int64
}

// predict returns the fast model's prediction for plan.
func (fm *fastModel) predict(plan *rewrite.Plan) *fastResult { return fm.sweep(plan, nil) }

// sweep returns the fast model's prediction for plan; with throttle set (per-device
// targets), it also holds ops back until swap-outs complete wherever the memory at an op
// would exceed its device's target, and returns those waits in fastResult.waits.
func (fm *fastModel) sweep(plan *rewrite.Plan, throttle []int64) *fastResult {
	return fm.prepare(plan, throttle).result(nil)
}

// preparedSweep is a plan's sweep prepared once for any subset of its swapped buffers: the
// events of every swap, sorted, and the static part of each swap's, buffer's and swap-in's
// state. Its step (swapStep) sweeps the events of the buffers a decision keeps, skipping the
// others, which is the sweep of the plan without the dropped buffers' swaps (and their
// waits): the events of the kept swaps, their order and their handling are the same.
type preparedSweep struct {
	fm       *fastModel
	plan     *rewrite.Plan
	throttle []int64
	evs      []sweepEv
	bufs     []bufState
	outs     []outState
	grps     []grpState
	// bufOfSwap is, per plan swap, the index of its buffer (-1 when the sweep ignores it).
	bufOfSwap []int32
	// waitsOf are, per node with waits, the swap-outs they wait for (-1: not a swap of the
	// plan); opWaits are the same lists, which the ops' events index (sweepEv.w).
	waitsOf map[int][]int32
	opWaits [][]int32
	// spec is the sweep as the incremental simulator's step (made on first use) and opNode
	// the node of each of its ops.
	spec   *cost.SwapStepSpec
	opNode []int32
	// sharedOps says that the op events are the fast model's shared list (opEventsAll), merged
	// in its order: the step's ops are then the shared ones (stepOpsAll).
	sharedOps bool
}

// prepare builds plan's prepared sweep.
func (fm *fastModel) prepare(plan *rewrite.Plan, throttle []int64) *preparedSweep {
	pr := fm.pr
	tm := pr.timing
	ps := &preparedSweep{fm: fm, plan: plan, throttle: throttle, bufOfSwap: make([]int32, len(plan.Swaps))}
	// The lists are sized for the plan: three events per swap (its swap-out and its buffer's
	// two) and three per swap-in, the ops' events appended.
	groups := 0
	for i := range plan.Swaps {
		groups += len(plan.Swaps[i].Groups)
	}
	evs := make([]sweepEv, 0, 3*len(plan.Swaps)+3*groups)
	ps.bufs = make([]bufState, 0, len(plan.Swaps))
	ps.outs = make([]outState, 0, len(plan.Swaps))
	ps.grps = make([]grpState, 0, groups)
	byBuf := make(map[*buffer]int32, len(plan.Swaps))
	outOf := make(map[graphdef.Tensor]int32, len(plan.Swaps))
	for i := range plan.Swaps {
		sw := &plan.Swaps[i]
		ps.bufOfSwap[i] = -1
		b := pr.bufOf[sw.Tensor]
		if b == nil || fm.trees[b.dev] == nil {
			continue
		}
		bi, ok := byBuf[b]
		if !ok {
			bi = int32(len(ps.bufs))
			byBuf[b] = bi
			ps.bufs = append(ps.bufs, bufState{b: b})
		}
		ps.bufOfSwap[i] = bi
		oi := int32(len(ps.outs))
		bs := &ps.bufs[bi]
		bs.outs = append(bs.outs, oi)
		outOf[sw.Tensor] = oi
		evs = append(evs, sweepEv{t: tm.times.End[sw.Tensor.Node.Index], kind: evOut, id: oi})
		ps.outs = append(ps.outs, outState{ps: sw, swap: int32(i), bs: bi})
	}
	redirected := map[graphdef.Use]bool{}
	for bi := range ps.bufs {
		bs := &ps.bufs[bi]
		clear(redirected)
		for _, oi := range bs.outs {
			for _, g := range ps.outs[oi].ps.Groups {
				for _, u := range g.Uses {
					redirected[u] = true
				}
			}
		}
		near := bs.b.prodEnd
		var walk func([]*access)
		walk = func(l []*access) {
			for _, x := range l {
				if redirected[x.u] {
					continue
				}
				near = max(near, x.end)
				walk(x.sub)
			}
		}
		walk(bs.b.tree)
		bs.lastNear = near
		evs = append(evs, sweepEv{t: near, kind: evNear, id: int32(bi)})
	}
	for bi := range ps.bufs {
		evs = append(evs, sweepEv{t: ps.bufs[bi].b.lastEnd, kind: evOrigEnd, id: int32(bi)})
	}
	for oi := range ps.outs {
		o := &ps.outs[oi]
		b := ps.bufs[o.bs].b
		for _, g := range o.ps.Groups {
			gs := grpState{out: int32(oi), trig: g.Trigger, due: -1}
			for _, u := range g.Uses {
				x := b.find(u)
				if x == nil {
					continue
				}
				if gs.due < 0 || x.start < gs.due {
					gs.due = x.start
				}
				gs.last = max(gs.last, x.last)
			}
			id := int32(len(ps.grps))
			ps.grps = append(ps.grps, gs)
			te := tm.times.End[g.Trigger.Index]
			if te < 0 {
				te = 0
			}
			evs = append(evs, sweepEv{t: te, kind: evCtl, id: id})
			if gs.due >= 0 {
				evs = append(evs, sweepEv{t: gs.due, kind: evDue, id: id})
				evs = append(evs, sweepEv{t: max(gs.last, gs.due), kind: evCopyEnd, id: id})
			}
		}
	}
	ps.waitsOf = map[int][]int32{}
	for _, w := range rewrite.PlanWaits(plan) {
		oi, ok := outOf[w.After]
		if !ok {
			oi = -1
		}
		ps.waitsOf[w.Node.Index] = append(ps.waitsOf[w.Node.Index], oi)
	}
	ops := len(evs) // the op events follow
	if throttle != nil && len(ps.waitsOf) == 0 {
		if all := fm.opEventsAll(); fm.opEventsOrdered {
			// Merged from the shared list, as sortEventsFrom would after appending them.
			ps.evs = mergeEvents(sortEvents(evs), all, ops)
			ps.sharedOps = true
			return ps
		}
		evs = append(evs, fm.opEvents...)
	} else if throttle != nil || len(ps.waitsOf) > 0 {
		if throttle != nil {
			// Every op of a compute device gets an event: the list grows once.
			ops := 0
			for _, dev := range pr.gpuDevices() {
				ops += len(tm.order[dev])
			}
			evs = slices.Grow(evs, ops)
		}
		for _, dev := range pr.gpuDevices() {
			for _, n := range tm.order[dev] {
				ws, ok := ps.waitsOf[n.Index]
				if throttle != nil || ws != nil {
					w := int32(-1)
					if ok {
						w = int32(len(ps.opWaits))
						ps.opWaits = append(ps.opWaits, ws)
					}
					evs = append(evs, sweepEv{t: tm.times.Start[n.Index], kind: evOp, id: int32(n.Index), w: w})
				}
			}
		}
	}
	ps.evs = sortEventsFrom(evs, ops)
	return ps
}

// sortEventsFrom is sortEvents for evs whose events from index from on are usually in order
// by time already (the op events of one compute device, in the order the ops start): when
// they are, only the events before from are sorted, and the two lists are merged; otherwise
// all are sorted. The order is the same either way (no two events compare equal), and at
// ResNet-50 4x its batch a sweep's events are a few dozen swap events before about 2,300 op
// events, which sortEvents sorted in full (5% of the planning's CPU profile).
func sortEventsFrom(evs []sweepEv, from int) []sweepEv {
	if !inTimeOrder(evs[from:]) {
		return sortEvents(evs)
	}
	return mergeEvents(sortEvents(evs[:from]), evs[from:], from)
}

// inTimeOrder reports whether evs are in order by time.
func inTimeOrder(evs []sweepEv) bool {
	for i := 1; i < len(evs); i++ {
		if evs[i].t < evs[i-1].t {
			return false
		}
	}
	return true
}

// mergeEvents returns head, a list sortEvents sorted, merged with tail, op events in order by
// time that follow head's events in the list they came from: tail's events are numbered from
// from on (seq) in the result, so sharing one kind and keeping their positions they are in
// sortEvents' order. tail is not changed.
func mergeEvents(head, tail []sweepEv, from int) []sweepEv {
	out := make([]sweepEv, 0, len(head)+len(tail))
	i := 0
	for j, e := range tail {
		e.seq = int32(from + j)
		for i < len(head) && cmpSweepEv(head[i], e) < 0 {
			out = append(out, head[i])
			i++
		}
		out = append(out, e)
	}
	return append(out, head[i:]...)
}

// cmpSweepEv orders events by time, then kind, then position (sortEvents' order).
func cmpSweepEv(a, b sweepEv) int {
	if a.t != b.t {
		return cmp.Compare(a.t, b.t)
	}
	if a.kind != b.kind {
		return cmp.Compare(a.kind, b.kind)
	}
	return cmp.Compare(a.seq, b.seq)
}

// result returns the prediction of the prepared sweep's step with keep's decisions (nil:
// every buffer kept): per prepared buffer whether its swaps are in the plan; the others'
// events are skipped, and an op whose waits all wait for dropped swaps is not held.
func (ps *preparedSweep) result(keep []bool) *fastResult {
	step := ps.swapStep(keep)
	r := &fastResult{base: ps.fm.trees, step: step, stall: step.Stall()}
	for _, w := range step.Waits() {
		n := ps.fm.pr.Analysis.Graph.Nodes[ps.opNode[w.Op]]
		r.waits = append(r.waits, rewrite.Wait{Node: n, After: ps.outs[w.Out].ps.Tensor})
	}
	return r
}

// keepOf returns the prepared buffers' keep flags for a subset of the plan's swaps (keep by
// swap index), and false when a buffer would keep some of its swaps and not others (the
// sweep must then be prepared for that plan).
func (ps *preparedSweep) keepOf(keepSwap func(i int) bool) ([]bool, bool) {
	keep := make([]bool, len(ps.bufs))
	set := make([]bool, len(ps.bufs))
	for i, bi := range ps.bufOfSwap {
		if bi < 0 {
			continue
		}
		k := keepSwap(i)
		if set[bi] && keep[bi] != k {
			return nil, false
		}
		keep[bi], set[bi] = k, true
	}
	return keep, true
}

// find returns the access of b by use u, or nil.
func (b *buffer) find(u graphdef.Use) *access {
	for _, x := range b.accesses {
		if x.u == u {
			return x
		}
	}
	return nil
}

// throttled returns plan with its waits replaced by those the fast model finds necessary to
// keep every device within target: an op whose start would take its device over target
// waits for the oldest swap-outs still on their way to the host.
func (pr *planRun) throttled(plan *rewrite.Plan, target []int64) (*rewrite.Plan, *fastResult) {
	bare := plan
	if len(plan.Waits) > 0 {
		bare = &rewrite.Plan{Swaps: plan.Swaps}
		pr.Explain.derive(bare, plan, "")
	}
	r := pr.fast.sweep(bare, target)
	if len(r.waits) == 0 {
		return bare, r
	}
	out := &rewrite.Plan{Swaps: plan.Swaps, Waits: r.waits}
	if pr.Explain != nil {
		pr.Explain.derive(out, plan, "")
	}
	return out, pr.fast.predict(out)
}
