package rewrite

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// Tuple Identities (issue 14 item 5). tf.gradients joins the gradients of one op's inputs
// with a tuple: a NoOp (".../tuple/group_deps") with a control input from each gradient, and
// an Identity of each gradient (".../tuple/control_dependency") with a control input from
// that NoOp. TensorFlow's Identity kernel forwards its input's buffer, and TensorFlow's
// default Grappler passes (the dependency optimizer) remove such Identities before the graph
// runs, but Grappler's VirtualCluster counts each as a buffer of its own, as large as the
// gradient, beside its input. BypassTupleIdentities removes them from the graph tfswap
// writes, without changing what any op computes or when it may run.

// TupleIdentities returns the tf.gradients tuple Identities of g that BypassTupleIdentities
// may remove, in graph order: each is an Identity with one data input that is not a reference
// (nor its output), read by at least one data input, with a control input from a NoOp that has no
// data inputs and a control input from the Identity's input's producer (the tuple's group);
// on the device its input's producer is on; outside while loops and conditional branches
// (a.InLoop, a.Conditional), its producer and readers too; read by no control-flow op
// (Enter, Merge, Switch and the like, whose inputs the rewrite never redirects) nor by a
// preserved node (Options.Preserve, whose inputs tfswap never redirects); not preserved
// itself; not named by keep (the step's fetches and feeds, as "name", "name:port" or
// "^name"); and not reading another such Identity (the outer one of two stays).
func TupleIdentities(g *graphdef.Graph, a *Analysis, keep []string) []*graphdef.Node {
	kept := map[string]bool{}
	for _, k := range keep {
		if name, _, _, err := graphdef.ParseInput(strings.TrimPrefix(k, "^")); err == nil {
			kept[name] = true
		}
	}
	ok := make([]bool, len(g.Nodes))
	for _, n := range g.Nodes {
		if n.Op != "Identity" || len(n.Inputs) != 1 || len(n.ControlInputs) == 0 || kept[n.Name] || a.Preserved(n) {
			continue
		}
		x := n.Inputs[0].Node
		if n.Def.GetDevice() != x.Def.GetDevice() || len(n.Consumers) == 0 || len(n.Consumers[0]) == 0 {
			continue
		}
		// The Identity of a reference (a TF1 variable) reads the variable when it runs; its
		// readers must not read the variable itself later instead.
		if dt, ok := n.Inputs[0].DataType(); len(n.OutputTypes) != 1 || graphdef.IsRef(n.OutputTypes[0]) || !ok || graphdef.IsRef(dt) {
			continue
		}
		if a.InLoop(n) || a.Conditional(n) || a.InLoop(x) || a.Conditional(x) {
			continue
		}
		readers := true
		for _, u := range n.Consumers[0] {
			// A control-flow op's inputs are never redirected (notConsumers), nor a preserved
			// reader's, nor a reader's in a loop or conditional branch.
			if notConsumers[u.Node.Op] || a.Preserved(u.Node) || a.InLoop(u.Node) || a.Conditional(u.Node) {
				readers = false
			}
		}
		if !readers {
			continue
		}
		grouped := false
		for _, c := range n.ControlInputs {
			if c.Op == "NoOp" && len(c.Inputs) == 0 && slices.Contains(c.ControlInputs, x) {
				grouped = true
				break
			}
		}
		ok[n.Index] = grouped
	}
	var out []*graphdef.Node
	for _, n := range g.Nodes {
		if ok[n.Index] && !ok[n.Inputs[0].Node.Index] {
			out = append(out, n)
		}
	}
	return out
}

// BypassTupleIdentities returns a copy of model in which each of ids (TupleIdentities of
// g) is bypassed, where g is the graph of model or of a model whose nodes model holds at the
// same positions, with the same data inputs (model may add control inputs, such as ordering
// edges): every data input that read the Identity reads the
// Identity's input instead, and its node gains a control input from the Identity's name
// (once), which now names a NoOp on the Identity's device with the Identity's control inputs
// and its attrs whose names begin with "_" (but "_output_shapes"). A reader therefore still
// waits for what the Identity waited for (the tuple's group, which waits for the Identity's
// input), control inputs from the Identity's name keep their meaning, and the reader reads
// the very tensor the Identity forwarded: the values computed are unchanged. model is not
// changed; the copy shares the NodeDefs it did not change.
func BypassTupleIdentities(model *graphdef.Model, g *graphdef.Graph, ids []*graphdef.Node) *graphdef.Model {
	out := model.Clone()
	if len(ids) == 0 {
		return out
	}
	src := map[string]string{} // the Identity's output as an input string -> its input's
	for _, id := range ids {
		src[graphdef.Tensor{Node: id, Port: 0}.InputString()] = id.Def.GetInput()[0]
		// An input may also name port 0 explicitly.
		src[id.Name+":0"] = id.Def.GetInput()[0]
	}
	readers := map[int]bool{}
	for _, id := range ids {
		for _, u := range id.Consumers[0] {
			readers[u.Node.Index] = true
		}
		nd := &npb.NodeDef{Name: id.Name, Op: "NoOp", Device: id.Def.GetDevice()}
		for _, in := range id.Def.GetInput() {
			if strings.HasPrefix(in, "^") {
				nd.Input = append(nd.Input, in)
			}
		}
		for k, v := range id.Def.GetAttr() {
			if strings.HasPrefix(k, "_") && k != "_output_shapes" {
				if nd.Attr == nil {
					nd.Attr = map[string]*apb.AttrValue{}
				}
				nd.Attr[k] = v
			}
		}
		out.Graph.Node[id.Index] = nd
	}
	for i := range readers {
		c := proto.Clone(model.Graph.Node[i]).(*npb.NodeDef)
		var data, ctrl, added []string
		for _, in := range c.GetInput() {
			if strings.HasPrefix(in, "^") {
				ctrl = append(ctrl, in)
				continue
			}
			if s, ok := src[in]; ok {
				name, _, _, _ := graphdef.ParseInput(in)
				if w := "^" + name; !slices.Contains(added, w) {
					added = append(added, w)
				}
				in = s
			}
			data = append(data, in)
		}
		for _, w := range added {
			if !slices.Contains(ctrl, w) {
				ctrl = append(ctrl, w)
			}
		}
		c.Input = append(data, ctrl...)
		out.Graph.Node[i] = c
	}
	return out
}

// BypassWritten bypasses, in res's graph (a rewrite, by Apply, of the graph whose tuple
// Identities names are: TupleIdentities of the graph planned), those of names that are
// still Identities there whose input is made on their device by a node that is not a
// relay, and that no node tfswap added reads (a swap-out, gate, recomputed copy or spacer,
// which read the tensor they name and wait for nothing else): each as BypassTupleIdentities
// does, so a reader of the Identity reads what the Identity read (the tensor itself, a
// swap-in or a recomputed copy of it) and waits for the Identity's name, now a NoOp. The
// plan was chosen with the Identities in its graph (tfswap's accounting models them as
// forwarding their input's buffer, so its figures barely change); the bypass then removes
// what Grappler's VirtualCluster counts as buffers of their own. A swap-in's recorded
// readers (SwapIn.Consumers) follow: a bypassed Identity among them is replaced by its
// readers. It returns the names bypassed, in the order of names, and records them in
// res.Bypassed; res is unchanged when it returns an error or none.
func BypassWritten(res *Result, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	g, err := graphdef.NewGraph(res.Model.Graph, "rewritten")
	if err != nil {
		return nil, fmt.Errorf("rewritten graph is invalid: %v", err)
	}
	var ids []*graphdef.Node
	var done []string
	readers := map[string][]string{}
	for _, name := range names {
		n := g.Node(name)
		if n == nil || n.Op != "Identity" || len(n.Inputs) != 1 || len(n.Consumers) == 0 || len(n.Consumers[0]) == 0 || n.Def.GetAttr()[RoleAttr] != nil || strings.HasPrefix(n.Name, Scope) {
			continue
		}
		x := n.Inputs[0].Node
		role := string(x.Def.GetAttr()[RoleAttr].GetS())
		if (x.Def.GetDevice() != n.Def.GetDevice() && role != "swap_in") || role == RelayRole {
			continue
		}
		ok := true
		var rs []string
		for _, u := range n.Consumers[0] {
			if u.Node.Def.GetAttr()[RoleAttr] != nil || strings.HasPrefix(u.Node.Name, Scope) || notConsumers[u.Node.Op] {
				ok = false
				break
			}
			if !slices.Contains(rs, u.Node.Name) {
				rs = append(rs, u.Node.Name)
			}
		}
		if !ok || slices.ContainsFunc(ids, func(o *graphdef.Node) bool { return o == x }) {
			continue
		}
		ids = append(ids, n)
		done = append(done, name)
		readers[name] = rs
	}
	if len(ids) == 0 {
		return nil, nil
	}
	res.Model = BypassTupleIdentities(res.Model, g, ids)
	for i := range res.Swaps {
		for j := range res.Swaps[i].SwapIns {
			si := &res.Swaps[i].SwapIns[j]
			var cs []string
			for _, c := range si.Consumers {
				rs, ok := readers[c]
				if !ok {
					rs = []string{c}
				}
				for _, r := range rs {
					if !slices.Contains(cs, r) {
						cs = append(cs, r)
					}
				}
			}
			si.Consumers = cs
		}
	}
	res.Bypassed = append(res.Bypassed, done...)
	res.built = nil
	return done, nil
}
