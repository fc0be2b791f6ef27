package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"

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
func PlanLMS(a *rewrite.Analysis) (*rewrite.Plan, []rewrite.Skipped) {
	opts := a.Opts
	cands, skipped := a.Candidates()
	plan := &rewrite.Plan{Accumulators: a.HostAccumulators(opts.MinTensorBytes)}
	for _, c := range cands {
		p := c.Tensor.Node
		var far []graphdef.Use
		for _, u := range c.Tensor.Consumers() {
			if rewrite.DeferredNode(u.Node).Level-p.Level >= opts.SwapoutThreshold && a.ConsumerEligible(u) {
				far = append(far, u)
			}
		}
		if len(far) == 0 {
			continue
		}
		rewrite.SortUses(far)
		ps := rewrite.PlannedSwap{Tensor: c.Tensor, Bytes: c.Bytes}
		for _, group := range rewrite.GroupUses(far, opts.SwapinGroupBy) {
			gs, rest, err := triggeredGroups(a.Graph, group, func(nodes []*graphdef.Node) (*graphdef.Node, error) {
				return triggers.ByDistance(p, nodes, opts.SwapinAhead, a.TriggerEligible)
			})
			ps.Groups = append(ps.Groups, gs...)
			if err != nil {
				skipped = append(skipped, rewrite.Skipped{Tensor: c.Tensor.String(), Reason: fmt.Sprintf("no trigger for consumer %q: %v (%s)", rest[0].Node.Name, err, a.NoTriggerWhy(p, rewrite.SwapInReaders(rest)))})
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
func triggeredGroups(g *graphdef.Graph, uses []graphdef.Use, choose func([]*graphdef.Node) (*graphdef.Node, error)) ([]rewrite.SwapInGroup, []graphdef.Use, error) {
	var out []rewrite.SwapInGroup
	for len(uses) > 0 {
		trig, err := choose(rewrite.SwapInReaders(uses))
		if err != nil {
			return out, uses, err
		}
		var kept, rest []graphdef.Use
		for _, u := range uses {
			if runsWithAll(g, trig, rewrite.StandIns(u.Node)) {
				kept = append(kept, u)
			} else {
				rest = append(rest, u)
			}
		}
		if len(kept) == 0 {
			return out, uses, noGateError{trig.Name}
		}
		out = append(out, rewrite.SwapInGroup{Uses: kept, Trigger: trig})
		uses = rest
	}
	return out, nil, nil
}

// noGateError is triggeredGroups' error when its trigger cannot gate any of the consumers
// left. Its message is made when it is read: lmsPlan drops these errors, and formatting each
// was 1% of the CPU profile of planning ResNet-50 at 4x its batch.
type noGateError struct{ trigger string }

func (e noGateError) Error() string {
	return fmt.Sprintf("trigger %q cannot gate any of the consumers left", e.trigger)
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

// isBackEdgeOp reports whether op's outputs are while loops' back edges.
func isBackEdgeOp(op string) bool { return op == "NextIteration" || op == "RefNextIteration" }

// PlanFor plans the LMS rewrite of g under opts (defaults applied) without applying it.
func PlanFor(g *graphdef.Graph, opts rewrite.Options) (*rewrite.Plan, error) {
	opts, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	plan, _ := PlanLMS(rewrite.Analyze(g, opts))
	return plan, nil
}

// Rewrite applies the LMS-style rewrite to model: it validates the graph, refuses one that
// tfswap already rewrote, plans with PlanLMS, applies the plan and checks the rewrite's
// invariants (Verify). The input model is not changed.
func Rewrite(model *graphdef.Model, opts rewrite.Options) (*rewrite.Result, error) {
	opts, g, err := rewrite.Prepare(model, opts)
	if err != nil {
		return nil, err
	}
	return rewriteLMS(model, rewrite.Analyze(g, opts))
}

// rewriteLMS is Rewrite on a model prepare has checked, a being the analysis of its graph.
func rewriteLMS(model *graphdef.Model, a *rewrite.Analysis) (*rewrite.Result, error) {
	plan, skipped := PlanLMS(a)
	b, err := rewrite.Build(a, plan)
	if err != nil {
		return nil, err
	}
	return b.WriteVerified(model, skipped)
}
