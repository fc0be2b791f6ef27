package cost

import (
	"math/rand"
	"slices"
	"testing"
)

// randomSwapStep returns a random step: one or two compute devices (sharing engines or not,
// with a host device), candidates with one or two swap-outs and up to two swap-ins each,
// triggers on either device or the host, ops waiting for swap-outs, events at random times.
func randomSwapStep(rng *rand.Rand) *SwapStepSpec {
	spec := &SwapStepSpec{Latency: int64(rng.Intn(3)), HostIdent: int64(1 + rng.Intn(2))}
	ncomp := 1 + rng.Intn(2)
	shared := rng.Intn(2) == 0
	horizon := int64(50 + rng.Intn(200))
	for d := 0; d < ncomp; d++ {
		dev := SwapDevice{Compute: true}
		if d == 0 || !shared {
			dev.D2H, dev.H2D = spec.Engines, spec.Engines+1
			spec.Engines += 2
		}
		var t, b int64
		var curve []MemPoint
		for k := 0; k < 5+rng.Intn(40); k++ {
			b += int64(rng.Intn(200) - 90)
			curve = append(curve, MemPoint{T: t, Bytes: b, Max: b + int64(rng.Intn(20))})
			t += int64(rng.Intn(int(horizon)/8 + 1))
		}
		dev.Curve = NewLoadTree(curve)
		spec.Devices = append(spec.Devices, dev)
	}
	spec.Devices = append(spec.Devices, SwapDevice{})
	type tev struct {
		ev  StepEvent
		seq int
	}
	var evs []tev
	add := func(t int64, k StepEventKind, id int) {
		evs = append(evs, tev{StepEvent{T: t, Kind: k, ID: int32(id)}, len(evs)})
	}
	for ti := 0; ti < 2+rng.Intn(12); ti++ {
		prod := rng.Int63n(horizon / 2)
		near := prod + rng.Int63n(horizon/4+1)
		end := near + rng.Int63n(horizon/2+1)
		spec.Tensors = append(spec.Tensors, SwappedTensor{Device: rng.Intn(ncomp), Bytes: int64(1 + rng.Intn(100)), OutCopy: int64(1 + rng.Intn(15)), InCopy: int64(1 + rng.Intn(15)), LastNear: near, LastEnd: end})
		add(near, EventNear, ti)
		add(end, EventTensorEnd, ti)
		for k := 0; k < 1+rng.Intn(2); k++ {
			o := len(spec.Outs)
			spec.Outs = append(spec.Outs, SwapOut{Tensor: int32(ti)})
			add(prod+int64(k), EventSwapOut, o)
			for j := 0; j < rng.Intn(3); j++ {
				g := len(spec.Ins)
				trig := rng.Intn(ncomp+1) - 1
				due := near + rng.Int63n(end-near+1)
				spec.Ins = append(spec.Ins, SwapIn{Out: int32(o), Trigger: trig, Last: due + rng.Int63n(end-due+1)})
				add(max(0, due-rng.Int63n(horizon/3+1)), EventTrigger, g)
				if rng.Intn(5) > 0 {
					add(due, EventSwapInDue, g)
					add(spec.Ins[g].Last, EventSwapInEnd, g)
				}
			}
		}
	}
	for k := 0; k < rng.Intn(10); k++ {
		op := StepOp{Device: rng.Intn(ncomp)}
		for j := 0; j < 1+rng.Intn(2); j++ {
			op.Waits = append(op.Waits, int32(rng.Intn(len(spec.Outs)+1)-1))
		}
		at := rng.Int63n(horizon)
		op.Hold, op.Next = rng.Intn(4) > 0, at+rng.Int63n(horizon/8+1)
		add(at, EventOp, len(spec.Ops))
		spec.Ops = append(spec.Ops, op)
	}
	// Ops without waits, which only throttling may hold.
	for k := 0; k < rng.Intn(20); k++ {
		at := rng.Int63n(horizon)
		add(at, EventOp, len(spec.Ops))
		spec.Ops = append(spec.Ops, StepOp{Device: rng.Intn(ncomp), Hold: rng.Intn(4) > 0, Next: at + rng.Int63n(horizon/8+1)})
	}
	slices.SortFunc(evs, func(a, b tev) int {
		switch {
		case a.ev.T != b.ev.T:
			return int(a.ev.T - b.ev.T)
		case a.ev.Kind != b.ev.Kind:
			return int(a.ev.Kind) - int(b.ev.Kind)
		}
		return a.seq - b.seq
	})
	for _, e := range evs {
		spec.Events = append(spec.Events, e.ev)
	}
	return spec
}

// sameSweep fails unless inc, a step changed decision by decision, predicts what a step
// swept afresh with its decisions predicts: every device's peak and its time, and the stall.
func sameSweep(t *testing.T, what string, spec *SwapStepSpec, inc *SwapStep) {
	t.Helper()
	fresh := NewSwapStep(spec, inc.swapped)
	for d := range spec.Devices {
		p, at := inc.Peak(d)
		fp, fat := fresh.Peak(d)
		if p != fp || at != fat {
			t.Fatalf("%s: device %d: incremental peak %d at %d, fresh sweep %d at %d (decisions %v)", what, d, p, at, fp, fat, inc.swapped)
		}
	}
	if inc.Stall() != fresh.Stall() {
		t.Fatalf("%s: incremental stall %d, fresh sweep %d (decisions %v)", what, inc.Stall(), fresh.Stall(), inc.swapped)
	}
}

// TestSwapStepIncrementalIsExact changes random steps' decisions one or two at a time (some
// changes undone) and checks each answer against a fresh sweep of the same decisions.
func TestSwapStepIncrementalIsExact(t *testing.T) {
	rng := rand.New(rand.NewSource(14))
	rejoins, changes := 0, 0
	for it := 0; it < 3000; it++ {
		spec := randomSwapStep(rng)
		sw := make([]bool, len(spec.Tensors))
		for i := range sw {
			sw[i] = rng.Intn(2) == 0
		}
		s := NewSwapStep(spec, sw)
		sameSweep(t, "prepared", spec, s)
		for k := 0; k < 12; k++ {
			// One tensor's decision flipped, or two set alike.
			ti, tj := rng.Intn(len(spec.Tensors)), rng.Intn(len(spec.Tensors))
			if rng.Intn(4) == 0 {
				s.Set(rng.Intn(2) == 0, ti, tj)
			} else {
				s.Set(!s.Swapped(ti), ti)
			}
			changes++
			if s.pend != nil && s.pend.stop < len(spec.Events) {
				rejoins++
			}
			sameSweep(t, "after a change", spec, s)
			if rng.Intn(3) == 0 {
				s.Undo()
				sameSweep(t, "after an undo", spec, s)
			}
		}
	}
	// The replays must have stopped early in some changes, or the test checks only the
	// replay to the end.
	if rejoins == 0 {
		t.Fatalf("no change of %d rejoined the previous sweep before the end", changes)
	}
	t.Logf("%d of %d changes rejoined the previous sweep before the end", rejoins, changes)
}

// TestSwapStepThrottleWaitsArePlanWaits: on random steps throttled to random targets, the
// waits throttling adds are waits an op may take (CanWait), and the throttled step predicts
// what the unthrottled step predicts when those waits are the ops' own (appended to their
// waits): every device's peak and its time, and the stall. That is how the planner uses
// them (Problem.throttled predicts the plan with the waits again). A target above every
// curve adds no wait.
func TestSwapStepThrottleWaitsArePlanWaits(t *testing.T) {
	rng := rand.New(rand.NewSource(15))
	waits, steps := 0, 0
	for it := 0; it < 3000; it++ {
		spec := randomSwapStep(rng)
		sw := make([]bool, len(spec.Tensors))
		for i := range sw {
			sw[i] = rng.Intn(4) > 0
		}
		spec.Throttle = make([]int64, len(spec.Devices))
		for d, dev := range spec.Devices {
			if dev.Compute {
				p, _ := dev.Curve.Peak()
				spec.Throttle[d] = p - int64(rng.Intn(400))
			}
		}
		spec.CanWait = func(op, out int32) bool { return (op+out)%4 != 0 }
		th := NewSwapStep(spec, sw)
		steps++
		plain := *spec
		plain.Throttle, plain.CanWait, plain.index = nil, nil, nil
		plain.Ops = append([]StepOp(nil), spec.Ops...)
		for _, w := range th.Waits() {
			if !spec.CanWait(w.Op, w.Out) {
				t.Fatalf("step %d: op %d waits for swap-out %d, which CanWait forbids", it, w.Op, w.Out)
			}
			op := &plain.Ops[w.Op]
			op.Waits = append(append([]int32(nil), op.Waits...), w.Out)
			waits++
		}
		ps := NewSwapStep(&plain, sw)
		for d := range spec.Devices {
			p, at := th.Peak(d)
			wp, wat := ps.Peak(d)
			if p != wp || at != wat {
				t.Fatalf("step %d: device %d: throttled peak %d at %d, with its waits %d at %d", it, d, p, at, wp, wat)
			}
		}
		if th.Stall() != ps.Stall() {
			t.Fatalf("step %d: throttled stall %d, with its waits %d", it, th.Stall(), ps.Stall())
		}
		for d := range spec.Throttle {
			spec.Throttle[d] = 1 << 40
		}
		if w := NewSwapStep(spec, sw).Waits(); len(w) != 0 {
			t.Fatalf("step %d: %d waits under a target above every curve", it, len(w))
		}
	}
	// The targets must have held some ops, or the test checks nothing.
	if waits < steps/10 {
		t.Fatalf("%d waits in %d throttled steps", waits, steps)
	}
	t.Logf("%d waits in %d throttled steps", waits, steps)
}
