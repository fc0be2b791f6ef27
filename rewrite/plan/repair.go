package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"sort"
	"strconv"

	"github.com/tfswap/tfswap/graphdef"
)

// Peak repair: a plan's peak is often made by the order the runtime picks among independent
// branches, not by what the plan keeps. In a residual block's backward pass the two batch-norm
// gradients both read the block's output gradient; when the copies both need arrive together,
// whichever runs first holds its own input and output beside the other's swapped-in input,
// which waits. A swap-in's trigger orders its reader after the trigger (the reader cannot run
// before the copy arrives), so re-triggering a copy that waits at the peak from an op that
// runs after the peak (and does not descend from the copy's readers) defers its reader past
// the ops that release memory first: in the block above, the first branch's gradient is
// consumed by its convolution's backprops before the second branch's input comes back.
// repairPeak tries that at the simulated peak, a few triggers per waiting copy, keeping what
// lowers the peak, for a few rounds.

// peakRepair turns peak repair on (tests turn it off to see what it gains).
var peakRepair = true

// repairRounds bounds the rounds of peak repair; repairTries the triggers tried per copy, and
// repairCopies the waiting copies tried per round.
const (
	repairRounds = 6
	repairTries  = 4
	repairCopies = 3
)

// repairPeak returns a plan derived from ev's by re-triggering swap-ins whose copies wait at
// the peak, when that lowers the worst device's excess, or ev itself.
func (pr *planRun) repairPeak(ev *Evaluation) (*Evaluation, error) {
	cur := ev
	desc := map[*graphdef.Node][]bool{}
	descOf := func(n *graphdef.Node) []bool {
		d := desc[n]
		if d == nil {
			d = pr.Analysis.Graph.Descendants(n)
			desc[n] = d
		}
		return d
	}
	for round := 0; round < repairRounds && !cur.Fits; round++ {
		_, tm, err := pr.evaluateTimed(cur.Plan)
		if err != nil {
			return cur, err
		}
		// The readers' descendants are taken in the plan's graph, not the original: the
		// plan's other swap-ins add edges (trigger, gate, swap-in, reader), and a new trigger
		// that descends from a reader only through them closes a cycle all the same (a
		// branch's op whose swap-in another branch's op triggers: ResNet-50 at 8x B0).
		planned, err := pr.graphFor(cur.Plan)
		if err != nil {
			return cur, err
		}
		readerDesc := map[*graphdef.Node][]bool{}
		readerDescOf := func(n *graphdef.Node) []bool {
			d := readerDesc[n]
			if d == nil {
				d = planned.Descendants(planned.Nodes[n.Index])
				readerDesc[n] = d
			}
			return d
		}
		// The worst device and its peak.
		worst, dp := int64(-1<<62), DevicePeak{}
		for _, d := range cur.Devices {
			if x := d.Over(); x > worst {
				worst, dp = x, d
			}
		}
		tp, dev := dp.PeakTime, dp.SimulatedIndex
		// When each copy to the device was issued: its buffer is allocated from then on.
		issued := map[string]int64{}
		for _, x := range tm.res.Timeline.Xfers {
			if x.Dst == dev && !tm.res.Devices[x.Src].GPU {
				issued[x.Tensor] = x.Enqueue
			}
		}
		// Copies on the device at the peak (arrived or on their way) whose readers have not
		// started.
		type waiting struct {
			swap, group int
			bytes       int64
		}
		var ws []waiting
		for i, ps := range cur.Plan.Swaps {
			for k, g := range ps.Groups {
				at, ok := issued[rewrite.SwapNodeName(ps.Tensor, "swap_in_"+strconv.Itoa(k))+":0"]
				if !ok || at > tp {
					continue
				}
				first := int64(-1)
				for _, u := range g.Uses {
					if s := tm.times.Start[u.Node.Index]; s >= 0 && (first < 0 || s < first) {
						first = s
					}
				}
				if first > tp {
					ws = append(ws, waiting{i, k, ps.Bytes})
				}
			}
		}
		sort.SliceStable(ws, func(a, b int) bool { return ws[a].bytes > ws[b].bytes })
		if len(ws) > repairCopies {
			ws = ws[:repairCopies]
		}
		improved := false
		for _, w := range ws {
			ps := cur.Plan.Swaps[w.swap]
			g := ps.Groups[w.group]
			prodDesc := descOf(ps.Tensor.Node)
			var readers [][]bool
			for _, u := range g.Uses {
				readers = append(readers, readerDescOf(u.Node))
			}
			// Ops on the device that end after the peak, in the plan's order, that descend
			// from the producer (or are the producer's own later work) and from none of the
			// readers: the copy is then released after the peak's op.
			var cands []*graphdef.Node
			for _, n := range tm.order[dev] {
				if len(cands) >= repairTries {
					break
				}
				if tm.times.End[n.Index] <= tp || n == g.Trigger || !prodDesc[n.Index] || !pr.eligible(n) || tm.isEarly(pr.Analysis.Graph, n) {
					continue
				}
				ok := true
				for i, r := range readers {
					if r[n.Index] || g.Uses[i].Node == n {
						ok = false
						break
					}
				}
				if ok {
					cands = append(cands, n)
				}
			}
			for _, n := range cands {
				plan := retriggered(cur.Plan, w.swap, w.group, n)
				pr.Explain.derive(plan, cur.Plan, "swap-in re-triggered after the peak (peak repair)")
				nev, err := pr.Evaluate(plan)
				if err != nil {
					return cur, err
				}
				if nev.Excess < cur.Excess || nev.Fits && better(nev, cur) {
					cur, improved = nev, true
					break
				}
			}
			if improved {
				break
			}
		}
		if !improved {
			break
		}
	}
	return cur, nil
}

// retriggered returns plan with swap i's swap-in k triggered by t (a trigger that descends
// from the producer, so it needs no wait).
func retriggered(plan *rewrite.Plan, i, k int, t *graphdef.Node) *rewrite.Plan {
	out := &rewrite.Plan{Swaps: append([]rewrite.PlannedSwap(nil), plan.Swaps...), Waits: plan.Waits}
	ps := out.Swaps[i]
	ps.Groups = append([]rewrite.SwapInGroup(nil), ps.Groups...)
	ps.Groups[k] = rewrite.SwapInGroup{Uses: ps.Groups[k].Uses, Trigger: t}
	out.Swaps[i] = ps
	return out
}
