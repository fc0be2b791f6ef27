package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// Ordering edges (issue 14 item 5): when no plan fits, the lowest peak is sometimes held by
// a tensor that only waits for a reader that could already run. In ResNet-50's backward
// pass, a projection block's shortcut batch-norm gradient is read by the shortcut's input
// gradient (which runs) and its filter gradient (which the scheduler leaves for later),
// while the main branch's batch-norm gradient allocates its output beside it. A control
// edge from the waiting reader to the op at the peak runs the reader first and frees the
// tensor there. Control edges change when ops run, never what they compute, so the values
// stay the same; an edge is added only when the reader does not descend from the peak op
// (no cycle) and every input of the reader was made before the peak op started (it was
// ready: the edge pulls nothing else forward).

// orderRounds bounds how many times the reorder pass adds edges and plans again.
const orderRounds = 3

// orderingEdges returns the control edges that free, at the peak of device dev in res (a
// simulation of g with a timeline and every live buffer listed), the activations live there
// that only wait for ready readers: for each such reader R and the op P that started last
// at the peak, the edge R before P. live are the buffers live at the peak, peakT its time
// and slack the width of the instant (1000 ns for the VirtualCluster's microsecond figure,
// 0 otherwise). keep reports whether a node may carry or be named by an edge. Edges are
// sorted by node, then after. base is the graph the plan was made for: g's first nodes are
// base's, and keep must hold only for those.
func orderingEdges(g, base *graphdef.Graph, res *cost.Result, dev int, peakT, slack int64, live []cost.LiveTensor, alias bool, keep func(*graphdef.Node) bool) []rewrite.OrderEdge {
	if res.Timeline == nil {
		return nil
	}
	span := make([]*cost.OpSpan, len(g.Nodes))
	var peak *cost.OpSpan
	atPeak := map[*graphdef.Node]bool{}
	for i := range res.Timeline.Ops {
		s := &res.Timeline.Ops[i]
		if s.Node == nil || s.Node.Index >= len(g.Nodes) || g.Nodes[s.Node.Index] != s.Node {
			continue
		}
		span[s.Node.Index] = s
		if s.Device == dev && s.Start <= peakT+slack && (s.End > peakT || s.Start >= peakT) {
			atPeak[s.Node] = true
			if peak == nil || s.Start > peak.Start || (s.Start == peak.Start && s.Node.Index > peak.Node.Index) {
				peak = s
			}
		}
	}
	if debugOrder && peak != nil {
		fmt.Fprintf(os.Stderr, "order: peak at %d ns (+%d), op %s (%s), %d ops at the peak, %d buffers live\n", peakT, slack, peak.Node.Name, peak.Node.Op, len(atPeak), len(live))
	}
	if peak == nil || !keep(peak.Node) {
		return nil
	}
	p := peak.Node
	// Descendants in the graph planned, before the plan's swap nodes and their edges:
	// planning again places those anew.
	desc := base.Descendants(base.Nodes[p.Index])
	// ready reports whether every input of r was made before the peak op started. Inputs
	// from nodes the plan added (swap-ins, gates) count as made: planning on the graph with
	// the edge places them again.
	ready := func(r *graphdef.Node) bool {
		made := func(n *graphdef.Node) bool {
			s := span[n.Index]
			return !keep(n) || (s != nil && s.End <= peak.Start)
		}
		for _, in := range r.Inputs {
			if !made(in.Node) {
				return false
			}
		}
		for _, c := range r.ControlInputs {
			if !made(c) {
				return false
			}
		}
		return true
	}
	byName := make(map[string]*graphdef.Node, len(g.Nodes))
	for _, n := range g.Nodes {
		byName[n.Name] = n
	}
	var out edgeSet
	for _, l := range live {
		if l.Kind != "activation" {
			continue
		}
		i := strings.LastIndexByte(l.Name, ':')
		if i < 0 {
			continue
		}
		port, err := strconv.Atoi(l.Name[i+1:])
		n := byName[l.Name[:i]]
		if err != nil || n == nil || atPeak[n] {
			continue
		}
		var pending []*graphdef.Node
		ok := true
		// The buffer's readers: the tensor's, and where an alias op (Identity, Reshape, ...)
		// that already ran shares the buffer, its readers too.
		var visit func(t graphdef.Tensor)
		visit = func(t graphdef.Tensor) {
			for _, u := range t.Consumers() {
				if !ok {
					return
				}
				r := u.Node
				s := span[r.Index]
				if s == nil || r.Index < len(res.Pruned) && res.Pruned[r.Index] {
					continue // not simulated, or run as a NoOp: it does not hold the buffer
				}
				if atPeak[r] || (s.Start <= peak.Start && s.End > peak.Start) {
					if debugOrder {
						fmt.Fprintf(os.Stderr, "    read at peak by %s\n", r.Name)
					}
					ok = false // read at the peak
					return
				}
				if s.Start <= peak.Start {
					if alias {
						for o := range r.Consumers {
							if cost.AliasedInput(r.Op, o) == u.Input {
								visit(graphdef.Tensor{Node: r, Port: o})
							}
						}
					}
					continue
				}
				// keep before desc: a node the plan added (a swap node, a gate) lies past the
				// end of desc, which covers base's nodes only.
				if s.Device != dev || !keep(r) || desc[r.Index] || !ready(r) {
					if debugOrder {
						kept := keep(r)
						fmt.Fprintf(os.Stderr, "    reader %s: same device %v, kept %v, descends from the peak op %v, ready %v\n", r.Name, s.Device == dev, kept, kept && desc[r.Index], ready(r))
					}
					ok = false
					return
				}
				if !slices.Contains(pending, r) {
					pending = append(pending, r)
				}
			}
		}
		visit(graphdef.Tensor{Node: n, Port: port})
		if debugOrder && l.Bytes >= 1<<20 {
			fmt.Fprintf(os.Stderr, "  live %s (%d bytes): %d readers to order, freeable %v\n", l.Name, l.Bytes, len(pending), ok)
		}
		if !ok || len(pending) == 0 {
			continue
		}
		// What the readers allocate must be less than what they free.
		var made int64
		for _, r := range pending {
			for o := range r.Consumers {
				b, known, _ := (graphdef.Tensor{Node: r, Port: o}).Bytes()
				if !known {
					made = l.Bytes
				}
				made += b
			}
		}
		if made >= l.Bytes {
			continue
		}
		for _, r := range pending {
			out.add(rewrite.OrderEdge{Node: p.Name, After: r.Name})
		}
	}
	return out.sorted()
}

// edgeSet collects ordering edges, each once, in the order first added.
type edgeSet struct {
	seen map[rewrite.OrderEdge]bool
	list []rewrite.OrderEdge
}

// add adds e unless the set has it.
func (s *edgeSet) add(e rewrite.OrderEdge) {
	if s.seen == nil {
		s.seen = map[rewrite.OrderEdge]bool{}
	}
	if !s.seen[e] {
		s.seen[e] = true
		s.list = append(s.list, e)
	}
}

// sorted returns the set's edges sorted by node, then after.
func (s *edgeSet) sorted() []rewrite.OrderEdge {
	sort.Slice(s.list, func(i, j int) bool {
		if s.list[i].Node != s.list[j].Node {
			return s.list[i].Node < s.list[j].Node
		}
		return s.list[i].After < s.list[j].After
	})
	return s.list
}

// peakEdges simulates ev's plan on pr and returns the ordering edges at the peak of its
// device furthest over budget, by each accounting over the budget there. Only nodes of pr's
// own graph (no swap nodes) carry or are named by an edge.
func (pr *planRun) peakEdges(ev *Evaluation) ([]rewrite.OrderEdge, error) {
	var dp DevicePeak
	worst := int64(-1 << 62)
	for _, d := range ev.Devices {
		if x := d.Over(); x > worst {
			worst, dp = x, d
		}
	}
	if worst <= 0 {
		return nil, nil
	}
	g, err := pr.graphFor(ev.Plan)
	if err != nil {
		return nil, err
	}
	orig := pr.Analysis.Graph
	keep := func(n *graphdef.Node) bool {
		return n.Index < len(orig.Nodes) && orig.Nodes[n.Index].Name == n.Name && !pr.Analysis.InLoop(orig.Nodes[n.Index]) &&
			!pr.Analysis.Conditional(orig.Nodes[n.Index])
	}
	type acc struct {
		conv cost.Conventions
		us   bool
	}
	var accs []acc
	if dp.fit.tfswap || dp.fit == (fitSet{}) {
		if dp.Peak > dp.Budget {
			accs = append(accs, acc{})
		}
	}
	if dp.fit.ns && dp.GrapplerPeak+dp.GrapplerMargin > dp.Budget {
		accs = append(accs, acc{conv: cost.GrapplerConventions()})
	}
	if dp.fit.us && dp.GrapplerPeakUS > dp.Budget {
		accs = append(accs, acc{conv: cost.GrapplerConventions(), us: true})
	}
	seen := map[rewrite.OrderEdge]bool{}
	var out []rewrite.OrderEdge
	for _, a := range accs {
		opts := pr.simOpts
		opts.TopLive = 1 << 30
		opts.Timeline = true
		if a.conv != (cost.Conventions{}) {
			opts.Conventions = a.conv
		}
		res, err := cost.Simulate(g, pr.Profile, opts)
		if err != nil {
			return nil, err
		}
		dev := -1
		for i, d := range res.Devices {
			if d.Name == dp.simName {
				dev = i
			}
		}
		if dev < 0 {
			continue
		}
		d := res.Devices[dev]
		peakT, live, slack := d.PeakTime, d.Live, int64(0)
		if a.us {
			peakT, live, slack = d.MicrosecondPeakTime, d.MicrosecondLive, 1000
		}
		for _, e := range orderingEdges(g, orig, res, dev, peakT, slack, live, !opts.Conventions.NoAliasing, keep) {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// withOrderEdges returns a copy of model whose nodes carry the control inputs edges name
// (those they do not have yet), and how many were added.
func withOrderEdges(model *graphdef.Model, edges []rewrite.OrderEdge) (*graphdef.Model, int) {
	byName := map[string][]string{}
	for _, e := range edges {
		byName[e.Node] = append(byName[e.Node], e.After)
	}
	out := model.Clone()
	added := 0
	for i, nd := range out.Graph.GetNode() {
		var ins []string
		for _, after := range byName[nd.GetName()] {
			in := "^" + after
			if !slices.Contains(nd.GetInput(), in) && !slices.Contains(ins, in) {
				ins = append(ins, in)
			}
		}
		if len(ins) > 0 {
			c := proto.Clone(nd).(*npb.NodeDef)
			c.Input = append(c.Input, ins...)
			out.Graph.Node[i] = c
			added += len(ins)
		}
	}
	return out, added
}

// acyclicOrderEdges returns the edges of found, in order, that name two nodes of g and
// close no cycle in g with the edges kept before them: an edge (Node waits for After) is
// dropped when Node is After or After descends from Node through g's data and control
// edges (a loop's NextIteration back edges aside, as in graphdef.Graph.Descendants) and
// the edges kept so far.
func acyclicOrderEdges(g *graphdef.Graph, found []rewrite.OrderEdge) []rewrite.OrderEdge {
	var kept []rewrite.OrderEdge
	extra := map[*graphdef.Node][]*graphdef.Node{} // After -> the nodes that wait for it
	for _, e := range found {
		n, after := g.Node(e.Node), g.Node(e.After)
		if n == nil || after == nil || n == after || reaches(g, n, after, extra) {
			continue
		}
		kept = append(kept, e)
		extra[after] = append(extra[after], n)
	}
	return kept
}

// reaches reports whether to descends from from in g, through g's data and control edges
// (not out of a loop's back edge) and the edges of extra (from a node to those waiting for it).
func reaches(g *graphdef.Graph, from, to *graphdef.Node, extra map[*graphdef.Node][]*graphdef.Node) bool {
	mark := make([]bool, len(g.Nodes))
	stack := []*graphdef.Node{from}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visit := func(c *graphdef.Node) {
			if !mark[c.Index] {
				mark[c.Index] = true
				stack = append(stack, c)
			}
		}
		for _, c := range extra[p] {
			visit(c)
		}
		if p.Op == "NextIteration" || p.Op == "RefNextIteration" {
			continue
		}
		for _, uses := range p.Consumers {
			for _, u := range uses {
				visit(u.Node)
			}
		}
		for _, c := range p.ControlOutputs {
			visit(c)
		}
	}
	return mark[to.Index]
}

// passReorder: when no plan fits, auto adds the ordering edges at the lowest plan's peak
// (peakEdges; those between nodes of the input graph) to the input graph and plans it again
// from the start, up to orderRounds times (each round may add edges at the new lowest peak);
// it keeps the first plan that fits or, when none does, the graph whose lowest peak is
// lowest (for the no-fit message). When the best plan fits but is costly (more than +50%)
// and a recompute pass's lowest plan missed the budget (planState.rcMiss), it adds the edges
// at that plan's peak instead and keeps the outcome when it is better: on ResNet-50 at 8x B0
// (v100-16gb, tfswap's accounting) every recomputing plan missed because a projection
// block's shortcut batch-norm gradient waited for its filter gradient beside the main
// branch's batch-norm gradient, while the plan that fitted swapped 557 GiB a step.
func passReorder(st *planState) error {
	if st.planner != autoStrategy || st.depth >= orderRounds || st.final == nil {
		return nil
	}
	fits := st.final.ev != nil && st.final.ev.Fits
	src := st.final
	if fits {
		if !ReorderCostly || !costly(st.final.ev) || st.rcMiss == nil {
			return nil
		}
		src = st.rcMiss
	}
	low := src.pr.lowest
	if low == nil {
		low = src.ev
	}
	if low == nil {
		return nil
	}
	found, err := src.pr.peakEdges(low)
	if err != nil {
		return err
	}
	// Edges found on a recomputed graph (a recomputing plan's lowest peak, or the costly
	// path's rcMiss) may close a cycle in the input graph: there the reader need not descend
	// from the op at the peak though it does in the input graph (it read the original).
	edges := acyclicOrderEdges(st.g, found)
	m2, added := withOrderEdges(st.model, edges)
	if added == 0 {
		return nil
	}
	sub := &planState{depth: st.depth + 1, orders: append(append([]rewrite.OrderEdge(nil), st.orders...), edges...), tupleOrders: st.tupleOrders}
	if err := st.replan(sub, m2, "reordered graph"); err != nil {
		return err
	}
	if debugOrder {
		if ev := sub.final.ev; ev != nil && ev.Fits {
			fmt.Fprintf(os.Stderr, "order: round %d, %d edges: fits, step %+.1f%%\n", sub.depth, len(sub.orders), 100*ev.Overhead)
		} else if l := sub.final.pr.lowest; l != nil {
			fmt.Fprintf(os.Stderr, "order: round %d, %d edges: lowest peak %d\n", sub.depth, len(sub.orders), maxPeak(l))
		}
	}
	if ev := sub.final.ev; ev == nil || !ev.Fits {
		// Nothing fits there either: keep the reordered graph when its lowest peak is lower,
		// for the no-fit message to report.
		if l, l0 := sub.final.pr.lowest, st.final.pr.lowest; !fits && l != nil && l0 != nil && l.Excess < l0.Excess {
			st.final, st.xpr, st.orders, st.tupleOrders = sub.final, sub.xpr, sub.orders, sub.tupleOrders
		}
		return nil
	}
	// The overhead is against the input graph's unswapped step.
	e := *sub.final.ev
	if base := st.pr.Base.StepTime; base > 0 {
		e.Overhead = float64(e.StepTime-base) / float64(base)
	}
	if !strings.HasSuffix(e.Strategy, "+order") {
		e.Strategy += "+order"
	}
	if fits && !better(&e, st.final.ev) {
		return nil
	}
	f := *sub.final
	f.ev = &e
	st.final, st.xpr, st.orders, st.tupleOrders = &f, sub.xpr, sub.orders, sub.tupleOrders
	return nil
}

// ReorderCostly lets the reorder pass add edges where the best plan fits but is costly (it
// is switched off only by tests, to show what it changes).
var ReorderCostly = true

// replan plans m2, the input graph with ordering edges added, into sub (which carries the
// depth and the edges), with st's options and planner: every planning pass up to nofit. what
// names the graph in an internal error.
func (st *planState) replan(sub *planState, m2 *graphdef.Model, what string) error {
	g2, err := graphdef.NewGraph(m2.Graph, st.model.Source)
	if err != nil {
		return fmt.Errorf("internal error: the %s is invalid: %v", what, err)
	}
	if err := g2.SortTopo(); err != nil {
		return fmt.Errorf("internal error: the %s has a cycle: %v", what, err)
	}
	sub.model, sub.g, sub.opts, sub.po, sub.planner, sub.mode = m2, g2, st.opts, st.po, st.planner, st.mode
	if err := runPassesFrom(sub, "", "nofit"); err != nil {
		return err
	}
	st.sims += sub.sims
	st.dropped = append(st.dropped, sub.dropped...)
	return nil
}

// passesToReplan returns planPasses (set by init: planPasses names passReorder, which plans
// again with them).
var passesToReplan func() []planPass

func init() { passesToReplan = func() []planPass { return planPasses } }

// debugOrder prints what the reorder pass finds (TFSWAP_DEBUG_ORDER=1).
var debugOrder = os.Getenv("TFSWAP_DEBUG_ORDER") != ""
