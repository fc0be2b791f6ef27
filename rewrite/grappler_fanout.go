package rewrite

import (
	"slices"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
)

// This file keeps the rewrite from changing the decisions Grappler's default optimizers take
// on the original nodes from their fan-out (issue 12, item 2). A swap-out or a gate is one
// more reader of an original tensor, and a swap-in moves a reader's input to another device.
// TensorFlow 2.18's dependency optimizer bypasses an Identity only where that does not raise
// the number of edges (inputs x outputs must not exceed inputs + outputs) or of device
// crossings, and its arithmetic optimizer folds a sum into the sum reading it, or turns a
// no-op Reshape or reduction into an Identity, only while it has that one reader. One reader
// more can keep an Identity, and the names Grappler sorts a gradient sum's terms by then
// change, and with them the sum's last bits. The rules below keep every node whose fan-out
// Grappler inspects with the readers, and the input devices, it had.

// grapplerIdentity reports whether n is an op the dependency optimizer bypasses (Identity,
// IdentityN), so that its readers read its input by that input's name.
func grapplerIdentity(n *graphdef.Node) bool {
	return n.Op == "Identity" || n.Op == "IdentityN" || n.Op == "RefIdentity"
}

// identityWithFanIn reports whether n is an Identity whose bypass depends on its number of
// readers: it, or an Identity its data input comes through, has control inputs or more than
// one input (the gradients' tuple/control_dependency Identities). Such an Identity with one
// reader more (or one on another device) is kept where the original's is bypassed.
func identityWithFanIn(n *graphdef.Node) bool {
	for steps := 0; steps < 64 && grapplerIdentity(n); steps++ {
		if len(n.ControlInputs) > 0 || len(n.Inputs) != 1 {
			return true
		}
		n = n.Inputs[0].Node
	}
	return false
}

// rootName returns the name Grappler's later passes see for t once the dependency optimizer
// has bypassed the Identities it comes through: the input string of the first tensor up the
// chain that no Identity makes.
func rootName(t graphdef.Tensor) string {
	for steps := 0; steps < 64 && grapplerIdentity(t.Node) && len(t.Node.Inputs) > t.Port; steps++ {
		t = t.Node.Inputs[t.Port]
	}
	return t.InputString()
}

// effectiveReaders returns the distinct nodes that read n's data outputs once the Identities
// between them are bypassed, and whether n or one of those Identities has control outputs.
func effectiveReaders(n *graphdef.Node) (readers []*graphdef.Node, control bool) {
	seen := map[*graphdef.Node]bool{}
	var walk func(x *graphdef.Node, depth int)
	walk = func(x *graphdef.Node, depth int) {
		if len(x.ControlOutputs) > 0 {
			control = true
		}
		for _, uses := range x.Consumers {
			for _, u := range uses {
				if depth < 64 && (grapplerIdentity(u.Node) || u.Input == 0 && noOpShape(u.Node)) {
					walk(u.Node, depth+1)
					continue
				}
				if !seen[u.Node] {
					seen[u.Node] = true
					readers = append(readers, u.Node)
				}
			}
		}
	}
	walk(n, 0)
	return readers, control
}

// absorbableSum reports whether n is a sum the arithmetic optimizer folds into the sum that
// reads it (AddOpsRewrite absorbs a term tree's inner nodes only while they have one reader):
// an aggregation whose only reader, through bypassed Identities, is an aggregation.
func absorbableSum(n *graphdef.Node) bool {
	if !aggregationOps[n.Op] {
		return false
	}
	r, _ := effectiveReaders(n) // control edges (gradient tuples) do not count for Grappler
	return len(r) == 1 && aggregationOps[r[0].Op]
}

// noOpShapeOps are ops Grappler turns into an Identity when their output has their first
// input's shape (a Reshape to the same shape, a reduction over no axis, a Tile by ones, ...);
// the Identity is then bypassed or not by its fan-out.
var noOpShapeOps = map[string]bool{
	"Reshape": true, "Squeeze": true, "ExpandDims": true, "Sum": true, "Mean": true,
	"Prod": true, "Max": true, "Min": true, "Tile": true, "BroadcastTo": true,
	"Transpose": true, "Slice": true, "StridedSlice": true,
}

// mayBecomeIdentity reports whether n is a noOpShapeOps op whose output shape equals its
// first input's shape, or whose shapes are not known.
func mayBecomeIdentity(n *graphdef.Node) bool {
	if !noOpShapeOps[n.Op] || len(n.Inputs) == 0 || len(n.OutputShapes) == 0 {
		return noOpShapeOps[n.Op] && len(n.Inputs) > 0
	}
	in, out := n.Inputs[0].Shape(), n.OutputShapes[0]
	if in == nil || out == nil || len(in) != len(out) {
		return in == nil || out == nil
	}
	for i := range in {
		if in[i] != out[i] || in[i] < 0 {
			return in[i] < 0 || out[i] < 0
		}
	}
	return true
}

// noOpShape reports whether n is a noOpShapeOps op whose output is known to have its first
// input's shape: Grappler turns it into an Identity and bypasses it.
func noOpShape(n *graphdef.Node) bool {
	if !noOpShapeOps[n.Op] || len(n.Inputs) == 0 || len(n.OutputShapes) == 0 {
		return false
	}
	in, out := n.Inputs[0].Shape(), n.OutputShapes[0]
	if in == nil || out == nil || len(in) != len(out) {
		return false
	}
	for i := range in {
		if in[i] != out[i] || in[i] < 0 {
			return false
		}
	}
	return true
}

// throughPassThrough follows t up the Identities and no-op shape ops it comes through.
func throughPassThrough(t graphdef.Tensor) graphdef.Tensor {
	for steps := 0; steps < 64; steps++ {
		switch {
		case grapplerIdentity(t.Node) && len(t.Node.Inputs) > t.Port:
			t = t.Node.Inputs[t.Port]
		case t.Port == 0 && noOpShape(t.Node):
			t = t.Node.Inputs[0]
		default:
			return t
		}
	}
	return t
}

// identityReaderSensitive reports whether a swap-in read by c, on another device and by
// another name, could change what Grappler does with c or with what reads it: c is an op
// Grappler may turn into an Identity (a no-op reshape or reduction, whose other inputs
// become control inputs), or an Identity with control inputs or several inputs, several
// readers, control outputs, or a sum or product among its readers (which would then sort or
// regroup by the swap-in's name). A plain Identity with one plain reader is bypassed in the
// original and in the rewrite alike.
func identityReaderSensitive(c *graphdef.Node) bool {
	if !grapplerIdentity(c) {
		return mayBecomeIdentity(c)
	}
	if identityWithFanIn(c) || len(c.ControlOutputs) > 0 {
		return true
	}
	r, control := effectiveReaders(c)
	if control || len(r) > 1 {
		return true
	}
	for _, x := range r {
		if aggregationOps[x.Op] || factorOps[x.Op] {
			return true
		}
	}
	return false
}

// FanoutSensitive returns why one more reader of n (a swap-out or a gate) could change what
// Grappler does to it, or "".
func FanoutSensitive(n *graphdef.Node) string {
	switch {
	case grapplerIdentity(n) && identityWithFanIn(n):
		return ReasonFanoutIdentity
	case absorbableSum(n):
		return ReasonFanoutSum
	case factorOps[n.Op] && InProductTree(n):
		return ReasonFanoutProduct
	case mayBecomeIdentity(n):
		return ReasonFanoutNoOp
	}
	return ""
}

// The reasons FanoutSensitive gives for a node one more reader would change Grappler's
// rewrite of, and ConsumerExclusion for an Identity reader.
const (
	// ReasonFanoutIdentity is FanoutSensitive's reason for a gradient tuple's Identity.
	ReasonFanoutIdentity = "an Identity with control inputs (a gradient tuple): one more reader, or one on another device, stops Grappler's dependency optimizer from bypassing it, which renames what its readers see"
	// ReasonFanoutSum is FanoutSensitive's reason for a sum read only by a sum.
	ReasonFanoutSum = "a sum read only by a sum: Grappler's arithmetic optimizer folds it into that sum only while it has one reader"
	// ReasonFanoutProduct is FanoutSensitive's reason for a product in a tree of products.
	ReasonFanoutProduct = "a product with one reader in a tree of products: Grappler pushes constants down such a tree only through products with one reader"
	// ReasonFanoutNoOp is FanoutSensitive's reason for an op Grappler may turn into an Identity.
	ReasonFanoutNoOp = "a reshape, reduction or copy Grappler may turn into an Identity, whose bypass depends on its readers"
	// ReasonIdentityReader is ConsumerExclusion's reason for an Identity reader that a
	// swap-in on another device would keep Grappler from bypassing.
	ReasonIdentityReader = "an Identity (or an op Grappler may turn into one): a swap-in on another device would decide whether Grappler's dependency optimizer bypasses it"
)

// InProductTree reports whether the product c is part of a tree of products Grappler may
// regroup (constant push-down, common factors): a product reads it (through Identities and
// no-op shape ops, which Grappler bypasses) or it reads a product. A swap-in, read on another
// device and by another name, changes how the tree is regrouped (the GELU gradient's
// products on the zoo GPT).
func InProductTree(c *graphdef.Node) bool {
	if readByOp(c, factorOps) {
		return true
	}
	for _, in := range c.Inputs {
		if factorOps[throughPassThrough(in).Node.Op] {
			return true
		}
	}
	return false
}

// valueDead marks the nodes whose value nobody reads: the unused half of a gradient tuple
// (an Identity with control inputs and no reader at all), and stateless ops whose data
// readers, at least one, are all value-dead. Grappler prunes the tuple member and its
// dependency optimizer turns the rest into NoOps, whose control edges it moves to their
// inputs' producers, but not across devices: a swap-in read by one of them, or a gate on
// one, would keep the whole chain, and the gradient tuple it holds, where the original loses
// it (the zoo GPT's gradient of the attention scale constant). Such readers keep reading the
// original, which after Grappler they never read. A node with no data reader (a sink, which
// may be fetched) is never marked, nor is anything whose value reaches one.
func valueDead(g *graphdef.Graph) []bool {
	dead := make([]bool, len(g.Nodes))
	for i := len(g.Topo) - 1; i >= 0; i-- {
		n := g.Topo[i]
		if graphdef.IsStatefulOp(n.Op) || !graphdef.KnownOp(n.Op) || notConsumers[n.Op] || neverSwappedOps[n.Op] && !grapplerIdentity(n) {
			continue
		}
		readers := 0
		all := true
		for _, uses := range n.Consumers {
			for _, u := range uses {
				readers++
				if !dead[u.Node.Index] {
					all = false
				}
			}
		}
		switch {
		case readers > 0:
			dead[n.Index] = all
		case grapplerIdentity(n) && len(n.ControlInputs) > 0 && len(n.ControlOutputs) == 0:
			dead[n.Index] = true
		}
	}
	return dead
}

// readByOp reports whether an op in ops reads c once Grappler has bypassed the Identities and
// no-op shape ops between them (effectiveReaders).
func readByOp(c *graphdef.Node, ops map[string]bool) bool {
	r, _ := effectiveReaders(c)
	for _, x := range r {
		if ops[x.Op] {
			return true
		}
	}
	return false
}

// severalReaders reports whether n's value has at least two distinct readers for Grappler:
// both among the nodes reading its outputs directly and among those reading them once the
// Identities and no-op shape ops between are bypassed (effectiveReaders), counting neither
// a reader marked in dead (valueDead, which Grappler prunes or turns into a NoOp) nor a
// control edge. Grappler's constant push-down (ConstantFolding::PrepareConstantPushDown:
// NumNonControlOutputs(op_child) > 1 refuses) and its MinimizeBroadcasts stage (an inner node
// needs NumNonControlOutputs == 1) regroup a product only through a product with one reader,
// so one reader more, a swap-out, changes nothing for a product that already has two.
func severalReaders(n *graphdef.Node, dead []bool) bool {
	live := func(x *graphdef.Node) bool { return dead == nil || x.Index >= len(dead) || !dead[x.Index] }
	direct := map[*graphdef.Node]bool{}
	for _, uses := range n.Consumers {
		for _, u := range uses {
			if live(u.Node) {
				direct[u.Node] = true
			}
		}
	}
	if len(direct) < 2 {
		return false
	}
	r, _ := effectiveReaders(n)
	count := 0
	for _, x := range r {
		if live(x) {
			count++
		}
	}
	return count >= 2
}

// swapOutSensitive returns why a swap-out reading n could change what Grappler does to it,
// or "". It is fanoutSensitive, except that a product in a tree of products is sensitive
// only while it has a single reader (severalReaders): the regroupings that look at a
// product's readers (constant push-down, MinimizeBroadcasts) require exactly one, so a
// product the forward and the backward pass both read keeps its treatment with a swap-out
// as a third reader. The swap-in its late readers take is an Identity, never a product, so
// no product tree grows or shrinks by it either (ConsumerExclusion).
func (a *Analysis) swapOutSensitive(n *graphdef.Node) string {
	if factorOps[n.Op] && InProductTree(n) {
		if severalReaders(n, a.ValueDead) {
			return ""
		}
		return ReasonFanoutProduct
	}
	return FanoutSensitive(n)
}

// pushDownChild reports whether Grappler's constant push-down may take the product c as the
// child it rotates (ConstantFolding::ConstantPushDown, Mul(C, Mul(X, Y)) -> Mul(X, Mul(C,
// Y))): c is read by a single live node (liveReaders: once the Identities and no-op shape
// ops between are bypassed and the value-dead readers in dead pruned; PrepareConstantPushDown
// refuses an op child with more than one non-control output, and Grappler counts the readers
// of a node it has not bypassed yet as they are, at least as many), and that reader is a
// product of two inputs whose other input may be a constant (pushDownParent): without a
// constant child the parent is left alone. PrepareConstantPushDown rotates such a pair only
// when both of c's inputs are on the parent's device (the zoo GPT's GELU gradient: a swap-in,
// made on the host, read by gradients/fc_0/Gelu/mul_1_grad/Mul_1 stopped a constant from
// being pushed down past it, and 116 variables differed after 3 steps), and it pairs the
// constant with c's second input once the arithmetic optimizer has sorted c's inputs by name
// (pushDownOrderKept): such a c reads a swap-in through a relay on its device (needsRelay),
// and only where the swap-in's name keeps the order.
//
// The rotations cascade (pushDownParent): constant folding repeats its sweep until nothing
// changes, and the child a rotation leaves, Mul(C, Y), is a parent with a constant child in
// the next sweep. So c is also a child when its reader is a product that is itself such a
// child, whatever its other input: in the zoo GPT's GELU gradient, Erf_grad/mul_1 reads
// mul_1_grad/Mul_1 and Erf_grad/mul (no constant), and is read by truediv_grad/RealDiv, a
// division by a constant that constant folding turns into a product by its reciprocal; the
// reciprocal is pushed into Erf_grad/mul_1, then into Mul_1. Grappler hands the bridge the
// graph after its first iteration, where the division is already that product, and a4fee95,
// which looked one level up only, let Mul_1 read fc_0/Gelu/mul's swap-in there (the second
// iteration's rotation then paired the constant with another input, and 36 variables
// differed after 3 steps through the bridge).
func pushDownChild(c *graphdef.Node, dead []bool) bool {
	return pushDownChildDepth(c, dead, pushDownDepth)
}

// pushDownDepth is how many cascaded rotations above a product pushDownChild follows before
// it assumes one more may reach it.
const pushDownDepth = 8

// pushDownChildDepth is pushDownChild following at most depth cascaded rotations.
func pushDownChildDepth(c *graphdef.Node, dead []bool, depth int) bool {
	if !factorOps[c.Op] {
		return false
	}
	r := liveReaders(c, dead)
	return len(r) == 1 && pushDownParent(r[0], c, dead, depth)
}

// liveReaders returns effectiveReaders(n) without the nodes marked in dead (valueDead).
func liveReaders(n *graphdef.Node, dead []bool) []*graphdef.Node {
	r, _ := effectiveReaders(n)
	out := r[:0:0]
	for _, x := range r {
		if dead == nil || x.Index >= len(dead) || !dead[x.Index] {
			out = append(out, x)
		}
	}
	return out
}

// pushDownParent reports whether the product p, which reads c, may be the parent of a
// constant push-down with c as its op child: p has two data inputs (PrepareConstantPushDown
// requires it) and either the one that is not c, once the Identities and no-op shape ops
// between are bypassed, may be a constant when constant folding runs (mayBeConstant), or p is
// itself a child a rotation may pair with a constant (pushDownChildDepth, at most depth
// levels up; past them it answers true), which makes p a parent with a constant child in the
// next sweep.
func pushDownParent(p, c *graphdef.Node, dead []bool, depth int) bool {
	if !factorOps[p.Op] || len(p.Inputs) != 2 {
		return false
	}
	for _, in := range p.Inputs {
		if src := throughPassThrough(in).Node; src != c && mayBeConstant(src, 8) {
			return true
		}
	}
	return depth <= 0 || pushDownChildDepth(p, dead, depth-1)
}

// mayBeConstant reports whether n may be a constant once Grappler's constant folding has run:
// a constant, an op whose value it materialises from a known shape (Shape, ShapeN, Size,
// Rank, ZerosLike, OnesLike), or a stateless op of known kind whose data inputs all may be.
// It errs towards true: past depth levels of inputs it answers true.
func mayBeConstant(n *graphdef.Node, depth int) bool {
	switch {
	case n.Op == "Const" || n.Op == "HostConst" || shapeReaders[n.Op] || n.Op == "ZerosLike" || n.Op == "OnesLike":
		return true
	case len(n.Inputs) == 0 || graphdef.IsStatefulOp(n.Op) || !graphdef.KnownOp(n.Op) || neverSwappedOps[n.Op] && !grapplerIdentity(n):
		return false
	case depth <= 0:
		return true
	}
	for _, in := range n.Inputs {
		if !mayBeConstant(in.Node, depth-1) {
			return false
		}
	}
	return true
}

// pushDownOrderKept reports whether the product c keeps the order of its two data inputs, as
// Grappler names them, when its input s, which carries the tensor swapped, is renamed to a
// node of the tensor's tfswap scope (swapKey), and whether the other input is renamed too or
// not. Constant push-down pairs the constant with c's second input, and the arithmetic
// optimizer sorts a product's inputs by name, in one pass by the names the graph gives them
// and in the next by those the dependency optimizer leaves (rootName): both orders must be
// the same in the original, and the swap-in's name must come in the same place against
// either name of the other input, and against the scope that input would be renamed to.
func pushDownOrderKept(c *graphdef.Node, s, swapped graphdef.Tensor) bool {
	if len(c.Inputs) != 2 {
		return false
	}
	o := c.Inputs[0]
	if o == s {
		o = c.Inputs[1]
	}
	if o == s || throughPassThrough(o) == throughPassThrough(s) {
		return false
	}
	want := strings.Compare(s.InputString(), o.InputString())
	if want == 0 || strings.Compare(rootName(s), rootName(o)) != want {
		return false
	}
	ks := swapKey(swapped)
	keys := []string{swapKey(o)}
	if grapplerIdentity(o.Node) && len(o.Node.Inputs) > o.Port {
		keys = append(keys, swapKey(o.Node.Inputs[o.Port]))
	}
	if tp := throughPassThrough(o); tp != o {
		keys = append(keys, swapKey(tp))
	}
	for _, name := range append([]string{o.InputString(), rootName(o)}, keys...) {
		if strings.HasPrefix(name, ks) || strings.HasPrefix(ks, name) || strings.Compare(ks, name) != want {
			return false
		}
	}
	return true
}

// hoistableSumReads reports whether a sum reading the product c, directly or once the
// Identities and no-op shape ops between are bypassed, is one from which Grappler's
// HoistCommonFactorOutOfAggregation may hoist a factor (commonFactors), in the sum node's
// own inputs or in the terms of the tree AddOpsRewrite collapses it into, with or without
// the Identities between bypassed (the dependency optimizer runs between the meta
// optimizer's two rounds).
func hoistableSumReads(c *graphdef.Node) bool {
	var sums []*graphdef.Node
	for _, uses := range c.Consumers {
		for _, u := range uses {
			if aggregationOps[u.Node.Op] {
				sums = append(sums, u.Node)
			}
		}
	}
	r, _ := effectiveReaders(c)
	for _, x := range r {
		if aggregationOps[x.Op] {
			sums = append(sums, x)
		}
	}
	for _, s := range sums {
		for _, terms := range [][]graphdef.Tensor{s.Inputs, sumTerms(s)} {
			if commonFactors(terms, false) || commonFactors(terms, true) {
				return true
			}
		}
	}
	return false
}

// commonFactors reports whether the terms of a sum, as Grappler sees them (bypassed: once
// the Identities and no-op shape ops are bypassed and renamed to what they pass on), are all
// products (all Mul, or all Div) sharing at least one factor by input name: the
// intersection GetCommonFactors computes. HoistCommonFactorOutOfAggregation rewrites the sum
// when that intersection holds exactly one name. Renaming a factor in some terms (a swap-in
// read by some of the products) can only shrink the intersection, so a sum whose terms
// share no factor is computed alike whatever reads a swap-in; one that shares some could go
// from two common names to one, or from one to none, and its products keep their inputs.
func commonFactors(terms []graphdef.Tensor, bypassed bool) bool {
	if len(terms) < 2 {
		return false
	}
	name := func(x graphdef.Tensor) string {
		if bypassed {
			return rootName(x)
		}
		return x.InputString()
	}
	var common map[string]bool
	mul, div := false, false
	for _, t := range terms {
		n := t.Node
		if bypassed {
			n = throughPassThrough(t).Node
		}
		switch {
		case n.Op == "Mul":
			mul = true
		case n.Op == "Div" || n.Op == "RealDiv":
			div = true
		default:
			return false
		}
		if mul && div || len(n.Inputs) < 2 {
			return false
		}
		f := map[string]bool{name(n.Inputs[1]): true}
		if mul {
			f[name(n.Inputs[0])] = true
		}
		if common == nil {
			common = f
			continue
		}
		for k := range common {
			if !f[k] {
				delete(common, k)
			}
		}
		if len(common) == 0 {
			return false
		}
	}
	return len(common) > 0
}

// sumTerms returns the terms of the tree of sums Grappler's AddOpsRewrite collapses the sum
// s into: the inputs of the aggregations read by a single aggregation, up from the root
// reached from s by single aggregation readers.
func sumTerms(s *graphdef.Node) []graphdef.Tensor {
	root := s
	for steps := 0; steps < 64; steps++ {
		r, _ := effectiveReaders(root)
		if len(r) != 1 || !aggregationOps[r[0].Op] {
			break
		}
		root = r[0]
	}
	var terms []graphdef.Tensor
	var collect func(n *graphdef.Node, depth int)
	collect = func(n *graphdef.Node, depth int) {
		for _, in := range n.Inputs {
			src := throughPassThrough(in)
			if depth < 64 && aggregationOps[src.Node.Op] {
				if r, _ := effectiveReaders(src.Node); len(r) == 1 && r[0] == n {
					collect(src.Node, depth+1)
					continue
				}
			}
			terms = append(terms, in)
		}
	}
	collect(root, 0)
	return terms
}

// tupleReader returns the one use that reads the value of the gradient tuple Identity n once
// Grappler has bypassed n and the plain Identities after it, when n may read a swap-in of its
// input without changing what Grappler does with n; otherwise nil.
//
// n is an Identity with control inputs (tf.tuple's, gate_gradients'), so Grappler's model
// pruner never removes it, and its dependency optimizer bypasses it only by its fan-out:
// inputs x outputs must not exceed inputs + outputs, nor the device crossings grow. With one
// reader on n's device, reading a swap-in made on the host adds one crossing before the
// bypass and the same one after it, and the edge counts do not change, so n is bypassed in
// the rewrite exactly where it is in the original (the swap-out reads n's input, never n).
// The chain from n to its reader may go through plain Identities (one data input, no
// control edges), each with that one reader, which Grappler bypasses in both graphs alike.
// After the bypass the reader reads the swap-in by its name, on the host, in Grappler's
// later passes: consumerExclusion judges it as a reader of the swap-in. Such an n runs as
// soon as the swap-in arrives, which costs nothing, so the planners time its read at its
// reader's (deferredNode).
func tupleReader(n *graphdef.Node) *graphdef.Use {
	if n.Op != "Identity" || len(n.Inputs) != 1 || len(n.ControlInputs) == 0 {
		return nil
	}
	if n.Def.GetDevice() != n.Inputs[0].Node.Def.GetDevice() {
		return nil
	}
	x := n
	for steps := 0; steps < 64; steps++ {
		u := soleUse(x)
		if u == nil || u.Node.Def.GetDevice() != n.Def.GetDevice() {
			return nil
		}
		r := u.Node
		if grapplerIdentity(r) {
			if r.Op != "Identity" || len(r.Inputs) != 1 || len(r.ControlInputs) > 0 {
				return nil
			}
			x = r
			continue
		}
		return u
	}
	return nil
}

// soleUse returns the one data use of n's outputs when n has exactly one and no control
// outputs, or nil.
func soleUse(n *graphdef.Node) *graphdef.Use {
	if len(n.ControlOutputs) > 0 {
		return nil
	}
	var one *graphdef.Use
	for _, uses := range n.Consumers {
		for i := range uses {
			if one != nil {
				return nil
			}
			one = &uses[i]
		}
	}
	return one
}

// tupleReaders returns the readers of the gradient tuple Identity n when it has several, all
// reading it directly on its device, none an Identity, and n has no control outputs: n may
// then read its input's swap-in through a relay (RelayRole), an Identity on n's device. The
// relay keeps n's input on its device, so the dependency optimizer, which counts n's inputs,
// outputs and device crossings, bypasses n in the rewrite exactly where it does in the
// original; its readers then read the relay, by a name of the swapped tensor's tfswap scope,
// and are judged as readers of the swap-in. Otherwise it returns nil.
func tupleReaders(n *graphdef.Node) []graphdef.Use {
	if n.Op != "Identity" || len(n.Inputs) != 1 || len(n.ControlInputs) == 0 || len(n.ControlOutputs) > 0 {
		return nil
	}
	if n.Def.GetDevice() != n.Inputs[0].Node.Def.GetDevice() || len(n.Consumers) != 1 || len(n.Consumers[0]) < 2 {
		return nil
	}
	for _, u := range n.Consumers[0] {
		if grapplerIdentity(u.Node) || u.Node.Def.GetDevice() != n.Def.GetDevice() {
			return nil
		}
	}
	return n.Consumers[0]
}

// TupleFanout reports whether n is a gradient tuple Identity with several readers
// (tupleReaders) and not one (tupleReader): a backward-phase Identity whose input became a
// swap candidate once such an Identity could read a swap-in through a relay (RelayRole).
func TupleFanout(n *graphdef.Node) bool { return tupleReader(n) == nil && tupleReaders(n) != nil }

// NeedsRelay reports whether the consumer n reads a swap-in through a relay on n's device
// (RelayRole): a gradient tuple Identity with several readers (tupleReaders), one whose one
// reader (tupleReader) Grappler's constant push-down may rotate (pushDownChild), or such a
// product itself. dead marks the graph's value-dead nodes (valueDead).
func NeedsRelay(n *graphdef.Node, dead []bool) bool {
	if r := tupleReader(n); r != nil {
		return pushDownChild(r.Node, dead)
	}
	return tupleReaders(n) != nil || pushDownChild(n, dead)
}

// StandIns returns the nodes whose runs stand for n's when n reads a swap-in: the readers of
// a gradient tuple Identity (tupleReader, tupleReaders), which the executor runs n just
// before once the swap-in has arrived, or n itself.
func StandIns(n *graphdef.Node) []*graphdef.Node {
	if r := tupleReader(n); r != nil {
		return []*graphdef.Node{r.Node}
	}
	if rs := tupleReaders(n); rs != nil {
		out := make([]*graphdef.Node, 0, len(rs))
		for _, u := range rs {
			if !slices.Contains(out, u.Node) {
				out = append(out, u.Node)
			}
		}
		return out
	}
	return []*graphdef.Node{n}
}

// DeferredNode returns the earliest (lowest level) of standIns(n).
func DeferredNode(n *graphdef.Node) *graphdef.Node {
	s := StandIns(n)
	best := s[0]
	for _, x := range s[1:] {
		if x.Level < best.Level {
			best = x
		}
	}
	return best
}

// RecomputeExclusion returns why the later read u must keep reading the original rather than a
// recomputed copy of its tensor, or "". For a product it keeps the rules ConsumerExclusion
// had before swap-ins were admitted by Grappler's actual conditions (severalReaders,
// hoistableSumReads): a product that feeds a sum (ReasonFactor) or belongs to a tree of
// products (ReasonProduct) is refused. A recomputed chain is made of new products whose own
// readers Grappler counts, so a copy read by one product alone could be regrouped where
// the original is not; a swap-in is an Identity and regroups nothing.
func RecomputeExclusion(u graphdef.Use) string {
	c := u.Node
	if tupleReader(c) != nil || tupleReaders(c) != nil {
		return ReasonIdentityReader // a copy is not a swap-in: tupleReader's argument is for one made on the host
	}
	if !factorOps[c.Op] {
		return ConsumerExclusion(u)
	}
	for _, uses := range c.Consumers {
		for _, r := range uses {
			if aggregationOps[r.Node.Op] {
				return ReasonFactor
			}
		}
	}
	if InProductTree(c) {
		return ReasonProduct
	}
	return ConsumerExclusion(u)
}

// FactorsAllMoved reports whether every product in the terms of a sum that reads n's
// outputs, directly or through the Identities and no-op shape ops Grappler bypasses, is among
// moved and reads n directly, so that after the rewrite all of them read the same recomputed
// copy and Grappler finds the same common factors. Products that feed no sum (the forward
// pass's) may keep reading the original: HoistCommonFactorOutOfAggregation looks only at the
// terms of a sum.
func FactorsAllMoved(n *graphdef.Node, moved []*graphdef.Node) bool {
	in := map[*graphdef.Node]bool{}
	for _, m := range moved {
		in[m] = true
	}
	var walk func(x *graphdef.Node, via bool, depth int) bool
	walk = func(x *graphdef.Node, via bool, depth int) bool {
		for _, uses := range x.Consumers {
			for _, u := range uses {
				c := u.Node
				if factorOps[c.Op] && (via || !in[c]) && feedsSum(c) {
					return false
				}
				if grapplerIdentity(c) || u.Input == 0 && noOpShape(c) {
					if depth >= 64 || !walk(c, true, depth+1) {
						return false
					}
				}
			}
		}
		return true
	}
	return walk(n, false, 0)
}

// feedsSum reports whether a sum reads c, directly or through the Identities and no-op shape
// ops Grappler bypasses.
func feedsSum(c *graphdef.Node) bool {
	if readByOp(c, aggregationOps) {
		return true
	}
	for _, uses := range c.Consumers {
		for _, u := range uses {
			if aggregationOps[u.Node.Op] {
				return true
			}
		}
	}
	return false
}
