package plan

import (
	"container/heap"
	"github.com/tfswap/tfswap/rewrite"
	"math"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/triggers"
)

// The adaptive schedule-window (Sony, "Out-of-core training for extremely large-scale neural
// networks with adaptive window-based scheduling", section 3).
//
// Each compute device's ops are taken in their predicted order (the function-sequence), each
// with the bytes it reads and writes (the variable-sequence). Walking the sequence, at each op:
// first, swap-ins are issued for the swapped-out buffers whose next read lies within the
// look-ahead window (the next reads reached before the accumulated bytes exceed the window);
// second, previously reserved swap-outs are completed, oldest first, only as far as the
// memory at this op (the unswapped step's, less what is out, plus what is back) must shrink
// to fit the budget; third, the buffers this op read or wrote are reserved for swap-out.
// Buffers whose next read is already inside the window are not swapped out. A buffer can be
// swapped out and in several times. The one hyper-parameter, the window in bytes, is tuned by
// simulating plans for a geometric range of windows and refining around the best.
//
// In the graph a completed swap-out is a swap whose reads after the current op take a
// swapped-in copy, and the swap-in's trigger is the op on the reader's ancestry where the
// window first reaches the read (triggers.ByWindow). The swap-out copy itself starts when
// the tensor is made; what the schedule decides is from when the device copy is given up.

type windowPlanner struct{}

// windowStrategy is the window strategy (windowPlanner).
var windowStrategy = &Strategy{
	Name: "window",
	Doc: "adaptive schedule-window (Sony out-of-core): swap-ins issued when the byte look-ahead window reaches a read, " +
		"swap-outs completed oldest first only as far as the budget requires; the window size is tuned with the simulator",
	Run: func(pass *Pass) (*Evaluation, error) {
		if pass.scale && pass.run.Opts.Window == 0 {
			return windowPlanner{}.planOne(pass.run, pass.run.Opts.Budget)
		}
		return windowPlanner{}.Plan(pass.run)
	},
}

// planOne plans with one window size, fitted with the simulator in the loop, instead of
// tuning the size: auto's effort rule runs it on graphs past its bound (Pass.scale), where
// screening and fitting a dozen sizes costs a dozen whole plans and their simulations.
func (p windowPlanner) planOne(pr *planRun, window int64) (*Evaluation, error) {
	if pr.Base.Fits {
		return pr.Base, nil
	}
	return pr.fitted(3, func(target []int64) *rewrite.Plan { return pr.windowPlan(window, target) })
}

// sequence returns the variable-sequence of simulated device dev.
func (pr *Problem) sequence(dev int) *triggers.Sequence {
	if pr.seqs == nil {
		pr.seqs = map[int]*triggers.Sequence{}
	}
	if s, ok := pr.seqs[dev]; ok {
		return s
	}
	g := pr.Analysis.Graph
	order := pr.timing.order[dev]
	s := &triggers.Sequence{Pos: make([]int, len(g.Nodes)), Cum: make([]int64, len(order)+1)}
	for i := range s.Pos {
		s.Pos[i] = -1
	}
	for p, n := range order {
		s.Pos[n.Index] = p
		var bytes int64
		for _, in := range n.Inputs {
			if b, ok := pr.shapes.Bytes(in); ok {
				bytes += b
			}
		}
		for port := range n.OutputTypes {
			if b, ok := pr.shapes.Bytes(graphdef.Tensor{Node: n, Port: port}); ok {
				bytes += b
			}
		}
		s.Cum[p+1] = s.Cum[p] + bytes
	}
	s.UseOrder(g, order)
	pr.seqs[dev] = s
	return s
}

// windowRule chooses triggers with the schedule-window.
func windowRule(window int64) triggerRule {
	return func(pr *Problem, groups []*pendingGroup) error {
		var firstErr error
		for _, g := range groups {
			t, _, err := triggers.ByWindow(g.t.Node, rewrite.SwapInReaders(g.uses), window, pr.sequence(g.c.b.dev), pr.eligible)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			g.trigger = t
		}
		return firstErr
	}
}

// winEntry is a swapped-out buffer waiting for the window to reach its next read.
type winEntry struct {
	b     *winBuf
	enter int
}

type winHeap []winEntry

func (h winHeap) Len() int { return len(h) }
func (h winHeap) Less(i, j int) bool {
	if h[i].enter != h[j].enter {
		return h[i].enter < h[j].enter
	}
	return h[i].b.b.order < h[j].b.b.order
}
func (h winHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *winHeap) Push(x any)   { *h = append(*h, x.(winEntry)) }
func (h *winHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// winBuf is a buffer's state during the walk.
type winBuf struct {
	b       *buffer
	pos     []int // position of each access
	valid   map[int]bool
	out     bool
	stamp   int // position of its latest reservation
	splits  []int
	nextAcc int
}

// windowChoices runs the schedule-window over every compute device for window bytes and
// per-device memory targets.
func (pr *Problem) windowChoices(window int64, target []int64) []*choice {
	var out []*choice
	for _, dev := range pr.gpuDevices() {
		seq := pr.sequence(dev)
		order := pr.timing.order[dev]
		tree := pr.fast.trees[dev]
		n := len(order)
		produced := make([][]*winBuf, n)
		read := make([][]*winBuf, n)
		var wbs []*winBuf
		for _, b := range pr.sortedBuffers(dev) {
			wb := &winBuf{b: b, pos: make([]int, len(b.accesses)), valid: map[int]bool{}, stamp: -1}
			pp := seq.Pos[b.root.Node.Index]
			if pp < 0 {
				continue
			}
			for k, x := range b.accesses {
				p := pp
				if x.local {
					p = seq.Pos[x.u.Node.Index]
				}
				wb.pos[k] = p
				if p >= 0 && p < n {
					read[p] = append(read[p], wb)
				}
			}
			for _, k := range b.splits() {
				if _, ok := redirects(b.tree, b.accesses[k].start, math.MaxInt64); ok {
					wb.valid[k] = true
				}
			}
			produced[pp] = append(produced[pp], wb)
			wbs = append(wbs, wb)
		}
		type reservation struct {
			wb    *winBuf
			stamp int
		}
		var queue []reservation
		qHead := 0
		var back winHeap
		var outBytes int64
		for i, node := range order {
			// Swap-ins the window reaches.
			for back.Len() > 0 && back[0].enter <= i {
				e := heap.Pop(&back).(winEntry)
				e.b.out = false
				outBytes -= e.b.b.bytes
			}
			// Swap-outs completed as far as the budget requires.
			from := pr.timing.times.Start[node.Index]
			to := pr.timing.times.End[node.Index] + 1
			if i+1 < n {
				to = max(to, pr.timing.times.Start[order[i+1].Index])
			}
			mem := tree.MaxIn(from, to) - outBytes
			for mem > target[dev] && qHead < len(queue) {
				r := queue[qHead]
				qHead++
				wb := r.wb
				if r.stamp != wb.stamp || wb.out {
					continue
				}
				for wb.nextAcc < len(wb.pos) && wb.pos[wb.nextAcc] <= i {
					wb.nextAcc++
				}
				k := wb.nextAcc
				if k >= len(wb.pos) || !wb.valid[k] {
					continue
				}
				j := wb.pos[k]
				if seq.Cum[j]-seq.Cum[i] <= window {
					continue // already inside the window
				}
				wb.out = true
				wb.splits = append(wb.splits, k)
				outBytes += wb.b.bytes
				mem -= wb.b.bytes
				heap.Push(&back, winEntry{b: wb, enter: seq.WindowStart(j, window)})
			}
			// Reserve what this op touched.
			touch := func(wb *winBuf) {
				if wb.out {
					return
				}
				wb.stamp = i
				queue = append(queue, reservation{wb: wb, stamp: i})
			}
			for _, wb := range produced[i] {
				touch(wb)
			}
			for _, wb := range read[i] {
				touch(wb)
			}
		}
		for _, wb := range wbs {
			if len(wb.splits) > 0 {
				out = append(out, &choice{b: wb.b, splits: wb.splits, why: "swapped out when the memory at an op exceeded the budget; back when the window reached its next read"})
			}
		}
	}
	return out
}

// windowPlan returns the plan of the schedule-window for window bytes and targets.
func (pr *planRun) windowPlan(window int64, target []int64) *rewrite.Plan {
	plan, _ := pr.buildPlan(pr.windowChoices(window, target), windowRule(window))
	plan, _ = pr.throttled(plan, target)
	return plan
}

func (p windowPlanner) Plan(pr *planRun) (*Evaluation, error) {
	if pr.Base.Fits {
		return pr.Base, nil
	}
	if pr.Opts.Window > 0 {
		return p.planOne(pr, pr.Opts.Window)
	}
	// A geometric range of windows around the budget, then the two neighbours of the best
	// at half the step.
	var ws []int64
	for k := -3; k <= 5; k++ {
		ws = append(ws, int64(math.Ldexp(float64(pr.Opts.Budget), k)))
	}
	best, bi, err := pr.screened(len(ws), windowKeep, func(i int, target []int64) *rewrite.Plan { return pr.windowPlan(ws[i], target) })
	if err != nil || bi < 0 {
		return best, err
	}
	near := []int64{int64(float64(ws[bi]) * math.Sqrt2), int64(float64(ws[bi]) / math.Sqrt2)}
	ev, _, err := pr.screened(len(near), len(near), func(i int, target []int64) *rewrite.Plan { return pr.windowPlan(near[i], target) })
	if better(ev, best) {
		best = ev
	}
	return best, err
}

// windowKeep is how many windows, best by the fast model, are simulated.
const windowKeep = 3
