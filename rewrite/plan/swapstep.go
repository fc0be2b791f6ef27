package plan

import "github.com/tfswap/tfswap/cost"

// swapStep returns the incremental simulator of a prepared sweep without throttling
// (cost.SwapStep), its candidates the prepared buffers and keep (nil: all) their decisions:
// its answers are those of ps.run for the same decisions, and a changed decision
// re-simulates only what it affects. The events that change nothing without throttling (a
// buffer's last reads, an op without waits) are left out.
func (ps *preparedSweep) swapStep(keep []bool) *cost.SwapStep {
	fm := ps.fm
	pr := fm.pr
	tm := pr.timing
	res := tm.res
	spec := &cost.SwapStepSpec{Engines: fm.engines, Latency: pr.latency, HostIdent: pr.hostIdent}
	spec.Devices = make([]cost.SwapDevice, len(fm.trees))
	for i, t := range fm.trees {
		if t != nil {
			spec.Devices[i] = cost.SwapDevice{Compute: true, Curve: res.Timeline.Memory[i], D2H: fm.d2h[i], H2D: fm.h2d[i]}
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
	spec.Events = make([]cost.StepEvent, 0, len(ps.evs))
	for _, ev := range ps.evs {
		switch ev.kind {
		case evOut:
			spec.Events = append(spec.Events, cost.StepEvent{T: ev.t, Kind: cost.EventSwapOut, ID: ev.id})
		case evCtl:
			spec.Events = append(spec.Events, cost.StepEvent{T: ev.t, Kind: cost.EventTrigger, ID: ev.id})
		case evDue:
			spec.Events = append(spec.Events, cost.StepEvent{T: ev.t, Kind: cost.EventSwapInDue, ID: ev.id})
		case evOp:
			d := devOf(int(ev.id))
			if ev.w < 0 || d < 0 {
				continue
			}
			spec.Events = append(spec.Events, cost.StepEvent{T: ev.t, Kind: cost.EventOp, ID: int32(len(spec.Ops))})
			spec.Ops = append(spec.Ops, cost.StepOp{Device: d, Waits: ps.opWaits[ev.w]})
		}
	}
	swapped := keep
	if swapped == nil {
		swapped = make([]bool, len(ps.bufs))
		for i := range swapped {
			swapped[i] = true
		}
	}
	return cost.NewSwapStep(spec, swapped)
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
