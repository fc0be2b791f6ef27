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
func PlanLMS(a *Analysis) (*Plan, []Skipped) {
	opts := a.Opts
	cands, skipped := a.Candidates()
	plan := &Plan{}
	for _, c := range cands {
		p := c.Tensor.Node
		var far []graphdef.Use
		for _, u := range c.Tensor.Consumers() {
			if u.Node.Level-p.Level >= opts.SwapoutThreshold && a.ConsumerEligible(u) {
				far = append(far, u)
			}
		}
		if len(far) == 0 {
			continue
		}
		sortUses(far)
		ps := PlannedSwap{Tensor: c.Tensor, Bytes: c.Bytes}
		for _, group := range groupUses(far, opts.SwapinGroupBy) {
			trigger, err := triggers.ByDistance(p, useNodes(group), opts.SwapinAhead, a.TriggerEligible)
			if err != nil {
				skipped = append(skipped, Skipped{Tensor: c.Tensor.String(), Reason: fmt.Sprintf("no trigger for consumer %q: %v", group[0].Node.Name, err)})
				continue
			}
			ps.Groups = append(ps.Groups, SwapInGroup{Uses: group, Trigger: trigger})
		}
		if len(ps.Groups) > 0 {
			plan.Swaps = append(plan.Swaps, ps)
		}
	}
	return plan, skipped
}

// groupUses splits uses (sorted by consumer level) into groups whose consumers lie within
// groupBy levels of the group's first; groupBy < 0 gives one group per consumer node.
func groupUses(uses []graphdef.Use, groupBy int) [][]graphdef.Use {
	var groups [][]graphdef.Use
	for _, u := range uses {
		if n := len(groups); n > 0 {
			first := groups[n-1][0].Node
			if u.Node == first || (groupBy >= 0 && u.Node.Level-first.Level <= groupBy) {
				groups[n-1] = append(groups[n-1], u)
				continue
			}
		}
		groups = append(groups, []graphdef.Use{u})
	}
	return groups
}

// useNodes returns the distinct consumer nodes of uses, in order.
func useNodes(uses []graphdef.Use) []*graphdef.Node {
	var nodes []*graphdef.Node
	seen := map[*graphdef.Node]bool{}
	for _, u := range uses {
		if !seen[u.Node] {
			seen[u.Node] = true
			nodes = append(nodes, u.Node)
		}
	}
	return nodes
}

// PlanFor plans the LMS rewrite of g under opts (defaults applied) without applying it.
func PlanFor(g *graphdef.Graph, opts Options) (*Plan, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	plan, _ := PlanLMS(Analyze(g, opts))
	return plan, nil
}
