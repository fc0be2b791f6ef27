package rewrite

import (
	"slices"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// A v1 while loop's gradient keeps what the backward pass needs of each forward iteration in
// a stack accumulator: a StackV2 made outside the loop, whose handle enters the forward loop,
// where a StackPushV2 pushes the tensor every iteration, and the gradient loop, where a
// StackPopV2 pops it back (tf.while_loop's gradient; StackV2 is made with swap_memory false
// unless the user asked). Those tensors never leave the loop frames as tensors of their own,
// so swapping (which needs a tensor read outside the frame) never moves them, and they are
// the bulk of what a recurrent network keeps for its backward pass. The LMS rewrite places
// such a stack on the host instead: the StackV2, the Enter and Identity nodes that carry its
// handle, and its push, pop and close ops move to the host device. Each push reads its
// tensor through an Identity on the host (StackOutRole), so the tensor is copied to the host
// as the forward iteration makes it and the device's copy is freed after its other readers;
// each pop's readers on the compute device read it through an Identity there (StackInRole),
// the copy back. Values are unchanged (copies), so training is bit-identical.
//
// TensorFlow's own mechanism, the StackPushV2 attr swap_memory, is not used: in TensorFlow
// 2.18 (core/kernels/stack.cc) only the GPU kernel swaps, and only a tensor above 2 KiB
// while the GPU allocator holds more than 70% of its limit, so it moves nothing on a CPU
// device and its effect depends on the allocator's state at run time.
//
// A lowered v2 while loop (tf.while_loop with control flow v2, once the session lowered its
// While to Enter/Merge/Switch/NextIteration/Exit, as Grappler and the bridge see it) keeps
// those tensors in TensorList accumulators instead: an EmptyTensorList made outside the loop
// enters the forward loop as a loop variable of its own (a DT_VARIANT carried by Enter, Merge,
// Switch, Identity and NextIteration), a TensorListPushBack appends the tensor every
// iteration, the list leaves through an Exit into the gradient loop, where a
// TensorListPopBack takes the elements back in reverse order. The LMS rewrite places such a
// list on the host in the same way: the Enter carrying the empty list into the loop and
// every node carrying that loop variable on through both loops (its own Merge, Switch,
// NextIteration and Exit, nothing of the other loop variables), its pushes and pops, and the
// EmptyTensorList when all the lists made from it move; the pushes read their tensor through
// a StackOutRole Identity on the host, the pops' element readers on the compute device read
// a StackInRole Identity there. TensorFlow's partitioner splits a frame across devices (the
// host partition gets its own copy of the loop's control: Enter, Merge, Switch and
// NextIteration of the loop condition, fed by a Send/Recv pair per iteration), so the loop
// runs as before with the list's plumbing on the host; a minimal v1 loop with a TensorList
// loop variable placed so trains to the same bytes (grappler_bridge/README.md, "While
// loops"). A list read by anything else (TensorListStack, TensorListGetItem, a list that
// is not an accumulator such as dynamic_rnn's TensorArray) stays where it is.

// FunctionalLoop is a functional While loop (While, StatelessWhile: control flow v2 as the
// graph is written, before TensorFlow lowers it) whose body pushes onto accumulators
// (cost.WhileListPushes), which the rewrite leaves on the device (UnloweredLoopLimit).
type FunctionalLoop struct {
	// While is the loop's node; Pushes the number of accumulator pushes of its body, one
	// element each per iteration.
	While  string
	Pushes int
}

// UnloweredLoopLimit says why the rewrite leaves a functional While's accumulators where they
// are. Lowering the loop (inlining its cond and body as frames of Enter, Merge, Switch,
// NextIteration and Exit nodes, as Grappler's LowerFunctionalOpsPass does) would write a
// graph other than the one TensorFlow lowers itself, which Grappler then optimizes
// differently; the Grappler bridge sees the loop lowered and moves its accumulators there.
const UnloweredLoopLimit = "tfswap does not lower functional While loops; TensorFlow lowers them when the graph runs, where the Grappler bridge (grappler_bridge) places their accumulators on the host"

// functionalLoops returns g's functional While loops with accumulators, in graph order.
func functionalLoops(g *graphdef.Graph) []FunctionalLoop {
	var out []FunctionalLoop
	for _, n := range g.Nodes {
		if n.Op != "While" && n.Op != "StatelessWhile" {
			continue
		}
		if pushes, _, _ := cost.WhileListPushes(g.Def.GetLibrary(), n); len(pushes) > 0 {
			out = append(out, FunctionalLoop{While: n.Name, Pushes: len(pushes)})
		}
	}
	return out
}

// StackOutRole is the role of the Identity on the host through which a stack or TensorList
// accumulator placed on the host reads the tensor it pushes.
const StackOutRole = "stack_out"

// StackInRole is the role of the Identity on the compute device through which the compute
// device's readers of a host stack's or list's pop read the popped tensor.
const StackInRole = "stack_in"

// Accumulator describes one while loop accumulator a rewrite placed on the host.
type Accumulator struct {
	// Stack is the StackV2 node of a stack accumulator, or the Enter that carries a
	// TensorList accumulator's empty list into the forward loop; Host the device it was
	// placed on; List whether it is a TensorList.
	Stack string
	Host  string
	List  bool
	// Pushed are the tensors pushed ("producer:port") and Bytes the size of one of each
	// (one loop iteration's), in the order of their pushes.
	Pushed []string
	Bytes  int64
	// Moved are the original nodes placed on the host, in the order found; Added the Identity
	// nodes added (StackOutRole, StackInRole).
	Moved []string
	Added []string
}

// stackHandleOps are the ops that carry a stack's handle on to its users unchanged.
var stackHandleOps = map[string]bool{"Enter": true, "Identity": true}

// stackUseOps are the ops that use a stack through its handle, their input 0.
var stackUseOps = map[string]bool{"StackPushV2": true, "StackPopV2": true, "StackCloseV2": true}

// stackAccumulator returns the nodes of the stack s (its StackV2, the nodes carrying its
// handle and the ops using it) and its pushes and pops, or ok false when the stack is not
// one this rewrite places on the host: a handle read by any other op or through any other
// input, a node off the compute device, preserved, in a conditional branch or already
// tfswap's, no push or no pop, or a pushed tensor of unknown size, under minimum bytes
// (pushedBytes) or made off the compute device.
func (a *Analysis) stackAccumulator(s *graphdef.Node, minimum int64) (members, pushes, pops []*graphdef.Node, bytes int64, ok bool) {
	seen := map[*graphdef.Node]bool{}
	var walk func(n *graphdef.Node) bool
	walk = func(n *graphdef.Node) bool {
		if seen[n] {
			return true
		}
		seen[n] = true
		if !a.OnCompute(n) || a.Preserved(n) || a.InBranch(n) {
			return false
		}
		if _, tf := n.Def.GetAttr()[RoleAttr]; tf {
			return false
		}
		members = append(members, n)
		switch {
		case n.Op == "StackPushV2":
			pushes = append(pushes, n)
			return true
		case n.Op == "StackPopV2":
			pops = append(pops, n)
			return true
		case n.Op == "StackCloseV2":
			return true
		}
		for port, uses := range n.Consumers {
			for _, u := range uses {
				if port != 0 || u.Input != 0 || !(stackHandleOps[u.Node.Op] || stackUseOps[u.Node.Op]) {
					return false
				}
				if !walk(u.Node) {
					return false
				}
			}
		}
		return true
	}
	if !walk(s) || len(pushes) == 0 || len(pops) == 0 {
		return nil, nil, nil, 0, false
	}
	bytes, ok = a.pushedBytes(pushes, minimum)
	if !ok {
		return nil, nil, nil, 0, false
	}
	return members, pushes, pops, bytes, true
}

// HostAccumulators returns the while loops' accumulators of a's graph that the rewrite can
// place on the host, their pushed tensors of at least minimum bytes each (-1: any size): the
// StackV2 of each stack that qualifies (stackAccumulator), then the Enter carrying each
// TensorList accumulator's empty list into its forward loop that qualifies
// (listAccumulator), each in graph order. Plan.Accumulators names some of them.
func (a *Analysis) HostAccumulators(minimum int64) []*graphdef.Node {
	var stacks, lists []*graphdef.Node
	for _, n := range a.Graph.Nodes {
		switch {
		case n.Op == "StackV2":
			if _, _, _, _, ok := a.stackAccumulator(n, minimum); ok {
				stacks = append(stacks, n)
			}
		case isListEnter(n):
			if _, _, _, _, ok := a.listAccumulator(n, minimum); ok {
				lists = append(lists, n)
			}
		}
	}
	return append(stacks, lists...)
}

// isListEnter reports whether n is an Enter reading an EmptyTensorList, the start of a
// TensorList accumulator's loop variable.
func isListEnter(n *graphdef.Node) bool {
	return n.Op == "Enter" && len(n.Inputs) == 1 && n.Inputs[0].Port == 0 && n.Inputs[0].Node.Op == "EmptyTensorList"
}

// placeAccumulators places the accumulators chosen (HostAccumulators' nodes: a StackV2, or a
// TensorList accumulator's Enter) on the host in res.Model, whose nodes up to
// len(a.Graph.Nodes) are the original nodes in order (Apply's output), and records them in
// res.Accumulators, stacks then lists, each in graph order. It adds one StackOutRole
// Identity per push and one StackInRole Identity per pop read on the compute device, after
// every other node, and drops the colocation attr (_class) of the nodes it moves, whose
// colocation group stays on the compute device. A chosen node that does not qualify is left
// alone; the minimum size (Options.MinTensorBytes) is the chooser's to apply. Deterministic.
func placeAccumulators(res *Result, a *Analysis, chosen []*graphdef.Node) {
	if len(chosen) == 0 {
		return
	}
	out := res.Model.Graph
	var cloned map[int]bool
	mutable := func(idx int) *npb.NodeDef {
		if cloned == nil {
			cloned = map[int]bool{}
		}
		if !cloned[idx] {
			out.Node[idx] = proto.Clone(out.Node[idx]).(*npb.NodeDef)
			cloned[idx] = true
		}
		return out.Node[idx]
	}
	chosen = slices.Clone(chosen)
	slices.SortFunc(chosen, func(x, y *graphdef.Node) int { return x.Index - y.Index })
	var enters []*graphdef.Node
	for _, s := range chosen {
		if s.Op != "StackV2" {
			enters = append(enters, s)
			continue
		}
		members, pushes, pops, bytes, ok := a.stackAccumulator(s, -1)
		if !ok {
			continue
		}
		acc := Accumulator{Stack: s.Name, Host: a.Host(s).String(), Bytes: bytes}
		moveAccumulator(out, &acc, members, pushes, mutable)
		for _, p := range pops {
			// The pop's readers on its original device read the copy back; others (on
			// another device) read the host's pop as they would any host tensor.
			dev := a.Device(p)
			var readers []graphdef.Use
			for _, u := range p.Consumers[0] {
				if a.Device(u.Node) == dev {
					readers = append(readers, u)
				}
			}
			if len(readers) == 0 {
				continue
			}
			readPopThroughCopy(out, &acc, p, 0, dev.String(), readers, mutable)
		}
		res.Accumulators = append(res.Accumulators, acc)
	}
	placeLists(res, a, enters, mutable)
	if cloned != nil {
		res.built = nil // the builder's graph no longer describes res.Model
	}
}

// listCarryOps are the ops that carry a TensorList loop variable on, from their input 0 (any
// input for Merge) to their output 0 (both outputs of Switch).
var listCarryOps = map[string]bool{"Enter": true, "Merge": true, "Switch": true, "Identity": true, "NextIteration": true, "Exit": true}

// listUseOps are the ops that use a TensorList accumulator through their input 0 and give
// the list on as their output 0.
var listUseOps = map[string]bool{"TensorListPushBack": true, "TensorListPopBack": true}

// listAccumulator returns the nodes carrying the TensorList loop variable that enters a
// loop through enter (an Enter reading an EmptyTensorList), with its pushes and pops, or ok
// false when that list is not one this rewrite places on the host: the list read by any
// other op or through any other input (a Merge's value_index included), a node off the
// compute device, preserved, in a conditional branch or already tfswap's, a Merge joining
// a value that is not this list's, no push or no pop, or a pushed tensor of unknown size,
// under minimum bytes (pushedBytes) or made off the compute device.
func (a *Analysis) listAccumulator(enter *graphdef.Node, minimum int64) (members, pushes, pops []*graphdef.Node, bytes int64, ok bool) {
	seen := map[*graphdef.Node]bool{}
	queue := []*graphdef.Node{enter}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		if !a.OnCompute(n) || a.Preserved(n) || a.InBranch(n) {
			return nil, nil, nil, 0, false
		}
		if _, tf := n.Def.GetAttr()[RoleAttr]; tf {
			return nil, nil, nil, 0, false
		}
		members = append(members, n)
		switch n.Op {
		case "TensorListPushBack":
			pushes = append(pushes, n)
		case "TensorListPopBack":
			pops = append(pops, n)
		}
		for port, uses := range n.Consumers {
			if port == 1 && n.Op == "TensorListPopBack" {
				continue // the popped element: its readers get a StackInRole copy
			}
			if port > 0 && n.Op != "Switch" && len(uses) > 0 {
				return nil, nil, nil, 0, false
			}
			for _, u := range uses {
				switch {
				case u.Node.Op == "Merge":
				case listCarryOps[u.Node.Op] || listUseOps[u.Node.Op]:
					if u.Input != 0 {
						return nil, nil, nil, 0, false
					}
				default:
					return nil, nil, nil, 0, false
				}
				queue = append(queue, u.Node)
			}
		}
	}
	for _, m := range members {
		if m.Op != "Merge" {
			continue
		}
		for _, in := range m.Inputs {
			if !seen[in.Node] {
				return nil, nil, nil, 0, false
			}
		}
	}
	if len(pushes) == 0 || len(pops) == 0 {
		return nil, nil, nil, 0, false
	}
	bytes, ok = a.pushedBytes(pushes, minimum)
	if !ok {
		return nil, nil, nil, 0, false
	}
	return members, pushes, pops, bytes, true
}

// placeLists places the TensorList accumulators entering their loops through enters (in
// graph order) that qualify (listAccumulator) on the host like placeAccumulators places
// stacks, mutable giving the output NodeDef of an original node to change: per Enter, the list's
// nodes move to the host, each push reads its tensor through a StackOutRole Identity there
// and each pop's element readers on the compute device read a StackInRole Identity; the
// EmptyTensorList moves too when every reader of it moved, and is left on the device (its
// empty list sent to the host) otherwise.
func placeLists(res *Result, a *Analysis, enters []*graphdef.Node, mutable func(int) *npb.NodeDef) {
	out := res.Model.Graph
	movedEnters, movedLists := map[*graphdef.Node]bool{}, map[*graphdef.Node]bool{}
	for _, e := range enters {
		if !isListEnter(e) {
			continue
		}
		members, pushes, pops, bytes, ok := a.listAccumulator(e, -1)
		if !ok {
			continue
		}
		acc := Accumulator{Stack: e.Name, Host: a.Host(e).String(), List: true, Bytes: bytes}
		movedEnters[e] = true
		moveAccumulator(out, &acc, members, pushes, mutable)
		for _, p := range pops {
			dev := a.Device(p)
			var readers []graphdef.Use
			if len(p.Consumers) > 1 {
				for _, u := range p.Consumers[1] {
					if a.Device(u.Node) == dev {
						readers = append(readers, u)
					}
				}
			}
			if len(readers) == 0 {
				continue
			}
			readPopThroughCopy(out, &acc, p, 1, dev.String(), readers, mutable)
		}
		res.Accumulators = append(res.Accumulators, acc)
	}
	// An EmptyTensorList all of whose readers moved moves with them (into the first list's
	// Moved): the empty list is then made on the host rather than sent there.
	for i := range res.Accumulators {
		acc := &res.Accumulators[i]
		if !acc.List {
			continue
		}
		l := a.Graph.Node(acc.Stack).Inputs[0].Node
		if movedLists[l] || !a.OnCompute(l) || a.Preserved(l) || a.InBranch(l) {
			continue
		}
		all := true
		for port, uses := range l.Consumers {
			for _, u := range uses {
				if port != 0 || !movedEnters[u.Node] {
					all = false
				}
			}
		}
		if _, tf := l.Def.GetAttr()[RoleAttr]; tf || !all {
			continue
		}
		movedLists[l] = true
		nd := mutable(l.Index)
		nd.Device = acc.Host
		delete(nd.Attr, "_class")
		acc.Moved = append(acc.Moved, l.Name)
	}
}

// pushedBytes returns the bytes pushes (an accumulator's StackPushV2 or TensorListPushBack
// nodes) push per iteration, or ok false when a push does not have two inputs or a pushed
// tensor is of unknown size, empty, under minimum bytes (-1: no minimum) or made off the
// compute device.
func (a *Analysis) pushedBytes(pushes []*graphdef.Node, minimum int64) (bytes int64, ok bool) {
	for _, p := range pushes {
		if len(p.Inputs) != 2 {
			return 0, false
		}
		t := p.Inputs[1]
		b, known, _ := t.Bytes()
		if !known || !a.OnCompute(t.Node) || (minimum >= 0 && b < minimum) || b == 0 {
			return 0, false
		}
		bytes += b
	}
	return bytes, true
}

// moveAccumulator moves an accumulator's members to acc.Host in out (mutable giving the
// output NodeDef of an original node to change), dropping their colocation attr, and makes
// each push read its tensor through a StackOutRole Identity on the host, recording both in
// acc.
func moveAccumulator(out *gpb.GraphDef, acc *Accumulator, members, pushes []*graphdef.Node, mutable func(int) *npb.NodeDef) {
	for _, m := range members {
		nd := mutable(m.Index)
		nd.Device = acc.Host
		delete(nd.Attr, "_class")
		acc.Moved = append(acc.Moved, m.Name)
	}
	for _, p := range pushes {
		t := p.Inputs[1]
		dt, _ := t.DataType()
		name := Scope + p.Name + "/" + StackOutRole
		out.Node = append(out.Node, swapNode(name, StackOutRole, out.Node[p.Index].Input[1], acc.Host, dt, t.Node, t.Port, ""))
		mutable(p.Index).Input[1] = name
		acc.Pushed = append(acc.Pushed, t.String())
		acc.Added = append(acc.Added, name)
	}
}

// readPopThroughCopy makes readers (the readers of output port of pop on its own device dev)
// read it through a StackInRole Identity on dev, recording the Identity in acc.
func readPopThroughCopy(out *gpb.GraphDef, acc *Accumulator, pop *graphdef.Node, port int, dev string, readers []graphdef.Use, mutable func(int) *npb.NodeDef) {
	elem := graphdef.Tensor{Node: pop, Port: port}
	dt, _ := elem.DataType()
	name := Scope + pop.Name + "/" + StackInRole
	out.Node = append(out.Node, swapNode(name, StackInRole, elem.InputString(), dev, dt, pop, port, ""))
	for _, u := range readers {
		mutable(u.Node.Index).Input[u.Input] = name
	}
	acc.Added = append(acc.Added, name)
}
