package testgraph

import (
	"reflect"

	"github.com/tfswap/tfswap/graphdef"
)

// Same returns "" when got and want are the same graph for every purpose of the simulator
// (nodes in the same order with the same names, ops, devices, types and shapes, the same data
// and control edges both ways, the same topological order and levels), and otherwise says
// where they first differ. Name lookup (Graph.Node) is not compared: a graph derived by the
// rewrite's builder does not support it.
func Same(got, want *graphdef.Graph) string {
	if len(got.Nodes) != len(want.Nodes) {
		return "node counts differ"
	}
	name := func(n *graphdef.Node) string { return n.Name }
	for i, w := range want.Nodes {
		g := got.Nodes[i]
		if g.Name != w.Name || g.Op != w.Op || g.Device != w.Device || g.TopoIndex != w.TopoIndex || g.Level != w.Level {
			return "node " + w.Name + " differs in name, op, device, order or level"
		}
		if !reflect.DeepEqual(g.OutputTypes, w.OutputTypes) || !reflect.DeepEqual(g.OutputShapes, w.OutputShapes) {
			return "node " + w.Name + " differs in types or shapes"
		}
		if len(g.Inputs) != len(w.Inputs) || len(g.ControlInputs) != len(w.ControlInputs) || len(g.ControlOutputs) != len(w.ControlOutputs) || len(g.Consumers) != len(w.Consumers) {
			return "node " + w.Name + " differs in edge counts"
		}
		for j := range w.Inputs {
			if name(g.Inputs[j].Node) != name(w.Inputs[j].Node) || g.Inputs[j].Port != w.Inputs[j].Port {
				return "node " + w.Name + " input differs"
			}
		}
		for j := range w.ControlInputs {
			if name(g.ControlInputs[j]) != name(w.ControlInputs[j]) {
				return "node " + w.Name + " control input differs"
			}
		}
		for j := range w.ControlOutputs {
			if name(g.ControlOutputs[j]) != name(w.ControlOutputs[j]) {
				return "node " + w.Name + " control output differs"
			}
		}
		for port := range w.Consumers {
			if len(g.Consumers[port]) != len(w.Consumers[port]) {
				return "node " + w.Name + " consumer count differs"
			}
			for j, u := range w.Consumers[port] {
				if name(g.Consumers[port][j].Node) != name(u.Node) || g.Consumers[port][j].Input != u.Input {
					return "node " + w.Name + " consumers differ"
				}
			}
		}
	}
	for i := range want.Topo {
		if got.Topo[i].Name != want.Topo[i].Name {
			return "topological orders differ"
		}
	}
	return ""
}
