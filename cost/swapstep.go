package cost

import "sort"

// The incremental swap simulator: a training step prepared once for a set of candidate
// swaps, whose decisions (swap a tensor or not) change one at a time, each change
// re-simulating only the events it affects.
//
// The step is the unswapped step's memory curve per device and the events of every
// candidate: a swapped tensor's swap-out starts when its producer ends and queues on its
// device's device-to-host engine; each swap-in is released by its trigger (a control
// message that queues on the trigger device's engine), allocated when both the message and
// the swap-out have reached the host, and copied back on the host-to-device engine when its
// first reader is due; an op that waits for swap-outs is held until they are done. Ops are
// not otherwise moved: a late copy or a wait shifts every later event of its device (the
// stall). The tensor's memory is freed from the later of its last read before the gap and
// the end of its swap-out, and each swap-in occupies memory from its allocation to its last
// read, in the unswapped step's time.
//
// Between events only the copy engines' free times and the devices' shifts carry from one
// swap to another. A changed decision therefore affects the events from its tensor's first
// to its last, and beyond them only while those carried values differ from the previous
// sweep's at the same event, or a value it changed (a swap-out's end, a swap-in's release)
// is still to be read: once neither holds, the rest of the sweep is the previous one's and
// is not replayed. The curve is kept as a segment tree with every swap's edit applied, so
// the peak after a change costs the changed edits, not a pass over the step; a step that is
// never changed (one prediction) reads its peaks from the edits and the unswapped curve.
//
// With throttling (SwapStepSpec.Throttle), an op that may be held and whose start would take
// its device over the device's target waits until enough swapped tensors have reached the
// host, oldest first (Waits lists the waits so added). Throttling needs the events of every
// op and of the tensors' and swap-ins' last reads, and a throttled step is swept once, not
// changed.

// SwapDevice is one device of a SwapStep: its unswapped memory curve (compute devices only;
// the step does not change Curve) and the copy engines its transfers queue on (engines are
// shared by devices on one link).
type SwapDevice struct {
	Compute  bool
	Curve    *LoadTree
	D2H, H2D int
}

// SwappedTensor is a candidate for swapping: its device, size, copy times each way, the end
// of its last read before its gap (LastNear) and the end of its last read (LastEnd).
type SwappedTensor struct {
	Device            int
	Bytes             int64
	OutCopy, InCopy   int64
	LastNear, LastEnd int64
}

// SwapOut is one swap-out of a candidate tensor.
type SwapOut struct{ Tensor int32 }

// SwapIn is one swap-in of a swap-out: the compute device of its trigger (-1 when the
// trigger is not on one) and the end of its last read.
type SwapIn struct {
	Out     int32
	Trigger int
	Last    int64
}

// StepOp is an op that waits for swap-outs before it starts (Waits, -1 for a swap-out that is
// not a candidate's), on compute device Device. With throttling every op of a compute device
// is one: Hold says whether it may be held and Next is the start of the next op on its device
// (the op's memory is the curve's maximum from its start to Next).
type StepOp struct {
	Device int
	Waits  []int32
	Hold   bool
	Next   int64
}

// StepEventKind is what happens at a StepEvent.
type StepEventKind uint8

// The event kinds: a swap-out's producer ends (ID a SwapOut), a swap-in's trigger ends (ID
// a SwapIn), an op with waits starts (ID a StepOp), a swap-in's first reader is due (ID a
// SwapIn); for throttling also a tensor's last read before its gap ends (EventNear, ID a
// SwappedTensor), a tensor's last read ends (EventTensorEnd), a swap-in's last read ends
// (EventSwapInEnd, ID a SwapIn).
const (
	EventSwapOut StepEventKind = iota
	EventTrigger
	EventOp
	EventSwapInDue
	EventNear
	EventTensorEnd
	EventSwapInEnd
)

// StepEvent is one event of a SwapStep at time T of the unswapped step.
type StepEvent struct {
	T    int64
	Kind StepEventKind
	ID   int32
}

// SwapStepSpec describes a SwapStep: its devices and engines, the transfer latency, the
// time a swapped-in copy waits on the host before it is released (HostIdent), the candidates
// and the events in the order they are handled, and the per-device targets of throttling
// (nil: none) with CanWait, which says whether an op may wait for a swap-out (nil: always).
// Scratch, when set, lends its working lists to the steps of the spec (one at a
// time).
type SwapStepSpec struct {
	Devices            []SwapDevice
	Engines            int
	Latency, HostIdent int64
	Tensors            []SwappedTensor
	Outs               []SwapOut
	Ins                []SwapIn
	Ops                []StepOp
	Events             []StepEvent
	Throttle           []int64
	CanWait            func(op, out int32) bool
	Scratch            *StepScratch
	index              *stepIndex // made by the first NewSwapStep
}

// StepScratch holds working lists that steps made one after another reuse.
type StepScratch struct {
	bounds, sorted []bound
}

// StepWait is a wait throttling added: op Op waits for swap-out Out.
type StepWait struct{ Op, Out int32 }

// stepEdit adds delta bytes to a device's curve over [from, to).
type stepEdit struct{ from, to, delta int64 }

// shiftStep is a device's shift s from unswapped time t on, set at event idx.
type shiftStep struct {
	t, s int64
	idx  int32
}

// SwapStep is a prepared step and the sweep of its current decisions (NewSwapStep).
type SwapStep struct {
	spec    *SwapStepSpec
	swapped []bool
	n       int // events
	nd, ne  int
	// The spec's static indices.
	*stepIndex
	// The current sweep: its values, the engines' and shifts' state before each event
	// (and after the last; recorded once the step is changed), the shift steps per device,
	// the edits and the curves (trees, made on the first change; until then peaks are read
	// from the edits and kept in peaks).
	done, ctl, alloc []int64
	stEng, stShift   []int64
	rec              bool
	hist             [][]shiftStep
	tEdit, gEdit     []stepEdit
	trees            []*LoadTree
	peaks            []stepPeak
	stall            int64
	waits            []StepWait
	// The pending change (Set), kept until the next Set commits it or Undo drops it.
	pend *stepChange
	// Trial working state, reused from change to change.
	epoch                          int32
	stampOut, stampCtl, stampAlloc []int32
	tDone, tCtl, tAlloc            []int64
	eng, shift                     []int64
}

// stepPeak is a device's peak and its time, read from the edits of a step not yet changed.
type stepPeak struct {
	v, t int64
	ok   bool
}

// stepChange is a change replayed but not committed: the changed tensors (none for the
// first sweep), the replayed
// events [start, stop) and the state before each, the new shift steps, the changed edits
// (with their old values, for Undo) and the previous stall.
type stepChange struct {
	tensors     []int
	start, stop int
	stEng       []int64
	stShift     []int64
	hist        [][]shiftStep
	prefix      []int
	tEdits      []int32
	oldT        []stepEdit
	gEdits      []int32
	oldG        []stepEdit
	stall       int64
}

// stepIndex holds a spec's static indices, made once for all its steps: the event that
// writes each value and the last event that reads it, each tensor's first and last event,
// and each tensor's swap-outs and each swap-out's swap-ins.
type stepIndex struct {
	outIdx, ctlIdx, dueIdx, allocIdx []int32
	outReader                        []int32
	first, last                      []int32
	outsOff, outsV, insOff, insV     []int32
}

func newStepIndex(spec *SwapStepSpec) *stepIndex {
	n := len(spec.Events)
	no, ni, nt := len(spec.Outs), len(spec.Ins), len(spec.Tensors)
	s := &stepIndex{}
	s.outIdx, s.outReader = fill32(no, -1), fill32(no, -1)
	s.ctlIdx, s.dueIdx, s.allocIdx = fill32(ni, -1), fill32(ni, -1), fill32(ni, -1)
	s.first, s.last = fill32(nt, int32(n)), fill32(nt, -1)
	s.outsOff, s.outsV = group(nt, no, func(o int) int { return int(spec.Outs[o].Tensor) })
	s.insOff, s.insV = group(no, ni, func(g int) int { return int(spec.Ins[g].Out) })
	touch := func(t int32, i int) {
		s.first[t] = min(s.first[t], int32(i))
		s.last[t] = max(s.last[t], int32(i))
	}
	for i, ev := range spec.Events {
		switch ev.Kind {
		case EventSwapOut:
			s.outIdx[ev.ID] = int32(i)
			touch(spec.Outs[ev.ID].Tensor, i)
		case EventTrigger:
			s.ctlIdx[ev.ID] = int32(i)
			touch(spec.Outs[spec.Ins[ev.ID].Out].Tensor, i)
		case EventSwapInDue:
			s.dueIdx[ev.ID] = int32(i)
			touch(spec.Outs[spec.Ins[ev.ID].Out].Tensor, i)
		case EventOp:
			for _, o := range spec.Ops[ev.ID].Waits {
				if o >= 0 {
					s.outReader[o] = max(s.outReader[o], int32(i))
					touch(spec.Outs[o].Tensor, i)
				}
			}
		}
	}
	for g, in := range spec.Ins {
		s.allocIdx[g] = max(s.ctlIdx[g], s.outIdx[in.Out])
		s.outReader[in.Out] = max(s.outReader[in.Out], s.allocIdx[g])
	}
	return s
}

// group returns the items 0..m-1 grouped by key (0..n-1), in order within a group: group k
// is v[off[k]:off[k+1]].
func group(n, m int, key func(int) int) (off, v []int32) {
	off = make([]int32, n+1)
	for j := 0; j < m; j++ {
		off[key(j)+1]++
	}
	for k := 0; k < n; k++ {
		off[k+1] += off[k]
	}
	v = make([]int32, m)
	next := append([]int32(nil), off[:n]...)
	for j := 0; j < m; j++ {
		k := key(j)
		v[next[k]] = int32(j)
		next[k]++
	}
	return off, v
}

// outsOf returns tensor t's swap-outs.
func (x *stepIndex) outsOf(t int) []int32 { return x.outsV[x.outsOff[t]:x.outsOff[t+1]] }

// insOf returns swap-out o's swap-ins.
func (x *stepIndex) insOf(o int) []int32 { return x.insV[x.insOff[o]:x.insOff[o+1]] }

// NewSwapStep prepares spec's step and sweeps it with the tensors swapped says are swapped.
func NewSwapStep(spec *SwapStepSpec, swapped []bool) *SwapStep {
	n := len(spec.Events)
	s := &SwapStep{spec: spec, swapped: append([]bool(nil), swapped...), n: n, nd: len(spec.Devices), ne: spec.Engines}
	no, ni, nt := len(spec.Outs), len(spec.Ins), len(spec.Tensors)
	if spec.index == nil {
		spec.index = newStepIndex(spec)
	}
	s.stepIndex = spec.index
	s.done, s.ctl, s.alloc = fill64(no, -1), fill64(ni, -1), fill64(ni, -1)
	s.tDone, s.tCtl, s.tAlloc = make([]int64, no), make([]int64, ni), make([]int64, ni)
	s.stampOut, s.stampCtl, s.stampAlloc = make([]int32, no), make([]int32, ni), make([]int32, ni)
	s.eng, s.shift = make([]int64, s.ne), make([]int64, s.nd)
	s.hist = make([][]shiftStep, s.nd)
	// The first sweep is a change from nothing swapped, all events replayed, committed.
	s.epoch = 1
	c := &stepChange{prefix: make([]int, s.nd), hist: make([][]shiftStep, s.nd)}
	s.replay(c, 0, nil)
	s.commitValues(c)
	s.tEdit, s.gEdit = make([]stepEdit, nt), make([]stepEdit, ni)
	s.peaks = make([]stepPeak, s.nd)
	for t := range spec.Tensors {
		if s.swapped[t] {
			s.setTensorEdit(t, s.tensorEdit(t, s.unwarpBase))
			for _, o := range s.outsOf(int(t)) {
				for _, g := range s.insOf(int(o)) {
					s.setInEdit(int(g), s.inEdit(int(g), s.unwarpBase))
				}
			}
		}
	}
	return s
}

// prime prepares the step for changes: it sweeps the current decisions again recording the
// engines' and shifts' state before every event, and makes the curves with every edit.
func (s *SwapStep) prime() {
	if s.rec {
		return
	}
	if s.spec.Throttle != nil {
		panic("cost: a throttled SwapStep cannot be changed")
	}
	s.rec = true
	s.stEng, s.stShift = make([]int64, (s.n+1)*s.ne), make([]int64, (s.n+1)*s.nd)
	s.epoch++
	c := &stepChange{prefix: make([]int, s.nd), hist: make([][]shiftStep, s.nd)}
	s.replay(c, 0, nil)
	s.commitValues(c)
	s.trees = make([]*LoadTree, s.nd)
	for d, dev := range s.spec.Devices {
		if dev.Compute {
			s.trees[d] = dev.Curve.Clone()
		}
	}
	for t, e := range s.tEdit {
		s.trees[s.spec.Tensors[t].Device].Add(e.from, e.to, e.delta)
	}
	for g, e := range s.gEdit {
		s.trees[s.inDevice(g)].Add(e.from, e.to, e.delta)
	}
}

// inDevice returns the device of swap-in g's tensor.
func (s *SwapStep) inDevice(g int) int {
	return s.spec.Tensors[s.spec.Outs[s.spec.Ins[g].Out].Tensor].Device
}

func fill32(n int, v int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func fill64(n int, v int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Swapped reports whether tensor t is swapped in the current decisions.
func (s *SwapStep) Swapped(t int) bool { return s.swapped[t] }

// Peak returns the predicted peak of device d and the time of the unswapped step it occurs
// at (0, 0 for a device that is not a compute device).
func (s *SwapStep) Peak(d int) (int64, int64) {
	dev := &s.spec.Devices[d]
	if !dev.Compute {
		return 0, 0
	}
	if s.trees != nil {
		return s.trees[d].Peak()
	}
	if p := s.peaks[d]; p.ok {
		return p.v, p.t
	}
	// Before the first change the edits are not applied to a curve: the peak is the unswapped
	// curve's maximum plus the edits' sum, piece by piece between the edits' bounds.
	sc := s.spec.Scratch
	if sc == nil {
		sc = &StepScratch{}
	}
	bs := sc.bounds[:0]
	edge := func(e stepEdit) {
		if e.from < e.to && e.delta != 0 {
			bs = append(bs, bound{e.from, e.delta}, bound{e.to, -e.delta})
		}
	}
	for t, e := range s.tEdit {
		if s.spec.Tensors[t].Device == d {
			edge(e)
		}
	}
	for g, e := range s.gEdit {
		if s.inDevice(g) == d {
			edge(e)
		}
	}
	v, at, bs, buf := dev.Curve.edgePeak(bs, sc.sorted)
	sc.bounds, sc.sorted = bs, buf
	s.peaks[d] = stepPeak{v, at, true}
	return v, at
}

// Waits returns the waits throttling added, in the order of the ops.
func (s *SwapStep) Waits() []StepWait { return s.waits }

// Stall returns the longest shift of a device at the end of the step: the predicted
// step-time overhead of the current decisions.
func (s *SwapStep) Stall() int64 { return s.stall }

// Set changes the decisions of tensors to swapped and re-simulates what the change
// affects. Undo reverts the last Set; a Set commits the one before it.
func (s *SwapStep) Set(swapped bool, tensors ...int) {
	s.prime()
	s.commit()
	c := &stepChange{prefix: make([]int, s.nd), hist: make([][]shiftStep, s.nd), stall: s.stall}
	start, last := s.n, -1
	for _, t := range tensors {
		if s.swapped[t] != swapped {
			s.swapped[t] = swapped
			c.tensors = append(c.tensors, t)
			start, last = min(start, int(s.first[t])), max(last, int(s.last[t]))
		}
	}
	if len(c.tensors) == 0 {
		return
	}
	s.epoch++
	s.replay(c, start, func(i int) bool { return i > last })
	s.pend = c
	s.applyEdits(c)
}

// Undo reverts the last Set (nothing when it was committed or made no change).
func (s *SwapStep) Undo() {
	c := s.pend
	if c == nil {
		return
	}
	s.pend = nil
	for k := len(c.tEdits) - 1; k >= 0; k-- {
		s.setTensorEdit(int(c.tEdits[k]), c.oldT[k])
	}
	for k := len(c.gEdits) - 1; k >= 0; k-- {
		s.setInEdit(int(c.gEdits[k]), c.oldG[k])
	}
	s.stall = c.stall
	for _, t := range c.tensors {
		s.swapped[t] = !s.swapped[t]
	}
}

// kept reports whether swap-out o's tensor is swapped.
func (s *SwapStep) kept(o int32) bool { return s.swapped[s.spec.Outs[o].Tensor] }

// Values during a replay from event start: the replay's own when written in it, the
// previous sweep's when written before start, and unset (-1) otherwise.
func (s *SwapStep) curDone(o int32, start int) int64 {
	if s.stampOut[o] == s.epoch {
		return s.tDone[o]
	}
	if int(s.outIdx[o]) < start {
		return s.done[o]
	}
	return -1
}

func (s *SwapStep) curCtl(g int32, start int) int64 {
	if s.stampCtl[g] == s.epoch {
		return s.tCtl[g]
	}
	if int(s.ctlIdx[g]) < start {
		return s.ctl[g]
	}
	return -1
}

func (s *SwapStep) curAlloc(g int32, start int) int64 {
	if s.stampAlloc[g] == s.epoch {
		return s.tAlloc[g]
	}
	if int(s.allocIdx[g]) < start {
		return s.alloc[g]
	}
	return -1
}

// replay sweeps the events from start with the current decisions, from the state the
// previous sweep had there, until the end or, once after(i) holds and the replay has
// rejoined the previous sweep at event i, up to i. It records in c the events replayed and
// (once the step is changed) the state before each.
func (s *SwapStep) replay(c *stepChange, start int, after func(int) bool) {
	spec := s.spec
	ne, nd := s.ne, s.nd
	eng, shift := s.eng, s.shift
	if start == 0 {
		clear(eng)
		clear(shift)
	} else {
		copy(eng, s.stEng[start*ne:(start+1)*ne])
		copy(shift, s.stShift[start*nd:(start+1)*nd])
	}
	// The shift steps before start are the previous sweep's (prefix counts them); the
	// replay's own go to c.hist. hi counts, per device, the previous sweep's steps before
	// the current event, for comparing the steps of the replayed stretch.
	hi := make([]int, nd)
	for d, h := range s.hist {
		c.prefix[d] = sort.Search(len(h), func(k int) bool { return int(h[k].idx) >= start })
		hi[d] = c.prefix[d]
	}
	var th *throttling
	if spec.Throttle != nil {
		th = newThrottling(s)
		s.waits = s.waits[:0]
	}
	lat := spec.Latency
	dirtyUntil := -1
	addShift := func(d int, t, by int64, i int) {
		shift[d] += by
		c.hist[d] = append(c.hist[d], shiftStep{t, shift[d], int32(i)})
	}
	setAlloc := func(g int32, done int64, i int) {
		v := max(s.curCtl(g, start), done) + spec.HostIdent
		s.tAlloc[g], s.stampAlloc[g] = v, s.epoch
		if len(c.tensors) > 0 && v != s.alloc[g] {
			dirtyUntil = max(dirtyUntil, int(s.dueIdx[g]))
		}
		if th != nil {
			th.allocated(g, v)
		}
	}
	c.start = start
	i := start
	for ; i < s.n; i++ {
		if after != nil && after(i) && i > dirtyUntil && s.rejoined(i, hi, c) {
			break
		}
		if s.rec {
			c.stEng = append(c.stEng, eng...)
			c.stShift = append(c.stShift, shift...)
		}
		ev := spec.Events[i]
		switch ev.Kind {
		case EventSwapOut:
			if !s.kept(ev.ID) {
				continue
			}
			t := spec.Outs[ev.ID].Tensor
			tn := &spec.Tensors[t]
			th.advance(tn.Device, ev.T)
			e := spec.Devices[tn.Device].D2H
			v := max(ev.T+shift[tn.Device]+lat, eng[e]) + tn.OutCopy
			eng[e] = v
			s.tDone[ev.ID], s.stampOut[ev.ID] = v, s.epoch
			if len(c.tensors) > 0 && v != s.done[ev.ID] {
				dirtyUntil = max(dirtyUntil, int(s.outReader[ev.ID]))
			}
			th.swappedOut(t, v)
			for _, g := range s.insOf(int(ev.ID)) {
				if int(s.ctlIdx[g]) < i {
					setAlloc(g, v, i)
				}
			}
		case EventTrigger:
			o := spec.Ins[ev.ID].Out
			if !s.kept(o) {
				continue
			}
			real := ev.T + lat
			if td := spec.Ins[ev.ID].Trigger; td >= 0 {
				e := spec.Devices[td].D2H
				real = max(real+shift[td], eng[e])
				eng[e] = real
			} else {
				real += shift[spec.Tensors[spec.Outs[o].Tensor].Device]
			}
			s.tCtl[ev.ID], s.stampCtl[ev.ID] = real, s.epoch
			if len(c.tensors) > 0 && real != s.ctl[ev.ID] {
				dirtyUntil = max(dirtyUntil, int(s.allocIdx[ev.ID]))
			}
			if d := s.curDone(o, start); d >= 0 {
				setAlloc(ev.ID, d, i)
			}
		case EventOp:
			op := &spec.Ops[ev.ID]
			th.advance(op.Device, ev.T)
			for _, o := range op.Waits {
				if o < 0 || !s.kept(o) {
					continue
				}
				if d := s.curDone(o, start); d >= 0 {
					if need := d + lat; need > ev.T+shift[op.Device] {
						addShift(op.Device, ev.T, need-(ev.T+shift[op.Device]), i)
						th.advance(op.Device, ev.T)
					}
				}
			}
			if th != nil && op.Hold {
				if by := th.hold(ev.ID, ev.T); by > 0 {
					addShift(op.Device, ev.T, by, i)
					th.advance(op.Device, ev.T)
				}
			}
		case EventSwapInDue:
			in := &spec.Ins[ev.ID]
			if !s.kept(in.Out) {
				continue
			}
			tn := &spec.Tensors[spec.Outs[in.Out].Tensor]
			th.advance(tn.Device, ev.T)
			a := s.curAlloc(ev.ID, start)
			if a < 0 {
				continue
			}
			e := spec.Devices[tn.Device].H2D
			v := max(a+lat, eng[e]) + tn.InCopy
			eng[e] = v
			if late := v - (ev.T + shift[tn.Device]); late > 0 {
				addShift(tn.Device, ev.T, late, i)
				th.advance(tn.Device, ev.T)
			}
		case EventNear:
			if s.swapped[ev.ID] {
				th.near(ev.ID, ev.T)
			}
		case EventTensorEnd:
			if s.swapped[ev.ID] {
				th.tensorEnd(ev.ID, ev.T)
			}
		case EventSwapInEnd:
			if s.kept(spec.Ins[ev.ID].Out) {
				th.inEnd(ev.ID, ev.T)
			}
		}
	}
	c.stop = i
	if i == s.n && s.rec {
		c.stEng = append(c.stEng, eng...)
		c.stShift = append(c.stShift, shift...)
	}
}

// rejoined reports whether the replay's state before event i is the previous sweep's: the
// engines' free times, the devices' shifts and the shift steps since the replay's start.
// hi[d] is advanced to the previous sweep's steps before i.
func (s *SwapStep) rejoined(i int, hi []int, c *stepChange) bool {
	ne, nd := s.ne, s.nd
	for d, h := range s.hist {
		for hi[d] < len(h) && int(h[hi[d]].idx) < i {
			hi[d]++
		}
	}
	for e, v := range s.eng {
		if s.stEng[i*ne+e] != v {
			return false
		}
	}
	for d, v := range s.shift {
		if s.stShift[i*nd+d] != v {
			return false
		}
	}
	for d, h := range s.hist {
		old := h[c.prefix[d]:hi[d]]
		if len(old) != len(c.hist[d]) {
			return false
		}
		for k, st := range old {
			if st.t != c.hist[d][k].t || st.s != c.hist[d][k].s {
				return false
			}
		}
	}
	return true
}

// unwarp maps real time r of device d back to the unswapped step's time through steps (a
// moment inside a stall maps to the stall's start).
func unwarp(steps []shiftStep, r int64) int64 {
	k := sort.Search(len(steps), func(i int) bool { return steps[i].t+steps[i].s > r }) - 1
	var sh int64
	if k >= 0 {
		sh = steps[k].s
	}
	t := r - sh
	if k+1 < len(steps) && t > steps[k+1].t {
		t = steps[k+1].t
	}
	return t
}

func (s *SwapStep) unwarpBase(d int, r int64) int64 { return unwarp(s.hist[d], r) }

// tensorEdit returns tensor t's edit of its device's curve: freed from the later of its
// last read before the gap and its swap-out's end (unwarped by uw) to its end, or held
// longer when the swap-out ends after it. Values are read through the committed sweep.
func (s *SwapStep) tensorEdit(t int, uw func(int, int64) int64) stepEdit {
	tn := &s.spec.Tensors[t]
	if !s.swapped[t] {
		return stepEdit{}
	}
	outDone := int64(-1)
	for _, o := range s.outsOf(int(t)) {
		outDone = max(outDone, s.valDone(o))
	}
	free := tn.LastNear
	if outDone >= 0 {
		free = max(free, uw(tn.Device, outDone))
	}
	if free < tn.LastEnd {
		return stepEdit{free, tn.LastEnd, -tn.Bytes}
	}
	if free > tn.LastEnd {
		return stepEdit{tn.LastEnd, free, tn.Bytes}
	}
	return stepEdit{}
}

// inEdit returns swap-in g's edit: its copy is held from its allocation to its last read.
func (s *SwapStep) inEdit(g int, uw func(int, int64) int64) stepEdit {
	in := &s.spec.Ins[g]
	if !s.kept(in.Out) {
		return stepEdit{}
	}
	a := s.valAlloc(int32(g))
	if a < 0 {
		return stepEdit{}
	}
	tn := &s.spec.Tensors[s.spec.Outs[in.Out].Tensor]
	return stepEdit{uw(tn.Device, a), in.Last, tn.Bytes}
}

// valDone and valAlloc read a value after a replay: the replay's when it wrote it, else
// the committed sweep's.
func (s *SwapStep) valDone(o int32) int64 {
	if s.stampOut[o] == s.epoch {
		return s.tDone[o]
	}
	return s.done[o]
}

func (s *SwapStep) valAlloc(g int32) int64 {
	if s.stampAlloc[g] == s.epoch {
		return s.tAlloc[g]
	}
	return s.alloc[g]
}

func (s *SwapStep) setTensorEdit(t int, e stepEdit) {
	s.setEdit(&s.tEdit[t], s.spec.Tensors[t].Device, e)
}

func (s *SwapStep) setInEdit(g int, e stepEdit) {
	s.setEdit(&s.gEdit[g], s.inDevice(g), e)
}

// setEdit replaces the edit at p, of device d's curve, by e.
func (s *SwapStep) setEdit(p *stepEdit, d int, e stepEdit) {
	old := *p
	if old == e {
		return
	}
	if s.trees != nil {
		s.trees[d].Add(old.from, old.to, -old.delta)
		s.trees[d].Add(e.from, e.to, e.delta)
	}
	s.peaks[d].ok = false
	*p = e
}

// applyEdits sets the edits the pending change c alters, remembering the old ones: those of
// the swaps whose values the replay changed and of the changed tensor; every swap's when
// the replay did not rejoin with the same shift steps.
func (s *SwapStep) applyEdits(c *stepChange) {
	nd := s.nd
	uw := s.unwarpBase
	all := false
	if c.stop == s.n {
		// The replay ran to the end: its shift steps replace the previous sweep's from start.
		same := true
		for d, h := range s.hist {
			old := h[c.prefix[d]:]
			if len(old) != len(c.hist[d]) {
				same = false
				break
			}
			for k, st := range old {
				if st.t != c.hist[d][k].t || st.s != c.hist[d][k].s {
					same = false
				}
			}
		}
		if !same {
			all = true
			steps := make([][]shiftStep, nd)
			for d, h := range s.hist {
				steps[d] = append(append([]shiftStep(nil), h[:c.prefix[d]]...), c.hist[d]...)
			}
			uw = func(d int, r int64) int64 { return unwarp(steps[d], r) }
		}
		var stall int64
		for d, dev := range s.spec.Devices {
			if dev.Compute {
				stall = max(stall, c.stShift[(c.stop-c.start)*nd+d])
			}
		}
		s.stall = stall
	}
	setT := func(t int) {
		if e := s.tensorEdit(t, uw); e != s.tEdit[t] {
			c.tEdits, c.oldT = append(c.tEdits, int32(t)), append(c.oldT, s.tEdit[t])
			s.setTensorEdit(t, e)
		}
	}
	setG := func(g int) {
		if e := s.inEdit(g, uw); e != s.gEdit[g] {
			c.gEdits, c.oldG = append(c.gEdits, int32(g)), append(c.oldG, s.gEdit[g])
			s.setInEdit(g, e)
		}
	}
	if all {
		for t := range s.spec.Tensors {
			setT(t)
		}
		for g := range s.spec.Ins {
			setG(g)
		}
		return
	}
	for _, t := range c.tensors {
		setT(t)
		for _, o := range s.outsOf(int(t)) {
			for _, g := range s.insOf(int(o)) {
				setG(int(g))
			}
		}
	}
	for i := c.start; i < c.stop; i++ {
		ev := s.spec.Events[i]
		switch ev.Kind {
		case EventSwapOut:
			if s.stampOut[ev.ID] == s.epoch && s.tDone[ev.ID] != s.done[ev.ID] {
				setT(int(s.spec.Outs[ev.ID].Tensor))
			}
			for _, g := range s.insOf(int(ev.ID)) {
				if s.stampAlloc[g] == s.epoch && s.tAlloc[g] != s.alloc[g] {
					setG(int(g))
				}
			}
		case EventTrigger:
			if g := ev.ID; s.stampAlloc[g] == s.epoch && s.tAlloc[g] != s.alloc[g] {
				setG(int(g))
			}
		}
	}
}

// commit makes the pending change the committed sweep.
func (s *SwapStep) commit() {
	c := s.pend
	if c == nil {
		return
	}
	s.pend = nil
	s.commitValues(c)
}

// commitValues writes the values, states and shift steps of replay c into the sweep.
func (s *SwapStep) commitValues(c *stepChange) {
	ne, nd := s.ne, s.nd
	for i := c.start; i < c.stop; i++ {
		ev := s.spec.Events[i]
		switch ev.Kind {
		case EventSwapOut:
			s.done[ev.ID] = s.valDone(ev.ID)
			for _, g := range s.insOf(int(ev.ID)) {
				s.alloc[g] = s.valAlloc(g)
			}
		case EventTrigger:
			if s.stampCtl[ev.ID] == s.epoch {
				s.ctl[ev.ID] = s.tCtl[ev.ID]
			}
			s.alloc[ev.ID] = s.valAlloc(ev.ID)
		}
	}
	for _, t := range c.tensors {
		if s.swapped[t] {
			continue
		}
		for _, o := range s.outsOf(int(t)) {
			s.done[o] = -1
			for _, g := range s.insOf(int(o)) {
				s.ctl[g], s.alloc[g] = -1, -1
			}
		}
	}
	end := c.stop
	if end == s.n {
		end = s.n + 1
	}
	if s.rec {
		copy(s.stEng[c.start*ne:end*ne], c.stEng)
		copy(s.stShift[c.start*nd:end*nd], c.stShift)
	}
	for d, h := range s.hist {
		k := sort.Search(len(h), func(k int) bool { return int(h[k].idx) >= c.stop })
		if c.stop == s.n {
			k = len(h)
		}
		nh := make([]shiftStep, 0, c.prefix[d]+len(c.hist[d])+len(h)-k)
		nh = append(append(append(nh, h[:c.prefix[d]]...), c.hist[d]...), h[k:]...)
		s.hist[d] = nh
	}
	if len(c.tensors) == 0 {
		var stall int64
		for d, dev := range s.spec.Devices {
			if dev.Compute {
				stall = max(stall, s.shift[d])
			}
		}
		s.stall = stall
	}
}

// Compute reports whether device d is a compute device (one with a memory curve).
func (s *SwapStep) Compute(d int) bool { return s.spec.Devices[d].Compute }
