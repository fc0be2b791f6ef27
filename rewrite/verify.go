package rewrite

import (
	"fmt"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"google.golang.org/protobuf/proto"
)

// Verify checks the invariants of a rewrite of orig into res: the rewritten graph is valid
// and acyclic; every original node is kept with its op, device and attrs, and only its inputs
// may differ; every changed input reads a swap-in that, through its swap-out, reads the very
// tensor the original input read; swap nodes are Identities of the tensor's dtype marked for
// Grappler to keep, the swap-out on the host; and each swap-in has exactly one control input,
// its trigger, and (with GateHost) sits on the host; control inputs added to original nodes
// (waits) name swap-outs. It returns the first violation.
func Verify(orig *graphdef.Graph, res *Result, gate Gate) error {
	out, err := graphdef.NewGraph(res.Model.Graph, "rewritten")
	if err != nil {
		return fmt.Errorf("rewritten graph is invalid: %v", err)
	}
	if len(out.Nodes) < len(orig.Nodes) {
		return fmt.Errorf("rewritten graph has %d nodes, fewer than the original %d", len(out.Nodes), len(orig.Nodes))
	}
	for i, on := range orig.Nodes {
		nn := out.Nodes[i]
		if nn.Name != on.Name || nn.Op != on.Op || nn.Def.GetDevice() != on.Def.GetDevice() {
			return fmt.Errorf("node %d changed from %s(%s) to %s(%s)", i, on.Name, on.Op, nn.Name, nn.Op)
		}
		if len(nn.Def.GetAttr()) != len(on.Def.GetAttr()) {
			return fmt.Errorf("node %q: attrs changed", on.Name)
		}
		for k, v := range on.Def.GetAttr() {
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
		// Control inputs added after the original ones are waits: they name swap-outs.
		for _, c := range nn.ControlInputs[len(on.ControlInputs):] {
			if string(c.Def.GetAttr()[RoleAttr].GetS()) != "swap_out" {
				return fmt.Errorf("node %q: added control input %q is not a swap-out", on.Name, c.Name)
			}
		}
		for j, in := range on.Inputs {
			got := nn.Inputs[j]
			if got.Node.Name == in.Node.Name && got.Port == in.Port {
				continue
			}
			src, err := swappedSource(got)
			if err != nil {
				return fmt.Errorf("node %q input %d: %v", on.Name, j, err)
			}
			if src.Node.Name != in.Node.Name || src.Port != in.Port {
				return fmt.Errorf("node %q input %d reads %s through swaps, not %s", on.Name, j, src, in)
			}
		}
	}
	for _, n := range out.Nodes[len(orig.Nodes):] {
		role := string(n.Def.GetAttr()[RoleAttr].GetS())
		if role == "gate" {
			if err := verifyGate(n); err != nil {
				return err
			}
			continue
		}
		if !strings.HasPrefix(n.Name, Scope) || n.Op != "Identity" || (role != "swap_out" && role != "swap_in") {
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
			if g := n.ControlInputs[0]; string(g.Def.GetAttr()[RoleAttr].GetS()) != "gate" {
				return fmt.Errorf("swap-in %q takes its control edge from %q, not from a gate", n.Name, g.Name)
			}
		}
	}
	return nil
}

// swappedSource follows a tensor back through a swap-in and its swap-out to the tensor they
// carry.
func swappedSource(t graphdef.Tensor) (graphdef.Tensor, error) {
	in := t.Node
	if string(in.Def.GetAttr()[RoleAttr].GetS()) != "swap_in" || t.Port != 0 {
		return t, fmt.Errorf("reads %s, which is neither the original tensor nor a swap-in", t)
	}
	out := in.Inputs[0].Node
	if string(out.Def.GetAttr()[RoleAttr].GetS()) != "swap_out" {
		return t, fmt.Errorf("swap-in %q reads %q, not a swap-out", in.Name, out.Name)
	}
	return out.Inputs[0], nil
}

// verifyGate checks a gate node: a preserved Identity named for its trigger, on the trigger's
// device, reading an original node's output.
func verifyGate(n *graphdef.Node) error {
	if n.Op != "Identity" || len(n.Inputs) != 1 || len(n.ControlInputs) != 0 || !n.Def.GetAttr()[DoNotRemoveAttr].GetB() {
		return fmt.Errorf("gate %q is not a preserved Identity with one data input", n.Name)
	}
	trigger := n.Inputs[0].Node
	if trigger.Def.GetAttr()[RoleAttr] != nil {
		return fmt.Errorf("gate %q reads the tfswap node %q, not a trigger", n.Name, trigger.Name)
	}
	if n.Name != GateNodeName(trigger) || n.Def.GetDevice() != trigger.Def.GetDevice() {
		return fmt.Errorf("gate %q does not match its trigger %q (name or device)", n.Name, trigger.Name)
	}
	return nil
}
