package plan

import (
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// peakFloor is a lower bound on the peak of a plan's step by tfswap's accounting, worked out
// from the unswapped graph without building or simulating the plan's graph: the buffers that
// must all be allocated at once on one compute device whatever the plan does to the
// schedule, unless it swaps them. Its pivot and relations also bound the plan's step
// (stepFloor).
//
// The pivot is an original node the unswapped step runs on that device: of the last
// floorPivots to start no later than the unswapped peak, the one whose bound is largest. A swap candidate's buffer counts when its producer is an ancestor of the pivot
// and one of its own (not an alias op's) data readers on the same device is a descendant of
// the pivot that the simulator cannot turn into a NoOp (floorAlive). A plan's graph keeps
// every original edge or replaces it with a path through its swap nodes, so these relations
// hold in it too: the buffer is allocated no later than its producer starts, which is before
// the pivot starts, and is released no earlier than that reader finishes, which is after the
// pivot ends; so all counted buffers are allocated at once, and the simulator's peak, taken
// at each allocation, is at least their sum. Two counted buffers are never one allocation:
// roots are not alias ops' outputs, and an op forwards an input's buffer only when nothing
// else holds it, while a counted buffer is held by its reader until after the pivot, which
// every producer of a counted buffer precedes. A plan frees a buffer earlier only by swapping
// it: the buffers whose roots the plan swaps are left out (peakFloor.bytes).
//
// It is made only for graphs whose steps run no control flow and call no functions (the
// simulator's Merge and loop rules and function bodies are left out of the argument), and
// only when tfswap's accounting is required and sizes tensors by their shapes (Grappler's
// rules count unknown dimensions as one).
type peakFloor struct {
	dev    int   // the simulated compute device of the pivot
	budget int64 // its budget
	// pivot is the pivot; anc and desc mark its ancestors and descendants (by node index),
	// alive the nodes no plan's simulation turns into NoOps (floorAlive).
	pivot            *graphdef.Node
	anc, desc, alive []bool
	// roots are the counted buffers' root tensors, with their bytes.
	roots []graphdef.Tensor
	sizes []int64
	total int64 // the sum of sizes
}

// floorControlFlowOps are the ops after which peakFloor's argument no longer holds as it
// stands: v1 control flow, whose Merges run before all their inputs have arrived and whose
// loops run their bodies more than once.
var floorControlFlowOps = map[string]bool{
	"Switch": true, "RefSwitch": true, "Merge": true, "RefMerge": true, "Enter": true, "RefEnter": true,
	"Exit": true, "RefExit": true, "NextIteration": true, "RefNextIteration": true, "LoopCond": true,
}

// peakFloorOf returns pr's peakFloor (made on first use, a memo), or nil when none is made:
// a graph with control flow or function calls, a step judged without tfswap's accounting, a
// problem with host accumulators, or no unswapped timing.
func (pr *Problem) peakFloorOf() *peakFloor {
	if pr.floorDone {
		return pr.floor
	}
	pr.floorDone = true
	pr.floor = pr.makePeakFloor()
	return pr.floor
}

// makePeakFloor works out pr's peakFloor for peakFloorOf.
func (pr *Problem) makePeakFloor() *peakFloor {
	tm := pr.timing
	if tm == nil || pr.Base == nil || pr.Base.Result == nil || !pr.fit.tfswap || len(pr.accumulators) > 0 || pr.simOpts.Conventions.UnknownDimsAsOne {
		return nil
	}
	g := pr.Analysis.Graph
	if len(g.Def.GetLibrary().GetFunction()) > 0 {
		return nil
	}
	for _, n := range g.Nodes {
		if tm.dev[n.Index] >= 0 && floorControlFlowOps[n.Op] {
			return nil
		}
	}
	// The pivot: on the device furthest over its budget, the last original node to start no
	// later than the unswapped peak.
	dev, over := -1, int64(0)
	for i, d := range pr.Base.Result.Devices {
		if !d.GPU || i >= len(tm.order) || len(tm.order[i]) == 0 {
			continue
		}
		if x := d.PeakBytes - pr.budgetOf(d.Name); dev < 0 || x > over {
			dev, over = i, x
		}
	}
	if dev < 0 {
		return nil
	}
	// The pivots tried: the last floorPivots original nodes to start no later than the
	// unswapped peak (the node that allocated it may be on a side branch, as a weight's
	// gradient is, and hold little across it). The floor is the largest of theirs.
	peakT := pr.Base.Result.Devices[dev].PeakTime
	order := tm.order[dev]
	last := -1
	for i, n := range order {
		if tm.times.Start[n.Index] > peakT {
			break
		}
		last = i
	}
	if last < 0 {
		return nil
	}
	alive := pr.floorAlive()
	budget := pr.budgetOf(pr.Base.Result.Devices[dev].Name)
	anc := make([]bool, len(g.Nodes))
	desc := make([]bool, len(g.Nodes))
	var best, f *peakFloor
	for i := last; i >= 0 && i > last-floorPivots; i-- {
		f = pr.floorAt(order[i], dev, alive, anc, desc)
		f.budget = budget
		if best == nil || f.total > best.total {
			best = f
		}
	}
	if best != f {
		// anc and desc hold the last pivot's relations: mark the best's again.
		pr.floorAt(best.pivot, dev, alive, anc, desc)
	}
	best.anc, best.desc, best.alive = anc, desc, alive
	return best
}

// floorPivots is how many pivots makePeakFloor tries.
const floorPivots = 4

// floorAt returns the peakFloor of pivot, on simulated device dev, with the nodes marked
// alive (floorAlive); anc and desc are scratch space of the graph's size, cleared here.
func (pr *Problem) floorAt(pivot *graphdef.Node, dev int, alive, anc, desc []bool) *peakFloor {
	tm := pr.timing
	markReached(pivot, anc, func(n *graphdef.Node, visit func(*graphdef.Node)) {
		for _, in := range n.Inputs {
			visit(in.Node)
		}
		for _, c := range n.ControlInputs {
			visit(c)
		}
	})
	markReached(pivot, desc, func(n *graphdef.Node, visit func(*graphdef.Node)) {
		for _, uses := range n.Consumers {
			for _, u := range uses {
				visit(u.Node)
			}
		}
		for _, c := range n.ControlOutputs {
			visit(c)
		}
	})
	f := &peakFloor{dev: dev, pivot: pivot}
	for _, b := range pr.buffers {
		q := b.root.Node
		if b.dev != dev || tm.dev[q.Index] != dev || !anc[q.Index] || b.bytes <= 0 || cost.AliasedInput(q.Op, b.root.Port) >= 0 {
			continue
		}
		held := false
		for _, u := range b.root.Consumers() {
			if r := u.Node.Index; desc[r] && alive[r] && tm.dev[r] == dev {
				held = true
				break
			}
		}
		if held {
			f.roots = append(f.roots, b.root)
			f.sizes = append(f.sizes, b.bytes)
			f.total += b.bytes
		}
	}
	return f
}

// floorAlive marks the original nodes of the unswapped step that the simulator cannot turn
// into NoOps (cost's prunedNodes) in any plan's graph: fetched nodes, stateful ops, and nodes
// with a data reader so marked. A plan's graph keeps each data edge or replaces it with a
// path through a swap-out and a swap-in, each of which then has a reader so marked, so the
// marks hold there too.
func (pr *Problem) floorAlive() []bool {
	g := pr.Analysis.Graph
	tm := pr.timing
	fetched := map[string]bool{}
	for _, f := range pr.simOpts.Fetch {
		name, _, _ := strings.Cut(strings.TrimPrefix(f, "^"), ":")
		fetched[name] = true
	}
	alive := make([]bool, len(g.Nodes))
	for i := len(g.Topo) - 1; i >= 0; i-- {
		n := g.Topo[i]
		if tm.dev[n.Index] < 0 {
			continue
		}
		a := fetched[n.Name] || graphdef.IsStatefulOp(n.Op)
		for _, uses := range n.Consumers {
			for _, u := range uses {
				a = a || alive[u.Node.Index]
			}
		}
		alive[n.Index] = a
	}
	return alive
}

// bytes returns the floor's bytes that plan leaves in place: those of the buffers whose roots
// it does not swap. A plan that recomputes or places accumulators is not bounded (-1).
func (f *peakFloor) bytes(plan *rewrite.Plan) int64 {
	if len(plan.Accumulators) > 0 {
		return -1
	}
	swapped := make(map[graphdef.Tensor]bool, len(plan.Swaps))
	for _, ps := range plan.Swaps {
		swapped[ps.Tensor] = true
	}
	total := f.total
	for i, t := range f.roots {
		if swapped[t] {
			total -= f.sizes[i]
		}
	}
	return total
}

// markReached clears mark and marks, by node index, the nodes reached from n (not n itself)
// over the edges next visits.
func markReached(n *graphdef.Node, mark []bool, next func(n *graphdef.Node, visit func(*graphdef.Node))) {
	clear(mark)
	stack := []*graphdef.Node{n}
	visit := func(m *graphdef.Node) {
		if !mark[m.Index] {
			mark[m.Index] = true
			stack = append(stack, m)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		next(n, visit)
	}
}

// stepFloor returns a lower bound on the step time of plan's graph by tfswap's accounting
// (0 when it bounds nothing), from the host link's copy engines of the pivot's device, each
// of which copies one tensor at a time for its bytes over the profile's bandwidth:
//   - a swap-out that an ancestor of the pivot (or the pivot) waits for (rewrite.Wait)
//     reaches the host before the pivot starts, so the pivot starts no earlier than the
//     device-to-host engine has copied all those tensors, one after another;
//   - a swap-in whose trigger is a descendant of the pivot (or the pivot) leaves the host
//     after the trigger ends (through its gate), so after the pivot starts, and the
//     host-to-device engine copies all those one after another before their readers run.
//
// The step is at least the sum of the two. Only tensors that are the roots of their buffers
// count (an alias op's output is copied with its buffer's bytes), on the pivot's device, with
// a swap-in group read by an original node on that device that no simulation turns into a
// NoOp (floorAlive) without a relay (its copy is the tensor's bytes); a swap-out counts if
// one such group reads it. The plan's graph keeps the original edges or replaces them with
// paths through swap nodes, so the relations of the unswapped graph hold in it. It is not
// worked out when swap-ins are on the device (Options.Gate), the host is not a CPU, or the
// simulation's transfers are instant or run as _Send/_Recv pairs.
func (f *peakFloor) stepFloor(pr *Problem, plan *rewrite.Plan) int64 {
	a := pr.Analysis
	c := pr.simOpts.Conventions
	if f.anc == nil || a.Opts.Gate != rewrite.GateHost || c.InstantTransfers || c.RecvOps || len(plan.Accumulators) > 0 {
		return 0
	}
	tm := pr.timing
	before := func(n *graphdef.Node) bool { return n == f.pivot || f.anc[n.Index] }
	after := func(n *graphdef.Node) bool { return n == f.pivot || f.desc[n.Index] }
	waited := map[graphdef.Tensor]bool{}
	for _, w := range rewrite.PlanWaits(plan) {
		if before(w.Node) {
			waited[w.After] = true
		}
	}
	var out, in int64
	for _, ps := range plan.Swaps {
		t := ps.Tensor
		if tm.dev[t.Node.Index] != f.dev || cost.AliasedInput(t.Node.Op, t.Port) >= 0 || a.Host(t.Node).Type != "CPU" {
			continue
		}
		b, ok := pr.shapes.Bytes(t)
		if !ok || b <= 0 {
			continue
		}
		read := false
		for _, g := range ps.Groups {
			if g.Trigger == nil || !f.groupRead(pr, g) {
				continue
			}
			read = true
			if after(g.Trigger) {
				in += copyFloor(b, pr.Profile.H2D)
			}
		}
		if read && waited[t] {
			out += copyFloor(b, pr.Profile.D2H)
		}
	}
	if out == 0 && in == 0 {
		return 0
	}
	return out + in
}

// groupRead reports whether swap-in group g is read, without a relay, by an original node on
// the floor's device that no plan's simulation turns into a NoOp.
func (f *peakFloor) groupRead(pr *Problem, g rewrite.SwapInGroup) bool {
	for _, u := range g.Uses {
		n := u.Node
		if pr.timing.dev[n.Index] == f.dev && f.alive[n.Index] && n.Def.GetAttr()[rewrite.RoleAttr].GetS() == nil &&
			!rewrite.NeedsRelay(n, pr.Analysis.ValueDead) {
			return true
		}
	}
	return false
}

// copyFloor is a lower bound, in nanoseconds, on the time a copy engine takes for bytes at
// bw bytes per second (the simulator rounds the same quotient up).
func copyFloor(bytes int64, bw float64) int64 {
	if bw <= 0 {
		return 0
	}
	return max(int64(float64(bytes)/bw*1e9)-1, 0)
}
