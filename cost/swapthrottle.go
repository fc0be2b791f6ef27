package cost

import "github.com/tfswap/tfswap/internal/minheap"

// throttling is the running memory state of a throttled sweep (SwapStepSpec.Throttle): per
// device the bytes of swapped tensors already freed and of swapped-in copies already held,
// the tensors whose swap-outs are all issued but not yet on the host (drains) and the
// swap-ins not yet allocated (allocs), each a heap by time. A nil *throttling does nothing.
type throttling struct {
	s             *SwapStep
	freed, copies []int64
	seq           []int32 // per device, the order of the next item of its drains and allocs
	drains        []timedHeap
	allocs        []timedHeap
	// Per tensor: swap-outs not yet issued, the end of the last, the order it joined its
	// device's drains, and whether it has reached the host, is counted as freed, has ended.
	pending              []int
	outDone              []int64
	drained, sub, ended  []bool
	inAllocated, inFreed []bool // per swap-in
	// walk is hold's frontier in a device's drains heap (see hold).
	walk minheap.Heap[heapPos]
}

// heapPos is an item of a timedHeap's array and its position there.
type heapPos struct {
	it  timed
	pos int
}

// Less orders heap positions by their items.
func (x heapPos) Less(o heapPos) bool { return x.it.Less(o.it) }

func newThrottling(s *SwapStep) *throttling {
	nd, nt, ni := s.nd, len(s.spec.Tensors), len(s.spec.Ins)
	th := &throttling{s: s, freed: make([]int64, nd), copies: make([]int64, nd), seq: make([]int32, nd),
		drains: make([]timedHeap, nd), allocs: make([]timedHeap, nd),
		pending: make([]int, nt), outDone: fill64(nt, -1), drained: make([]bool, nt), sub: make([]bool, nt),
		ended: make([]bool, nt), inAllocated: make([]bool, ni), inFreed: make([]bool, ni)}
	for t := range th.pending {
		th.pending[t] = len(s.outsOf(int(t)))
	}
	return th
}

// advance brings device d's running state up to time t of the unswapped step: the tensors
// whose copies have reached the host by then are freed once their last read before the gap
// is over, and the swap-ins allocated by then are held.
func (th *throttling) advance(d int, t int64) {
	if th == nil {
		return
	}
	spec := th.s.spec
	r := t + th.s.shift[d]
	for th.drains[d].Len() > 0 && th.drains[d].Peek().at <= r {
		tn := th.drains[d].Pop().id
		th.drained[tn] = true
		if t >= spec.Tensors[tn].LastNear && !th.ended[tn] && !th.sub[tn] {
			th.sub[tn] = true
			th.freed[d] += spec.Tensors[tn].Bytes
		}
	}
	for th.allocs[d].Len() > 0 && th.allocs[d].Peek().at <= r {
		g := th.allocs[d].Pop().id
		if !th.inFreed[g] {
			th.inAllocated[g] = true
			th.copies[d] += spec.Tensors[spec.Outs[spec.Ins[g].Out].Tensor].Bytes
		}
	}
}

// swappedOut records that a swap-out of tensor t ends at real time done; once all of t's
// have been issued, t joins its device's drains.
func (th *throttling) swappedOut(t int32, done int64) {
	if th == nil {
		return
	}
	th.outDone[t] = max(th.outDone[t], done)
	th.pending[t]--
	if th.pending[t] == 0 {
		d := th.s.spec.Tensors[t].Device
		th.drains[d].Push(timed{th.outDone[t], th.seq[d], t})
		th.seq[d]++
	}
}

// allocated records that swap-in g is allocated at real time at.
func (th *throttling) allocated(g int32, at int64) {
	if th == nil {
		return
	}
	d := th.s.inDevice(int(g))
	th.allocs[d].Push(timed{at, th.seq[d], g})
	th.seq[d]++
}

// near handles the end of tensor t's last read before its gap, at time t0.
func (th *throttling) near(t int32, t0 int64) {
	if th == nil {
		return
	}
	tn := &th.s.spec.Tensors[t]
	th.advance(tn.Device, t0)
	if th.drained[t] && !th.sub[t] && !th.ended[t] {
		th.sub[t] = true
		th.freed[tn.Device] += tn.Bytes
	}
}

// tensorEnd handles the end of tensor t's last read, at time t0.
func (th *throttling) tensorEnd(t int32, t0 int64) {
	if th == nil {
		return
	}
	tn := &th.s.spec.Tensors[t]
	th.advance(tn.Device, t0)
	th.ended[t] = true
	if th.sub[t] {
		th.freed[tn.Device] -= tn.Bytes
	}
}

// inEnd handles the end of swap-in g's last read, at time t0.
func (th *throttling) inEnd(g int32, t0 int64) {
	if th == nil {
		return
	}
	d := th.s.inDevice(int(g))
	th.advance(d, t0)
	th.inFreed[g] = true
	if th.inAllocated[g] {
		th.copies[d] -= th.s.spec.Tensors[th.s.spec.Outs[th.s.spec.Ins[g].Out].Tensor].Bytes
	}
}

// hold decides whether op (starting at t0 of the unswapped step) waits: when its memory (the
// unswapped curve's maximum until the next op, less what is freed, plus the copies held)
// is over its device's target, it waits for the oldest tensors on their way to the host
// until enough bytes are freed, that is for the last of the last one's swap-outs (unless
// that could close a cycle). It returns the stall the wait adds (0: none) and records the
// wait.
func (th *throttling) hold(op int32, t0 int64) int64 {
	s := th.s
	spec := s.spec
	o := &spec.Ops[op]
	d := o.Device
	target := spec.Throttle[d]
	load := spec.Devices[d].Curve.MaxIn(t0, o.Next) - th.freed[d] + th.copies[d]
	if load <= target {
		return 0
	}
	// The candidates are taken in the drains' order, oldest first, until enough bytes are
	// freed. Only the oldest few are usually needed (a million-node graph's drains hold
	// tens of thousands of tensors), so the drains heap is walked in order from its root: a
	// second heap holds the frontier, the items whose parents have been taken, and taking an
	// item adds its children. The drains are not changed.
	items := th.drains[d].Items()
	if len(items) == 0 {
		return 0
	}
	th.walk.Init(th.walk.Items()[:0])
	th.walk.Push(heapPos{items[0], 0})
	var acc int64
	last := int32(-1)
	for th.walk.Len() > 0 {
		p := th.walk.Pop()
		for _, c := range [2]int{2*p.pos + 1, 2*p.pos + 2} {
			if c < len(items) {
				th.walk.Push(heapPos{items[c], c})
			}
		}
		t := p.it.id
		tn := &spec.Tensors[t]
		if tn.LastNear > t0 || th.ended[t] || tn.LastEnd <= t0 || th.outDone[t] < 0 {
			continue // not a candidate
		}
		acc += tn.Bytes
		last = t
		if load-acc <= target {
			break
		}
	}
	if last < 0 {
		return 0
	}
	after := int32(-1)
	for _, oi := range s.outsOf(int(last)) {
		if after < 0 || s.tDone[oi] > s.tDone[after] {
			after = oi
		}
	}
	if spec.CanWait != nil && !spec.CanWait(op, after) {
		return 0 // the wait could close a cycle
	}
	s.waits = append(s.waits, StepWait{Op: op, Out: after})
	return th.outDone[last] + spec.Latency - (t0 + s.shift[d])
}
