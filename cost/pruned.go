package cost

import (
	"slices"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
)

// Value-dead nodes: what Grappler's dependency optimizer turns into NoOps.
//
// A step runs every node its fetches reach through data or control edges, so a node read
// only through control edges runs even though nothing uses its value: the gradient of a
// constant factor (`Mul_grad/Mul_1` of `scores * (1/sqrt(d))`), which tf.gradients' tuple
// ties to the step through group_deps' control inputs once the unused tuple member is left
// out of the fan-in. Under TensorFlow's default configuration Grappler optimizes the graph
// first, and its dependency optimizer (dependency_optimizer.cc, OptimizeNode) replaces
// every node that SafeToConvertToNoOp accepts with a NoOp whose inputs are all control
// inputs, then revisits the nodes it read: a chain of stateless ops ending in a control
// edge becomes NoOps down to the first node whose value something still reads. A NoOp
// waits for its inputs as the node did and takes no time, but it reads no tensor: the
// tensors such a chain read live only until their last live reader has run.
//
// SafeToConvertToNoOp accepts a node when fetch nodes are known (Session.run's fetches and
// targets), the node is not among them (nodes to preserve) and has no data output read in
// the graph, is not a Merge, Switch, Enter, Exit or NextIteration, is free of side effects
// (IsFreeOfSideEffect: not a Placeholder, an op in the registry that is not stateful, has no
// ref input, has no "Queue" in its name, is not a _Send, modifies no input in place), has at
// least one output, is not Assert, CheckNumerics, _Retval, _Arg, _ParallelConcatUpdate,
// ControlTrigger or a TPU op, and (an Identity) does not read a variable, a _Recv or a
// Switch. Constants are not converted (OptimizeNode deletes a constant nothing reads).
// Nodes carrying _grappler_do_not_remove = true (tfswap's gates, swap and recompute nodes)
// are among the nodes to preserve (GrapplerItem::NodesToPreserve) and are never converted:
// they run and read their inputs.

// doNotRemoveAttr is the attr that puts a node among Grappler's nodes to preserve
// (GrapplerItem::NodesToPreserve); rewrite.DoNotRemoveAttr sets it on tfswap's nodes.
const doNotRemoveAttr = "_grappler_do_not_remove"

// notNoOpOps are the ops SafeToConvertToNoOp refuses by kind.
var notNoOpOps = map[string]bool{
	"NoOp": true, "Const": true, "HostConst": true,
	"Placeholder": true, "PlaceholderV2": true, "PlaceholderWithDefault": true,
	"Merge": true, "RefMerge": true, "Switch": true, "RefSwitch": true,
	"Enter": true, "RefEnter": true, "Exit": true, "RefExit": true,
	"NextIteration": true, "RefNextIteration": true,
	"Assert": true, "CheckNumerics": true, "CheckNumericsV2": true, "_Retval": true, "_Arg": true,
	"_ParallelConcatUpdate": true, "TPUExecute": true, "TPUCompile": true, "ControlTrigger": true,
	"_Send": true, "_HostSend": true,
}

// variableReadOps are the producers Grappler's IsVariable and IsRecv name: an Identity of one
// of them is never removed (SafeToRemoveIdentity).
var variableReadOps = map[string]bool{
	"Variable": true, "VariableV2": true, "AutoReloadVariable": true, "VarHandleOp": true,
	"_VarHandlesOp": true, "ReadVariableOp": true, "_ReadVariablesOp": true,
	"_Recv": true, "_HostRecv": true,
}

// noOpConvertible reports whether Grappler's dependency optimizer may turn n into a NoOp once
// nothing reads its value (SafeToConvertToNoOp, fetch nodes known and n not among them nor
// among the nodes to preserve).
func noOpConvertible(n *graphdef.Node) bool {
	if notNoOpOps[n.Op] || !graphdef.KnownOp(n.Op) || graphdef.IsStatefulOp(n.Op) || len(n.OutputTypes) == 0 {
		return false
	}
	if strings.Contains(n.Op, "Queue") || strings.Contains(strings.ToLower(n.Op), "inplace") ||
		strings.HasPrefix(n.Op, "Submodel") {
		return false
	}
	if n.Def.GetAttr()[doNotRemoveAttr].GetB() {
		return false
	}
	for _, key := range []string{"in_place", "inplace"} {
		if v, ok := n.Def.GetAttr()[key]; ok && v.GetB() {
			return false
		}
	}
	for _, in := range n.Inputs {
		if dt, ok := in.DataType(); ok && graphdef.IsRef(dt) {
			return false
		}
	}
	if n.Op == "Identity" || n.Op == "IdentityN" {
		if len(n.Inputs) == 0 {
			return false
		}
		p := n.Inputs[0].Node
		if variableReadOps[p.Op] || p.Op == "Switch" || p.Op == "RefSwitch" {
			return false
		}
	}
	return true
}

// prunedNodes marks the nodes of the step (incl) that Grappler's dependency optimizer turns
// into NoOps: noOpConvertible, not fetched, and every data reader of theirs in the step
// marked too (none at all included). fetch names the fetched nodes; with none known,
// SafeToConvertToNoOp converts nothing and neither does prunedNodes (it returns nil).
// convertible is noOpConvertible or a cache of it.
func prunedNodes(g *graphdef.Graph, incl []bool, fetch []string, convertible func(*graphdef.Node) bool) []bool {
	if len(fetch) == 0 {
		return nil
	}
	// The fetched nodes' names: usually a few, compared in turn rather than by hashing every
	// node's name; a map when there are many.
	names := make([]string, 0, len(fetch))
	for _, f := range fetch {
		name, _, _ := strings.Cut(strings.TrimPrefix(f, "^"), ":")
		names = append(names, name)
	}
	fetched := func(name string) bool { return slices.Contains(names, name) }
	if len(names) > 8 {
		set := make(map[string]bool, len(names))
		for _, name := range names {
			set[name] = true
		}
		fetched = func(name string) bool { return set[name] }
	}
	dead := make([]bool, len(g.Nodes))
	any := false
	for i := len(g.Topo) - 1; i >= 0; i-- {
		n := g.Topo[i]
		if !incl[n.Index] || fetched(n.Name) || !convertible(n) {
			continue
		}
		all := true
		for _, uses := range n.Consumers {
			for _, u := range uses {
				if incl[u.Node.Index] && !dead[u.Node.Index] {
					all = false
				}
			}
		}
		dead[n.Index] = all
		any = any || all
	}
	if !any {
		return nil
	}
	return dead
}

// PrunedNodes marks the nodes of g that Grappler's dependency optimizer turns into NoOps in
// the step that runs fetch: prunedNodes over fetch's fan-in, the branches of every
// conditional included (the simulator leaves out the branch it does not take, so it may
// prune a node read only there; either branch may run). It returns nil when fetch is empty
// or nothing is pruned, and an error when fetch names no node of g.
func PrunedNodes(g *graphdef.Graph, fetch []string) ([]bool, error) {
	incl, err := fanin(g, fetch)
	if err != nil {
		return nil, err
	}
	return prunedNodes(g, incl, fetch, noOpConvertible), nil
}

// reads reports whether node c, in the step, reads the tensors of its data inputs: it is
// not turned into a NoOp (prunedNodes).
func (s *sim) reads(c int) bool { return s.incl[c] && (s.pruned == nil || !s.pruned[c]) }
