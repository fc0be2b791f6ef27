package plan

import (
	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/rewrite"
	"math"
	"slices"
	"sort"
)

// AutoSwap (Zhang et al., "Efficient Memory Management for GPU-based Deep Learning Systems",
// section IV).
//
// Candidates are the buffers of at least 1 MiB (or Options.MinTensorBytes when larger) whose
// lifetime spans the device's peak time, swapped across the gap between the two reads that
// straddle it. Each gets the four priority scores: DOA, the duration of absence (the time
// between the two reads less the swap-out and swap-in times); AOA, the area of absence (DOA
// times the size, or DOA divided by the size when DOA is negative); WDOA, the area under the
// unswapped memory load curve between the two reads; SWDOA, the same under the load curve
// updated by the swaps selected so far. Selection takes the highest score among the
// candidates absent at the current peak, updates the load, and repeats until the peak is
// within the budget, so scores and the peak are recomputed as the load changes. Swap-ins are
// scheduled as AutoSwap schedules them: in order of next access, one after another, each as
// late as still lets the access run undelayed (triggers.ByCost).
//
// The scores are combined as BO = a·AOA + b·DOA + c·WDOA + d·SWDOA over standardised scores
// with weights in [-1, 1], tuned by Bayesian optimisation (a Gaussian process with expected
// improvement, bo.go) against the step-time overhead the fast memory model predicts (a
// simulation of the copy queues and stalls on the unswapped step's timeline); the four plain
// scores are always evaluated and the optimisation starts from them; the best few weight
// vectors are then simulated in full and corrected until they fit.

type autoSwapPlanner struct{}

// autoSwapStrategy is the autoswap strategy (autoSwapPlanner).
var autoSwapStrategy = &Strategy{
	Name: "autoswap",
	Doc: "AutoSwap (Zhang et al.): candidates >= 1 MiB whose lifetime spans the peak; select by priority score (DOA, AOA, WDOA, SWDOA, " +
		"recomputed as the load changes) until the peak fits; score weights tuned by Bayesian optimisation against the simulated step time",
	Run: func(pass *Pass) (*Evaluation, error) { return autoSwapPlanner{}.Plan(pass.run) },
}

// DefaultBOIterations is how many weight vectors AutoSwap's Bayesian optimisation evaluates
// after the four plain scores.
const DefaultBOIterations = 12

// autoSwapMinBytes is AutoSwap's candidate size threshold.
const autoSwapMinBytes = 1 << 20

// asCand is an AutoSwap candidate.
type asCand struct {
	c *choice
	// reads: the end of the read before the gap and the start of the read after it.
	last, next int64
	// from, to: the interval the buffer is predicted absent from the device.
	from, to       int64
	doa, aoa, wdoa float64
	// li and ri are the first and last points of the device's memory curve in [last, next)
	// (li > ri when there is none), for the area under the updated curve (SWDOA).
	li, ri int
	slack  float64
}

// autoSwapCandidates returns the candidates of every compute device.
func (pr *Problem) autoSwapCandidates(minBytes int64) []*asCand {
	var out []*asCand
	for _, dev := range pr.gpuDevices() {
		_, peakT := pr.fast.trees[dev].Peak()
		for _, b := range pr.sortedBuffers(dev) {
			if b.bytes < minBytes || !(b.alloc <= peakT && peakT < b.lastEnd) {
				continue
			}
			k := b.spanning(peakT)
			if k < 0 {
				continue
			}
			if _, ok := pr.episodes(&choice{b: b, splits: []int{k}}); !ok {
				continue
			}
			out = append(out, pr.newCand(b, k, "lifetime spans the peak"))
		}
	}
	return out
}

// newCand computes a candidate's absence interval and its static scores.
func (pr *Problem) newCand(b *buffer, k int, why string) *asCand {
	last, next := b.gap(k)
	dOut, dIn := pr.fast.xferTime(b.bytes, false), pr.fast.xferTime(b.bytes, true)
	c := &asCand{c: &choice{b: b, splits: []int{k}, why: why}, last: last, next: next}
	c.from = max(last, b.prodEnd+pr.latency+dOut)
	c.to = next - dIn - 2*pr.latency - pr.hostIdent
	c.doa = float64(next-last) - float64(dOut+dIn)
	if c.doa >= 0 {
		c.aoa = c.doa * float64(b.bytes)
	} else {
		c.aoa = c.doa / float64(b.bytes)
	}
	lt := pr.fast.trees[b.dev]
	c.li, c.ri = lt.Index(last), lt.Index(next)-1
	c.wdoa = lt.AreaIdx(c.li, c.ri)
	c.slack = float64(b.bytes) * math.Min(1, math.Max(0, float64(next-last))/float64(2*(dOut+dIn)+1))
	return c
}

// asWeights are the weights of the combined score: AOA, DOA, WDOA, SWDOA, and (used by the
// auto planner only) the size with slack, the buffer's size scaled down when its gap leaves
// less than twice the time its copies take.
type asWeights [5]float64

// autoSwapSelect selects candidates by the combined score until every device's predicted
// peak is within target, and returns the plan. Selection works on each candidate's ideal
// absence; when the fast model, with the triggers and copy queues of the actual plan, still
// predicts too much memory, it selects again for a target lowered by the difference. Ops
// that would take the device over target in the forward pass wait for swap-outs to complete
// (AutoSwap delays the next allocation until enough has been swapped out).
func (pr *planRun) autoSwapSelect(cands []*asCand, w asWeights, target []int64) *rewrite.Plan {
	t := append([]int64(nil), target...)
	var plan *rewrite.Plan
	for round := 0; round < 3; round++ {
		var r *fastResult
		plan, r = pr.throttled(pr.autoSwapSelectOnce(cands, w, t), target)
		x, dev := pr.fastExcess(r, target)
		if x <= 0 || dev < 0 {
			break
		}
		t[dev] -= x
	}
	return plan
}

func (pr *planRun) autoSwapSelectOnce(cands []*asCand, w asWeights, target []int64) *rewrite.Plan {
	trees := make([]*cost.LoadTree, len(pr.fast.trees))
	for i, t := range pr.fast.trees {
		if t != nil {
			trees[i] = t.Clone()
		}
	}
	taken := make([]bool, len(cands))
	var sel []*choice
	stuck := map[int]bool{}
	// The area under each candidate's absence (SWDOA) is kept incrementally: each selection's
	// range addition is recorded per device, and a candidate's area brings in the additions
	// made since it was last scored (seen), each as its amount times the length of its
	// overlap with the candidate's points, instead of querying the tree again.
	adds := make([][]rangeAdd, len(trees))
	area := make([]float64, len(cands))
	seen := make([]int, len(cands))
	for i, c := range cands {
		area[i] = c.wdoa
	}
	// elig and raw are the eligible candidates and their scores, reused from step to step.
	var elig []int
	var raw [][5]float64
	for {
		// The device furthest over its target that can still be helped.
		dev, worst := -1, int64(0)
		for i, t := range trees {
			if t == nil || stuck[i] {
				continue
			}
			p, _ := t.Peak()
			if x := p - target[i]; x > worst {
				dev, worst = i, x
			}
		}
		if dev < 0 {
			break
		}
		_, peakT := trees[dev].Peak()
		elig = elig[:0]
		for i, c := range cands {
			if !taken[i] && c.c.b.dev == dev && c.from <= peakT && peakT < c.to {
				elig = append(elig, i)
			}
		}
		if len(elig) == 0 {
			stuck[dev] = true
			continue
		}
		// Scores, standardised over the eligible candidates.
		raw = slices.Grow(raw[:0], len(elig))[:len(elig)]
		for j, i := range elig {
			c := cands[i]
			raw[j] = [5]float64{c.aoa, c.doa, c.wdoa, 0, c.slack}
			if w[3] != 0 {
				lt := trees[dev]
				for _, a := range adds[dev][seen[i]:] {
					if lo, hi := max(a.l, c.li), min(a.r, c.ri); lo <= hi {
						area[i] += float64(a.v) * float64(lt.Span(lo, hi))
					}
				}
				seen[i] = len(adds[dev])
				raw[j][3] = area[i]
			}
		}
		// A score of weight 0 adds nothing (its standardised value is finite), so only the
		// weighted ones are standardised; each mean and deviation sums in candidate order.
		var mean, sd [5]float64
		for s := 0; s < 5; s++ {
			if w[s] == 0 {
				continue
			}
			for j := range raw {
				mean[s] += raw[j][s]
			}
			mean[s] /= float64(len(raw))
			for j := range raw {
				d := raw[j][s] - mean[s]
				sd[s] += d * d
			}
			sd[s] = math.Sqrt(sd[s] / float64(len(raw)))
		}
		bestJ, bestScore := -1, math.Inf(-1)
		for j := range raw {
			var score float64
			for s := 0; s < 5; s++ {
				if w[s] == 0 {
					continue
				}
				z := 0.0
				if sd[s] > 0 {
					z = (raw[j][s] - mean[s]) / sd[s]
				}
				score += w[s] * z
			}
			// Ties: the larger buffer, then the earlier one.
			if bestJ < 0 || score > bestScore+1e-12 || (math.Abs(score-bestScore) <= 1e-12 && cands[elig[j]].c.b.bytes > cands[elig[bestJ]].c.b.bytes) {
				bestJ, bestScore = j, score
			}
		}
		i := elig[bestJ]
		taken[i] = true
		c := cands[i]
		lt := trees[dev]
		lt.Add(c.from, c.to, -c.c.b.bytes)
		if l, r := lt.Index(c.from), lt.Index(c.to)-1; l <= r && c.c.b.bytes != 0 {
			adds[dev] = append(adds[dev], rangeAdd{l, r, -c.c.b.bytes})
		}
		sel = append(sel, c.c)
	}
	plan, _ := pr.buildPlan(mergeChoices(sel), costRule(nil, 0))
	return plan
}

// rangeAdd is one addition of v bytes to the points l..r of a memory curve.
type rangeAdd struct {
	l, r int
	v    int64
}

// mergeChoices merges the choices of one buffer (different gaps) into one with all their
// splits, in buffer order.
func mergeChoices(sel []*choice) []*choice {
	byB := map[*buffer]*choice{}
	var out []*choice
	for _, c := range sel {
		m := byB[c.b]
		if m == nil {
			m = &choice{b: c.b, why: c.why}
			byB[c.b] = m
			out = append(out, m)
		}
		for _, k := range c.splits {
			dup := false
			for _, x := range m.splits {
				dup = dup || x == k
			}
			if !dup {
				m.splits = append(m.splits, k)
			}
		}
	}
	for _, c := range out {
		sort.Ints(c.splits)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].b.order < out[j].b.order })
	return out
}

func (p autoSwapPlanner) Plan(pr *planRun) (*Evaluation, error) {
	if pr.Base.Fits {
		return pr.Base, nil
	}
	minBytes := int64(autoSwapMinBytes)
	if pr.Analysis.Opts.MinTensorBytes > minBytes {
		minBytes = pr.Analysis.Opts.MinTensorBytes
	}
	cands := pr.autoSwapCandidates(minBytes)
	ev, _, err := pr.autoSwapTune(cands, pr.Opts.BOIterations, autoSwapKeep)
	return ev, err
}

// autoSwapKeep is how many weight vectors, best by the fast model, are simulated.
const autoSwapKeep = 3

// autoSwapTune evaluates the four plain scores and iters weight vectors proposed by
// Bayesian optimisation (0: DefaultBOIterations, negative: none) with the fast model as the
// objective (its predicted step-time overhead, a plan that does not fit penalised), then
// simulates the keep best and returns the best simulated outcome and the weights tried.
func (pr *planRun) autoSwapTune(cands []*asCand, iters, keep int) (*Evaluation, []asWeights, error) {
	target := pr.targets()
	var ws []asWeights
	var losses []float64
	plans := map[int]*rewrite.Plan{}
	try := func(w asWeights) float64 {
		plan := pr.autoSwapSelect(cands, w, target)
		plans[len(ws)] = plan
		ws = append(ws, w)
		r := pr.fast.predict(plan)
		x, _ := pr.fastExcess(r, target)
		loss := 1 + float64(r.stall)/float64(max(pr.Base.StepTime, 1))
		if x > 0 {
			loss += 10 + float64(x)/float64(max(pr.Opts.Budget, 1))
		}
		losses = append(losses, loss)
		return loss
	}
	for s := 0; s < 4; s++ {
		var w asWeights
		w[s] = 1
		try(w)
	}
	if iters == 0 {
		iters = DefaultBOIterations
	}
	if iters > 0 {
		bo := newBayesOpt(4, pr.Opts.Seed)
		for i := range ws {
			bo.observe(ws[i][:4], losses[i])
		}
		for it := 0; it < iters; it++ {
			x := bo.next()
			var w asWeights
			copy(w[:4], x)
			bo.observe(x, try(w))
		}
	}
	ev, _, err := pr.screened(len(ws), keep, func(i int, t []int64) *rewrite.Plan {
		if p, ok := plans[i]; ok && slices.Equal(t, target) {
			return p
		}
		return pr.autoSwapSelect(cands, ws[i], t)
	})
	return ev, ws, err
}
