package plan

import (
	"cmp"
	"github.com/tfswap/tfswap/rewrite"
	"slices"
	"sort"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/minheap"
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

// loadTree is one device's memory curve as a segment tree over the curve's points: range
// additions, the maximum (with its time) and the area under the curve over a range.
type loadTree struct {
	t    []int64 // point times
	n    int
	max  []int64 // max of spike+add over the node's range
	arg  []int32 // leaf index of max
	sum  []float64
	dt   []float64 // sum of durations over the node's range
	lazy []int64
}

// newLoadTree builds the tree of a simulated memory curve.
func newLoadTree(pts []cost.MemPoint) *loadTree {
	n := len(pts)
	if n == 0 {
		pts = []cost.MemPoint{{}}
		n = 1
	}
	lt := &loadTree{n: n, t: make([]int64, n), max: make([]int64, 4*n), arg: make([]int32, 4*n), sum: make([]float64, 4*n), dt: make([]float64, 4*n), lazy: make([]int64, 4*n)}
	for i, p := range pts {
		lt.t[i] = p.T
	}
	var build func(node, l, r int)
	build = func(node, l, r int) {
		if l == r {
			p := pts[l]
			var d float64
			if l+1 < n {
				d = float64(pts[l+1].T - p.T)
			}
			lt.max[node] = p.Max
			lt.arg[node] = int32(l)
			lt.dt[node] = d
			lt.sum[node] = float64(p.Bytes) * d
			return
		}
		m := (l + r) / 2
		build(2*node, l, m)
		build(2*node+1, m+1, r)
		lt.pull(node)
	}
	build(1, 0, n-1)
	return lt
}

func (lt *loadTree) clone() *loadTree {
	c := *lt
	c.max = append([]int64(nil), lt.max...)
	c.arg = append([]int32(nil), lt.arg...)
	c.sum = append([]float64(nil), lt.sum...)
	c.lazy = append([]int64(nil), lt.lazy...)
	return &c
}

func (lt *loadTree) pull(node int) {
	l, r := 2*node, 2*node+1
	if lt.max[l] >= lt.max[r] {
		lt.max[node], lt.arg[node] = lt.max[l], lt.arg[l]
	} else {
		lt.max[node], lt.arg[node] = lt.max[r], lt.arg[r]
	}
	lt.sum[node] = lt.sum[l] + lt.sum[r]
	lt.dt[node] = lt.dt[l] + lt.dt[r]
}

func (lt *loadTree) apply(node int, v int64) {
	lt.max[node] += v
	lt.sum[node] += float64(v) * lt.dt[node]
	lt.lazy[node] += v
}

func (lt *loadTree) push(node int) {
	if v := lt.lazy[node]; v != 0 {
		lt.apply(2*node, v)
		lt.apply(2*node+1, v)
		lt.lazy[node] = 0
	}
}

// index returns the first point at or after time t.
func (lt *loadTree) index(t int64) int {
	return sort.Search(lt.n, func(i int) bool { return lt.t[i] >= t })
}

// add adds v bytes over the time interval [from, to).
func (lt *loadTree) add(from, to, v int64) {
	l, r := lt.index(from), lt.index(to)-1
	if l > r || v == 0 {
		return
	}
	lt.update(1, 0, lt.n-1, l, r, v)
}

func (lt *loadTree) update(node, nl, nr, l, r int, v int64) {
	if r < nl || nr < l {
		return
	}
	if l <= nl && nr <= r {
		lt.apply(node, v)
		return
	}
	lt.push(node)
	m := (nl + nr) / 2
	lt.update(2*node, nl, m, l, r, v)
	lt.update(2*node+1, m+1, nr, l, r, v)
	lt.pull(node)
}

// peak returns the curve's maximum and its time.
func (lt *loadTree) peak() (int64, int64) { return lt.max[1], lt.t[lt.arg[1]] }

// area returns the integral of the curve over [from, to) in byte-nanoseconds, by points.
func (lt *loadTree) area(from, to int64) float64 {
	return lt.areaIdx(lt.index(from), lt.index(to)-1)
}

// span returns the total duration of the points l..r (l <= r): the time from point l to the
// point after r, the last point lasting nothing.
func (lt *loadTree) span(l, r int) int64 {
	return lt.t[min(r+1, lt.n-1)] - lt.t[l]
}

// areaIdx returns the integral of the curve over the points l..r (0 when l > r).
func (lt *loadTree) areaIdx(l, r int) float64 {
	if l > r {
		return 0
	}
	return lt.query(1, 0, lt.n-1, l, r)
}

func (lt *loadTree) query(node, nl, nr, l, r int) float64 {
	if r < nl || nr < l {
		return 0
	}
	if l <= nl && nr <= r {
		return lt.sum[node]
	}
	lt.push(node)
	m := (nl + nr) / 2
	return lt.query(2*node, nl, m, l, r) + lt.query(2*node+1, m+1, nr, l, r)
}

// bufSwaps are a plan's swaps of one buffer.
type bufSwaps struct {
	b     *buffer
	swaps []*rewrite.PlannedSwap
}

// fastModel predicts plans' memory curves from the unswapped step.
type fastModel struct {
	pr    *Problem
	trees []*loadTree // per simulated device; nil for hosts
	// d2h and h2d are the copy engines of each device (shared links and non-duplex links
	// share them), as in the simulator.
	d2h, h2d []int
	engines  int
	// nextStart is, per node, the start of the next op on its device (its own end when last).
	nextStart []int64
	// bounds and sortBuf are fastResult.peak's working lists, reused from call to call
	// (planning is sequential).
	bounds, sortBuf []bound
}

func newFastModel(pr *Problem) *fastModel {
	res := pr.timing.res
	fm := &fastModel{pr: pr, trees: make([]*loadTree, len(res.Devices)), d2h: make([]int, len(res.Devices)), h2d: make([]int, len(res.Devices))}
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
		fm.trees[i] = newLoadTree(res.Timeline.Memory[i])
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

// fastResult is a plan's predicted memory: the unswapped curves with the plan's edits, and
// the predicted swap-ins.
type fastResult struct {
	fm    *fastModel
	base  []*loadTree
	edits [][]edit
	peaks []int64
	peakT []int64
	done  []bool
	// late sums how long consumers are predicted to wait for copies (ns).
	late int64
	// waits are the waits the sweep added to hold ops back (throttling); stall is the longest
	// total delay of a device (waits and late copies), an estimate of the step-time overhead.
	waits []rewrite.Wait
	stall int64
}

// edit adds delta bytes to a curve over [from, to).
type edit struct {
	from, to, delta int64
}

func newFastResult(fm *fastModel) *fastResult {
	n := len(fm.trees)
	return &fastResult{fm: fm, base: fm.trees, edits: make([][]edit, n), peaks: make([]int64, n), peakT: make([]int64, n), done: make([]bool, n)}
}

func (r *fastResult) add(dev int, from, to, delta int64) {
	if from < to && delta != 0 {
		r.edits[dev] = append(r.edits[dev], edit{from, to, delta})
		r.done[dev] = false
	}
}

// peak returns the predicted peak of device dev and its time: the maximum over the pieces
// between edit boundaries of the unswapped curve's maximum plus the edits' sum.
func (r *fastResult) peak(dev int) (int64, int64) {
	if r.base[dev] == nil {
		return 0, 0
	}
	if r.done[dev] {
		return r.peaks[dev], r.peakT[dev]
	}
	es := r.edits[dev]
	bs := r.fm.bounds[:0]
	for _, e := range es {
		bs = append(bs, bound{e.from, e.delta}, bound{e.to, -e.delta})
	}
	// The sorted list and the other are distinct arrays, kept for the next call.
	bs, r.fm.sortBuf = sortBoundsWith(bs, r.fm.sortBuf)
	r.fm.bounds = bs
	lt := r.base[dev]
	best, bestT := int64(-1<<62), int64(0)
	// Each piece between bounds is the points lo..hi-1; a piece starts where the last ended.
	// Only a point above best-d can raise the peak, so the query skips the parts of the
	// curve that stay at or below it (qargAbove).
	consider := func(lo, hi int, d int64) {
		if lo < hi {
			if v, at, ok := lt.qargAbove(1, 0, lt.n-1, lo, hi-1, best-d); ok && v+d > best {
				best, bestT = v+d, lt.t[at]
			}
		}
	}
	var d int64
	lo := 0
	for i := 0; i < len(bs); {
		t := bs[i].t
		hi := firstAtOrAfter(lt.t[:lt.n], lo, t)
		consider(lo, hi, d)
		for i < len(bs) && bs[i].t == t {
			d += bs[i].d
			i++
		}
		lo = hi
	}
	consider(lo, lt.n, d)
	r.peaks[dev], r.peakT[dev], r.done[dev] = best, bestT, true
	return best, bestT
}

// bound is where an edit of a memory curve starts (d its amount) or ends (d minus it).
type bound struct {
	t, d int64
}

// firstAtOrAfter returns the least k at or after lo with ts[k] >= t (len(ts) when there is
// none), ts being sorted: a galloping search, by steps that double from lo, then a binary
// search within the last step. Successive calls for increasing t from the last answer cost
// the logarithm of the distance moved, not of the whole list.
func firstAtOrAfter(ts []int64, lo int, t int64) int {
	n := len(ts)
	hi, step := lo, 1
	for hi < n && ts[hi] < t {
		lo = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, n)
	return lo + sort.Search(hi-lo, func(k int) bool { return ts[lo+k] >= t })
}

// sortBounds returns bs ordered by time (the order of equal times is not kept), by a radix
// sort when the list is long and no time is negative.
func sortBounds(bs []bound) []bound {
	out, _ := sortBoundsWith(bs, nil)
	return out
}

// sortBoundsWith is sortBounds with buf as the radix sort's working list (grown when too
// short); it returns the sorted list and the other of the two lists, for reuse. Either may be
// bs.
func sortBoundsWith(bs, buf []bound) ([]bound, []bound) {
	var hi int64
	neg := false
	for _, b := range bs {
		hi = max(hi, b.t)
		neg = neg || b.t < 0
	}
	if len(bs) < 256 || neg {
		slices.SortFunc(bs, func(a, b bound) int { return cmp.Compare(a.t, b.t) })
		return bs, buf
	}
	const bits = 11
	var count [1 << bits]int
	if cap(buf) < len(bs) {
		buf = make([]bound, len(bs), len(bs)+len(bs)/4)
	}
	buf = buf[:len(bs)]
	for shift := uint(0); shift < 64 && hi>>shift > 0; shift += bits {
		clear(count[:])
		for _, b := range bs {
			count[(b.t>>shift)&(1<<bits-1)]++
		}
		for k, sum := 0, 0; k < len(count); k++ {
			count[k], sum = sum, sum+count[k]
		}
		for _, b := range bs {
			k := (b.t >> shift) & (1<<bits - 1)
			buf[count[k]] = b
			count[k]++
		}
		bs, buf = buf, bs
	}
	return bs, buf
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
	cmpEv := func(a, b sweepEv) int {
		if a.t != b.t {
			return cmp.Compare(a.t, b.t)
		}
		if a.kind != b.kind {
			return cmp.Compare(a.kind, b.kind)
		}
		return cmp.Compare(a.seq, b.seq)
	}
	var hi int64
	neg := false
	for _, e := range evs {
		hi = max(hi, e.t)
		neg = neg || e.t < 0
	}
	if len(evs) < 256 || neg {
		slices.SortFunc(evs, cmpEv)
		return evs
	}
	const bits = 11
	var count [1 << bits]int
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
	evs, buf = buf, evs
	// By time, least significant digit first (each pass stable).
	for shift := uint(0); shift < 64 && hi>>shift > 0; shift += bits {
		clear(count[:])
		for _, e := range evs {
			count[(e.t>>shift)&(1<<bits-1)]++
		}
		for k, sum := 0, 0; k < len(count); k++ {
			count[k], sum = sum, sum+count[k]
		}
		for _, e := range evs {
			d := (e.t >> shift) & (1<<bits - 1)
			buf[count[d]] = e
			count[d]++
		}
		evs, buf = buf, evs
	}
	return evs
}

// outState is one planned swap-out during the sweep.
type outState struct {
	ps   *rewrite.PlannedSwap
	swap int32 // index in the plan's swaps
	bs   int32 // index of its buffer
	done int64 // real time the copy is on the host; -1 until enqueued
	wait []int32
}

// bufState is one swapped buffer during the sweep.
type bufState struct {
	b                   *buffer
	outs                []int32
	lastNear, outDone   int64
	pending             int
	drained, sub, ended bool
	// seq orders the buffers by when they joined their device's drains.
	seq int
}

// drainItem orders the swapped buffers waiting for their copy to the host by the copy's
// end, then by arrival.
type drainItem struct{ bs *bufState }

func (a drainItem) Less(b drainItem) bool {
	if a.bs.outDone != b.bs.outDone {
		return a.bs.outDone < b.bs.outDone
	}
	return a.bs.seq < b.bs.seq
}

// allocItem orders the swap-ins not yet allocated by their allocation time, then by arrival.
type allocItem struct {
	g   *grpState
	seq int
}

func (a allocItem) Less(b allocItem) bool {
	if a.g.allocReal != b.g.allocReal {
		return a.g.allocReal < b.g.allocReal
	}
	return a.seq < b.seq
}

// grpState is one planned swap-in during the sweep.
type grpState struct {
	out                int32 // index of its swap-out
	trig               *graphdef.Node
	ctlDone, allocReal int64
	due, last, done    int64
	allocated, freed   bool
}

// devState is one compute device during the sweep: its time shift (the stalls so far),
// recorded as steps for mapping real times back, and its running memory edits.
type devState struct {
	shift         int64
	stepT, stepS  []int64
	freed, copies int64
	// drains are the swapped buffers whose copy to the host is not done yet, allocs the
	// swap-ins not yet allocated, each a heap by time (advance takes them off in O(log n)).
	drains minheap.Heap[drainItem]
	allocs minheap.Heap[allocItem]
	seq    int
}

func (d *devState) addShift(t, by int64) {
	d.shift += by
	if n := len(d.stepT); n > 0 && d.stepT[n-1] == t {
		d.stepS[n-1] = d.shift
		return
	}
	d.stepT = append(d.stepT, t)
	d.stepS = append(d.stepS, d.shift)
}

// unwarp maps a real time back to the unswapped step's time: a moment inside a stall maps
// to the stall's start.
func (d *devState) unwarp(r int64) int64 {
	k := sort.Search(len(d.stepT), func(i int) bool { return d.stepT[i]+d.stepS[i] > r }) - 1
	var s int64
	if k >= 0 {
		s = d.stepS[k]
	}
	t := r - s
	if k+1 < len(d.stepT) && t > d.stepT[k+1] {
		t = d.stepT[k+1]
	}
	return t
}

// predict returns the fast model's prediction for plan. With throttle set (per-device
// targets), it also holds ops back until swap-outs complete wherever the memory at an op
// would exceed its device's target, and returns those waits in fastResult.waits.
func (fm *fastModel) predict(plan *rewrite.Plan) *fastResult { return fm.sweep(plan, nil) }

func (fm *fastModel) sweep(plan *rewrite.Plan, throttle []int64) *fastResult {
	return fm.prepare(plan, throttle).run(nil)
}

// preparedSweep is a plan's sweep prepared once for any subset of its swapped buffers: the
// events of every swap, sorted, and the static part of each swap's, buffer's and swap-in's
// state. run replays the events of the buffers a decision keeps, skipping the others, which
// is the sweep of the plan without the dropped buffers' swaps (and their waits): the events
// of the kept swaps, their order and their handling are the same.
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
	// scratchBufs, scratchOuts and scratchGrps are run's working copies of bufs, outs and
	// grps, reused from run to run.
	scratchBufs []bufState
	scratchOuts []outState
	scratchGrps []grpState
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
			ps.bufs = append(ps.bufs, bufState{b: b, outDone: -1})
		}
		ps.bufOfSwap[i] = bi
		oi := int32(len(ps.outs))
		bs := &ps.bufs[bi]
		bs.outs = append(bs.outs, oi)
		bs.pending++
		outOf[sw.Tensor] = oi
		evs = append(evs, sweepEv{t: tm.times.End[sw.Tensor.Node.Index], kind: evOut, id: oi})
		ps.outs = append(ps.outs, outState{ps: sw, swap: int32(i), bs: bi, done: -1})
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
			gs := grpState{out: int32(oi), trig: g.Trigger, ctlDone: -1, allocReal: -1, due: -1}
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
	if throttle != nil || len(ps.waitsOf) > 0 {
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
	ps.evs = sortEvents(evs)
	return ps
}

// run replays the prepared sweep. keep, when not nil, says per prepared buffer whether its
// swaps are in the plan; the others' events are skipped, and an op whose waits all wait for
// dropped swaps is not held (without throttling, the event of an op does nothing else).
func (ps *preparedSweep) run(keep []bool) *fastResult {
	fm := ps.fm
	pr := fm.pr
	tm := pr.timing
	throttle := ps.throttle
	res := newFastResult(fm)
	devs := make([]*devState, len(fm.trees))
	for i, t := range fm.trees {
		if t != nil {
			devs[i] = &devState{}
		}
	}
	// The states start as prepared, in scratch copies kept for the next run (planning is
	// sequential, and the result refers to none of them).
	bufs := append(ps.scratchBufs[:0], ps.bufs...)
	outs := append(ps.scratchOuts[:0], ps.outs...)
	grps := append(ps.scratchGrps[:0], ps.grps...)
	ps.scratchBufs, ps.scratchOuts, ps.scratchGrps = bufs, outs, grps
	kept := func(bi int32) bool { return keep == nil || keep[bi] }
	engFree := make([]int64, fm.engines)
	lat := pr.latency
	// advance brings device d's running memory edits up to base time t.
	advance := func(d int, t int64) {
		ds := devs[d]
		r := t + ds.shift
		for ds.drains.Len() > 0 && ds.drains.Peek().bs.outDone <= r {
			bs := ds.drains.Pop().bs
			bs.drained = true
			if t >= bs.lastNear && !bs.ended && !bs.sub {
				bs.sub = true
				ds.freed += bs.b.bytes
			}
		}
		for ds.allocs.Len() > 0 && ds.allocs.Peek().g.allocReal <= r {
			g := ds.allocs.Pop().g
			if !g.freed {
				g.allocated = true
				ds.copies += bufs[outs[g.out].bs].b.bytes
			}
		}
	}
	setAlloc := func(g *grpState) {
		o := &outs[g.out]
		g.allocReal = max(g.ctlDone, o.done) + pr.hostIdent
		ds := devs[bufs[o.bs].b.dev]
		ds.allocs.Push(allocItem{g, ds.seq})
		ds.seq++
	}
	devOfNode := func(n *graphdef.Node) int {
		d := tm.dev[n.Index]
		if d < 0 || d >= len(devs) || devs[d] == nil {
			return -1
		}
		return d
	}
	grpBuf := func(g *grpState) *bufState { return &bufs[outs[g.out].bs] }
	// cand and candHeap hold a throttled op's candidate swap-outs, reused from op to op.
	var cand []drainItem
	var candHeap minheap.Heap[drainItem]
	for _, ev := range ps.evs {
		switch ev.kind {
		case evOut:
			o := &outs[ev.id]
			if !kept(o.bs) {
				continue
			}
			bs := &bufs[o.bs]
			b := bs.b
			ds := devs[b.dev]
			advance(b.dev, ev.t)
			eng := fm.d2h[b.dev]
			start := max(ev.t+ds.shift+lat, engFree[eng])
			o.done = start + fm.xferTime(b.bytes, false)
			engFree[eng] = o.done
			bs.outDone = max(bs.outDone, o.done)
			bs.pending--
			if bs.pending == 0 {
				bs.seq = ds.seq
				ds.seq++
				ds.drains.Push(drainItem{bs})
			}
			for _, gi := range o.wait {
				setAlloc(&grps[gi])
			}
			o.wait = nil
		case evCtl:
			g := &grps[ev.id]
			o := &outs[g.out]
			if !kept(o.bs) {
				continue
			}
			td := devOfNode(g.trig)
			real := ev.t + lat
			if td >= 0 {
				real += devs[td].shift
				eng := fm.d2h[td]
				real = max(real, engFree[eng])
				engFree[eng] = real
			} else if d := bufs[o.bs].b.dev; devs[d] != nil {
				real += devs[d].shift
			}
			g.ctlDone = real
			if o.done >= 0 {
				setAlloc(g)
			} else {
				o.wait = append(o.wait, ev.id)
			}
		case evNear:
			if !kept(ev.id) {
				continue
			}
			bs := &bufs[ev.id]
			advance(bs.b.dev, ev.t)
			if bs.drained && !bs.sub && !bs.ended {
				bs.sub = true
				devs[bs.b.dev].freed += bs.b.bytes
			}
		case evOrigEnd:
			if !kept(ev.id) {
				continue
			}
			bs := &bufs[ev.id]
			advance(bs.b.dev, ev.t)
			bs.ended = true
			if bs.sub {
				devs[bs.b.dev].freed -= bs.b.bytes
			}
		case evOp:
			n := pr.Analysis.Graph.Nodes[ev.id]
			var waits []int32
			if ev.w >= 0 {
				waits = ps.opWaits[ev.w]
			}
			if throttle == nil && keep != nil {
				any := false
				for _, oi := range waits {
					any = any || oi >= 0 && kept(outs[oi].bs)
				}
				if !any {
					continue
				}
			}
			d := devOfNode(n)
			if d < 0 {
				continue
			}
			ds := devs[d]
			advance(d, ev.t)
			for _, oi := range waits {
				if oi < 0 || !kept(outs[oi].bs) {
					continue
				}
				if o := &outs[oi]; o.done >= 0 {
					if need := o.done + lat; need > ev.t+ds.shift {
						ds.addShift(ev.t, need-(ev.t+ds.shift))
						advance(d, ev.t)
					}
				}
			}
			if throttle == nil || !pr.eligible(n) {
				continue
			}
			load := fm.trees[d].maxIn(ev.t, fm.nextStart[n.Index]) - ds.freed + ds.copies
			if load <= throttle[d] {
				continue
			}
			// Hold the op back until enough swap-outs have reached the host, oldest first
			// (by the copy's end, then by arrival: a total order, as seq is unique on a
			// device). Only the oldest few are usually needed, so the candidates are put in
			// a heap and taken off it in order rather than sorted whole.
			cand = cand[:0]
			for _, it := range ds.drains.Items() {
				if bs := it.bs; bs.lastNear <= ev.t && !bs.ended && bs.b.lastEnd > ev.t && bs.outDone >= 0 {
					cand = append(cand, it)
				}
			}
			if len(cand) == 0 {
				continue
			}
			candHeap.Init(cand)
			var acc int64
			var last *bufState
			for candHeap.Len() > 0 {
				bs := candHeap.Pop().bs
				acc += bs.b.bytes
				last = bs
				if load-acc <= throttle[d] {
					break
				}
			}
			var after *outState
			for _, oi := range last.outs {
				if o := &outs[oi]; after == nil || o.done > after.done {
					after = o
				}
			}
			if after.ps.Tensor.Node.TopoIndex >= n.TopoIndex || pr.timing.isEarly(pr.Analysis.Graph, after.ps.Tensor.Node) {
				continue // the wait could close a cycle (see timing.isEarly)
			}
			res.waits = append(res.waits, rewrite.Wait{Node: n, After: after.ps.Tensor})
			ds.addShift(ev.t, last.outDone+lat-(ev.t+ds.shift))
			advance(d, ev.t)
		case evDue:
			g := &grps[ev.id]
			bs := grpBuf(g)
			if !kept(outs[g.out].bs) {
				continue
			}
			b := bs.b
			ds := devs[b.dev]
			advance(b.dev, ev.t)
			if g.allocReal < 0 {
				continue
			}
			eng := fm.h2d[b.dev]
			start := max(g.allocReal+lat, engFree[eng])
			g.done = start + fm.xferTime(b.bytes, true)
			engFree[eng] = g.done
			if late := g.done - (ev.t + ds.shift); late > 0 {
				res.late += late
				ds.addShift(ev.t, late)
				advance(b.dev, ev.t)
			}
		case evCopyEnd:
			g := &grps[ev.id]
			if !kept(outs[g.out].bs) {
				continue
			}
			b := grpBuf(g).b
			advance(b.dev, ev.t)
			g.freed = true
			if g.allocated {
				devs[b.dev].copies -= b.bytes
			}
		}
	}
	// Edit the curves in the unswapped step's time: at most one edit per kept buffer and
	// swap-in, in lists sized for them.
	count := make([]int, len(devs))
	for bi := range bufs {
		if kept(int32(bi)) {
			count[bufs[bi].b.dev]++
		}
	}
	for gi := range grps {
		if g := &grps[gi]; kept(outs[g.out].bs) && g.allocReal >= 0 {
			count[grpBuf(g).b.dev]++
		}
	}
	for d, c := range count {
		if c > 0 {
			res.edits[d] = make([]edit, 0, c)
		}
	}
	for bi := range bufs {
		if !kept(int32(bi)) {
			continue
		}
		bs := &bufs[bi]
		b := bs.b
		ds := devs[b.dev]
		free := bs.lastNear
		if bs.outDone >= 0 {
			free = max(free, ds.unwarp(bs.outDone))
		}
		if free < b.lastEnd {
			res.add(b.dev, free, b.lastEnd, -b.bytes)
		} else if free > b.lastEnd {
			res.add(b.dev, b.lastEnd, free, b.bytes)
		}
	}
	for gi := range grps {
		g := &grps[gi]
		if !kept(outs[g.out].bs) {
			continue
		}
		b := grpBuf(g).b
		if g.allocReal < 0 {
			continue
		}
		ds := devs[b.dev]
		alloc := ds.unwarp(g.allocReal)
		res.add(b.dev, alloc, g.last, b.bytes)
	}
	for _, ds := range devs {
		if ds != nil && ds.shift > res.stall {
			res.stall = ds.shift
		}
	}
	return res
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

// maxIn returns the curve's maximum over the points in [from, to), or the value at the last
// point before from when the range holds none.
func (lt *loadTree) maxIn(from, to int64) int64 {
	l, r := lt.index(from), lt.index(to)-1
	if l > r {
		if l > 0 {
			l--
		}
		r = l
	}
	return lt.qmax(1, 0, lt.n-1, l, r)
}

func (lt *loadTree) qmax(node, nl, nr, l, r int) int64 {
	if r < nl || nr < l {
		return -1 << 62
	}
	if l <= nl && nr <= r {
		return lt.max[node]
	}
	lt.push(node)
	m := (nl + nr) / 2
	return max(lt.qmax(2*node, nl, m, l, r), lt.qmax(2*node+1, m+1, nr, l, r))
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

// rangeMax returns the maximum over the points in [from, to), the time of the point where it
// occurs, and whether the range holds a point.
func (lt *loadTree) rangeMax(from, to int64) (int64, int64, bool) {
	l, r := lt.index(from), lt.index(to)-1
	if l > r {
		return 0, 0, false
	}
	v, i := lt.qarg(1, 0, lt.n-1, l, r)
	return v, lt.t[i], true
}

// qargAbove returns what qarg returns for the points l..r when their maximum is above thr,
// and false otherwise, without descending into the parts of the tree whose maximum is not
// above thr. Where the maximum is above thr, the skipped parts hold no point as high, so
// the point returned is qarg's (the earliest of the highest).
func (lt *loadTree) qargAbove(node, nl, nr, l, r int, thr int64) (int64, int, bool) {
	if r < nl || nr < l || lt.max[node] <= thr {
		return 0, -1, false
	}
	if l <= nl && nr <= r {
		return lt.max[node], int(lt.arg[node]), true
	}
	lt.push(node)
	m := (nl + nr) / 2
	a, ai, aok := lt.qargAbove(2*node, nl, m, l, r, thr)
	if aok {
		// The right half need only beat the left's maximum (a tie keeps the left).
		thr = a
	}
	b, bi, bok := lt.qargAbove(2*node+1, m+1, nr, l, r, thr)
	if bok {
		return b, bi, true
	}
	return a, ai, aok
}

func (lt *loadTree) qarg(node, nl, nr, l, r int) (int64, int) {
	if r < nl || nr < l {
		return -1 << 62, -1
	}
	if l <= nl && nr <= r {
		return lt.max[node], int(lt.arg[node])
	}
	lt.push(node)
	m := (nl + nr) / 2
	a, ai := lt.qarg(2*node, nl, m, l, r)
	b, bi := lt.qarg(2*node+1, m+1, nr, l, r)
	if b > a {
		return b, bi
	}
	return a, ai
}
