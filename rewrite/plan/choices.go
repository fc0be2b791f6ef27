package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"sort"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/triggers"
)

// choice swaps one buffer: the reads from access splits[0] on go to swapped-in copies, and
// each further split starts another swap-in (the buffer is absent from the device between
// the last read before a split and the copy brought back for it).
type choice struct {
	b      *buffer
	splits []int
	// why says which strategy chose it and why, for --explain.
	why string
}

// pendingGroup is one swap-in being planned: the reads of tensor t in one episode of a
// choice.
type pendingGroup struct {
	c     *choice
	ep    int
	t     graphdef.Tensor
	reads []*access
	uses  []graphdef.Use
	due   int64 // earliest read's start (unswapped timing)
	// trigger is chosen by a trigger rule; late says it is predicted to arrive late;
	// triggerWaits says the trigger waits for the swap-out (SwapInGroup.TriggerWaits).
	trigger      *graphdef.Node
	late         bool
	triggerWaits bool
	// target is when the rule wanted the copy released (for --explain), -1 when it does not
	// reason in time.
	target int64
}

// triggerRule chooses the triggers of a set of pending swap-ins.
type triggerRule func(pr *Problem, groups []*pendingGroup) error

// episodes returns the pending swap-ins of a choice, one per tensor read in each episode
// but those that would serve only gates (gatesOnly), or ok=false when a read that would
// have to be redirected cannot be.
func (pr *Problem) episodes(c *choice) (out []*pendingGroup, ok bool) {
	b := c.b
	for e, k := range c.splits {
		from := b.accesses[k].start
		to := int64(1) << 62
		if e+1 < len(c.splits) {
			to = b.accesses[c.splits[e+1]].start
		}
		reads, good := redirects(b.tree, from, to)
		if !good || len(reads) == 0 {
			return nil, false
		}
		byT := map[graphdef.Tensor]*pendingGroup{}
		var groups []*pendingGroup
		for _, x := range reads {
			g := byT[x.t]
			if g == nil {
				g = &pendingGroup{c: c, ep: e, t: x.t, due: x.start, target: -1}
				byT[x.t] = g
				groups = append(groups, g)
			}
			g.reads = append(g.reads, x)
			g.uses = append(g.uses, x.u)
			if x.start < g.due {
				g.due = x.start
			}
		}
		for _, g := range groups {
			if gatesOnly(g.uses) {
				continue // the gates keep reading the original
			}
			rewrite.SortUses(g.uses)
			out = append(out, g)
		}
	}
	return out, true
}

// gatesOnly reports whether every use is a read by a gate the graph has (an offload's,
// rewrite.OffloadGroups). The graph surgery leaves such a read on the original tensor (a gate
// reading a swap-in would wait for a swap-in it may itself release), so a swap-in whose uses
// are all gates would be read by no node, which rewrite.Verify rejects; episodes leaves it
// out, as assemble leaves out a swap-in without a trigger (its reads keep the original). An
// Identity gate's read is never redirected (it has control outputs: ConsumerEligible refuses
// it), but an L2Loss gate's (--gate-kind reduce) is. Such a swap-in finds no trigger on the
// gate's ancestry (the gate reads its trigger alone), but one of a sibling branch
// (siblingTrigger) may run between the producer and a gate that waits on a busy device.
func gatesOnly(uses []graphdef.Use) bool {
	for _, u := range uses {
		if string(u.Node.Def.GetAttr()[rewrite.RoleAttr].GetS()) != "gate" {
			return false
		}
	}
	return len(uses) > 0
}

// buildPlan turns choices into a plan, choosing triggers with rule. Choices that cannot be
// planned (a read that cannot be redirected, no trigger) are left out and reported.
func (pr *planRun) buildPlan(cs []*choice, rule triggerRule) (*rewrite.Plan, []rewrite.Skipped) {
	groups, skipped := pr.groupsOf(cs, rule)
	plan, sk := assemble(groups, nil)
	pr.Explain.record(plan, cs)
	return plan, append(skipped, sk...)
}

// groupsOf returns the pending swap-ins of choices with their triggers chosen by rule.
func (pr *Problem) groupsOf(cs []*choice, rule triggerRule) ([]*pendingGroup, []rewrite.Skipped) {
	var groups []*pendingGroup
	var skipped []rewrite.Skipped
	for _, c := range cs {
		gs, ok := pr.episodes(c)
		if !ok {
			skipped = append(skipped, rewrite.Skipped{Tensor: c.b.root.String(), Reason: "a read after the gap cannot take a swapped-in copy"})
			continue
		}
		groups = append(groups, gs...)
	}
	if err := rule(pr, groups); err != nil {
		// Fall back to one level ahead for the groups the rule could not serve.
		for _, g := range groups {
			if g.trigger == nil {
				if t, err := triggers.ByDistance(g.t.Node, rewrite.SwapInReaders(g.uses), 1, pr.eligible); err == nil {
					g.trigger = t
				}
			}
		}
	}
	for _, g := range groups {
		if g.trigger == nil && g.c.splits[g.ep] == 0 {
			pr.siblingTrigger(g)
		}
	}
	return groups, skipped
}

// siblingTrigger chooses the trigger of a swap-in of a buffer swapped out as soon as it is
// made (split 0) when no op on the readers' ancestry descends from the producer: the latest
// eligible op on the buffer's device that starts after the producer ends and ends early
// enough for the copy back to arrive before the first read (in the unswapped step), else the
// latest that ends before that read. The trigger waits for the swap-out
// (SwapInGroup.TriggerWaits). Every edge this adds runs forward in the unswapped step's time
// (producer, swap-out, trigger, gate, swap-in, reader), so it closes no cycle with the plan's
// other edges, which do the same. That holds only where time order is graph order: a node
// that runs before one of its own ancestors (timing.isEarly: after a v1 Merge whose untaken
// input depends on the readers) is never chosen, nor one that descends from a reader.
func (pr *Problem) siblingTrigger(g *pendingGroup) {
	tm := pr.timing
	b := g.c.b
	if tm.isEarly(pr.Analysis.Graph, g.t.Node) {
		return // the trigger's wait on the swap-out could close a cycle
	}
	deadline := g.due - pr.fast.xferTime(b.bytes, true) - 2*pr.latency - pr.hostIdent
	var best, fallback *graphdef.Node
	for _, n := range tm.order[b.dev] {
		s, e := tm.times.Start[n.Index], tm.times.End[n.Index]
		if s < b.prodEnd || n == g.t.Node {
			continue
		}
		if e > g.due {
			break
		}
		if !pr.eligible(n) || e >= g.due || tm.isEarly(pr.Analysis.Graph, n) {
			continue
		}
		consumer := false
		for _, u := range g.uses {
			consumer = consumer || u.Node == n || pr.Analysis.Graph.Reachable(u.Node, n)
		}
		if consumer {
			continue
		}
		fallback = n
		if e <= deadline {
			best = n
		}
	}
	if best == nil {
		best = fallback
		g.late = best != nil
	}
	if best != nil {
		g.trigger, g.triggerWaits = best, true
	}
}

// assemble makes a plan of the groups whose choice keep accepts (all when keep is nil): one
// swap per tensor, its swap-ins in episode order.
func assemble(groups []*pendingGroup, keep func(*choice) bool) (*rewrite.Plan, []rewrite.Skipped) {
	var skipped []rewrite.Skipped
	byT := map[graphdef.Tensor]*rewrite.PlannedSwap{}
	var order []graphdef.Tensor
	for _, g := range groups {
		if keep != nil && !keep(g.c) {
			continue
		}
		if g.trigger == nil {
			skipped = append(skipped, rewrite.Skipped{Tensor: g.t.String(), Reason: "no trigger for consumer " + g.uses[0].Node.Name})
			continue
		}
		ps := byT[g.t]
		if ps == nil {
			n, _, _ := g.t.Bytes()
			ps = &rewrite.PlannedSwap{Tensor: g.t, Bytes: n}
			byT[g.t] = ps
			order = append(order, g.t)
		}
		ps.Groups = append(ps.Groups, rewrite.SwapInGroup{Uses: g.uses, Trigger: g.trigger, TriggerWaits: g.triggerWaits})
	}
	plan := &rewrite.Plan{}
	if len(order) > 0 {
		plan.Swaps = make([]rewrite.PlannedSwap, 0, len(order))
	}
	for _, t := range order {
		plan.Swaps = append(plan.Swaps, *byT[t])
	}
	sortPlan(plan)
	return plan, skipped
}

// sortPlan orders a plan's swaps by producer topological position and port, and each swap's
// groups by their earliest consumer, so that equal plans are equal slices.
func sortPlan(plan *rewrite.Plan) {
	sort.SliceStable(plan.Swaps, func(i, j int) bool {
		ti, tj := plan.Swaps[i].Tensor, plan.Swaps[j].Tensor
		if ti.Node.TopoIndex != tj.Node.TopoIndex {
			return ti.Node.TopoIndex < tj.Node.TopoIndex
		}
		return ti.Port < tj.Port
	})
}

// engineOf returns the host-to-device copy engine of simulated device dev.
func (pr *Problem) engineOf(dev int) int { return pr.fast.h2d[dev] }

// costRule chooses triggers by predicted time and copy-engine queue (triggers.ByCost) from
// the timing tm (nil: the unswapped step), keeping margin ns of slack before each consumer.
func costRule(tm *timing, margin int64) triggerRule {
	return func(pr *Problem, groups []*pendingGroup) error {
		if tm == nil {
			tm = pr.timing
		}
		ts := make([]triggers.Transfer, len(groups))
		for i, g := range groups {
			ts[i] = triggers.Transfer{Producer: g.t.Node, Consumers: rewrite.SwapInReaders(g.uses), Engine: pr.engineOf(g.c.b.dev),
				Duration: pr.fast.xferTime(g.c.b.bytes, true), Latency: 2*pr.latency + pr.hostIdent, Margin: margin}
		}
		var firstErr error
		memo := pr.memo(tm)
		chs, err := triggers.ByCostMemo(ts, memo, pr.eligible)
		if err != nil {
			// Choose one by one so that one bad group does not lose the others.
			for i, g := range groups {
				ch, err := triggers.ByCostMemo(ts[i:i+1], memo, pr.eligible)
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				g.trigger, g.late, g.target = ch[0].Trigger, ch[0].Late, ch[0].By
			}
			return firstErr
		}
		for i, g := range groups {
			g.trigger, g.late, g.target = chs[i].Trigger, chs[i].Late, chs[i].By
		}
		return nil
	}
}

// layerRule chooses triggers as vDNN's prefetch does (triggers.ByLayer).
func layerRule(isLayer func(*graphdef.Node) bool) triggerRule {
	return func(pr *Problem, groups []*pendingGroup) error {
		var firstErr error
		for _, g := range groups {
			t, err := triggers.ByLayer(g.t.Node, rewrite.SwapInReaders(g.uses), isLayer, pr.eligible)
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

// fixedRule keeps triggers already set on the groups.
func fixedRule(pr *Problem, groups []*pendingGroup) error {
	for _, g := range groups {
		if g.trigger == nil {
			return fmt.Errorf("tensor %s: no trigger", g.t)
		}
	}
	return nil
}

// choiceLen returns the bytes a choice moves to the host and back.
func (c *choice) traffic() int64 { return c.b.bytes * int64(1+len(c.splits)) }
