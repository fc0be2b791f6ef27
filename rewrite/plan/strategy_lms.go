package plan

import (
	"encoding/binary"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/triggers"
)

// lmsPlanner is TensorFlow Large Model Support (Le et al., TFLMS) with its auto-tuning done
// with the simulator: for each swapin_ahead and swapin_groupby of a small grid it searches,
// with the fast memory model, the largest swapout_threshold whose plan fits the budget (a
// larger threshold swaps fewer tensors); the pairs whose plans the fast model predicts to
// stall least are simulated, their thresholds corrected until the simulation fits, and the
// fitting plan with the shortest simulated step is kept.
type lmsPlanner struct{}

// lmsStrategy is the lms strategy (lmsPlanner).
var lmsStrategy = &Strategy{
	Name: "lms",
	Doc: "TensorFlow Large Model Support (Le et al.): swap every tensor for its consumers at least swapout_threshold levels away, " +
		"triggered swapin_ahead levels early, consumers within swapin_groupby levels sharing a swap-in; the three are tuned with the simulator " +
		"(largest fitting threshold per ahead/groupby pair, then the shortest step)",
	Run: func(pass *Pass) (*Evaluation, error) { return lmsPlanner{}.Plan(pass.run) },
}

// lmsAheads and lmsGroupBys are the grid the tuning searches.
var (
	lmsAheads   = []int{1, 2, 3, 4, 6, 8}
	lmsGroupBys = []int{-1, 2, 5, 10}
)

// lmsCand is a swap candidate with its eligible consumers sorted as PlanLMS sorts them, and
// each one's distance in levels from the producer (its deferredNode's level less the
// producer's), which the sort makes ascending.
type lmsCand struct {
	c    rewrite.Candidate
	uses []graphdef.Use
	dist []int
}

// lmsCache holds what PlanLMS recomputes on every call: the candidates with their eligible
// consumers, and the triggers found for (producer, consumers, ahead).
type lmsCache struct {
	cands    []lmsCand
	triggers map[string]*graphdef.Node
	// peaks are the fast model's predicted peaks of the plans of lmsPlan, by threshold,
	// ahead and groupBy, the threshold made canonical (lmsCanon): lmsFit asks for the same
	// plans at every target it fits, and many thresholds give the same plan.
	peaks map[[3]int][]int64
	// planPeaks are the same predicted peaks by the plan's content (lmsSignature): other
	// pairs of ahead and groupBy often give the same plan (one far consumer per tensor has
	// one group whatever groupBy is), whose prediction is then not made again.
	planPeaks map[string][]int64
	// groups are the swap-ins lmsPlan gave a candidate's uses from the k-th on, by the
	// candidate's position, k, ahead and groupBy (lmsGroupsKey).
	groups map[lmsGroupsKey][]rewrite.SwapInGroup
	// dists are the distances of every candidate's uses, sorted and without repeats.
	dists []int
}

// lmsInit fills the problem's lmsCache with the candidates, the first time it is needed.
func (pr *Problem) lmsInit() {
	if pr.lms != nil {
		return
	}
	a := pr.Analysis
	pr.lms = &lmsCache{triggers: map[string]*graphdef.Node{}}
	if m := pr.Opts.memo; m != nil {
		// The predicted peaks are shared with the planning's other problems of the same
		// inputs (simMemo.lmsPeaks).
		k := pr.problemKey()
		if m.lmsPeaks[k] == nil {
			m.lmsPeaks[k] = map[[3]int][]int64{}
		} else if m.hits != nil {
			*m.hits = append(*m.hits, memoHit{pr: pr, lmsPeaks: m.lmsPeaks[k]})
		}
		pr.lms.peaks = m.lmsPeaks[k]
	}
	cands, _ := a.Candidates()
	for _, c := range cands {
		var uses []graphdef.Use
		for _, u := range c.Tensor.Consumers() {
			if a.ConsumerEligible(u) {
				uses = append(uses, u)
			}
		}
		rewrite.SortUses(uses)
		dist := make([]int, len(uses))
		for i, u := range uses {
			dist[i] = rewrite.DeferredNode(u.Node).Level - c.Tensor.Node.Level
			pr.lms.dists = append(pr.lms.dists, dist[i])
		}
		pr.lms.cands = append(pr.lms.cands, lmsCand{c: c, uses: uses, dist: dist})
	}
	slices.Sort(pr.lms.dists)
	pr.lms.dists = slices.Compact(pr.lms.dists)
}

// lmsGroupsKey names the swap-ins of one candidate's uses from the k-th on, for one ahead
// and groupBy.
type lmsGroupsKey struct{ cand, k, ahead, groupBy int }

// lmsCanon returns the smallest distance of a candidate's use at least threshold (or
// math.MaxInt when there is none): lmsPlan swaps for exactly the same uses, and so makes
// the same plan, with either threshold.
func (pr *Problem) lmsCanon(threshold int) int {
	pr.lmsInit()
	i, _ := slices.BinarySearch(pr.lms.dists, threshold)
	if i == len(pr.lms.dists) {
		return math.MaxInt
	}
	return pr.lms.dists[i]
}

// lmsSignature writes the content of an LMS plan to b: for each swap, its tensor, and for
// each of its groups the trigger and the uses, by node index. Plans with the same signature
// are the same plan.
func lmsSignature(b []byte, plan *rewrite.Plan) []byte {
	for _, ps := range plan.Swaps {
		b = binary.AppendUvarint(b, uint64(ps.Tensor.Node.Index))
		b = binary.AppendUvarint(b, uint64(ps.Tensor.Port))
		b = binary.AppendUvarint(b, uint64(len(ps.Groups)))
		for _, g := range ps.Groups {
			b = binary.AppendUvarint(b, uint64(g.Trigger.Index))
			b = binary.AppendUvarint(b, uint64(len(g.Uses)))
			for _, u := range g.Uses {
				b = binary.AppendUvarint(b, uint64(u.Node.Index))
				b = binary.AppendUvarint(b, uint64(u.Input))
			}
		}
	}
	return b
}

// lmsPlan plans LMS with the given distances: the plan PlanLMS makes with these options,
// from cached candidates and triggers.
func (pr *Problem) lmsPlan(threshold, ahead, groupBy int) *rewrite.Plan {
	a := pr.Analysis
	pr.lmsInit()
	plan := &rewrite.Plan{}
	if pr.lms.groups == nil {
		pr.lms.groups = map[lmsGroupsKey][]rewrite.SwapInGroup{}
	}
	var key strings.Builder
	for ci, lc := range pr.lms.cands {
		p := lc.c.Tensor.Node
		k, _ := slices.BinarySearch(lc.dist, threshold)
		far := lc.uses[k:len(lc.uses):len(lc.uses)]
		if len(far) == 0 {
			continue
		}
		ps := rewrite.PlannedSwap{Tensor: lc.c.Tensor, Bytes: lc.c.Bytes}
		// The swap-ins depend on the threshold only through k: they are made once per k
		// and handed out as copies of the group list (the groups' uses clipped, so that an
		// append to them copies).
		gk := lmsGroupsKey{ci, k, ahead, groupBy}
		if gs, ok := pr.lms.groups[gk]; ok {
			if len(gs) > 0 {
				ps.Groups = slices.Clone(gs)
				plan.Swaps = append(plan.Swaps, ps)
			}
			continue
		}
		for _, group := range rewrite.GroupUses(far, groupBy) {
			gs, _, _ := triggeredGroups(a.Graph, group, func(nodes []*graphdef.Node) (*graphdef.Node, error) {
				key.Reset()
				key.WriteString(strconv.Itoa(p.Index))
				key.WriteByte('/')
				key.WriteString(strconv.Itoa(ahead))
				for _, n := range nodes {
					key.WriteByte(',')
					key.WriteString(strconv.Itoa(n.Index))
				}
				trig, ok := pr.lms.triggers[key.String()]
				if !ok {
					trig, _ = triggers.ByDistance(p, nodes, ahead, pr.eligible)
					pr.lms.triggers[key.String()] = trig
				}
				if trig == nil {
					return nil, fmt.Errorf("no trigger")
				}
				return trig, nil
			})
			ps.Groups = append(ps.Groups, gs...)
		}
		for i := range ps.Groups {
			ps.Groups[i].Uses = slices.Clip(ps.Groups[i].Uses)
		}
		pr.lms.groups[gk] = slices.Clone(ps.Groups)
		if len(ps.Groups) > 0 {
			plan.Swaps = append(plan.Swaps, ps)
		}
	}
	return plan
}

// maxDistance returns the longest producer-to-consumer distance in levels among the
// candidates.
func (pr *Problem) maxDistance() int {
	m := 1
	cands, _ := pr.Analysis.Candidates()
	for _, c := range cands {
		for _, u := range c.Tensor.Consumers() {
			if d := u.Node.Level - c.Tensor.Node.Level; d > m {
				m = d
			}
		}
	}
	return m
}

func (p lmsPlanner) Plan(pr *planRun) (*Evaluation, error) {
	// The LMS caches (candidates, triggers, swap-ins and kept peaks: tens of MB at 10k nodes)
	// serve this search only: kept for the whole problem, they stayed live through the
	// strategies after it and raised the 10k planning's peak resident memory by a third.
	defer func() { pr.lms = nil }()
	if pr.Opts.FixedLMS {
		o := pr.Analysis.Opts
		return pr.Evaluate(pr.lmsPlan(o.SwapoutThreshold, o.SwapinAhead, o.SwapinGroupBy))
	}
	maxT := pr.maxDistance() + 1
	n := len(lmsAheads) * len(lmsGroupBys)
	ev, _, err := pr.screened(n, lmsKeep, func(i int, target []int64) *rewrite.Plan {
		return pr.lmsFit(maxT, lmsAheads[i/len(lmsGroupBys)], lmsGroupBys[i%len(lmsGroupBys)], target)
	})
	return ev, err
}

// noPeak marks, among predicted peaks, a device the fast model does not follow.
const noPeak = math.MinInt64

// lmsKeep is how many ahead/groupby pairs, best by the fast model, are simulated.
const lmsKeep = 3

// lmsFit returns the LMS plan with the largest threshold the fast model fits into target.
// Memory is not monotone in the threshold at small thresholds (swapping tensors for
// consumers only a few levels away can cost memory), so the thresholds are first scanned on
// a geometric grid from the largest down, and the answer refined between grid points; when
// none fits, the threshold of the lowest predicted peak is taken.
func (pr *Problem) lmsFit(maxT, ahead, groupBy int, target []int64) *rewrite.Plan {
	// The excess is fastExcess's over the predicted peaks, which do not depend on target
	// and are kept (lmsCache.peaks; a device the model does not follow has no peak).
	pr.lmsInit()
	excess := func(th int) int64 {
		key := [3]int{pr.lmsCanon(th), ahead, groupBy}
		peaks, ok := pr.lms.peaks[key]
		if !ok {
			plan := pr.lmsPlan(th, ahead, groupBy)
			sig := string(lmsSignature(nil, plan))
			if peaks, ok = pr.lms.planPeaks[sig]; !ok {
				r := pr.fast.predict(plan)
				peaks = make([]int64, len(r.base))
				for i, t := range r.base {
					if t == nil {
						peaks[i] = noPeak
						continue
					}
					peaks[i], _ = r.peak(i)
				}
				if pr.lms.planPeaks == nil {
					pr.lms.planPeaks = map[string][]int64{}
				}
				pr.lms.planPeaks[sig] = peaks
			}
			if pr.lms.peaks == nil {
				pr.lms.peaks = map[[3]int][]int64{}
			}
			pr.lms.peaks[key] = peaks
		}
		worst := int64(-1 << 62)
		for i, p := range peaks {
			if p == noPeak {
				continue
			}
			if x := p - target[i]; x > worst {
				worst = x
			}
		}
		return worst
	}
	var grid []int
	for th := float64(maxT); th >= 1; th /= 1.5 {
		if t := int(th); len(grid) == 0 || t < grid[len(grid)-1] {
			grid = append(grid, t)
		}
	}
	if grid[len(grid)-1] != 1 {
		grid = append(grid, 1)
	}
	// The grid is searched from the largest threshold down by bisection over its indices
	// (memory falls as the threshold falls over the useful range), remembering the lowest
	// predicted peak in case nothing fits.
	bestT, bestX := grid[0], int64(1<<62)
	xs := map[int]int64{}
	at := func(i int) int64 {
		if x, ok := xs[i]; ok {
			return x
		}
		x := excess(grid[i])
		xs[i] = x
		if x < bestX {
			bestT, bestX = grid[i], x
		}
		return x
	}
	lo, hi := 0, len(grid)-1 // find the first index (largest threshold) that fits
	if at(hi) > 0 {
		// Even the smallest threshold does not fit by the model: scan for the lowest peak.
		for i := range grid {
			at(i)
		}
		return pr.lmsPlan(bestT, ahead, groupBy)
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if at(mid) <= 0 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	// Refine between this threshold and the next larger grid point.
	th := grid[lo]
	top := maxT
	if lo > 0 {
		top = grid[lo-1] - 1
	}
	l, h := th, top
	for l < h {
		mid := (l + h + 1) / 2
		if excess(mid) <= 0 {
			l = mid
		} else {
			h = mid - 1
		}
	}
	return pr.lmsPlan(l, ahead, groupBy)
}
