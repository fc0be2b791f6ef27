package cost

import (
	"cmp"
	"math/rand"
	"slices"
	"sort"
	"testing"
)

// TestLoadTreeIncremental: the incremental memory curve of the fast model and SwapStep (a segment tree with lazy
// range additions) agrees with the curve recomputed from scratch (every point edited one by
// one) after every one of a random sequence of decisions, for the peak, the maximum over a
// range (also when only a maximum above a threshold is asked for) and the area.
func TestLoadTreeIncremental(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 30; trial++ {
		n := 1 + rng.Intn(200)
		pts := make([]MemPoint, n)
		var tt int64
		for i := range pts {
			tt += 1 + rng.Int63n(50)
			b := rng.Int63n(1 << 20)
			pts[i] = MemPoint{T: tt, Bytes: b, Max: b + rng.Int63n(1<<10)}
		}
		lt := NewLoadTree(pts)
		bytes := make([]int64, n)
		maxes := make([]int64, n)
		for i, p := range pts {
			bytes[i], maxes[i] = p.Bytes, p.Max
		}
		// One range's area kept incrementally, as the greedy selections keep their area
		// scores: each addition brings its amount times its overlap's span.
		ql := rng.Intn(n)
		qr := ql + rng.Intn(n-ql)
		kept := lt.AreaIdx(ql, qr)
		for step := 0; step < 60; step++ {
			from, to := rng.Int63n(tt+20)-10, rng.Int63n(tt+20)-10
			if from > to {
				from, to = to, from
			}
			v := rng.Int63n(1<<19) - 1<<18
			lt.Add(from, to, v)
			if l, r := lt.Index(from), lt.Index(to)-1; l <= r {
				if lo, hi := max(l, ql), min(r, qr); lo <= hi {
					kept += float64(v) * float64(lt.Span(lo, hi))
				}
			}
			if got := lt.AreaIdx(ql, qr); got != kept {
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
			if p, at := lt.Peak(); p != best || at != pts[bestI].T {
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
			if got := lt.Area(qf, qt); got != area {
				t.Fatalf("trial %d step %d: area over [%d,%d) %v, recomputed %v", trial, step, qf, qt, got, area)
			}
			got, gotT, ok := lt.RangeMax(qf, qt)
			if ok != any || (ok && (got != want || gotT != wantT)) {
				t.Fatalf("trial %d step %d: max over [%d,%d) %d at %d (%v), recomputed %d at %d (%v)", trial, step, qf, qt, got, gotT, ok, want, wantT, any)
			}
			// The pruned query (the peak from edits') answers as the maximum does when the
			// maximum is above its threshold, and says there is none otherwise.
			if l, r := lt.Index(qf), lt.Index(qt)-1; l <= r {
				thr := want - 1<<10 + rng.Int63n(1<<11)
				v, i, ok := lt.MaxAbove(l, r, thr)
				if ok != (want > thr) || (ok && (v != want || lt.t[i] != wantT)) {
					t.Fatalf("trial %d step %d: max above %d over [%d,%d) %d at index %d (%v), recomputed %d at %d", trial, step, thr, qf, qt, v, i, ok, want, wantT)
				}
			}
		}
	}
}

// TestMaxAboveTies: on curves of few distinct values (many ties), the pruned maximum query
// returns the earliest of the highest points, as the plain one does, whenever the maximum is
// above the threshold, and nothing otherwise.
func TestMaxAboveTies(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.Intn(40)
		pts := make([]MemPoint, n)
		for i := range pts {
			b := rng.Int63n(4)
			pts[i] = MemPoint{T: int64(10 * (i + 1)), Bytes: b, Max: b}
		}
		lt := NewLoadTree(pts)
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
			v, i, ok := lt.MaxAbove(l, r, thr)
			if ok != (want > thr) || (ok && (v != want || i != wantI)) {
				t.Fatalf("trial %d: max above %d of points %d..%d = %d at %d (%v), want %d at %d", trial, thr, l, r, v, i, ok, want, wantI)
			}
		}
	}
}

// TestFirstAtOrAfter: the galloping search of the peak from edits (LoadTree.edgePeak) answers what a binary search
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

// TestSortBounds checks that sortBoundsWith sorts the bounds of the peak from edits by time,
// keeping every one, on random lists, short and long.
func TestSortBounds(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 40; trial++ {
		n := rng.Intn(3000)
		span := int64(1) << uint(rng.Intn(40)+1)
		bs := make([]bound, n)
		for i := range bs {
			bs[i] = bound{t: rng.Int63n(span), d: int64(i)}
		}
		sorted, _ := sortBoundsWith(append([]bound(nil), bs...), nil)
		if !slices.IsSortedFunc(sorted, func(a, b bound) int { return cmp.Compare(a.t, b.t) }) {
			t.Fatalf("trial %d (%d bounds): sortBoundsWith does not sort", trial, n)
		}
		slices.SortFunc(sorted, func(a, b bound) int { return cmp.Compare(a.d, b.d) })
		if !slices.Equal(sorted, bs) {
			t.Fatalf("trial %d (%d bounds): sortBoundsWith lost or changed bounds", trial, n)
		}
	}
}

// TestEdgePeakIsTheEditedCurve: the peak read from edits that are not applied (a SwapStep
// before its first change) is the peak of the curve with every edit applied, its time
// included, on random curves and edits (some empty or reversed, which change nothing).
func TestEdgePeakIsTheEditedCurve(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.Intn(300)
		pts := make([]MemPoint, n)
		var tt int64
		for i := range pts {
			tt += rng.Int63n(20)
			b := rng.Int63n(1 << 12)
			pts[i] = MemPoint{T: tt, Bytes: b, Max: b + rng.Int63n(1<<6)}
		}
		base := NewLoadTree(pts)
		full := base.Clone()
		var bs []bound
		for k := 0; k < rng.Intn(400); k++ {
			from, to := rng.Int63n(tt+20)-10, rng.Int63n(tt+20)-10
			v := rng.Int63n(1<<12) - 1<<11
			full.Add(from, to, v)
			if from < to && v != 0 {
				bs = append(bs, bound{from, v}, bound{to, -v})
			}
		}
		wp, wt := full.Peak()
		gp, gt, _, _ := base.edgePeak(bs, nil)
		if gp != wp || gt != wt {
			t.Fatalf("trial %d (%d points, %d bounds): peak from edits %d at %d, edited curve %d at %d", trial, n, len(bs), gp, gt, wp, wt)
		}
		// The edits are not applied to the base curve.
		want := pts[0].Max
		for _, p := range pts {
			want = max(want, p.Max)
		}
		if bp, _ := base.Peak(); bp != want {
			t.Fatalf("trial %d: the base curve's peak is %d after the peak from edits, want %d", trial, bp, want)
		}
	}
}
