package plan

import (
	"cmp"
	"github.com/tfswap/tfswap/rewrite"
	"math/rand"
	"slices"
	"sort"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestLoadTreeIncremental: the planner's incremental memory curve (a segment tree with lazy
// range additions) agrees with the curve recomputed from scratch (every point edited one by
// one) after every one of a random sequence of decisions, for the peak, the maximum over a
// range (also when only a maximum above a threshold is asked for) and the area.
func TestLoadTreeIncremental(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 30; trial++ {
		n := 1 + rng.Intn(200)
		pts := make([]cost.MemPoint, n)
		var tt int64
		for i := range pts {
			tt += 1 + rng.Int63n(50)
			b := rng.Int63n(1 << 20)
			pts[i] = cost.MemPoint{T: tt, Bytes: b, Max: b + rng.Int63n(1<<10)}
		}
		lt := newLoadTree(pts)
		bytes := make([]int64, n)
		maxes := make([]int64, n)
		for i, p := range pts {
			bytes[i], maxes[i] = p.Bytes, p.Max
		}
		// One range's area kept incrementally, as the greedy selections keep their area
		// scores: each addition brings its amount times its overlap's span.
		ql := rng.Intn(n)
		qr := ql + rng.Intn(n-ql)
		kept := lt.areaIdx(ql, qr)
		for step := 0; step < 60; step++ {
			from, to := rng.Int63n(tt+20)-10, rng.Int63n(tt+20)-10
			if from > to {
				from, to = to, from
			}
			v := rng.Int63n(1<<19) - 1<<18
			lt.add(from, to, v)
			if l, r := lt.index(from), lt.index(to)-1; l <= r {
				if lo, hi := max(l, ql), min(r, qr); lo <= hi {
					kept += float64(v) * float64(lt.span(lo, hi))
				}
			}
			if got := lt.areaIdx(ql, qr); got != kept {
				t.Fatalf("trial %d step %d: area of points %d..%d %v, kept incrementally %v", trial, step, ql, qr, got, kept)
			}
			for i, p := range pts {
				if p.T >= from && p.T < to {
					bytes[i] += v
					maxes[i] += v
				}
			}
			// The peak: the largest point's maximum, the earliest on ties.
			best, bestI := maxes[0], 0
			for i := range maxes {
				if maxes[i] > best {
					best, bestI = maxes[i], i
				}
			}
			if p, at := lt.peak(); p != best || at != pts[bestI].T {
				t.Fatalf("trial %d step %d: peak %d at %d, recomputed %d at %d", trial, step, p, at, best, pts[bestI].T)
			}
			qf, qt := rng.Int63n(tt+20)-10, rng.Int63n(tt+20)-10
			if qf > qt {
				qf, qt = qt, qf
			}
			var area float64
			want, wantT, any := int64(-1<<62), int64(0), false
			for i, p := range pts {
				if p.T >= qf && p.T < qt {
					d := int64(0)
					if i+1 < n {
						d = pts[i+1].T - p.T
					}
					area += float64(bytes[i]) * float64(d)
					if !any || maxes[i] > want {
						want, wantT, any = maxes[i], p.T, true
					}
				}
			}
			if got := lt.area(qf, qt); got != area {
				t.Fatalf("trial %d step %d: area over [%d,%d) %v, recomputed %v", trial, step, qf, qt, got, area)
			}
			got, gotT, ok := lt.rangeMax(qf, qt)
			if ok != any || (ok && (got != want || gotT != wantT)) {
				t.Fatalf("trial %d step %d: max over [%d,%d) %d at %d (%v), recomputed %d at %d (%v)", trial, step, qf, qt, got, gotT, ok, want, wantT, any)
			}
			// The pruned query (fastResult.peak's) answers as the maximum does when the
			// maximum is above its threshold, and says there is none otherwise.
			if l, r := lt.index(qf), lt.index(qt)-1; l <= r {
				thr := want - 1<<10 + rng.Int63n(1<<11)
				v, i, ok := lt.qargAbove(1, 0, lt.n-1, l, r, thr)
				if ok != (want > thr) || (ok && (v != want || lt.t[i] != wantT)) {
					t.Fatalf("trial %d step %d: max above %d over [%d,%d) %d at index %d (%v), recomputed %d at %d", trial, step, thr, qf, qt, v, i, ok, want, wantT)
				}
			}
		}
	}
}

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

// TestSortEvents checks the sweep's linear event sort against a comparison sort on random
// lists, short and long, with ties in time and kind, and that sortBounds sorts the peak's
// bounds by time, keeping every one.
func TestSortEvents(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 40; trial++ {
		n := rng.Intn(3000)
		span := int64(1) << uint(rng.Intn(40)+1)
		evs := make([]sweepEv, n)
		for i := range evs {
			evs[i] = sweepEv{t: rng.Int63n(span), kind: uint8(rng.Intn(evOrigEnd + 1)), id: int32(i)}
		}
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
		got := sortEvents(evs)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d events, span %d): sortEvents differs from a stable sort", trial, n, span)
		}
		bs := make([]bound, n)
		for i := range bs {
			bs[i] = bound{t: rng.Int63n(span), d: int64(i)}
		}
		sorted := sortBounds(append([]bound(nil), bs...))
		if !slices.IsSortedFunc(sorted, func(a, b bound) int { return cmp.Compare(a.t, b.t) }) {
			t.Fatalf("trial %d (%d bounds): sortBounds does not sort", trial, n)
		}
		slices.SortFunc(sorted, func(a, b bound) int { return cmp.Compare(a.d, b.d) })
		if !slices.Equal(sorted, bs) {
			t.Fatalf("trial %d (%d bounds): sortBounds lost or changed bounds", trial, n)
		}
	}
}

// TestDropSweepAgreesWithSweep: the prepared sweep vDNN_dyn replays, after every one of a
// random sequence of decisions (a layer's offload dropped or taken back), predicts exactly
// what a fresh sweep of the assembled and synchronised plan predicts: the peak of every
// device, the edits of the memory curve, the late copies and the stall; and the predicted
// peak (found piece by piece between the edits) is that of the curve with every edit applied.
// The replay auto's pruning uses (a plan without one buffer's swaps) is checked the same way. The models run on the
// fixtures' graphs with slow and fast links, so copies queue and stall.
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
					// The peak by pieces between the edits' bounds is the peak of the curve
					// with every edit applied.
					full := lt.clone()
					for _, e := range want.edits[dev] {
						full.add(e.from, e.to, e.delta)
					}
					if fp, ft := full.peak(); fp != wp || ft != wt {
						t.Fatalf("%s/%d step %d: device %d peak %d at %d, the edited curve's %d at %d", fixture, pi, step, dev, wp, wt, fp, ft)
					}
					we, ge := sortedEdits(want.edits[dev]), sortedEdits(got.edits[dev])
					if !slices.Equal(we, ge) {
						t.Fatalf("%s/%d step %d: device %d: %d edits, fresh sweep %d (or different)", fixture, pi, step, dev, len(ge), len(we))
					}
				}
				if want.late != got.late || want.stall != got.stall {
					t.Fatalf("%s/%d step %d: late %d stall %d, fresh sweep late %d stall %d", fixture, pi, step, got.late, got.stall, want.late, want.stall)
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
					if wp != gp || wt != gt || !slices.Equal(sortedEdits(want.edits[dev]), sortedEdits(got.edits[dev])) {
						t.Fatalf("%s/%d: without unit %v: device %d peak %d at %d, fresh sweep %d at %d (or edits differ)", fixture, pi, u, dev, gp, gt, wp, wt)
					}
				}
				if want.late != got.late || want.stall != got.stall {
					t.Fatalf("%s/%d: without unit %v: late %d stall %d, fresh sweep late %d stall %d", fixture, pi, u, got.late, got.stall, want.late, want.stall)
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

func sortedEdits(es []edit) []edit {
	out := append([]edit(nil), es...)
	slices.SortFunc(out, func(a, b edit) int {
		if a.from != b.from {
			return cmp.Compare(a.from, b.from)
		}
		if a.to != b.to {
			return cmp.Compare(a.to, b.to)
		}
		return cmp.Compare(a.delta, b.delta)
	})
	return out
}

// TestQargAboveTies: on curves of few distinct values (many ties), the pruned maximum query
// returns the earliest of the highest points, as the plain one does, whenever the maximum is
// above the threshold, and nothing otherwise.
func TestQargAboveTies(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.Intn(40)
		pts := make([]cost.MemPoint, n)
		for i := range pts {
			b := rng.Int63n(4)
			pts[i] = cost.MemPoint{T: int64(10 * (i + 1)), Bytes: b, Max: b}
		}
		lt := newLoadTree(pts)
		for q := 0; q < 20; q++ {
			l := rng.Intn(n)
			r := l + rng.Intn(n-l)
			want, wantI := pts[l].Max, l
			for i := l; i <= r; i++ {
				if pts[i].Max > want {
					want, wantI = pts[i].Max, i
				}
			}
			thr := rng.Int63n(5) - 1
			v, i, ok := lt.qargAbove(1, 0, lt.n-1, l, r, thr)
			if ok != (want > thr) || (ok && (v != want || i != wantI)) {
				t.Fatalf("trial %d: max above %d of points %d..%d = %d at %d (%v), want %d at %d", trial, thr, l, r, v, i, ok, want, wantI)
			}
		}
	}
}

// TestFirstAtOrAfter: the galloping search fastResult.peak uses answers what a binary search
// over the whole rest of the list answers, for every start and every time, on lists with
// repeated times.
func TestFirstAtOrAfter(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for n := 0; n < 40; n++ {
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = int64(rng.Intn(12))
		}
		slices.Sort(ts)
		for lo := 0; lo <= n; lo++ {
			for x := int64(-1); x <= 13; x++ {
				want := lo + sort.Search(n-lo, func(k int) bool { return ts[lo+k] >= x })
				if got := firstAtOrAfter(ts, lo, x); got != want {
					t.Fatalf("%v from %d for %d: %d, want %d", ts, lo, x, got, want)
				}
			}
		}
	}
}
