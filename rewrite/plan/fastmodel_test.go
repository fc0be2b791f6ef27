package plan

import (
	"cmp"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestFastModelAgreesWithSimulate: after every one of a random sequence of swap decisions on
// a chain whose copies hide behind compute (triggers 2 ms ahead, gaps of at least 4 ms), the
// plan adds no stall by either model, and the fast model's predicted peak (an edit of the
// unswapped curve) is the simulator's, or (a known difference of the fast model, which
// planners correct for by simulating every plan they keep: in the backward pass the
// simulator holds one more buffer at the peak when swap-ins overlap) below it by at most one
// swapped buffer; it is never above it.
func TestFastModelAgreesWithSimulate(t *testing.T) {
	const n = 12
	gr, err := graphdef.NewGraph(planChain(n, ""), "chain")
	if err != nil {
		t.Fatal(err)
	}
	m := graphdef.NewModel(planChain(n, ""))
	m.Source = "chain"
	pr, err := newProblemRun(m, rewrite.Analyze(gr, rewrite.Options{}), PlanOptions{Profile: slowProfile(), Budget: 1 << 20, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	bufs := pr.sortedBuffers(-1)
	const gapMin = 4_000_000
	checked, exact := 0, 0
	for seed := int64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewSource(seed))
		for trial := 0; trial < 12; trial++ {
			var sel []*choice
			var largest int64
			perm := rng.Perm(len(bufs))
			for _, i := range perm[:1+rng.Intn(len(perm))] {
				b := bufs[i]
				if len(b.accesses) < 2 {
					continue
				}
				k := rng.Intn(len(b.accesses)-1) + 1
				c := &choice{b: b, splits: []int{k}}
				if _, ok := pr.episodes(c); !ok {
					continue
				}
				if ac := pr.newCand(b, k, ""); ac.to-ac.from < gapMin {
					continue
				}
				sel = append(sel, c)
				largest = max(largest, b.bytes)
				plan, _ := pr.buildPlan(mergeChoices(sel), costRule(nil, 2_000_000))
				if len(plan.Swaps) == 0 {
					t.Fatalf("seed %d trial %d: %d decisions made no swap", seed, trial, len(sel))
				}
				r := pr.fast.predict(plan)
				ev, err := pr.Evaluate(plan)
				if err != nil {
					t.Fatal(err)
				}
				d := ev.Devices[0]
				p, _ := r.peak(d.SimulatedIndex)
				if r.stall != 0 || d.SwapInStall != 0 {
					t.Fatalf("seed %d trial %d: %d swaps stall (fast %d ns, simulated %d ns)", seed, trial, len(plan.Swaps), r.stall, d.SwapInStall)
				}
				if p > d.Peak || d.Peak-p > largest {
					t.Fatalf("seed %d trial %d: %d swaps: fast model peak %d, simulated %d (largest swapped buffer %d)", seed, trial, len(plan.Swaps), p, d.Peak, largest)
				}
				checked++
				if p == d.Peak {
					exact++
				}
			}
		}
	}
	// Most plans agree exactly; the bound above is not the whole check.
	if checked < 50 || exact*4 < checked*3 {
		t.Fatalf("%d plans checked, %d predicted exactly", checked, exact)
	}
	t.Logf("%d plans checked, %d predicted exactly", checked, exact)
}

// stableSortedEvents returns a copy of evs numbered by position (seq) and sorted by a stable
// comparison sort on time and kind: the order sortEvents must give.
func stableSortedEvents(evs []sweepEv) []sweepEv {
	want := append([]sweepEv(nil), evs...)
	for i := range want {
		want[i].seq = int32(i)
	}
	sort.SliceStable(want, func(a, b int) bool {
		if want[a].t != want[b].t {
			return want[a].t < want[b].t
		}
		return want[a].kind < want[b].kind
	})
	return want
}

// TestSortEvents checks the sweep's linear event sort against a comparison sort on random
// lists, short and long, with ties in time and kind.
func TestSortEvents(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 40; trial++ {
		n := rng.Intn(3000)
		span := int64(1) << uint(rng.Intn(40)+1)
		evs := make([]sweepEv, n)
		for i := range evs {
			evs[i] = sweepEv{t: rng.Int63n(span), kind: uint8(rng.Intn(evOrigEnd + 1)), id: int32(i)}
		}
		want := stableSortedEvents(evs)
		got := sortEvents(evs)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d events, span %d): sortEvents differs from a stable sort", trial, n, span)
		}
	}
}

// TestSortEventsFrom checks sortEventsFrom against a comparison sort on random lists whose
// events from a random index on are op events in order by time (ties in time with each other
// and with the events before them), and on lists where they are not in order.
func TestSortEventsFrom(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	merged := 0
	for trial := 0; trial < 60; trial++ {
		n := rng.Intn(3000)
		from := rng.Intn(n + 1)
		span := int64(1) << uint(rng.Intn(20)+1)
		evs := make([]sweepEv, n)
		for i := range evs {
			evs[i] = sweepEv{t: rng.Int63n(span), kind: uint8(rng.Intn(evOrigEnd + 1)), id: int32(i)}
		}
		tail := evs[from:]
		for i := range tail {
			tail[i].kind = evOp
		}
		if trial%4 != 3 {
			slices.SortFunc(tail, func(a, b sweepEv) int { return cmp.Compare(a.t, b.t) })
			merged++
		}
		want := stableSortedEvents(evs)
		// prepare's merge of a shared list of op events, which it must leave as it is.
		shared := slices.Clone(evs[from:])
		kept := slices.Clone(shared)
		if trial%4 != 3 {
			if got := mergeEvents(sortEvents(slices.Clone(evs[:from])), shared, from); !slices.Equal(got, want) {
				t.Fatalf("trial %d (%d events, op events from %d): mergeEvents differs from a stable sort", trial, n, from)
			}
			if !slices.Equal(shared, kept) {
				t.Fatalf("trial %d: mergeEvents changed the op events it merged", trial)
			}
		}
		got := sortEventsFrom(evs, from)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d events, op events from %d, span %d): sortEventsFrom differs from a stable sort", trial, n, from, span)
		}
	}
	if merged == 0 {
		t.Fatal("no list with its op events in order")
	}
}

// TestOpEventsShared: a throttled sweep of a plan without waits takes its op events from the
// fast model's shared list (opEventsAll), and gets the events, in the order, that listing every
// op of each compute device in start order gives; its prediction is the same whether the list
// was made for it or before, and sweeping does not change the list.
func TestOpEventsShared(t *testing.T) {
	m, gr := loadTestModel(t, "fixtures", "resnet", "a fixture of the repository")
	pr, err := newProblemRun(m, rewrite.Analyze(gr, rewrite.Options{}), PlanOptions{Profile: slowProfile(), Budget: 1 << 20, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	cs := pr.vdnnChoices(false)
	groups, _ := pr.groupsOf(cs, layerRule(convAny))
	tm := pr.timing
	var want []sweepEv
	for _, dev := range pr.gpuDevices() {
		for _, n := range tm.order[dev] {
			want = append(want, sweepEv{t: tm.times.Start[n.Index], kind: evOp, id: int32(n.Index), w: -1})
		}
	}
	if len(want) == 0 {
		t.Fatal("no ops")
	}
	rng := rand.New(rand.NewSource(5))
	swapped := 0
	for trial := 0; trial < 20; trial++ {
		// Targets from 40% to 97% of each device's unswapped peak.
		throttle := make([]int64, len(tm.res.Devices))
		for i, d := range tm.res.Devices {
			throttle[i] = d.PeakBytes * int64(40+3*trial) / 100
		}
		plan, _ := assemble(groups, func(*choice) bool { return rng.Intn(2) == 0 })
		plan = &rewrite.Plan{Swaps: plan.Swaps}
		pr.fast.opEvents = nil
		fresh := pr.fast.prepare(plan, throttle)
		shared := pr.fast.prepare(plan, throttle)
		if !slices.Equal(pr.fast.opEvents, want) {
			t.Fatalf("trial %d: the shared op events differ from every op in start order", trial)
		}
		var ops []sweepEv
		for _, ev := range shared.evs {
			if ev.kind == evOp {
				ev.seq = 0
				ops = append(ops, ev)
			}
		}
		slices.SortStableFunc(ops, func(a, b sweepEv) int { return cmp.Compare(a.id, b.id) })
		sorted := slices.Clone(want)
		slices.SortStableFunc(sorted, func(a, b sweepEv) int { return cmp.Compare(a.id, b.id) })
		if !slices.Equal(ops, sorted) {
			t.Fatalf("trial %d (%d swaps): the sweep's op events differ from every op's", trial, len(plan.Swaps))
		}
		if !slices.Equal(fresh.evs, shared.evs) {
			t.Fatalf("trial %d (%d swaps): the sweep's events with the op events made before differ", trial, len(plan.Swaps))
		}
		// The same sweep with its op events appended and sorted (as for a list out of order),
		// whose step makes its own ops: the step's events, ops and their nodes are the same.
		pr.fast.opEventsOrdered = false
		own := pr.fast.prepare(plan, throttle)
		pr.fast.opEventsOrdered = true
		if !shared.sharedOps || own.sharedOps {
			t.Fatalf("trial %d: the sweeps did not take the paths meant", trial)
		}
		ss, os := shared.stepSpec(), own.stepSpec()
		if !slices.Equal(own.evs, shared.evs) || !reflect.DeepEqual(ss.Events, os.Events) || !reflect.DeepEqual(ss.Ops, os.Ops) || !slices.Equal(shared.opNode, own.opNode) {
			t.Fatalf("trial %d (%d swaps): the step with the shared ops differs from the step with its own", trial, len(plan.Swaps))
		}
		if &ss.Ops[0] != &pr.fast.stepOps[0] {
			t.Fatalf("trial %d: the step's ops are not the shared ones", trial)
		}
		a, b := fresh.result(nil), shared.result(nil)
		if a.stall != b.stall || !reflect.DeepEqual(a.waits, b.waits) {
			t.Fatalf("trial %d (%d swaps): stall %d and %d waits, with the op events made before %d and %d", trial, len(plan.Swaps), a.stall, len(a.waits), b.stall, len(b.waits))
		}
		for dev := range a.base {
			ap, at := a.peak(dev)
			bp, bt := b.peak(dev)
			if ap != bp || at != bt {
				t.Fatalf("trial %d: device %d peak %d at %d, with the op events made before %d at %d", trial, dev, ap, at, bp, bt)
			}
		}
		if len(plan.Swaps) > 0 {
			swapped++
		}
	}
	if swapped == 0 {
		t.Fatal("no plan swapped")
	}
}

// TestDropSweepAgreesWithSweep: the prepared sweep vDNN_dyn replays, after every one of a
// random sequence of decisions (a layer's offload dropped or taken back), with the dropped
// buffers' events skipped, predicts exactly what a sweep prepared afresh for the assembled
// and synchronised plan predicts: the peak of every device and its time, and the stall. The
// replay auto's pruning uses (a plan without one buffer's swaps) is checked the same way. The
// models run on the fixtures' graphs with slow and fast links, so copies queue and stall.
func TestDropSweepAgreesWithSweep(t *testing.T) {
	slow := slowProfile()
	slow.D2H, slow.H2D = 1<<30, 1<<30
	allStalls := 0
	for _, fixture := range []string{"cnn", "resnet"} {
		for pi, prof := range []*cost.Profile{slowProfile(), slow} {
			m, err := graphdef.Load("../../testmodels/fixtures/"+fixture+".pb", graphdef.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gr, err := graphdef.NewGraph(m.Graph, fixture)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := newProblemRun(m, rewrite.Analyze(gr, rewrite.Options{}), PlanOptions{Profile: prof, Budget: 1 << 20, FitAccounting: "tfswap"})
			if err != nil {
				t.Fatal(err)
			}
			cs := pr.vdnnChoices(false)
			if len(cs) < 4 {
				t.Fatalf("%s: %d vDNN choices", fixture, len(cs))
			}
			groups, _ := pr.groupsOf(cs, layerRule(convAny))
			drop := pr.newDropSweep(groups)
			if drop.prep == nil || drop.bufChoice == nil {
				t.Fatalf("%s: the drop sweep was not prepared, or not by buffer (%v)", fixture, drop.prep != nil)
			}
			rng := rand.New(rand.NewSource(int64(len(cs)) + int64(pi)))
			keep := map[*choice]bool{}
			for _, c := range cs {
				keep[c] = rng.Intn(2) == 0
			}
			stalls, peaks := 0, map[int64]bool{}
			for step := 0; step < 60; step++ {
				c := cs[rng.Intn(len(cs))]
				keep[c] = !keep[c]
				plan, _ := assemble(groups, func(c *choice) bool { return keep[c] })
				want := pr.fast.predict(pr.vdnnSync(plan))
				got := drop.predict(keep)
				for dev, lt := range want.base {
					if lt == nil {
						continue
					}
					wp, wt := want.peak(dev)
					gp, gt := got.peak(dev)
					if wp != gp || wt != gt {
						t.Fatalf("%s/%d step %d (%d swaps): device %d peak %d at %d, fresh sweep %d at %d", fixture, pi, step, len(plan.Swaps), dev, gp, gt, wp, wt)
					}
					peaks[wp] = true
				}
				if want.stall != got.stall {
					t.Fatalf("%s/%d step %d: stall %d, fresh sweep %d", fixture, pi, step, got.stall, want.stall)
				}
				if want.stall > 0 {
					stalls++
				}
			}
			// auto's pruning: the plan without one buffer's swaps (and without the plan's
			// waits), for every buffer of a synchronised plan.
			plan, _ := assemble(groups, func(c *choice) bool { return keep[c] })
			plan = pr.vdnnSync(plan)
			wo := pr.newWithoutSweep(plan)
			units := pr.unitsOf(plan)
			if len(units) == 0 || len(plan.Waits) == 0 {
				t.Fatalf("%s/%d: %d units, %d waits", fixture, pi, len(units), len(plan.Waits))
			}
			for _, u := range units {
				want := pr.fast.predict(without(plan, u))
				got := wo.predict(u)
				for dev, lt := range want.base {
					if lt == nil {
						continue
					}
					wp, wt := want.peak(dev)
					gp, gt := got.peak(dev)
					if wp != gp || wt != gt {
						t.Fatalf("%s/%d: without unit %v: device %d peak %d at %d, fresh sweep %d at %d", fixture, pi, u, dev, gp, gt, wp, wt)
					}
				}
				if want.stall != got.stall {
					t.Fatalf("%s/%d: without unit %v: stall %d, fresh sweep %d", fixture, pi, u, got.stall, want.stall)
				}
			}
			// The decisions changed the prediction.
			if len(peaks) < 2 {
				t.Fatalf("%s/%d: only %d distinct peaks over the decisions", fixture, pi, len(peaks))
			}
			t.Logf("%s/%d: %d choices, %d distinct peaks, %d of 60 plans stall", fixture, pi, len(cs), len(peaks), stalls)
			allStalls += stalls
		}
	}
	// Some plans stall: copies queue, and the replay carries the delays forward.
	if allStalls == 0 {
		t.Fatal("no plan stalls")
	}
}

// TestNoGateErrorMessage: triggeredGroups' error for a trigger that gates none of the consumers
// left reads as the message it had when it was formatted at once (PlanLMS's skip reasons show
// it).
func TestNoGateErrorMessage(t *testing.T) {
	var err error = noGateError{"block1/conv/Relu"}
	if got, want := fmt.Sprintf("%v", err), `trigger "block1/conv/Relu" cannot gate any of the consumers left`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
