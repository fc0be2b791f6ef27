package rewrite

import (
	"github.com/tfswap/tfswap/graphdef"
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
// The lowered v2 while loop (TensorList accumulators) is not handled: there the accumulator
// is a loop variable (a DT_VARIANT TensorList carried by Enter, Merge, Switch, NextIteration
// and Exit into the gradient loop), so placing it on the host would move the loop's own
// control-flow nodes for that variable, which this rewrite leaves alone.

// StackOutRole is the role of the Identity on the host through which a stack accumulator
// placed on the host reads the tensor it pushes.
const StackOutRole = "stack_out"

// StackInRole is the role of the Identity on the compute device through which the compute
// device's readers of a host stack's pop read the popped tensor.
const StackInRole = "stack_in"

// Accumulator describes one while loop stack accumulator a rewrite placed on the host.
type Accumulator struct {
	// Stack is the StackV2 node; Host the device it was placed on.
	Stack string
	Host  string
	// Pushed are the tensors pushed ("producer:port") and Bytes the size of one of each
	// (one loop iteration's), in the order of their pushes.
	Pushed []string
	Bytes  int64
	// Moved are the original nodes placed on the host, in graph order; Added the Identity
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
// tfswap's, no push or no pop, or a pushed tensor of unknown size, under the minimum size
// (Options.MinTensorBytes) or made off the compute device.
func (a *Analysis) stackAccumulator(s *graphdef.Node) (members, pushes, pops []*graphdef.Node, bytes int64, ok bool) {
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
	for _, p := range pushes {
		if len(p.Inputs) != 2 {
			return nil, nil, nil, 0, false
		}
		t := p.Inputs[1]
		b, known, _ := t.Bytes()
		if !known || !a.OnCompute(t.Node) || (a.Opts.MinTensorBytes >= 0 && b < a.Opts.MinTensorBytes) || b == 0 {
			return nil, nil, nil, 0, false
		}
		bytes += b
	}
	return members, pushes, pops, bytes, true
}

// placeAccumulators places the stack accumulators of a's graph that qualify
// (stackAccumulator) on the host in res.Model, whose nodes up to len(a.Graph.Nodes) are the
// original nodes in order (Apply's output), and records them in res.Accumulators. It adds
// one StackOutRole Identity per push and one StackInRole Identity per pop read on the
// compute device, after every other node, and drops the colocation attr (_class) of the
// nodes it moves, whose colocation group stays on the compute device. Deterministic: stacks
// in graph order.
func placeAccumulators(res *Result, a *Analysis) {
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
	for _, s := range a.Graph.Nodes {
		if s.Op != "StackV2" {
			continue
		}
		members, pushes, pops, bytes, ok := a.stackAccumulator(s)
		if !ok {
			continue
		}
		host := a.Host(s).String()
		acc := Accumulator{Stack: s.Name, Host: host, Bytes: bytes}
		for _, m := range members {
			nd := mutable(m.Index)
			nd.Device = host
			delete(nd.Attr, "_class")
			acc.Moved = append(acc.Moved, m.Name)
		}
		for _, p := range pushes {
			t := p.Inputs[1]
			dt, _ := t.DataType()
			name := Scope + p.Name + "/" + StackOutRole
			out.Node = append(out.Node, swapNode(name, StackOutRole, out.Node[p.Index].Input[1], host, dt, t.Node, t.Port, ""))
			mutable(p.Index).Input[1] = name
			acc.Pushed = append(acc.Pushed, t.String())
			acc.Added = append(acc.Added, name)
		}
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
			dt, _ := (graphdef.Tensor{Node: p, Port: 0}).DataType()
			name := Scope + p.Name + "/" + StackInRole
			out.Node = append(out.Node, swapNode(name, StackInRole, p.Name, dev.String(), dt, p, 0, ""))
			for _, u := range readers {
				mutable(u.Node.Index).Input[u.Input] = name
			}
			acc.Added = append(acc.Added, name)
		}
		res.Accumulators = append(res.Accumulators, acc)
	}
	if cloned != nil {
		res.graph = nil // the builder's graph no longer describes res.Model
	}
}
