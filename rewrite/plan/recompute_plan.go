package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"sort"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/triggers"
)

// recomputableOps are the ops whose outputs tfswap may recompute: stateless and
// deterministic, most of them cheap per byte (memory-bound).
var recomputableOps = map[string]bool{
	"Relu": true, "Relu6": true, "Elu": true, "Selu": true, "LeakyRelu": true, "Sigmoid": true,
	"Tanh": true, "Softplus": true, "Softsign": true, "Erf": true,
	"Add": true, "AddV2": true, "Sub": true, "Mul": true, "RealDiv": true, "Maximum": true,
	"Minimum": true, "Neg": true, "Square": true, "Sqrt": true, "Rsqrt": true, "Exp": true,
	"BiasAdd": true, "Cast": true,
	"FusedBatchNorm": true, "FusedBatchNormV2": true, "FusedBatchNormV3": true,
	"MaxPool": true, "AvgPool": true,
	// Convolutions and matrix products cost far more per byte; the planner takes them last,
	// where the host link is saturated (gradient checkpointing's trade).
	"Conv2D": true, "DepthwiseConv2dNative": true, "MatMul": true, "BatchMatMulV2": true,
}

// recomputeDepth is how many producers deep a recomputation chain may reach; recomputeNodes
// bounds the ops in one chain.
const (
	recomputeDepth = 6
	recomputeNodes = 10
)

// recomputeGrapplerMargin is the share of the budget, in thousandths, that a plan with
// recomputations keeps free by Grappler's nanosecond accounting under --fit-accounting both
// (2%), as it did when that was the default. Then tfswap's model of that accounting timed ops
// with tfswap's own estimates, and a recomputed copy, once its gate had fired, could be run
// by the VirtualCluster's scheduler beside other ready work where the model did not (1.1% on
// an Inception-v3 plan). With Grappler's op times the simulation reproduces the
// VirtualCluster's trace to the nanosecond, so the other accountings keep no margin
// (newProblemFor); "both" keeps it so that its plans stay as they were.
const recomputeGrapplerMargin = 20

// recomputeSmallBytes is the size under which a chain input counts as staying on the device
// whatever its lifetime (scales, offsets, statistics of a batch normalisation).
const recomputeSmallBytes = 64 << 10

// rcTarget is a tensor the unswapped step could recompute: made on a compute device before
// the device's peak, read before and after it (Far are the later reads, first the earliest
// start among them), every later read redirectable.
type rcTarget struct {
	t     graphdef.Tensor
	bytes int64
	far   []graphdef.Use
	nodes []*graphdef.Node // the far readers
	first int64
	index int
	// trigger is the last op that ends after the peak and before the first later read; it
	// releases the target's chain.
	trigger *graphdef.Node
}

// rcChain is the chain that remakes a target at its time, with its predicted cost.
type rcChain struct {
	nodes []*graphdef.Node
	cost  int64
}

// external returns the tensors the chain reads from outside itself, each once, in the order
// of its nodes and their inputs.
func (c *rcChain) external() []graphdef.Tensor {
	in := map[*graphdef.Node]bool{}
	for _, n := range c.nodes {
		in[n] = true
	}
	seen := map[graphdef.Tensor]bool{}
	var out []graphdef.Tensor
	for _, n := range c.nodes {
		for _, y := range n.Inputs {
			if !in[y.Node] && !seen[y] {
				seen[y] = true
				out = append(out, y)
			}
		}
	}
	return out
}

// recomputeTargets returns the tensors pr's unswapped step could recompute, in topological
// order of their producers.
func (pr *Problem) recomputeTargets() []*rcTarget {
	a := pr.Analysis
	tm := pr.timing
	peakAt := map[int]int64{}
	for _, d := range pr.Base.Devices {
		peakAt[d.SimulatedIndex] = d.PeakTime
	}
	var out []*rcTarget
	for _, n := range a.Graph.Topo {
		if !pr.recomputable(n) {
			continue
		}
		tp, ok := peakAt[tm.dev[n.Index]]
		if !ok || tm.times.End[n.Index] > tp {
			continue
		}
	ports:
		for port := range n.Consumers {
			t := graphdef.Tensor{Node: n, Port: port}
			bytes, ok := pr.shapes.Bytes(t)
			if !ok || bytes < a.Opts.MinTensorBytes || bytes <= 0 {
				continue
			}
			rt := &rcTarget{t: t, bytes: bytes, first: -1, index: len(out)}
			factors := false
			for _, u := range n.Consumers[port] {
				s := tm.times.Start[u.Node.Index]
				if s < 0 || isAliasUse(u) {
					continue ports // a read that did not run, or an alias that extends the buffer
				}
				if s < tp {
					continue
				}
				if a.DeadCopyRead(u) {
					// Read by a value-dead node, which Grappler drops with the copy.
				} else if !a.ConsumerMovable(u) || rewrite.RecomputeExclusion(u) != "" {
					switch rcReadRule(a, u) {
					case rcReadOriginal:
						continue
					case rcReadCommonFactor:
						factors = true
					default:
						continue ports
					}
				}
				rt.far = append(rt.far, u)
				rt.nodes = append(rt.nodes, u.Node)
				if rt.first < 0 || s < rt.first {
					rt.first = s
				}
			}
			if len(rt.far) == 0 || factors && !rewrite.FactorsAllMoved(n, rt.nodes) {
				continue
			}
			// Something must release the chain after the peak and before the first later
			// read: an op that ends in between, not the producer itself (a read right after
			// the producer is no later read).
			// The chain shares the compute stream with everything else, so starting it earlier
			// gains no time; it would only leave a scheduler (TensorFlow's executor, the
			// VirtualCluster's) room to run it beside other work.
			trig, late, err := triggers.ByTime(n, rt.nodes, rt.first, &tm.times, pr.eligible)
			if err != nil || late || trig == n || tm.times.End[trig.Index] < tp {
				continue
			}
			rt.trigger = trig
			out = append(out, rt)
		}
	}
	return out
}

// How a later read that ConsumerEligible refuses a swap-in (ConsumerExclusion) is treated
// when its tensor is recomputed, as rcReadRule returns it.
const (
	// rcReadRefused: the read keeps the original on the device, so recomputing the tensor
	// frees nothing (it is not a target).
	rcReadRefused = iota
	// rcReadOriginal: the read keeps reading the original and does not hold it: a shape
	// reader, which needs only the shape and which the executor runs as soon as the tensor
	// is made (ReasonShapeReader).
	rcReadOriginal
	// rcReadCommonFactor: a product in the terms of a sum (ReasonFactor) may read the copy
	// when every product that reads the tensor does too (rewrite.FactorsAllMoved): Grappler's
	// HoistCommonFactorOutOfAggregation then finds the same common factor, by the copy's name.
	rcReadCommonFactor
)

// rcReadRule returns how the later read u, which ConsumerEligible refuses, is treated when
// its tensor is recomputed. The other rules of ConsumerExclusion hold for a recomputed copy
// as for a swap-in: the copy has another name (tfswap's scope), by which Grappler would sort
// a sum's terms, and another fan-out, by which it regroups products and bypasses Identities.
func rcReadRule(a *rewrite.Analysis, u graphdef.Use) int {
	switch rewrite.RecomputeExclusion(u) {
	case rewrite.ReasonShapeReader:
		return rcReadOriginal
	case rewrite.ReasonFactor:
		if a.ConsumerMovable(u) && !rewrite.InProductTree(u.Node) {
			return rcReadCommonFactor
		}
	}
	return rcReadRefused
}

// recomputable reports whether n may be run again: a recomputable op on a compute device
// that ran in the unswapped step, outside loops and conditional branches, not excluded, not
// folded into a constant and without control inputs.
func (pr *Problem) recomputable(n *graphdef.Node) bool {
	a := pr.Analysis
	if !recomputableOps[n.Op] || !a.OnCompute(n) || a.InLoop(n) || a.Conditional(n) || a.Foldable[n.Index] {
		return false
	}
	if ex, _ := a.Excluded(n); ex {
		return false
	}
	if rewrite.FanoutSensitive(n) != "" {
		return false // a copy's products are judged by their own readers (rewrite.RecomputeExclusion)
	}
	if n.Index >= len(pr.timing.dev) || pr.timing.dev[n.Index] < 0 {
		return false
	}
	return len(n.ControlInputs) == 0
}

// rcPlanner selects recomputations greedily. Its state is the selected targets and the
// chain of each; a target whose later reads move to a copy no longer keeps its original on
// the device, so a chain that read it as an input must make it again itself.
type rcPlanner struct {
	pr       *Problem
	targets  []*rcTarget
	byTensor map[graphdef.Tensor]*rcTarget
	selected map[graphdef.Tensor]bool
	chains   map[graphdef.Tensor]*rcChain
	// readers indexes chains: for each tensor, the selected targets whose chain reads it
	// from outside itself (rcChain.reads), with their place in order.
	readers map[graphdef.Tensor]map[graphdef.Tensor]int
	// order is the selection order, bytes the cumulative bytes after each selection, and
	// deltas the compute (ns) each selection added.
	order  []*rcTarget
	bytes  []int64
	deltas []int64
	// single limits chains to one output larger than recomputeSmallBytes (the target's):
	// a chain re-running a convolution, its batch normalisation, a residual sum and a ReLU
	// holds four such tensors at its last op by Grappler's accounting, which counts every
	// output as its own buffer, where TensorFlow forwards the element-wise ops' buffers.
	single bool
	// apart makes plan give every selected target its own chain, released by its own
	// trigger, instead of serving a target from another target's chain that makes it and
	// runs earlier: such a copy stays on the device from that chain's release to the
	// target's own reads. The greedy order is the same (marginals already cost each target's
	// chain on its own); apart spends more compute for shorter lifetimes.
	apart bool
	// rec memoises pr.recomputable by node index (0 unknown, 1 yes, 2 no): it depends only
	// on the problem, and chains are built many times over the same nodes.
	rec []int8
	// deps, when not nil, records every tensor whose selection liveAt consulted (marginal's
	// dependencies on the selected set).
	deps *[]graphdef.Tensor
	// marginals counts the marginals computed (the cache's test checks it saves some).
	marginals int
}

// recomputable is pr.recomputable(n), memoised.
func (rp *rcPlanner) recomputable(n *graphdef.Node) bool {
	if n.Index < 0 || n.Index >= len(rp.rec) {
		return rp.pr.recomputable(n)
	}
	switch rp.rec[n.Index] {
	case 1:
		return true
	case 2:
		return false
	}
	ok := rp.pr.recomputable(n)
	rp.rec[n.Index] = 2
	if ok {
		rp.rec[n.Index] = 1
	}
	return ok
}

// setChain records c as the chain of the selected target t (the order'th selected) and
// keeps readers up to date.
func (rp *rcPlanner) setChain(t graphdef.Tensor, c *rcChain, order int) {
	if old := rp.chains[t]; old != nil {
		for _, x := range old.external() {
			delete(rp.readers[x], t)
		}
	}
	rp.chains[t] = c
	for _, x := range c.external() {
		m := rp.readers[x]
		if m == nil {
			m = map[graphdef.Tensor]int{}
			rp.readers[x] = m
		}
		m[t] = order
	}
}

// buildChain returns the chain that remakes t by time at given the selected targets: t's
// producer and, for each input not on the device at that time, that input's producer in
// turn (at most recomputeDepth deep and recomputeNodes ops).
func (rp *rcPlanner) buildChain(t graphdef.Tensor, at int64, sel map[graphdef.Tensor]bool) (*rcChain, bool) {
	in := map[*graphdef.Node]bool{}
	var nodes []*graphdef.Node
	var walk func(n *graphdef.Node, depth int) bool
	walk = func(n *graphdef.Node, depth int) bool {
		if in[n] {
			return true
		}
		if depth > recomputeDepth || len(nodes) >= recomputeNodes || !rp.recomputable(n) {
			return false
		}
		in[n] = true
		for _, x := range n.Inputs {
			if rp.liveAt(x, at, sel) {
				continue
			}
			if !walk(x.Node, depth+1) {
				return false
			}
		}
		nodes = append(nodes, n)
		return true
	}
	if !walk(t.Node, 1) {
		return nil, false
	}
	if rp.single {
		// One large output per chain: Grappler's accounting forwards no buffer, so a
		// chain's outputs are all live at its last op.
		big := 0
		for _, n := range nodes {
			for p := range n.Consumers {
				if b, ok := rp.pr.shapes.Bytes(graphdef.Tensor{Node: n, Port: p}); !ok || b > recomputeSmallBytes {
					big++
				}
			}
		}
		if big > 1 {
			return nil, false
		}
	}
	c := &rcChain{nodes: nodes}
	for _, n := range nodes {
		c.cost += rp.pr.timing.times.End[n.Index] - rp.pr.timing.times.Start[n.Index]
	}
	return c, true
}

// liveAt reports whether tensor x is on the device at time at in the unswapped step with
// the selected recomputations: it stays resident (a constant or a variable's value), is
// small, or a read at or after that time keeps the original (the later reads of a selected
// target read its copy instead).
func (rp *rcPlanner) liveAt(x graphdef.Tensor, at int64, sel map[graphdef.Tensor]bool) bool {
	if rewrite.Resident(x.Node) {
		return true
	}
	if b, ok := rp.pr.shapes.Bytes(x); ok && b <= recomputeSmallBytes {
		return true
	}
	if x.Port >= len(x.Node.Consumers) {
		return false
	}
	if rp.deps != nil {
		*rp.deps = append(*rp.deps, x)
	}
	moved := sel[x]
	for _, u := range x.Node.Consumers[x.Port] {
		s := rp.pr.timing.times.Start[u.Node.Index]
		if s < at {
			continue
		}
		if moved && rp.isFar(x, u) {
			continue
		}
		return true
	}
	return false
}

// isFar reports whether u is one of the later reads of target x.
func (rp *rcPlanner) isFar(x graphdef.Tensor, u graphdef.Use) bool {
	rt := rp.byTensor[x]
	if rt == nil {
		return false
	}
	for _, f := range rt.far {
		if f == u {
			return true
		}
	}
	return false
}

// readerOrder returns the place in order of the selected target t.
func (rp *rcPlanner) readerOrder(t graphdef.Tensor) int {
	for i, o := range rp.order {
		if o.t == t {
			return i
		}
	}
	return len(rp.order)
}

// marginal returns the chains that change when rt is selected (rt's own and those of
// selected targets that read rt's original) and the added cost; ok is false when a chain
// cannot be built.
func (rp *rcPlanner) marginal(rt *rcTarget) (map[graphdef.Tensor]*rcChain, int64, bool) {
	sel := rp.selected
	sel[rt.t] = true
	defer delete(sel, rt.t)
	changed := map[graphdef.Tensor]*rcChain{}
	var delta int64
	// The selected targets whose chain reads rt's tensor (rcChain.reads, indexed in
	// readers), in selection order.
	var readers []*rcTarget
	for t := range rp.readers[rt.t] {
		readers = append(readers, rp.byTensor[t])
	}
	sort.Slice(readers, func(i, j int) bool { return rp.readers[rt.t][readers[i].t] < rp.readers[rt.t][readers[j].t] })
	for _, o := range readers {
		c := rp.chains[o.t]
		nc, ok := rp.buildChain(o.t, o.first, sel)
		if !ok {
			return nil, 0, false
		}
		changed[o.t] = nc
		delta += nc.cost - c.cost
	}
	c, ok := rp.buildChain(rt.t, rt.first, sel)
	if !ok {
		return nil, 0, false
	}
	changed[rt.t] = c
	delta += c.cost
	return changed, delta, true
}

// newRCPlanner orders pr's recomputation targets greedily, the least added compute per byte
// first, until none is left that can be recomputed; single limits chains to one large
// output (rcPlanner.single).
//
// Each step needs every remaining target's marginal, but a selection changes few of them, so
// each marginal is kept with what it was computed from and computed again only when that
// changed (rcPlanner.marginal depends on the selected set only through the tensors liveAt
// consulted, and on the chains of the selected targets that read the target's original,
// which are indexed in readers): the marginals of the targets whose recorded tensors include
// the one selected, and of the targets whose readers changed (the external tensors of every
// chain the selection replaced or added). The order is the same as marginals computed afresh
// at every step (TestRCPlannerCacheMatchesFresh).
func (pr *Problem) newRCPlanner(single bool) *rcPlanner {
	return pr.newRCPlannerWith(single, true)
}

// rcMarginal is a target's marginal as last computed (rcPlanner.marginal), valid until a
// selection changes what it depends on.
type rcMarginal struct {
	valid   bool
	changed map[graphdef.Tensor]*rcChain
	delta   int64
}

// newRCPlannerWith is newRCPlanner, with cache false computing every marginal afresh at
// every step (the reference the cache is tested against).
func (pr *Problem) newRCPlannerWith(single, cache bool) *rcPlanner {
	rp := &rcPlanner{pr: pr, targets: pr.recomputeTargets(), byTensor: map[graphdef.Tensor]*rcTarget{},
		selected: map[graphdef.Tensor]bool{}, chains: map[graphdef.Tensor]*rcChain{}, readers: map[graphdef.Tensor]map[graphdef.Tensor]int{},
		single: single, rec: make([]int8, len(pr.Analysis.Graph.Nodes))}
	for _, rt := range rp.targets {
		rp.byTensor[rt.t] = rt
	}
	left := append([]*rcTarget(nil), rp.targets...)
	// marg is each target's cached marginal (by rcTarget.index); dependents indexes them by
	// the tensors whose selection they consulted (stale entries only cost a recomputation).
	marg := make([]rcMarginal, len(rp.targets))
	dependents := map[graphdef.Tensor][]*rcTarget{}
	var deps []graphdef.Tensor
	invalidate := func(t graphdef.Tensor) {
		if rt := rp.byTensor[t]; rt != nil {
			marg[rt.index].valid = false
		}
	}
	var total int64
	for len(left) > 0 {
		var best *rcTarget
		var bestChanged map[graphdef.Tensor]*rcChain
		var bestDelta int64
		keep := left[:0]
		for _, rt := range left {
			m := &marg[rt.index]
			if !cache || !m.valid {
				deps = deps[:0]
				rp.deps = &deps
				changed, delta, ok := rp.marginal(rt)
				rp.deps = nil
				rp.marginals++
				if !ok {
					continue // it cannot become recomputable by selecting more
				}
				*m = rcMarginal{valid: true, changed: changed, delta: delta}
				if cache {
					for _, x := range deps {
						if l := dependents[x]; len(l) == 0 || l[len(l)-1] != rt {
							dependents[x] = append(l, rt)
						}
					}
				}
			}
			changed, delta := m.changed, m.delta
			keep = append(keep, rt)
			// Least added cost per byte, compared without division; ties to the earlier.
			if best == nil || delta*best.bytes < bestDelta*rt.bytes ||
				(delta*best.bytes == bestDelta*rt.bytes && rt.index < best.index) {
				best, bestChanged, bestDelta = rt, changed, delta
			}
		}
		left = keep
		if best == nil {
			break
		}
		rp.selected[best.t] = true
		for _, rt := range dependents[best.t] {
			marg[rt.index].valid = false
		}
		delete(dependents, best.t)
		for t, c := range bestChanged {
			ord := len(rp.order) // best's place, for its own chain
			if t != best.t {
				ord = rp.readerOrder(t)
			}
			if old := rp.chains[t]; old != nil {
				for _, x := range old.external() {
					invalidate(x)
				}
			}
			for _, x := range c.external() {
				invalidate(x)
			}
			rp.setChain(t, c, ord)
		}
		rp.order = append(rp.order, best)
		rp.deltas = append(rp.deltas, bestDelta)
		total += best.bytes
		rp.bytes = append(rp.bytes, total)
		for i, rt := range left {
			if rt == best {
				left = append(left[:i], left[i+1:]...)
				break
			}
		}
	}
	return rp
}

// plan returns the recomputations of the first k selected targets (every one for k < 0)
// in topological order of their targets, each chain released by its target's trigger. A
// target whose producer another chain runs early enough is served by that chain's copy
// instead of a chain of its own, unless rp.apart.
func (rp *rcPlanner) plan(k int) []*rewrite.PlannedRecompute {
	if k < 0 || k > len(rp.order) {
		k = len(rp.order)
	}
	sel := map[graphdef.Tensor]bool{}
	for _, rt := range rp.order[:k] {
		sel[rt.t] = true
	}
	targets := append([]*rcTarget(nil), rp.order[:k]...)
	sort.SliceStable(targets, func(i, j int) bool { return targets[i].index < targets[j].index })
	type built struct {
		rt    *rcTarget
		chain *rcChain
		rc    *rewrite.PlannedRecompute
	}
	var bs []*built
	for _, rt := range targets {
		c, ok := rp.buildChain(rt.t, rt.first, sel)
		if !ok {
			continue
		}
		bs = append(bs, &built{rt: rt, chain: c})
	}
	// A chain whose target's trigger is one of its own ops is dropped.
	kept := bs[:0]
	for _, b := range bs {
		inChain := false
		for _, n := range b.chain.nodes {
			inChain = inChain || n == b.rt.trigger
		}
		if inChain {
			continue
		}
		b.rc = &rewrite.PlannedRecompute{Tensor: b.rt.t, Bytes: b.rt.bytes, Chain: b.chain.nodes, Uses: b.rt.far, Trigger: b.rt.trigger, Cost: b.chain.cost}
		kept = append(kept, b)
	}
	bs = kept
	// A target is served by another target's chain when that chain makes it and runs no
	// later than its first later read (the earliest such chain); only chains of targets not
	// served so are kept.
	byFirst := append([]*built(nil), bs...)
	sort.SliceStable(byFirst, func(i, j int) bool { return byFirst[i].rt.first < byFirst[j].rt.first })
	servedBy := map[*built]*built{}
	for i, b := range byFirst {
		if rp.apart {
			break
		}
		for _, o := range byFirst[:i] {
			if servedBy[o] != nil {
				continue
			}
			has := false
			for _, n := range o.chain.nodes {
				has = has || n == b.rt.t.Node
			}
			if has {
				servedBy[b] = o
				break
			}
		}
	}
	var out []*rewrite.PlannedRecompute
	for _, b := range bs {
		if servedBy[b] == nil {
			out = append(out, b.rc)
		}
	}
	for _, b := range bs {
		if o := servedBy[b]; o != nil && o.rc != nil {
			o.rc.Also = append(o.rc.Also, rewrite.ServedTensor{Tensor: b.rt.t, Bytes: b.rt.bytes, Uses: b.rt.far})
		}
	}
	return out
}

// linkLevel returns how many of the selected targets, in order, each add no more compute per
// byte freed than nsPerByte (the time a byte takes to the host and back): past them, moving a
// byte over the link costs less than making it again, where the link has the time.
func (rp *rcPlanner) linkLevel(nsPerByte float64) int {
	for i, rt := range rp.order {
		if float64(rp.deltas[i]) > nsPerByte*float64(rt.bytes) {
			return i
		}
	}
	return len(rp.order)
}

// level returns how many of the selected targets reach want bytes (all when want < 0).
func (rp *rcPlanner) level(want int64) int {
	if want < 0 {
		return len(rp.order)
	}
	for i, b := range rp.bytes {
		if b >= want {
			return i + 1
		}
	}
	return len(rp.order)
}

// recomputeLevels returns the byte targets of the recomputation levels tried for a step whose
// worst device exceeds its budget by excess: half the excess (swaps do the rest), the excess,
// one and a half times it, and every candidate (-1). screenRecomputes adds the link's level
// (rcPlanner.linkLevel).
func recomputeLevels(excess int64) []int64 {
	if excess <= 0 {
		return nil
	}
	return []int64{excess / 2, excess, excess * 3 / 2, -1}
}

// linkBoundStep is the shortest step any swap-only plan can reach on top of a step whose
// simulation is res when the worst device must drop excess bytes at its peak: those bytes
// cross the link device-to-host before the peak and host-to-device after it.
func linkBoundStep(res *cost.Result, p *cost.Profile, excess int64) int64 {
	var peakT int64
	var worst int64 = -1
	for _, d := range res.Devices {
		if d.GPU && d.PeakBytes > worst {
			worst, peakT = d.PeakBytes, d.PeakTime
		}
	}
	if excess <= 0 {
		return res.StepTime
	}
	d2h := int64(float64(excess) / p.D2H * 1e9)
	h2d := int64(float64(excess) / p.H2D * 1e9)
	return max(peakT, d2h) + max(res.StepTime-peakT, h2d)
}
