package rewrite

import (
	"fmt"
	"slices"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// SpacerRole is the RoleAttr value of a spacer (AddSpacers).
const SpacerRole = "spacer"

// Spacer holds an op back by one kernel: Node waits, by a control edge, for an L2Loss of
// Reads (one of Node's data inputs, on Node's device), which itself waits for After (the
// producers of Node's other inputs on that device). Grappler's VirtualCluster counts an op's
// outputs from its start and the inputs a previous op frees until that op's end, both read
// in whole microseconds by TensorFlow's peak (GraphMemory); when the op starts the moment the
// previous one ends, the two sets look simultaneous. The spacer runs between them for at
// least the time to read Reads, so they fall in different microseconds (and nanoseconds). It
// reads a tensor Node reads anyway, so it keeps no buffer alive longer and changes no value.
type Spacer struct {
	Node  string
	Reads string
	After []string `json:",omitempty"`
}

// SpacerName returns the name of the spacer that holds node back.
func SpacerName(node string) string { return Scope + "spacer/" + node }

// SpacerType reports whether a spacer (an L2Loss) may read a tensor of dtype dt: half,
// bfloat16, float or double.
func SpacerType(dt graphdef.DataType) bool { return reduceGateTypes[dt] }

// SpacerMayHold reports whether a spacer may hold back an op of type op: any but a
// control-flow op (Enter, Merge, Switch, NextIteration and the like, and the sends and
// retvals whose inputs the rewrite never redirects). A loop's Merge reads its NextIteration
// by the back edge, so a spacer waiting for the producers of its inputs would wait for an
// op that runs after the Merge it holds back: a cycle.
func SpacerMayHold(op string) bool { return !notConsumers[op] }

// AddSpacers adds spacers to res's graph: for each, an L2Loss named SpacerName(Node) on
// Node's device, reading Reads and waiting for After, preserved from Grappler's optimizers,
// and a control input of Node on it. It records them in res.Spacers. A spacer whose node or
// tensor is missing, whose tensor is not a half, bfloat16, float or double output, or whose
// node already has one is an error naming it; res is then unchanged.
func AddSpacers(res *Result, spacers []Spacer) error {
	if len(spacers) == 0 {
		return nil
	}
	nodes := res.Model.Graph.GetNode()
	at := make(map[string]int, len(nodes))
	for i, nd := range nodes {
		at[nd.GetName()] = i
	}
	g, err := graphdef.NewGraph(res.Model.Graph, "rewritten")
	if err != nil {
		return fmt.Errorf("rewritten graph is invalid: %v", err)
	}
	m := res.Model.Clone()
	out := m.Graph.Node
	changed := map[int]*npb.NodeDef{}
	for _, s := range spacers {
		i, ok := at[s.Node]
		if !ok {
			return fmt.Errorf("spacer: node %q is not in the graph", s.Node)
		}
		name := SpacerName(s.Node)
		if _, dup := at[name]; dup {
			return fmt.Errorf("spacer: node %q already has a spacer", s.Node)
		}
		rn, port, ctl, err := graphdef.ParseInput(s.Reads)
		var dt graphdef.DataType
		if p := g.Node(rn); err == nil && !ctl && p != nil && port < len(p.OutputTypes) {
			dt, ok = p.OutputTypes[port], true
		} else {
			ok = false
		}
		if !ok || !reduceGateTypes[dt] {
			return fmt.Errorf("spacer of %q: %s is not a half, bfloat16, float or double tensor", s.Node, s.Reads)
		}
		nd := &npb.NodeDef{Name: name, Op: "L2Loss", Device: nodes[i].GetDevice(), Input: []string{s.Reads},
			Attr: map[string]*apb.AttrValue{"T": dtypeAttr(dt), DoNotRemoveAttr: attrTrue, RoleAttr: roleAttr(SpacerRole), "_output_shapes": scalarShapeAttr}}
		for _, a := range s.After {
			if _, ok := at[a]; !ok {
				return fmt.Errorf("spacer of %q: node %q is not in the graph", s.Node, a)
			}
			nd.Input = append(nd.Input, "^"+a)
		}
		at[name] = len(out)
		out = append(out, nd)
		c, ok := changed[i]
		if !ok {
			c = proto.Clone(nodes[i]).(*npb.NodeDef)
			changed[i] = c
			out[i] = c
		}
		c.Input = append(c.Input, "^"+name)
	}
	m.Graph.Node = out
	res.Model = m
	res.Spacers = append(res.Spacers, spacers...)
	res.built = nil
	return nil
}

// verifySpacer checks an added node with the spacer role: a preserved L2Loss on its node's
// device reading one of that node's data inputs, waiting only for producers of that node's
// data inputs, and a control input of that node alone, which is not a control-flow op
// (SpacerMayHold).
func verifySpacer(n *graphdef.Node) error {
	if n.Op != "L2Loss" || len(n.Inputs) != 1 || !n.Def.GetAttr()[DoNotRemoveAttr].GetB() {
		return fmt.Errorf("spacer %q is not a preserved L2Loss with one data input", n.Name)
	}
	if dt, ok := n.Inputs[0].DataType(); !ok || !reduceGateTypes[dt] || dt != n.Def.GetAttr()["T"].GetType() {
		return fmt.Errorf("spacer %q is an L2Loss of %s, not of a half, bfloat16, float or double tensor of its T", n.Name, n.Inputs[0])
	}
	if len(n.Consumers) > 0 && len(n.Consumers[0]) > 0 {
		return fmt.Errorf("spacer %q: its value is read", n.Name)
	}
	var held *graphdef.Node
	for _, c := range n.ControlOutputs {
		if held != nil || SpacerName(c.Name) != n.Name {
			return fmt.Errorf("spacer %q holds back %q, not the node it is named after alone", n.Name, c.Name)
		}
		held = c
	}
	if held == nil || held.Def.GetDevice() != n.Def.GetDevice() || !slices.ContainsFunc(held.Inputs, func(t graphdef.Tensor) bool { return t == n.Inputs[0] }) {
		return fmt.Errorf("spacer %q does not read an input of the node it holds back, on its device", n.Name)
	}
	if !SpacerMayHold(held.Op) {
		return fmt.Errorf("spacer %q holds back %q, a control-flow op (%s)", n.Name, held.Name, held.Op)
	}
	for _, c := range n.ControlInputs {
		if !slices.ContainsFunc(held.Inputs, func(t graphdef.Tensor) bool { return t.Node == c }) {
			return fmt.Errorf("spacer %q waits for %q, which makes no input of %q", n.Name, c.Name, held.Name)
		}
	}
	return nil
}

// WidenGates makes the L2Loss gate (GateReduce) of each of triggers, named
// GateNodeName(trigger), read its trigger's largest half, bfloat16, float or double output
// of known size (the first of equals) instead of the smallest one GateOp picks, and records
// them in res.WideGates. Grappler's VirtualCluster runs a swap-in's copy in a nanosecond, so
// a swap-in released by a gate that reads a few bytes lands within the microsecond its
// trigger ends, and Cluster.DeterminePeakMemoryUsage, which reads the trace in whole
// microseconds, counts the copy beside the inputs the trigger has just freed. A gate that
// reads the trigger's large output takes longer than a microsecond, so the copy lands after
// them; it reads a tensor that exists until its own readers have run, which the gate runs
// before, and changes no value. A trigger that is missing, whose gate is not an L2Loss or
// has no such output is an error naming it; res is then unchanged.
func WidenGates(res *Result, triggers []string) error {
	if len(triggers) == 0 {
		return nil
	}
	g, err := graphdef.NewGraph(res.Model.Graph, "rewritten")
	if err != nil {
		return fmt.Errorf("rewritten graph is invalid: %v", err)
	}
	m := res.Model.Clone()
	for _, name := range triggers {
		t := g.Node(name)
		if t == nil {
			return fmt.Errorf("widening a gate: trigger %q is not in the graph", name)
		}
		gate := g.Node(GateNodeName(t))
		if gate == nil || gate.Op != "L2Loss" || len(gate.Inputs) != 1 || gate.Inputs[0].Node != t {
			return fmt.Errorf("widening a gate: %q has no L2Loss gate reading it", name)
		}
		port, dt, ok := WidestGatePort(t)
		if !ok {
			return fmt.Errorf("widening a gate: %q has no half, bfloat16, float or double output of known size", name)
		}
		nd := proto.Clone(m.Graph.Node[gate.Index]).(*npb.NodeDef)
		nd.Input[0] = graphdef.Tensor{Node: t, Port: port}.InputString()
		nd.Attr["T"] = dtypeAttr(dt)
		m.Graph.Node[gate.Index] = nd
	}
	res.Model = m
	res.WideGates = append(res.WideGates, triggers...)
	res.built = nil
	return nil
}

// WidestGatePort returns the largest output of n an L2Loss gate may read (a half, bfloat16,
// float or double output of known size; the first of equals) and its dtype; ok is false when
// n has none.
func WidestGatePort(n *graphdef.Node) (port int, dt graphdef.DataType, ok bool) {
	best := int64(-1)
	for p, t := range n.OutputTypes {
		if !reduceGateTypes[t] {
			continue
		}
		if b, known, _ := (graphdef.Tensor{Node: n, Port: p}).Bytes(); known && b > best {
			port, dt, best, ok = p, t, b, true
		}
	}
	return port, dt, ok
}
