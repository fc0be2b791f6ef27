package rewrite

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"google.golang.org/protobuf/proto"
)

// Verify checks the invariants of a rewrite of orig into res: the rewritten graph is valid
// and acyclic; every original node is kept with its op, device and attrs, and only its inputs
// may differ; every changed input reads a swap-in that, through its swap-out, reads the very
// tensor the original input read; swap nodes are Identities of the tensor's dtype marked for
// Grappler to keep, the swap-out on the host; and each swap-in has exactly one control input,
// its trigger's gate, and (with GateHost) sits on the host; the trigger is reachable from the
// swapped tensor's producer in the original graph with the ordering edges of res.Orders
// (else nothing orders the swap-in after the swap-out, and the copy may be sent back before
// it was needed), or waits for the swap-out
// (a control input on it: SwapInGroup.TriggerWaits), and neither it nor a reader of the
// swap-in lies inside a branch of a v1 conditional; control inputs added to original nodes
// name swap-outs (waits) or original nodes (the ordering edges of res.Orders); a recomputed
// copy is its original op with inputs carrying the original's and one control input more,
// from a gate; the nodes of a stack or TensorList accumulator placed on the host
// (Result.Accumulators) moved to a host CPU, losing at most their colocation attr, and its
// push reads its tensor through a StackOutRole Identity on the host, its pop's readers the
// popped tensor through a StackInRole Identity; every swap-in is read; and the graph does
// what res records: each wait (Result.Waits) is a control input of its node on its swap-out,
// each consumer of a swap-in (SwapIn.Consumers) reads it. It returns the first violation.
//
// A Result made by Apply carries the builder's graph, which Verify checks rather than
// parsing the GraphDef again (Apply writes the GraphDef from that graph, NodeDef by NodeDef),
// and drops once checked: a later change to the Model is checked in the GraphDef. A Result
// made otherwise is parsed with graphdef.NewGraph.
func Verify(orig *graphdef.Graph, res *Result, gate Gate) error {
	if err := verify(orig, res, gate); err != nil {
		return err
	}
	res.built = nil
	return nil
}

// verify is Verify without dropping the builder's graph.
func verify(orig *graphdef.Graph, res *Result, gate Gate) error {
	out := res.built
	if out == nil || len(out.Nodes) != len(res.Model.Graph.GetNode()) {
		var err error
		if out, err = graphdef.NewGraph(res.Model.Graph, "rewritten"); err != nil {
			return fmt.Errorf("rewritten graph is invalid: %v", err)
		}
	}
	if len(out.Nodes) < len(orig.Nodes) {
		return fmt.Errorf("rewritten graph has %d nodes, fewer than the original %d", len(out.Nodes), len(orig.Nodes))
	}
	orders := map[OrderEdge]bool{}
	for _, e := range res.Orders {
		if n := orig.Node(e.After); n == nil || n.Name != out.Nodes[n.Index].Name {
			return fmt.Errorf("ordering edge %s after %s: %q is not an original node", e.Node, e.After, e.After)
		}
		orders[e] = true
	}
	// The nodes of stack accumulators placed on the host (placeAccumulators) may move to a
	// host CPU and lose their colocation attr.
	moved := map[string]bool{}
	for _, acc := range res.Accumulators {
		for _, name := range acc.Moved {
			moved[name] = true
		}
	}
	// The tuple Identities of orig the rewrite bypassed (BypassWritten) are NoOps in out.
	bypassed := map[string]bool{}
	for _, name := range res.Bypassed {
		if on := orig.Node(name); on != nil && on.Op == "Identity" {
			if err := verifyBypassed(on, out.Nodes[on.Index], orders); err != nil {
				return err
			}
			bypassed[name] = true
		}
	}
	for i, on := range orig.Nodes {
		nn := out.Nodes[i]
		if bypassed[on.Name] {
			continue
		}
		if nn.Name != on.Name || nn.Op != on.Op {
			return fmt.Errorf("node %d changed from %s(%s) to %s(%s)", i, on.Name, on.Op, nn.Name, nn.Op)
		}
		if nn.Def.GetDevice() != on.Def.GetDevice() {
			if !moved[on.Name] || nn.Device.Type != "CPU" || !(stackUseOps[on.Op] || stackHandleOps[on.Op] || on.Op == "StackV2" || listCarryOps[on.Op] || listUseOps[on.Op] || on.Op == "EmptyTensorList") {
				return fmt.Errorf("node %d changed from %s(%s) on %q to %s(%s) on %q", i, on.Name, on.Op, on.Def.GetDevice(), nn.Name, nn.Op, nn.Def.GetDevice())
			}
		}
		if nn.Def == on.Def && len(nn.Inputs) == len(on.Inputs) && len(nn.ControlInputs) == len(on.ControlInputs) && sameInputs(nn, on) {
			continue // the very NodeDef, reading the very tensors
		}
		lost := 0
		if _, ok := on.Def.GetAttr()["_class"]; ok && moved[on.Name] {
			if _, kept := nn.Def.GetAttr()["_class"]; !kept {
				lost = 1
			}
		}
		if len(nn.Def.GetAttr())+lost != len(on.Def.GetAttr()) {
			return fmt.Errorf("node %q: attrs changed", on.Name)
		}
		for k, v := range on.Def.GetAttr() {
			if lost == 1 && k == "_class" {
				continue
			}
			if !proto.Equal(v, nn.Def.GetAttr()[k]) {
				return fmt.Errorf("node %q: attr %q changed", on.Name, k)
			}
		}
		if len(nn.Inputs) != len(on.Inputs) || len(nn.ControlInputs) < len(on.ControlInputs) {
			return fmt.Errorf("node %q: number of inputs changed", on.Name)
		}
		for j, c := range on.ControlInputs {
			if nn.ControlInputs[j].Name != c.Name {
				return fmt.Errorf("node %q: control input %d changed from %q to %q", on.Name, j, c.Name, nn.ControlInputs[j].Name)
			}
		}
		// Control inputs added after the original ones are waits (they name swap-outs) or
		// the ordering edges planning added (Result.Orders).
		// A reader of a bypassed Identity waits for its NoOp instead.
		for _, c := range nn.ControlInputs[len(on.ControlInputs):] {
			role := string(c.Def.GetAttr()[RoleAttr].GetS())
			if role != "swap_out" && !orders[OrderEdge{Node: on.Name, After: c.Name}] && (role != SpacerRole || c.Name != SpacerName(on.Name)) &&
				!(bypassed[c.Name] && slices.ContainsFunc(on.Inputs, func(t graphdef.Tensor) bool { return t.Node.Name == c.Name })) {
				return fmt.Errorf("node %q: added control input %q is not a swap-out", on.Name, c.Name)
			}
		}
		for j, in := range on.Inputs {
			if bypassed[in.Node.Name] {
				// It reads what the Identity read, and waits for the Identity's NoOp.
				if !slices.ContainsFunc(nn.ControlInputs, func(c *graphdef.Node) bool { return c.Name == in.Node.Name }) {
					return fmt.Errorf("node %q input %d: reads past the bypassed Identity %q without waiting for it", on.Name, j, in.Node.Name)
				}
				in = in.Node.Inputs[0]
			}
			if err := carries(nn.Inputs[j], in); err != nil {
				return fmt.Errorf("node %q input %d: %v", on.Name, j, err)
			}
		}
	}
	reach := newReachability(orig, res.Orders)
	branches := &condBranches{orig: orig}
	var dead []bool // valueDead(orig), once a relay needs it
	for _, n := range out.Nodes[len(orig.Nodes):] {
		role := string(n.Def.GetAttr()[RoleAttr].GetS())
		if role == "gate" {
			if err := verifyGate(n); err != nil {
				return err
			}
			continue
		}
		if role == SpacerRole {
			if err := verifySpacer(n); err != nil {
				return err
			}
			continue
		}
		if role == "recompute" {
			if err := verifyRecompute(orig, n); err != nil {
				return err
			}
			continue
		}
		if !strings.HasPrefix(n.Name, Scope) || n.Op != "Identity" || (role != "swap_out" && role != "swap_in" && role != RelayRole && role != StackOutRole && role != StackInRole) {
			return fmt.Errorf("added node %q (%s, role %q) is not a swap node", n.Name, n.Op, role)
		}
		if !n.Def.GetAttr()[DoNotRemoveAttr].GetB() {
			return fmt.Errorf("swap node %q lacks %s", n.Name, DoNotRemoveAttr)
		}
		if len(n.Inputs) != 1 {
			return fmt.Errorf("swap node %q has %d data inputs", n.Name, len(n.Inputs))
		}
		if dt, ok := n.Inputs[0].DataType(); !ok || dt != n.Def.GetAttr()["T"].GetType() {
			return fmt.Errorf("swap node %q: T does not match its input's dtype", n.Name)
		}
		switch role {
		case StackOutRole:
			if n.Device.Type != "CPU" || len(n.ControlInputs) != 0 {
				return fmt.Errorf("stack copy %q is on %q with %d control inputs, want the host and none", n.Name, n.Def.GetDevice(), len(n.ControlInputs))
			}
			for _, u := range n.Consumers[0] {
				if (u.Node.Op != "StackPushV2" && u.Node.Op != "TensorListPushBack") || u.Input != 1 || !moved[u.Node.Name] {
					return fmt.Errorf("stack copy %q is read by %q, not by a push of a stack on the host", n.Name, u.Node.Name)
				}
			}
		case StackInRole:
			in := n.Inputs[0]
			stackPop := in.Node.Op == "StackPopV2" && in.Port == 0
			listPop := in.Node.Op == "TensorListPopBack" && in.Port == 1
			if !(stackPop || listPop) || !moved[in.Node.Name] || len(n.ControlInputs) != 0 {
				return fmt.Errorf("stack copy %q does not read the pop of a stack or list on the host alone", n.Name)
			}
		case RelayRole:
			if string(n.Inputs[0].Node.Def.GetAttr()[RoleAttr].GetS()) != "swap_in" || len(n.ControlInputs) != 0 {
				return fmt.Errorf("relay %q does not read a swap-in alone", n.Name)
			}
			if dead == nil {
				dead = valueDead(orig)
			}
			if len(n.Consumers[0]) != 1 || n.Consumers[0][0].Node.Index >= len(orig.Nodes) || !NeedsRelay(orig.Nodes[n.Consumers[0][0].Node.Index], dead) {
				return fmt.Errorf("relay %q is not read by one node alone that needs a relay (a gradient tuple Identity, or a product Grappler may rotate)", n.Name)
			}
		case "swap_out":
			if n.Device.Type != "CPU" {
				return fmt.Errorf("swap-out %q is on %q, not a host CPU", n.Name, n.Def.GetDevice())
			}
			if len(n.ControlInputs) != 0 {
				return fmt.Errorf("swap-out %q has control inputs", n.Name)
			}
		case "swap_in":
			if n.Inputs[0].Node.Def.GetAttr()[RoleAttr].GetS() == nil || string(n.Inputs[0].Node.Def.GetAttr()[RoleAttr].GetS()) != "swap_out" {
				return fmt.Errorf("swap-in %q does not read a swap-out", n.Name)
			}
			if len(n.ControlInputs) != 1 {
				return fmt.Errorf("swap-in %q has %d control inputs, want its trigger alone", n.Name, len(n.ControlInputs))
			}
			if gate == GateHost && n.Device.Type != "CPU" {
				return fmt.Errorf("swap-in %q is on %q: the trigger must gate the host side", n.Name, n.Def.GetDevice())
			}
			g := n.ControlInputs[0]
			if string(g.Def.GetAttr()[RoleAttr].GetS()) != "gate" {
				return fmt.Errorf("swap-in %q takes its control edge from %q, not from a gate", n.Name, g.Name)
			}
			if err := reach.check(n, g); err != nil {
				return err
			}
			if err := branches.check(n, g); err != nil {
				return err
			}
			if len(n.Consumers) == 0 || len(n.Consumers[0]) == 0 {
				return fmt.Errorf("swap-in %q of %s is read by no node", n.Name, swappedTensor(n))
			}
		}
	}
	return verifyRecorded(orig, out, res)
}

// verifyBypassed checks nn, the rewrite's node at the place of on, a tf.gradients tuple
// Identity of the graph planned that the rewrite bypassed (BypassWritten,
// BypassTupleIdentities): a NoOp of the same name on the same device, with no data input,
// on's control inputs first (any added ones swap-outs or ordering edges of orders) and on's attrs whose names begin with "_" but "_output_shapes", and none
// other. Its readers are checked where they read it.
func verifyBypassed(on, nn *graphdef.Node, orders map[OrderEdge]bool) error {
	if nn.Name != on.Name || nn.Op != "NoOp" || nn.Def.GetDevice() != on.Def.GetDevice() || len(nn.Inputs) != 0 {
		return fmt.Errorf("bypassed Identity %q is not a NoOp on its device without data inputs (%s on %q)", on.Name, nn.Op, nn.Def.GetDevice())
	}
	if len(nn.ControlInputs) < len(on.ControlInputs) {
		return fmt.Errorf("bypassed Identity %q lost control inputs", on.Name)
	}
	for j, c := range on.ControlInputs {
		if nn.ControlInputs[j].Name != c.Name {
			return fmt.Errorf("bypassed Identity %q: control input %d changed from %q to %q", on.Name, j, c.Name, nn.ControlInputs[j].Name)
		}
	}
	for _, c := range nn.ControlInputs[len(on.ControlInputs):] {
		if string(c.Def.GetAttr()[RoleAttr].GetS()) != "swap_out" && !orders[OrderEdge{Node: on.Name, After: c.Name}] {
			return fmt.Errorf("bypassed Identity %q: added control input %q is neither a swap-out nor an ordering edge", on.Name, c.Name)
		}
	}
	want := 0
	for k, v := range on.Def.GetAttr() {
		if !strings.HasPrefix(k, "_") || k == "_output_shapes" {
			continue
		}
		want++
		if !proto.Equal(v, nn.Def.GetAttr()[k]) {
			return fmt.Errorf("bypassed Identity %q: attr %q changed", on.Name, k)
		}
	}
	if len(nn.Def.GetAttr()) != want {
		return fmt.Errorf("bypassed Identity %q: attrs changed", on.Name)
	}
	return nil
}

// swappedTensor returns the tensor swap-in or swap-out n carries, "producer:port", for
// messages; "?" when n does not read what a swap node reads.
func swappedTensor(n *graphdef.Node) string {
	if string(n.Def.GetAttr()[RoleAttr].GetS()) == "swap_in" && len(n.Inputs) == 1 {
		n = n.Inputs[0].Node
	}
	if len(n.Inputs) != 1 {
		return "?"
	}
	return n.Inputs[0].String()
}

// verifyRecorded checks that the rewritten graph out does what res records: each wait
// (Result.Waits, the plan's and its triggers', SwapInGroup.TriggerWaits) is a control input of
// its node on its swap-out, and each consumer of a swap-in (SwapIn.Consumers) reads that
// swap-in, directly or through a relay. A wait lost lets its op run before the swap-out has
// the tensor; a consumer that reads the original tensor again keeps it on the device, and
// leaves the swap-in copied back for nothing.
func verifyRecorded(orig, out *graphdef.Graph, res *Result) error {
	if len(res.Waits) == 0 && len(res.Swaps) == 0 {
		return nil
	}
	// The builder's graph (Result.built) has no index by name: original nodes keep their
	// index in out, and the few nodes the rewrite added are indexed here.
	added := make(map[string]*graphdef.Node, len(out.Nodes)-len(orig.Nodes))
	for _, n := range out.Nodes[len(orig.Nodes):] {
		added[n.Name] = n
	}
	node := func(name string) *graphdef.Node {
		if n := added[name]; n != nil {
			return n
		}
		if n := orig.Node(name); n != nil {
			return out.Nodes[n.Index]
		}
		return nil
	}
	for _, w := range res.Waits {
		n, so := node(w.Node), node(w.SwapOut)
		if n == nil || so == nil || string(so.Def.GetAttr()[RoleAttr].GetS()) != "swap_out" {
			return fmt.Errorf("wait of %q after %q: no such node and swap-out in the rewritten graph", w.Node, w.SwapOut)
		}
		if !slices.Contains(n.ControlInputs, so) {
			return fmt.Errorf("wait lost: %q does not wait for the swap-out %q of %s (no control input on it)", w.Node, w.SwapOut, swappedTensor(so))
		}
	}
	for _, s := range res.Swaps {
		for _, si := range s.SwapIns {
			in := node(si.Node)
			if in == nil || string(in.Def.GetAttr()[RoleAttr].GetS()) != "swap_in" || len(in.Inputs) != 1 || in.Inputs[0].Node.Name != s.SwapOut {
				return fmt.Errorf("swap-in %q of %s: no such swap-in of %q in the rewritten graph", si.Node, s.Tensor, s.SwapOut)
			}
			for _, c := range si.Consumers {
				if cn := node(c); cn == nil || !readsSwapIn(cn, in) {
					return fmt.Errorf("swap-in %q of %s: its consumer %q does not read it", si.Node, s.Tensor, c)
				}
			}
		}
	}
	return nil
}

// readsSwapIn reports whether node n reads swap-in in, directly or through a relay
// (RelayRole).
func readsSwapIn(n, in *graphdef.Node) bool {
	for _, t := range n.Inputs {
		if t.Node == in {
			return true
		}
		if string(t.Node.Def.GetAttr()[RoleAttr].GetS()) == RelayRole && len(t.Node.Inputs) == 1 && t.Node.Inputs[0].Node == in {
			return true
		}
	}
	return false
}

// carries checks that tensor got of the rewritten graph carries the value of want, the
// tensor the original graph read there: it is want itself, a swap-in of a tensor that
// carries it (through the swap-in's swap-out), a relay of such a swap-in (RelayRole), or a
// recomputed copy of it.
func carries(got, want graphdef.Tensor) error {
	for hops := 0; ; hops++ {
		if got.Node.Name == want.Node.Name && got.Port == want.Port {
			return nil
		}
		switch string(got.Node.Def.GetAttr()[RoleAttr].GetS()) {
		case RelayRole:
			if got.Port != 0 || len(got.Node.Inputs) != 1 {
				return fmt.Errorf("relay %q is not an Identity of one tensor", got.Node.Name)
			}
			got = got.Node.Inputs[0]
		case "swap_in":
			out := got.Node.Inputs[0].Node
			if got.Port != 0 || string(out.Def.GetAttr()[RoleAttr].GetS()) != "swap_out" {
				return fmt.Errorf("swap-in %q reads %q, not a swap-out", got.Node.Name, out.Name)
			}
			got = out.Inputs[0]
		case StackOutRole, StackInRole:
			if got.Port != 0 || len(got.Node.Inputs) != 1 {
				return fmt.Errorf("stack copy %q is not an Identity of one tensor", got.Node.Name)
			}
			got = got.Node.Inputs[0]
		case "recompute":
			if recomputedOp(got.Node.Name) != want.Node.Name || got.Port != want.Port {
				return fmt.Errorf("reads %s, a recomputation of another tensor than %s", got, want)
			}
			return nil
		default:
			return fmt.Errorf("reads %s, which is neither %s nor a swap-in or recomputation of it", got, want)
		}
		if hops > 3 {
			return fmt.Errorf("reads %s through too many swaps", got)
		}
	}
}

// verifyRecompute checks a recomputed copy n against the original op it copies: the same
// op, device and attrs (besides the attrs every tfswap node has), data inputs that carry the
// original's, and the original's control inputs plus one from a gate (and one from its
// spacer, AddSpacers, when it has one).
func verifyRecompute(orig *graphdef.Graph, n *graphdef.Node) error {
	on := orig.Node(recomputedOp(n.Name))
	if on == nil || !strings.HasPrefix(n.Name, Scope) {
		return fmt.Errorf("recompute node %q copies no original node", n.Name)
	}
	if n.Op != on.Op || n.Def.GetDevice() != on.Def.GetDevice() {
		return fmt.Errorf("recompute node %q is not a copy of %q", n.Name, on.Name)
	}
	for k, v := range on.Def.GetAttr() {
		if !proto.Equal(v, n.Def.GetAttr()[k]) {
			return fmt.Errorf("recompute node %q: attr %q differs from %q's", n.Name, k, on.Name)
		}
	}
	if len(n.Def.GetAttr()) != len(on.Def.GetAttr())+3 || !n.Def.GetAttr()[DoNotRemoveAttr].GetB() || string(n.Def.GetAttr()[idAttr].GetS()) != n.Name {
		return fmt.Errorf("recompute node %q: want %q's attrs plus %s, %s and %s", n.Name, on.Name, DoNotRemoveAttr, RoleAttr, idAttr)
	}
	if len(n.Inputs) != len(on.Inputs) {
		return fmt.Errorf("recompute node %q has %d data inputs, %q has %d", n.Name, len(n.Inputs), on.Name, len(on.Inputs))
	}
	for j, in := range on.Inputs {
		if err := carries(n.Inputs[j], in); err != nil {
			return fmt.Errorf("recompute node %q input %d: %v", n.Name, j, err)
		}
	}
	gates, spacers := 0, 0
	for _, c := range n.ControlInputs {
		switch {
		case string(c.Def.GetAttr()[RoleAttr].GetS()) == "gate":
			gates++
		case string(c.Def.GetAttr()[RoleAttr].GetS()) == SpacerRole && c.Name == SpacerName(n.Name):
			spacers++
		}
	}
	if gates != 1 || len(n.ControlInputs) != len(on.ControlInputs)+1+spacers {
		return fmt.Errorf("recompute node %q: want %q's control inputs, one gate and at most its spacer", n.Name, on.Name)
	}
	return nil
}

// verifyGate checks a gate node: a preserved Identity, or an L2Loss of a floating-point
// tensor (GateReduce), named for its trigger, on the trigger's device, reading an original
// node's output.
func verifyGate(n *graphdef.Node) error {
	if !IsGateOp(n.Op) || len(n.Inputs) != 1 || len(n.ControlInputs) != 0 || !n.Def.GetAttr()[DoNotRemoveAttr].GetB() {
		return fmt.Errorf("gate %q is not a preserved Identity or L2Loss with one data input", n.Name)
	}
	if n.Op == "L2Loss" {
		if dt, ok := n.Inputs[0].DataType(); !ok || !reduceGateTypes[dt] || dt != n.Def.GetAttr()["T"].GetType() {
			return fmt.Errorf("gate %q is an L2Loss of %s, not of a half, bfloat16, float or double tensor of its T", n.Name, n.Inputs[0])
		}
	}
	trigger := n.Inputs[0].Node
	if trigger.Def.GetAttr()[RoleAttr] != nil {
		return fmt.Errorf("gate %q reads the tfswap node %q, not a trigger", n.Name, trigger.Name)
	}
	if (n.Name != GateNodeName(trigger) && n.Name != recomputeGateName(trigger)) || n.Def.GetDevice() != trigger.Def.GetDevice() {
		return fmt.Errorf("gate %q does not match its trigger %q (name or device)", n.Name, trigger.Name)
	}
	return nil
}

// reachability answers whether a trigger descends from a producer in the original graph
// with the ordering edges planning added (Result.Orders). graphdef.Graph.Reachable decides
// the original graph's own edges, in constant time for most pairs; the edges it does not
// follow, the ordering edges and (once there are ordering edges) the while loops' back edges,
// are jumps, searched between with Reachable. Each question costs one Reachable per jump
// and per jump reached, rather than a search of the graph per swap-in.
type reachability struct {
	orig *graphdef.Graph
	// jumps are the edges Reachable does not follow, by the node they leave: the ordering
	// edges (by the node that runs first) and, when there are any, the edges out of while
	// loops' NextIteration nodes, as a search of the graph with the ordering edges follows
	// them. None without ordering edges.
	jumps []jump
	// next holds, for each jump once needed, the jumps whose node a target of it reaches.
	next [][]int32
	// seen marks the jumps reached in the current question, by its stamp.
	seen  []uint32
	stamp uint32
}

// jump is an edge, or the edges out of one node, that graphdef.Graph.Reachable does not
// follow.
type jump struct {
	from   *graphdef.Node
	to     []*graphdef.Node
	nextOK bool // next[i] is computed
}

// newReachability returns the reachability of orig with the ordering edges orders.
func newReachability(orig *graphdef.Graph, orders []OrderEdge) *reachability {
	r := &reachability{orig: orig}
	if len(orders) == 0 {
		return r
	}
	at := map[*graphdef.Node]int{}
	for _, e := range orders {
		from, to := orig.Node(e.After), orig.Node(e.Node)
		if from == nil || to == nil {
			continue
		}
		i, ok := at[from]
		if !ok {
			i = len(r.jumps)
			at[from] = i
			r.jumps = append(r.jumps, jump{from: from})
		}
		r.jumps[i].to = append(r.jumps[i].to, to)
	}
	for _, n := range orig.Nodes {
		if n.Op != "NextIteration" && n.Op != "RefNextIteration" {
			continue
		}
		j := jump{from: n}
		for _, uses := range n.Consumers {
			for _, u := range uses {
				j.to = append(j.to, u.Node)
			}
		}
		j.to = append(j.to, n.ControlOutputs...)
		if len(j.to) > 0 {
			r.jumps = append(r.jumps, j)
		}
	}
	r.next = make([][]int32, len(r.jumps))
	r.seen = make([]uint32, len(r.jumps))
	return r
}

// reachable reports whether to is reachable from from through the original graph's data and
// control edges and the ordering edges (with the loops' back edges when there are ordering
// edges: a path is Reachable's paths joined by jumps).
func (r *reachability) reachable(from, to *graphdef.Node) bool {
	if r.orig.Reachable(from, to) {
		return true
	}
	if len(r.jumps) == 0 {
		return false
	}
	if r.stamp++; r.stamp == 0 {
		clear(r.seen)
		r.stamp = 1
	}
	var stack []int32
	for i := range r.jumps {
		if r.orig.Reachable(from, r.jumps[i].from) {
			r.seen[i] = r.stamp
			stack = append(stack, int32(i))
		}
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, t := range r.jumps[i].to {
			if r.orig.Reachable(t, to) {
				return true
			}
		}
		for _, k := range r.nextJumps(i) {
			if r.seen[k] != r.stamp {
				r.seen[k] = r.stamp
				stack = append(stack, k)
			}
		}
	}
	return false
}

// nextJumps returns the jumps whose node a target of jump i reaches through the original
// graph's edges, worked out once.
func (r *reachability) nextJumps(i int32) []int32 {
	j := &r.jumps[i]
	if !j.nextOK {
		j.nextOK = true
		for k := range r.jumps {
			for _, t := range j.to {
				if r.orig.Reachable(t, r.jumps[k].from) {
					r.next[i] = append(r.next[i], int32(k))
					break
				}
			}
		}
	}
	return r.next[i]
}

// check fails when the trigger that gate reads is not reachable from the producer of the
// tensor swap-in sw carries, through data and control edges of the original graph and the
// ordering edges planning added.
func (r *reachability) check(sw, gate *graphdef.Node) error {
	if len(gate.Inputs) != 1 {
		return fmt.Errorf("gate %q of swap-in %q has %d data inputs", gate.Name, sw.Name, len(gate.Inputs))
	}
	out := sw.Inputs[0].Node
	if len(out.Inputs) != 1 {
		return fmt.Errorf("swap-out %q has %d data inputs", out.Name, len(out.Inputs))
	}
	producer := r.orig.Node(out.Inputs[0].Node.Name)
	trigger := r.orig.Node(gate.Inputs[0].Node.Name)
	if producer == nil || trigger == nil {
		return fmt.Errorf("swap-in %q: its producer %q or trigger %q is not a node of the original graph", sw.Name, out.Inputs[0].Node.Name, gate.Inputs[0].Node.Name)
	}
	reach := trigger != producer && r.reachable(producer, trigger)
	if trigger != producer && !reach {
		// A trigger off the producer's descent is ordered after the swap-out by waiting
		// for it (SwapInGroup.TriggerWaits): it has a control input on this swap-out.
		for _, c := range gate.Inputs[0].Node.ControlInputs {
			if c == out {
				return nil
			}
		}
	}
	if !reach {
		return fmt.Errorf("swap-in %q is triggered by %q, which is not reachable from the producer %q: nothing orders the swap-in after the swap-out", sw.Name, trigger.Name, producer.Name)
	}
	return nil
}

// sameInputs reports whether nn, a node of the rewritten graph, reads the same tensors and
// has the same control inputs as on, the original node, by name and port.
func sameInputs(nn, on *graphdef.Node) bool {
	for j, t := range on.Inputs {
		if nn.Inputs[j].Node.Name != t.Node.Name || nn.Inputs[j].Port != t.Port {
			return false
		}
	}
	for j, c := range on.ControlInputs {
		if nn.ControlInputs[j].Name != c.Name {
			return false
		}
	}
	return true
}

// condBranches answers whether original nodes lie inside a branch of a v1 conditional
// (graphdef.Graph.InCondBranch, found once, on the first question).
type condBranches struct {
	orig *graphdef.Graph
	in   []bool
}

// check fails when the trigger that gate reads, or a reader of swap-in sw, lies inside a
// branch of a v1 conditional: a trigger in the branch not taken is dead, and makes the
// swap-in and its readers dead with it; a reader inside a branch runs only on one side, so
// the swap-in (outside it) would be copied back for nothing on the other (issue 12, item 7).
func (b *condBranches) check(sw, gate *graphdef.Node) error {
	if b.in == nil {
		b.in = b.orig.InCondBranch()
	}
	inBranch := func(name string) bool {
		n := b.orig.Node(name)
		return n != nil && b.in[n.Index]
	}
	if len(gate.Inputs) == 1 && inBranch(gate.Inputs[0].Node.Name) {
		return fmt.Errorf("swap-in %q is triggered by %q, inside a conditional branch", sw.Name, gate.Inputs[0].Node.Name)
	}
	for _, uses := range sw.Consumers {
		for _, u := range uses {
			if inBranch(u.Node.Name) {
				return fmt.Errorf("swap-in %q is read by %q, inside a conditional branch", sw.Name, u.Node.Name)
			}
		}
	}
	return nil
}
