package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"sort"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// vDNN (Rhu et al., "vDNN: Virtualized Deep Neural Networks for Scalable, Memory-Efficient
// Neural Network Design", MICRO'16), section III-C.
//
// In a TensorFlow graph a "layer" is an op with a device kernel, its input feature maps X
// are the tensors it reads, and a feature map is reused in the backward pass when it is read
// again after its longest idle gap (forward to backward). vDNN_all offloads the X of every
// layer, vDNN_conv only those of convolutions. Prefetches follow vDNN's findPrefetchLayer:
// a layer's X is brought back while the backward computation of the layer after it runs, the
// search never reaching past the closest convolution (triggers.ByLayer). vDNN_dyn first tries
// no offloading, then vDNN_conv, then vDNN_all, and takes the first that fits; from there it
// drops offloads, last layers first, as long as the plan still fits: the least offloading
// that fits.
//
// vDNN synchronises the compute and memory streams after each offload: the next layer does
// not start before the offload of the layer's input has completed. In the graph that is a
// wait: the op after the feature map's last forward read gets a control input on the
// swap-out (vdnnSync). The choice of convolution algorithms, the other half of vDNN_dyn, has
// no counterpart in a rewritten graph (TensorFlow's autotuner makes it).

type vdnnPolicy int

const (
	vdnnAll vdnnPolicy = iota
	vdnnConv
	vdnnDyn
)

// vdnnPlanner plans by one of vDNN's policies. bar, when set, is a plan that fits that
// vDNN_all's or vDNN_conv's plan is kept only if better than (Pass.bar).
type vdnnPlanner struct {
	policy vdnnPolicy
	bar    *Evaluation
}

// vdnnAllStrategy, vdnnConvStrategy and vdnnDynStrategy are the three vDNN policies
// (vdnnPlanner).
var (
	vdnnAllStrategy = &Strategy{
		Name: "vdnn-all",
		Doc:  "vDNN_all (Rhu et al., MICRO'16): offload the input feature maps of every layer (op with a kernel) that are reused in the backward pass; prefetch during the backward computation of the layer after, never past the closest convolution",
		Run: func(pass *Pass) (*Evaluation, error) {
			return vdnnPlanner{policy: vdnnAll, bar: pass.bar}.Plan(pass.run)
		},
		budgetFree: true,
	}
	vdnnConvStrategy = &Strategy{
		Name: "vdnn-conv",
		Doc:  "vDNN_conv (Rhu et al., MICRO'16): offload only the input feature maps of convolutions; prefetch as vdnn-all",
		Run: func(pass *Pass) (*Evaluation, error) {
			return vdnnPlanner{policy: vdnnConv, bar: pass.bar}.Plan(pass.run)
		},
		budgetFree: true,
	}
	vdnnDynStrategy = &Strategy{
		Name: "vdnn-dyn",
		Doc:  "vDNN_dyn (Rhu et al., MICRO'16): no offloading if that fits, else vDNN_conv, else vDNN_all; then drop offloads, last layers first, while the plan still fits (the least offloading that fits)",
		Run:  func(pass *Pass) (*Evaluation, error) { return vdnnPlanner{policy: vdnnDyn}.Plan(pass.run) },
	}
)

// convForward reports whether n is a forward convolution.
func convForward(n *graphdef.Node) bool {
	switch n.Op {
	case "Conv2D", "_FusedConv2D", "Conv3D", "DepthwiseConv2dNative", "Conv1D":
		return true
	}
	return false
}

// convAny reports whether n is a convolution or a convolution's gradient: the ops that
// bound vDNN's prefetch window.
func convAny(n *graphdef.Node) bool {
	if convForward(n) {
		return true
	}
	switch n.Op {
	case "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
		"DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter":
		return true
	}
	return false
}

// layerOp reports whether n is a layer in vDNN's sense: an op that launches a kernel.
func (pr *Problem) layerOp(n *graphdef.Node) bool {
	return cost.EstimateOp(n, pr.shapes).Kind != cost.KindNoKernel
}

// vdnnChoices returns the offloads of vDNN_all (conv false) or vDNN_conv (conv true), in
// layer order.
func (pr *Problem) vdnnChoices(conv bool) []*choice {
	var out []*choice
	for _, b := range pr.sortedBuffers(-1) {
		k := b.largestGap()
		if k < 0 {
			continue
		}
		isX := false
		for _, x := range b.accesses[:k] {
			if !x.local || len(x.sub) > 0 {
				continue
			}
			if conv && convForward(x.u.Node) && x.u.Input == 0 || !conv && pr.layerOp(x.u.Node) {
				isX = true
				break
			}
		}
		if !isX || tupleFanoutRead(b.accesses[k:]) {
			continue
		}
		why := "input feature map of a layer, reused in the backward pass"
		if conv {
			why = "input feature map of a convolution, reused in the backward pass"
		}
		out = append(out, &choice{b: b, splits: []int{k}, why: why})
	}
	return out
}

// tupleFanoutRead reports whether one of the reads l is a gradient tuple Identity with
// several readers (rewrite.TupleFanout). Its input is a gradient of the backward pass, not a
// layer's input feature map reused there, so vDNN does not offload it: a swap-in read there
// (through a relay) only adds host traffic, as on VGG-16 (bench note finding 4: 13.5 -> 22.6
// GB each way on titanx at batch 221, the same peak). l is a tail of a buffer's accesses,
// which list the reads of its alias ops' outputs too, sorted by start (indexBuffers): a read
// of an alias op's output on the buffer's device starts no earlier than the alias op's own
// read, so where the alias op's read is in l, such a tuple Identity reading its output is too.
func tupleFanoutRead(l []*access) bool {
	for _, x := range l {
		if rewrite.TupleFanout(x.u.Node) {
			return true
		}
	}
	return false
}

func (p vdnnPlanner) Plan(pr *planRun) (*Evaluation, error) {
	rule := layerRule(convAny)
	static := func(conv bool) (*Evaluation, []*choice, error) {
		cs := pr.vdnnChoices(conv)
		plan, _ := pr.buildPlan(cs, rule)
		var ev *Evaluation
		var err error
		if p.policy == vdnnDyn {
			// vDNN_dyn reads the fit of its static plans: they are judged in full.
			ev, err = pr.Evaluate(pr.vdnnSync(plan))
		} else {
			ev, err = pr.evaluateBeaten(pr.vdnnSync(plan), p.bar)
		}
		return ev, cs, err
	}
	switch p.policy {
	case vdnnAll:
		ev, _, err := static(false)
		return ev, err
	case vdnnConv:
		ev, _, err := static(true)
		return ev, err
	}
	// vDNN_dyn.
	if pr.Base.Fits {
		return pr.Base, nil
	}
	ev, cs, err := static(true)
	if err != nil {
		return nil, err
	}
	if !ev.Fits {
		evAll, csAll, err := static(false)
		if err != nil {
			return nil, err
		}
		if !evAll.Fits {
			if better(evAll, ev) {
				return evAll, nil
			}
			return ev, nil
		}
		ev, cs = evAll, csAll
	}
	// The least offloading that fits: drop offloads, last layers first, while the fast model
	// (corrected by the simulation) says the plan still fits. The triggers of one choice do
	// not depend on the others, so they are chosen once.
	groups, _ := pr.groupsOf(cs, rule)
	drop := pr.newDropSweep(groups)
	best := ev
	slack := make([]int64, len(pr.timing.res.Devices))
	for round := 0; round < 3; round++ {
		keep := map[*choice]bool{}
		for _, c := range cs {
			keep[c] = true
		}
		kept := func(c *choice) bool { return keep[c] }
		target := pr.targets()
		for i := range target {
			target[i] -= slack[i]
		}
		// The incremental simulator answers each drop (nil: the assembled plans are swept).
		step := drop.step()
		for i := len(cs) - 1; i >= 0; i-- {
			keep[cs[i]] = false
			var x int64
			if step != nil {
				step.Set(false, drop.bufsOf[cs[i]]...)
				x, _ = stepExcess(step, target)
			} else {
				x, _ = pr.fastExcess(drop.predict(keep), target)
			}
			if x > 0 {
				keep[cs[i]] = true
				if step != nil {
					step.Undo()
				}
			}
		}
		plan, _ := assemble(groups, kept)
		pr.Explain.record(plan, selectKept(cs, keep))
		e, err := pr.Evaluate(pr.vdnnSync(plan))
		if err != nil {
			return nil, err
		}
		if better(e, best) {
			best = e
		}
		if e.Fits {
			break
		}
		for _, d := range e.Devices {
			if x := d.Over(); x > 0 {
				slack[d.SimulatedIndex] += x + d.Budget/200
			}
		}
	}
	return best, nil
}

// dropSweep predicts vDNN_dyn's plans, each the synchronised plan of a subset of one set
// of choices, by replaying one prepared sweep of the plan with every choice (whose swaps and
// waits do not depend on each other) with the dropped choices' buffers skipped, instead of
// assembling, synchronising and sweeping each plan anew.
type dropSweep struct {
	pr       *planRun
	groups   []*pendingGroup
	full     *rewrite.Plan
	choiceOf map[graphdef.Tensor]*choice
	prep     *preparedSweep
	// bufChoice is, per prepared buffer, the one choice all its swaps belong to (nil when
	// some buffer's swaps belong to more than one; predict then asks keepOf), and keepBuf
	// the buffers' keep flags, reused from prediction to prediction.
	bufChoice []*choice
	keepBuf   []bool
	// bufsOf are, per choice, its prepared buffers (with bufChoice).
	bufsOf map[*choice][]int
}

// newDropSweep prepares the sweep of the plan with every choice of groups. When a swapped
// tensor belongs to two choices, predict assembles each plan instead.
func (pr *planRun) newDropSweep(groups []*pendingGroup) *dropSweep {
	d := &dropSweep{pr: pr, groups: groups, choiceOf: map[graphdef.Tensor]*choice{}}
	for _, g := range groups {
		if c, ok := d.choiceOf[g.t]; ok && c != g.c {
			d.choiceOf = nil
			return d
		}
		d.choiceOf[g.t] = g.c
	}
	d.full, _ = assemble(groups, nil)
	d.prep = pr.fast.prepare(pr.vdnnSync(d.full), nil)
	d.bufChoice = make([]*choice, len(d.prep.bufs))
	for i, bi := range d.prep.bufOfSwap {
		if bi < 0 {
			continue
		}
		c := d.choiceOf[d.full.Swaps[i].Tensor]
		if o := d.bufChoice[bi]; o != nil && o != c || c == nil {
			d.bufChoice = nil
			break
		}
		d.bufChoice[bi] = c
	}
	d.keepBuf = make([]bool, len(d.prep.bufs))
	if d.bufChoice != nil {
		d.bufsOf = map[*choice][]int{}
		for bi, c := range d.bufChoice {
			d.bufsOf[c] = append(d.bufsOf[c], bi)
		}
	}
	return d
}

// step returns the incremental simulator of the synchronised plan with every choice, its
// candidates the prepared buffers (bufsOf), or nil when the sweep is not prepared by buffer.
func (d *dropSweep) step() *cost.SwapStep {
	if d.prep == nil || d.bufChoice == nil {
		return nil
	}
	return d.prep.swapStep(nil)
}

// predict returns the fast model's prediction for the synchronised plan of the choices keep
// holds: the same as pr.fast.predict(pr.vdnnSync(assemble(groups, keep))).
func (d *dropSweep) predict(keep map[*choice]bool) *fastResult {
	if d.prep != nil && d.bufChoice != nil {
		// Every swap of a buffer is one choice's, so the buffer keeps all or none of them.
		for bi, c := range d.bufChoice {
			d.keepBuf[bi] = keep[c]
		}
		return d.prep.result(d.keepBuf)
	}
	if d.prep != nil {
		if kb, ok := d.prep.keepOf(func(i int) bool { return keep[d.choiceOf[d.full.Swaps[i].Tensor]] }); ok {
			return d.prep.result(kb)
		}
	}
	plan, _ := assemble(d.groups, func(c *choice) bool { return keep[c] })
	return d.pr.fast.predict(d.pr.vdnnSync(plan))
}

// selectKept returns the choices keep accepts, in order.
func selectKept(cs []*choice, keep map[*choice]bool) []*choice {
	var out []*choice
	for _, c := range cs {
		if keep[c] {
			out = append(out, c)
		}
	}
	return out
}

// vdnnSync adds vDNN's synchronisation to plan: after the last layer that reads an offloaded
// feature map in the forward pass, the next op on the device waits until the offload is done.
func (pr *planRun) vdnnSync(plan *rewrite.Plan) *rewrite.Plan {
	out := &rewrite.Plan{Swaps: plan.Swaps}
	tm := pr.timing
	for _, ps := range plan.Swaps {
		b := pr.bufOf[ps.Tensor]
		if b == nil {
			continue
		}
		redirected := map[graphdef.Use]bool{}
		for _, g := range ps.Groups {
			for _, u := range g.Uses {
				redirected[u] = true
			}
		}
		near := b.prodEnd
		var walk func([]*access)
		walk = func(l []*access) {
			for _, x := range l {
				if redirected[x.u] {
					continue
				}
				near = max(near, x.end)
				walk(x.sub)
			}
		}
		walk(b.tree)
		order := tm.order[b.dev]
		k := sort.Search(len(order), func(i int) bool { return tm.times.Start[order[i].Index] >= near })
		for ; k < len(order); k++ {
			n := order[k]
			if n.TopoIndex > ps.Tensor.Node.TopoIndex && pr.eligible(n) && !redirectedNode(&ps, n) && !tm.isEarly(pr.Analysis.Graph, ps.Tensor.Node) {
				out.Waits = append(out.Waits, rewrite.Wait{Node: n, After: ps.Tensor})
				break
			}
		}
	}
	pr.Explain.derive(out, plan, "")
	return out
}

// redirectedNode reports whether n reads a swapped-in copy of ps.
func redirectedNode(ps *rewrite.PlannedSwap, n *graphdef.Node) bool {
	for _, g := range ps.Groups {
		for _, u := range g.Uses {
			if u.Node == n {
				return true
			}
		}
	}
	return false
}
