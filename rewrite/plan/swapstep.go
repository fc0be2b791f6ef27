package plan

import "github.com/tfswap/tfswap/cost"

// swapStep returns the incremental simulator of a prepared sweep (cost.SwapStep), its
// candidates the prepared buffers and keep (nil: all) their decisions, throttled when the
// sweep was prepared with targets. Without throttling the events that change nothing (a
// buffer's last reads, an op without waits) are left out.
func (ps *preparedSweep) swapStep(keep []bool) *cost.SwapStep {
	if ps.spec == nil {
		ps.spec = ps.stepSpec()
	}
	swapped := keep
	if swapped == nil {
		swapped = make([]bool, len(ps.bufs))
		for i := range swapped {
			swapped[i] = true
		}
	}
	return cost.NewSwapStep(ps.spec, swapped)
}

// stepSpec returns the prepared sweep as the spec of a cost.SwapStep.
func (ps *preparedSweep) stepSpec() *cost.SwapStepSpec {
	fm := ps.fm
	pr := fm.pr
	tm := pr.timing
	spec := &cost.SwapStepSpec{Engines: fm.engines, Latency: pr.latency, HostIdent: pr.hostIdent, Throttle: ps.throttle, Scratch: &fm.scratch}
	spec.Devices = make([]cost.SwapDevice, len(fm.trees))
	for i, t := range fm.trees {
		if t != nil {
			spec.Devices[i] = cost.SwapDevice{Compute: true, Curve: t, D2H: fm.d2h[i], H2D: fm.h2d[i]}
		}
	}
	devOf := func(index int) int {
		d := tm.dev[index]
		if d < 0 || d >= len(fm.trees) || fm.trees[d] == nil {
			return -1
		}
		return d
	}
	spec.Tensors = make([]cost.SwappedTensor, len(ps.bufs))
	for i := range ps.bufs {
		bs := &ps.bufs[i]
		b := bs.b
		spec.Tensors[i] = cost.SwappedTensor{Device: b.dev, Bytes: b.bytes, OutCopy: fm.xferTime(b.bytes, false), InCopy: fm.xferTime(b.bytes, true), LastNear: bs.lastNear, LastEnd: b.lastEnd}
	}
	spec.Outs = make([]cost.SwapOut, len(ps.outs))
	for i := range ps.outs {
		spec.Outs[i] = cost.SwapOut{Tensor: ps.outs[i].bs}
	}
	spec.Ins = make([]cost.SwapIn, len(ps.grps))
	for i := range ps.grps {
		g := &ps.grps[i]
		spec.Ins[i] = cost.SwapIn{Out: g.out, Trigger: devOf(g.trig.Index), Last: g.last}
	}
	throttle := ps.throttle != nil
	// A sweep whose op events are the fast model's shared list, merged in its order, shares
	// the step's ops made for that list: the j-th op event is op j.
	shared := throttle && ps.sharedOps && fm.stepOpsAll(devOf)
	spec.Events = make([]cost.StepEvent, 0, len(ps.evs))
	if shared {
		nOps := int32(0)
		for _, ev := range ps.evs {
			if ev.kind == evOp {
				spec.Events = append(spec.Events, cost.StepEvent{T: ev.t, Kind: cost.EventOp, ID: nOps})
				nOps++
				continue
			}
			spec.Events = ps.appendSwapEvent(spec.Events, ev, throttle)
		}
		spec.Ops, ps.opNode = fm.stepOps, fm.stepOpNodes
		ps.canWait(spec)
		return spec
	}
	// The ops are sized for every op event (with throttling nearly all are kept), so that a
	// sweep over a large step does not grow them by copying.
	ops := 0
	for _, ev := range ps.evs {
		if ev.kind == evOp {
			ops++
		}
	}
	spec.Ops = make([]cost.StepOp, 0, ops)
	ps.opNode = make([]int32, 0, ops)
	for _, ev := range ps.evs {
		switch ev.kind {
		default:
			spec.Events = ps.appendSwapEvent(spec.Events, ev, throttle)
		case evOp:
			d := devOf(int(ev.id))
			if d < 0 || ev.w < 0 && !throttle {
				continue
			}
			op := cost.StepOp{Device: d}
			if ev.w >= 0 {
				op.Waits = ps.opWaits[ev.w]
			}
			if throttle {
				n := pr.Analysis.Graph.Nodes[ev.id]
				op.Hold, op.Next = pr.eligible(n), fm.nextStart[ev.id]
			}
			spec.Events = append(spec.Events, cost.StepEvent{T: ev.t, Kind: cost.EventOp, ID: int32(len(spec.Ops))})
			spec.Ops = append(spec.Ops, op)
			ps.opNode = append(ps.opNode, ev.id)
		}
	}
	if throttle {
		ps.canWait(spec)
	}
	return spec
}

// appendSwapEvent appends to evs the step's event of ev, an event of the sweep's swaps (not an
// op's); the events only throttling reads are left out without it.
func (ps *preparedSweep) appendSwapEvent(evs []cost.StepEvent, ev sweepEv, throttle bool) []cost.StepEvent {
	switch ev.kind {
	case evOut:
		evs = append(evs, cost.StepEvent{T: ev.t, Kind: cost.EventSwapOut, ID: ev.id})
	case evCtl:
		evs = append(evs, cost.StepEvent{T: ev.t, Kind: cost.EventTrigger, ID: ev.id})
	case evDue:
		evs = append(evs, cost.StepEvent{T: ev.t, Kind: cost.EventSwapInDue, ID: ev.id})
	case evNear:
		if throttle {
			evs = append(evs, cost.StepEvent{T: ev.t, Kind: cost.EventNear, ID: ev.id})
		}
	case evOrigEnd:
		if throttle {
			evs = append(evs, cost.StepEvent{T: ev.t, Kind: cost.EventTensorEnd, ID: ev.id})
		}
	case evCopyEnd:
		if throttle {
			evs = append(evs, cost.StepEvent{T: ev.t, Kind: cost.EventSwapInEnd, ID: ev.id})
		}
	}
	return evs
}

// canWait sets spec's CanWait, for a throttled step: a wait for a swap-out whose producer does
// not come before the op, or runs early, could close a cycle (see timing.isEarly).
func (ps *preparedSweep) canWait(spec *cost.SwapStepSpec) {
	pr := ps.fm.pr
	tm := pr.timing
	nodes := pr.Analysis.Graph.Nodes
	spec.CanWait = func(op, out int32) bool {
		prod := ps.outs[out].ps.Tensor.Node
		return prod.TopoIndex < nodes[ps.opNode[op]].TopoIndex && !tm.isEarly(pr.Analysis.Graph, prod)
	}
}

// stepOpsAll makes, on first use, the steps' ops of the shared op events (opEventsAll), as
// stepSpec makes a throttled step's ops of events without waits, with devOf the compute
// device of a node (-1: none); it reports whether every event has one (else nothing is
// shared). The steps only read them.
func (fm *fastModel) stepOpsAll(devOf func(int) int) bool {
	if fm.stepOps == nil {
		pr := fm.pr
		evs := fm.opEventsAll()
		fm.stepOps, fm.stepOpNodes, fm.stepOpsOK = make([]cost.StepOp, 0, len(evs)), make([]int32, 0, len(evs)), true
		for _, ev := range evs {
			d := devOf(int(ev.id))
			if d < 0 {
				fm.stepOpsOK = false
				break
			}
			n := pr.Analysis.Graph.Nodes[ev.id]
			fm.stepOps = append(fm.stepOps, cost.StepOp{Device: d, Hold: pr.eligible(n), Next: fm.nextStart[ev.id]})
			fm.stepOpNodes = append(fm.stepOpNodes, ev.id)
		}
	}
	return fm.stepOpsOK
}

// stepExcess returns the largest peak of step minus target over the compute devices, and
// the device where it occurs (fastExcess for a cost.SwapStep).
func stepExcess(step *cost.SwapStep, target []int64) (int64, int) {
	worst, dev := int64(-1<<62), -1
	for i := range target {
		if !step.Compute(i) {
			continue
		}
		p, _ := step.Peak(i)
		if x := p - target[i]; x > worst {
			worst, dev = x, i
		}
	}
	return worst, dev
}
