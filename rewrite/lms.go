package rewrite

import (
	"fmt"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/triggers"
)

// PlanLMS plans swaps as TensorFlow Large Model Support does: every candidate tensor is
// swapped for its consumers at least SwapoutThreshold levels after the producer; those far
// consumers are grouped when their levels lie within SwapinGroupBy of the group's earliest;
// each group's swap-in is triggered SwapinAhead levels before its earliest consumer.
// Tensors and consumer groups it could not plan are returned as skipped, with the reason.
// Every while loop accumulator that can be, its pushed tensors of the minimum size
// (Options.MinTensorBytes) at least, is placed on the host (Analysis.HostAccumulators).
func PlanLMS(a *Analysis) (*Plan, []Skipped) {
	opts := a.Opts
	cands, skipped := a.Candidates()
	plan := &Plan{Accumulators: a.HostAccumulators(opts.MinTensorBytes)}
	for _, c := range cands {
		p := c.Tensor.Node
		var far []graphdef.Use
		for _, u := range c.Tensor.Consumers() {
			if deferredNode(u.Node).Level-p.Level >= opts.SwapoutThreshold && a.ConsumerEligible(u) {
				far = append(far, u)
			}
		}
		if len(far) == 0 {
			continue
		}
		sortUses(far)
		ps := PlannedSwap{Tensor: c.Tensor, Bytes: c.Bytes}
		for _, group := range groupUses(far, opts.SwapinGroupBy) {
			gs, rest, err := triggeredGroups(a.Graph, group, func(nodes []*graphdef.Node) (*graphdef.Node, error) {
				return triggers.ByDistance(p, nodes, opts.SwapinAhead, a.TriggerEligible)
			})
			ps.Groups = append(ps.Groups, gs...)
			if err != nil {
				skipped = append(skipped, Skipped{Tensor: c.Tensor.String(), Reason: fmt.Sprintf("no trigger for consumer %q: %v (%s)", rest[0].Node.Name, err, a.noTriggerWhy(p, useNodes(rest)))})
			}
		}
		if len(ps.Groups) > 0 {
			plan.Swaps = append(plan.Swaps, ps)
		}
	}
	return plan, skipped
}

// triggeredGroups gives the uses of one LMS group (sorted by consumer level) their
// swap-ins: choose picks a trigger for the consumers of the uses not yet served (an ancestor
// of the earliest of them); the uses whose consumer the trigger may gate share that swap-in
// (runsWith), and the others are served by further swap-ins. A trigger that merely lies on
// the earliest consumer's ancestry may depend on what another consumer's step does not run:
// a Keras graph built on its model's own input placeholder reads the same learning-phase
// tensor as the training step, and gating the step's consumer on the other graph's op pulls
// that unfed placeholder into the step (issue 12: cond_v2). When choose fails, the uses
// left are returned with the error.
func triggeredGroups(g *graphdef.Graph, uses []graphdef.Use, choose func([]*graphdef.Node) (*graphdef.Node, error)) ([]SwapInGroup, []graphdef.Use, error) {
	var out []SwapInGroup
	for len(uses) > 0 {
		trig, err := choose(useNodes(uses))
		if err != nil {
			return out, uses, err
		}
		var kept, rest []graphdef.Use
		for _, u := range uses {
			if runsWithAll(g, trig, standIns(u.Node)) {
				kept = append(kept, u)
			} else {
				rest = append(rest, u)
			}
		}
		if len(kept) == 0 {
			return out, uses, fmt.Errorf("trigger %q cannot gate any of the consumers left", trig.Name)
		}
		out = append(out, SwapInGroup{Uses: kept, Trigger: trig})
		uses = rest
	}
	return out, nil, nil
}

// runsWith reports whether trigger t may gate a swap-in read by consumer c: whenever a step
// runs c, it already runs everything t needs. That holds when t is an ancestor of c, or when
// each of t's inputs (data and control, while loops' back edges aside) is: the gate then adds
// t alone to c's step, never a placeholder or a variable read c's step does not run.
func runsWith(g *graphdef.Graph, t, c *graphdef.Node) bool {
	if g.Reachable(t, c) {
		return true
	}
	for _, in := range t.Inputs {
		if !isBackEdgeOp(in.Node.Op) && !g.Reachable(in.Node, c) {
			return false
		}
	}
	for _, p := range t.ControlInputs {
		if !isBackEdgeOp(p.Op) && !g.Reachable(p, c) {
			return false
		}
	}
	return true
}

// runsWithAll reports whether runsWith holds for trigger t and each of nodes.
func runsWithAll(g *graphdef.Graph, t *graphdef.Node, nodes []*graphdef.Node) bool {
	for _, c := range nodes {
		if !runsWith(g, t, c) {
			return false
		}
	}
	return true
}

// NoTriggerInLoop is the phrase a Skipped reason holds when no swap-in trigger could be found
// because every op between the producer and its consumer lies inside a while loop.
const NoTriggerInLoop = "inside a while loop"

// noTriggerWhy says why no op on the path ByDistance walks back from the earliest of consumers
// to producer (triggers.Ancestry) may trigger a swap-in: how many of those ops lie inside a
// while loop (NoTriggerInLoop when all do), inside a conditional branch, off the compute
// device, or do no work a trigger may be hung on.
func (a *Analysis) noTriggerWhy(producer *graphdef.Node, consumers []*graphdef.Node) string {
	path := triggers.Ancestry(producer, consumers)
	if len(path) == 0 {
		return "no op lies between them"
	}
	var loop, cond, off, other int
	for _, n := range path {
		switch {
		case a.InLoop(n):
			loop++
		case a.Conditional(n):
			cond++
		case !a.OnCompute(n):
			off++
		default:
			other++
		}
	}
	if loop == len(path) {
		return fmt.Sprintf("all %d ops between them lie %s", len(path), NoTriggerInLoop)
	}
	return fmt.Sprintf("of the %d ops between them, %d lie inside a while loop, %d inside a conditional branch, %d off the compute device, and %d do no work a trigger can be hung on", len(path), loop, cond, off, other)
}

// isBackEdgeOp reports whether op's outputs are while loops' back edges.
func isBackEdgeOp(op string) bool { return op == "NextIteration" || op == "RefNextIteration" }

// groupUses splits uses (sorted by consumer level) into groups whose consumers lie within
// groupBy levels of the group's first; groupBy < 0 gives one group per consumer node.
func groupUses(uses []graphdef.Use, groupBy int) [][]graphdef.Use {
	var groups [][]graphdef.Use
	for _, u := range uses {
		if n := len(groups); n > 0 {
			first := groups[n-1][0].Node
			if u.Node == first || (groupBy >= 0 && deferredNode(u.Node).Level-deferredNode(first).Level <= groupBy) {
				groups[n-1] = append(groups[n-1], u)
				continue
			}
		}
		groups = append(groups, []graphdef.Use{u})
	}
	return groups
}

// useNodes returns the distinct nodes whose runs the swap-in read by uses must precede, in
// order: the consumers, a gradient tuple Identity replaced by its reader (deferredNode),
// which the trigger rules then search back from (the Identity itself waits only for the
// swap-in and its tuple, both early).
func useNodes(uses []graphdef.Use) []*graphdef.Node {
	var nodes []*graphdef.Node
	seen := map[*graphdef.Node]bool{}
	for _, u := range uses {
		for _, n := range standIns(u.Node) {
			if !seen[n] {
				seen[n] = true
				nodes = append(nodes, n)
			}
		}
	}
	return nodes
}

// SwapInReaders returns the nodes whose runs a swap-in read by uses must precede, the ones
// its trigger is searched back from (useNodes): the consumers, with a gradient tuple
// Identity replaced by the readers it is deferred to. Tools that place triggers themselves
// (package tune) use it so that their candidates match the planners'.
func SwapInReaders(uses []graphdef.Use) []*graphdef.Node { return useNodes(uses) }

// PlanFor plans the LMS rewrite of g under opts (defaults applied) without applying it.
func PlanFor(g *graphdef.Graph, opts Options) (*Plan, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	plan, _ := PlanLMS(Analyze(g, opts))
	return plan, nil
}
