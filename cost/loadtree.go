package cost

import (
	"cmp"
	"slices"
	"sort"
)

// LoadTree is one device's memory curve as a segment tree over the curve's points: range
// additions, the maximum (the earliest point where it occurs) over the whole curve or a
// range, and the area under the curve over a range. The planner's fast memory model and
// the incremental swap simulator (SwapStep) keep their curves in it.
type LoadTree struct {
	t    []int64 // point times
	n    int
	max  []int64 // maximum over the node's range, its lazy additions included
	arg  []int32 // leaf index of the maximum
	sum  []float64
	dt   []float64 // sum of durations over the node's range
	lazy []int64
}

// NewLoadTree builds the tree of a simulated memory curve (its points' Max and, for the area,
// Bytes; a point lasts until the next, the last nothing).
func NewLoadTree(pts []MemPoint) *LoadTree {
	n := len(pts)
	if n == 0 {
		pts = []MemPoint{{}}
		n = 1
	}
	lt := &LoadTree{n: n, t: make([]int64, n), max: make([]int64, 4*n), arg: make([]int32, 4*n), sum: make([]float64, 4*n), dt: make([]float64, 4*n), lazy: make([]int64, 4*n)}
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

// Clone returns a copy of the tree that changes independently of it (the point times are
// shared: they never change).
func (lt *LoadTree) Clone() *LoadTree {
	c := *lt
	c.max = append([]int64(nil), lt.max...)
	c.arg = append([]int32(nil), lt.arg...)
	c.sum = append([]float64(nil), lt.sum...)
	c.lazy = append([]int64(nil), lt.lazy...)
	return &c
}

// Len returns the number of points.
func (lt *LoadTree) Len() int { return lt.n }

// T returns the time of point i.
func (lt *LoadTree) T(i int) int64 { return lt.t[i] }

func (lt *LoadTree) pull(node int) {
	l, r := 2*node, 2*node+1
	if lt.max[l] >= lt.max[r] {
		lt.max[node], lt.arg[node] = lt.max[l], lt.arg[l]
	} else {
		lt.max[node], lt.arg[node] = lt.max[r], lt.arg[r]
	}
	lt.sum[node] = lt.sum[l] + lt.sum[r]
	lt.dt[node] = lt.dt[l] + lt.dt[r]
}

func (lt *LoadTree) apply(node int, v int64) {
	lt.max[node] += v
	lt.sum[node] += float64(v) * lt.dt[node]
	lt.lazy[node] += v
}

func (lt *LoadTree) push(node int) {
	if v := lt.lazy[node]; v != 0 {
		lt.apply(2*node, v)
		lt.apply(2*node+1, v)
		lt.lazy[node] = 0
	}
}

// Index returns the first point at or after time t (Len when there is none).
func (lt *LoadTree) Index(t int64) int {
	return sort.Search(lt.n, func(i int) bool { return lt.t[i] >= t })
}

// Add adds v bytes over the time interval [from, to).
func (lt *LoadTree) Add(from, to, v int64) {
	l, r := lt.Index(from), lt.Index(to)-1
	if l > r || v == 0 {
		return
	}
	lt.update(1, 0, lt.n-1, l, r, v)
}

func (lt *LoadTree) update(node, nl, nr, l, r int, v int64) {
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

// Peak returns the curve's maximum and the time of the earliest point where it occurs.
func (lt *LoadTree) Peak() (int64, int64) { return lt.max[1], lt.t[lt.arg[1]] }

// Area returns the integral of the curve over [from, to) in byte-nanoseconds, by points.
func (lt *LoadTree) Area(from, to int64) float64 {
	return lt.AreaIdx(lt.Index(from), lt.Index(to)-1)
}

// Span returns the total duration of the points l..r (l <= r): the time from point l to the
// point after r, the last point lasting nothing.
func (lt *LoadTree) Span(l, r int) int64 {
	return lt.t[min(r+1, lt.n-1)] - lt.t[l]
}

// AreaIdx returns the integral of the curve over the points l..r (0 when l > r).
func (lt *LoadTree) AreaIdx(l, r int) float64 {
	if l > r {
		return 0
	}
	return lt.qsum(1, 0, lt.n-1, l, r)
}

func (lt *LoadTree) qsum(node, nl, nr, l, r int) float64 {
	if r < nl || nr < l {
		return 0
	}
	if l <= nl && nr <= r {
		return lt.sum[node]
	}
	lt.push(node)
	m := (nl + nr) / 2
	return lt.qsum(2*node, nl, m, l, r) + lt.qsum(2*node+1, m+1, nr, l, r)
}

// MaxIn returns the curve's maximum over the points in [from, to), or the value at the last
// point before from when the range holds none.
func (lt *LoadTree) MaxIn(from, to int64) int64 {
	l, r := lt.Index(from), lt.Index(to)-1
	if l > r {
		if l > 0 {
			l--
		}
		r = l
	}
	v, _ := lt.qarg(1, 0, lt.n-1, l, r)
	return v
}

// RangeMax returns the maximum over the points in [from, to), the time of the earliest point
// where it occurs, and whether the range holds a point.
func (lt *LoadTree) RangeMax(from, to int64) (int64, int64, bool) {
	l, r := lt.Index(from), lt.Index(to)-1
	if l > r {
		return 0, 0, false
	}
	v, i := lt.qarg(1, 0, lt.n-1, l, r)
	return v, lt.t[i], true
}

// MaxAbove returns the maximum over the points l..r and the earliest point where it occurs
// when that maximum is above thr, and false otherwise, without descending into the parts of
// the tree whose maximum is not above thr (those hold no point as high as the answer).
func (lt *LoadTree) MaxAbove(l, r int, thr int64) (int64, int, bool) {
	return lt.qargAbove(1, 0, lt.n-1, l, r, thr)
}

func (lt *LoadTree) qargAbove(node, nl, nr, l, r int, thr int64) (int64, int, bool) {
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

func (lt *LoadTree) qarg(node, nl, nr, l, r int) (int64, int) {
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

// bound is where an edit of a memory curve starts (d its amount) or ends (d minus it).
type bound struct {
	t, d int64
}

// edgePeak is the peak of a curve with edits that are not applied to it: the maximum over
// the pieces between the edits' bounds of the curve's maximum plus the edits' sum there, and
// the time of its earliest point. bs and buf are working lists (bs holds the bounds, any
// order); the two lists are returned for reuse.
func (lt *LoadTree) edgePeak(bs, buf []bound) (int64, int64, []bound, []bound) {
	bs, buf = sortBoundsWith(bs, buf)
	best, bestT := int64(-1<<62), int64(0)
	// Each piece between bounds is the points lo..hi-1; a piece starts where the last ended.
	// Only a point above best-d can raise the peak, so the query skips the parts of the
	// curve that stay at or below it.
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
	return best, bestT, bs, buf
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

// sortBoundsWith returns bs ordered by time (the order of equal times is not kept), by a
// radix sort when the list is long and no time is negative, with buf as the radix sort's
// working list (grown when too short); it returns the sorted list and the other of the two
// lists, for reuse. Either may be bs.
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
