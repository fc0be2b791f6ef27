package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"math"
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
	Run: func(pass *Pass) (*Evaluation, error) { return lmsPlanner{}.Plan(pass.Problem) },
}

// lmsAheads and lmsGroupBys are the grid the tuning searches.
var (
	lmsAheads   = []int{1, 2, 3, 4, 6, 8}
	lmsGroupBys = []int{-1, 2, 5, 10}
)

// lmsCand is a swap candidate with its eligible consumers sorted as PlanLMS sorts them.
type lmsCand struct {
	c    rewrite.Candidate
	uses []graphdef.Use
}

// lmsCache holds what PlanLMS recomputes on every call: the candidates with their eligible
// consumers, and the triggers found for (producer, consumers, ahead).
type lmsCache struct {
	cands    []lmsCand
	triggers map[string]*graphdef.Node
	// peaks are the fast model's predicted peaks of the plans of lmsPlan, by threshold,
	// ahead and groupBy: lmsFit asks for the same plans at every target it fits.
	peaks map[[3]int][]int64
}

// lmsInit fills the problem's lmsCache with the candidates, the first time it is needed.
func (pr *Problem) lmsInit() {
	if pr.lms != nil {
		return
	}
	a := pr.Analysis
	pr.lms = &lmsCache{triggers: map[string]*graphdef.Node{}}
	cands, _ := a.Candidates()
	for _, c := range cands {
		var uses []graphdef.Use
		for _, u := range c.Tensor.Consumers() {
			if a.ConsumerEligible(u) {
				uses = append(uses, u)
			}
		}
		rewrite.SortUses(uses)
		pr.lms.cands = append(pr.lms.cands, lmsCand{c: c, uses: uses})
	}
}

// lmsPlan plans LMS with the given distances: the plan PlanLMS makes with these options,
// from cached candidates and triggers.
func (pr *Problem) lmsPlan(threshold, ahead, groupBy int) *rewrite.Plan {
	a := pr.Analysis
	pr.lmsInit()
	plan := &rewrite.Plan{}
	var key strings.Builder
	for _, lc := range pr.lms.cands {
		p := lc.c.Tensor.Node
		var far []graphdef.Use
		for _, u := range lc.uses {
			if rewrite.DeferredNode(u.Node).Level-p.Level >= threshold {
				far = append(far, u)
			}
		}
		if len(far) == 0 {
			continue
		}
		ps := rewrite.PlannedSwap{Tensor: lc.c.Tensor, Bytes: lc.c.Bytes}
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

func (p lmsPlanner) Plan(pr *Problem) (*Evaluation, error) {
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
		key := [3]int{th, ahead, groupBy}
		peaks, ok := pr.lms.peaks[key]
		if !ok {
			r := pr.fast.predict(pr.lmsPlan(th, ahead, groupBy))
			peaks = make([]int64, len(r.base))
			for i, t := range r.base {
				if t == nil {
					peaks[i] = noPeak
					continue
				}
				peaks[i], _ = r.peak(i)
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
