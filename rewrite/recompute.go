package rewrite

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// Recomputation frees a tensor that sits idle on the GPU between its forward and its
// backward reads without moving it over the host link: its backward readers read a copy made
// by running its producer again, just before they need it. The DQN swap/recompute planner
// (papers/dqn-swap-recompute.txt) and gradient checkpointing trade compute for memory this
// way; tfswap uses it where the link cannot carry a swap without stalling the GPU.
//
// A recomputed tensor T is re-made by a chain of cheap, deterministic ops (batch
// normalisation, activations, element-wise arithmetic, pooling): T's producer and, where its
// inputs are not themselves still on the device at that time, their producers, up to
// recomputeDepth deep. The chain's other inputs (its leaves) must be live at the time of the
// recomputation anyway, because a later op reads them (a convolution's output kept for the
// batch-norm gradient, say), so the recomputation extends no lifetime. The chain's copies
// carry a control input from a gate of a trigger op that runs shortly before T's first
// backward read (the same preserved gate Identity as a swap-in's, so that Grappler cannot
// move the edge), and T's backward readers read the copy of T; its forward readers keep the
// original, which is freed after them.
//
// Copies are the original NodeDefs with the same op, device, inputs and attrs, plus a
// control input from the gate and the attrs every tfswap node has (RoleAttr "recompute",
// a unique idAttr so that no common-subexpression elimination merges a copy back into its
// original, and DoNotRemoveAttr). The ops are deterministic, so a copy computes the very same
// values: training is bit-identical.

// RecomputeModes are the values PlanOptions.Recompute accepts: "auto" (the default: the auto
// strategy recomputes where the simulator says it beats swapping alone; the other strategies,
// the papers' swap-only policies, never do), "off" and "max" (every candidate is recomputed
// and the strategy plans swaps for what remains: for experiments and tests).
var RecomputeModes = []string{"auto", "off", "max"}

// PlannedRecompute recomputes Tensor for its backward readers: Chain are the ops run again
// (producers first; the last makes Tensor), Uses the reads redirected to the copy, and
// Trigger the op whose gate releases the chain.
type PlannedRecompute struct {
	Tensor  graphdef.Tensor
	Bytes   int64
	Chain   []*graphdef.Node
	Uses    []graphdef.Use
	Trigger *graphdef.Node
	// Cost is the chain's predicted time in the unswapped step (ns).
	Cost int64
	// Also are other tensors the chain makes whose later reads read its copies too.
	Also []ServedTensor
}

// ServedTensor is a tensor whose later reads (Uses) read the copy a recomputation chain
// makes of it.
type ServedTensor struct {
	Tensor graphdef.Tensor
	Bytes  int64
	Uses   []graphdef.Use
}

// Recompute describes one recomputed tensor in a Result.
type Recompute struct {
	// Tensor is the recomputed tensor and Bytes its size.
	Tensor string
	Bytes  int64
	// Ops are the original ops run again, producers first, and Copies their copies' names.
	Ops    []string
	Copies []string
	// Trigger is the op whose completion releases the chain, Gate the node the copies'
	// control inputs come from.
	Trigger string
	Gate    string
	// Consumers are the nodes that read the recomputed copy.
	Consumers []string
	// Also are other tensors the chain makes whose later readers read its copies, with
	// their sizes and readers.
	Also []RecomputeServed `json:",omitempty"`
	// CostNS is the chain's predicted time (simulated, unswapped step).
	CostNS int64 `json:"cost_ns"`
}

// RecomputeServed is a tensor a recomputation chain makes for its own later readers.
type RecomputeServed struct {
	Tensor    string
	Bytes     int64
	Consumers []string
}

// recomputeNodeName returns the name of the copy of op in the recomputation of tensor t:
// "tfswap/<producer>_<port>/recompute/<op>".
func recomputeNodeName(t graphdef.Tensor, op *graphdef.Node) string {
	return Scope + t.Node.Name + "_" + strconv.Itoa(t.Port) + "/recompute/" + op.Name
}

// recomputeGateName returns the name of the gate that releases recomputations:
// "tfswap/<trigger>/recompute_gate". It differs from a swap-in's gate (GateNodeName) so that
// planning swaps on a graph with recomputations never adds a second node of the same name.
func recomputeGateName(trigger *graphdef.Node) string {
	return Scope + trigger.Name + "/recompute_gate"
}

// ApplyRecomputes adds the recomputations to model (whose graph is a's) and returns the new
// model and their descriptions. It changes only the inputs of the redirected readers, adds
// the copies and gates after the original nodes, and is deterministic.
func ApplyRecomputes(model *graphdef.Model, a *Analysis, rcs []*PlannedRecompute) (*graphdef.Model, []Recompute, error) {
	m, _, descs, err := ApplyRecomputesIndexed(model, a, rcs)
	return m, descs, err
}

// ApplyRecomputesIndexed is ApplyRecomputes, and also returns the new model's graph indexed
// (graphdef.NewGraph, which checks it; its Source is model's with " (recomputed)"), for a
// caller that would index it again.
func ApplyRecomputesIndexed(model *graphdef.Model, a *Analysis, rcs []*PlannedRecompute) (*graphdef.Model, *graphdef.Graph, []Recompute, error) {
	g := a.Graph
	out := model.Clone()
	newInputs := map[int]map[int]string{}
	var added []*npb.NodeDef
	gates := map[string]bool{}
	var descs []Recompute
	for _, rc := range rcs {
		t := rc.Tensor
		if rc.Trigger == nil || len(rc.Uses) == 0 || len(rc.Chain) == 0 || rc.Chain[len(rc.Chain)-1] != t.Node {
			return nil, nil, nil, fmt.Errorf("recomputation of %s: no trigger, no readers or a chain that does not end at its producer", t)
		}
		gate := recomputeGateName(rc.Trigger)
		if !gates[gate] {
			gn, err := gateNode(rc.Trigger, a.Opts)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("recomputation of %s: %v", t, err)
			}
			gn.Name = gate
			gn.Attr[idAttr] = &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(gate)}}
			gates[gate] = true
			added = append(added, gn)
		}
		d := Recompute{Tensor: t.String(), Bytes: rc.Bytes, Trigger: rc.Trigger.Name, Gate: gate, CostNS: rc.Cost}
		copyOf := map[*graphdef.Node]string{}
		for _, c := range rc.Chain {
			name := recomputeNodeName(t, c)
			copyOf[c] = name
			nd := proto.Clone(c.Def).(*npb.NodeDef)
			nd.Name = name
			for j, x := range c.Inputs {
				if cp, ok := copyOf[x.Node]; ok {
					nd.Input[j] = graphdef.Tensor{Node: &graphdef.Node{Name: cp}, Port: x.Port}.InputString()
				}
			}
			nd.Input = append(nd.Input, "^"+gate)
			if nd.Attr == nil {
				nd.Attr = map[string]*apb.AttrValue{}
			}
			nd.Attr[DoNotRemoveAttr] = &apb.AttrValue{Value: &apb.AttrValue_B{B: true}}
			nd.Attr[RoleAttr] = &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte("recompute")}}
			nd.Attr[idAttr] = &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(name)}}
			added = append(added, nd)
			d.Ops = append(d.Ops, c.Name)
			d.Copies = append(d.Copies, name)
		}
		redirect := func(x graphdef.Tensor, uses []graphdef.Use) ([]string, error) {
			cp, ok := copyOf[x.Node]
			if !ok {
				return nil, fmt.Errorf("recomputation of %s: its chain does not make %s", t, x)
			}
			src := graphdef.Tensor{Node: &graphdef.Node{Name: cp}, Port: x.Port}.InputString()
			seen := map[string]bool{}
			var names []string
			for _, u := range uses {
				if u.Node.Inputs[u.Input] != x {
					return nil, fmt.Errorf("recomputation of %s: input %d of %q does not read it", x, u.Input, u.Node.Name)
				}
				m := newInputs[u.Node.Index]
				if m == nil {
					m = map[int]string{}
					newInputs[u.Node.Index] = m
				}
				if _, dup := m[u.Input]; dup {
					return nil, fmt.Errorf("recomputation of %s: input %d of %q is redirected twice", x, u.Input, u.Node.Name)
				}
				m[u.Input] = src
				if !seen[u.Node.Name] {
					seen[u.Node.Name] = true
					names = append(names, u.Node.Name)
				}
			}
			return names, nil
		}
		var err error
		if d.Consumers, err = redirect(t, rc.Uses); err != nil {
			return nil, nil, nil, err
		}
		for _, x := range rc.Also {
			names, err := redirect(x.Tensor, x.Uses)
			if err != nil {
				return nil, nil, nil, err
			}
			d.Also = append(d.Also, RecomputeServed{Tensor: x.Tensor.String(), Bytes: x.Bytes, Consumers: names})
		}
		descs = append(descs, d)
	}
	for idx, m := range newInputs {
		nd := proto.Clone(g.Nodes[idx].Def).(*npb.NodeDef)
		for input, name := range m {
			nd.Input[input] = name
		}
		out.Graph.Node[idx] = nd
	}
	out.Graph.Node = append(out.Graph.Node, added...)
	index, err := graphdef.NewGraph(out.Graph, model.Source+" (recomputed)")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("internal error: the recomputed graph is invalid: %v", err)
	}
	return out, index, descs, nil
}

// recomputedOp returns the original op's name in a copy's name
// "tfswap/<producer>_<port>/recompute/<op>".
func recomputedOp(name string) string {
	const mark = "/recompute/"
	if i := strings.Index(name, mark); i >= 0 {
		return name[i+len(mark):]
	}
	return ""
}
