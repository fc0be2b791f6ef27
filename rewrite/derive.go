package rewrite

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/tfswap/tfswap/graphdef"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// byIndex orders nodes by index, for slices.SortStableFunc.
func byIndex(a, b *graphdef.Node) int { return cmp.Compare(a.Index, b.Index) }

// orderWaits returns the plan's waits in the order Apply adds their control inputs (by the
// waiting node's index, then the swapped tensor's topological position and port), without
// duplicates, and checks that every wait names a swapped tensor.
func orderWaits(plan *Plan) ([]Wait, error) {
	swapped := map[graphdef.Tensor]bool{}
	for _, ps := range plan.Swaps {
		swapped[ps.Tensor] = true
	}
	ws := append([]Wait(nil), PlanWaits(plan)...)
	sort.SliceStable(ws, func(i, j int) bool {
		if ws[i].Node.Index != ws[j].Node.Index {
			return ws[i].Node.Index < ws[j].Node.Index
		}
		ti, tj := ws[i].After, ws[j].After
		if ti.Node.TopoIndex != tj.Node.TopoIndex {
			return ti.Node.TopoIndex < tj.Node.TopoIndex
		}
		return ti.Port < tj.Port
	})
	var out []Wait
	for i, w := range ws {
		if !swapped[w.After] {
			return nil, fmt.Errorf("%q waits for the swap-out of %s, which the plan does not swap", w.Node.Name, w.After)
		}
		if i > 0 && ws[i-1].Node == w.Node && ws[i-1].After == w.After {
			continue
		}
		out = append(out, w)
	}
	return out, nil
}

// OrderSwaps returns the plan's swaps in the order Apply adds their nodes: by the producer's
// topological position, then port.
func OrderSwaps(plan *Plan) []PlannedSwap {
	swaps := append([]PlannedSwap(nil), plan.Swaps...)
	sort.SliceStable(swaps, func(i, j int) bool {
		ti, tj := swaps[i].Tensor, swaps[j].Tensor
		if ti.Node.TopoIndex != tj.Node.TopoIndex {
			return ti.Node.TopoIndex < tj.Node.TopoIndex
		}
		return ti.Port < tj.Port
	})
	return swaps
}

// DeriveGraph returns the indexed view of the graph Apply writes for plan, without copying
// or parsing a single NodeDef: it is the builder's graph (see build), which planners simulate
// to evaluate a candidate plan. The original nodes keep their indices and NodeDefs (the
// rewritten inputs are in the nodes' edges, not in their Def), the swap nodes follow in
// Apply's order, and the topological order and levels are recomputed as graphdef.NewGraph
// computes them. It is equivalent to graphdef.NewGraph(Apply(...).Model.Graph) for every
// purpose except Graph.Node (name lookup), which the derived graph does not support, the
// Def of an original node whose inputs the plan changes, and the Def of an added node: a
// template shared by the added nodes alike (their op, device and attrs, without a name,
// inputs or the per-node idAttr; see Built.Graph).
func DeriveGraph(a *Analysis, plan *Plan) (*graphdef.Graph, error) {
	b, err := Build(a, plan)
	if err != nil {
		return nil, err
	}
	return b.Graph, nil
}

// Built is a rewrite as Build makes it: the rewritten graph's indexed view (which a planner
// simulates) and what Write needs to write its GraphDef and describe it.
type Built struct {
	// Graph is the rewritten graph: a's original nodes (copies, same indices, same Defs)
	// followed by the added nodes, whose Defs are their templates until Write (shared
	// NodeDefs holding the op, device and attrs of added nodes alike, without names, inputs
	// or the per-node idAttr: see addedShare.template) and complete afterwards. The node's
	// Name, Inputs and ControlInputs give what a template leaves out.
	Graph *graphdef.Graph
	// a is the analysis of the graph the plan was built on, and plan the plan (for Write).
	a    *Analysis
	plan *Plan
	// n0 is the number of original nodes.
	n0 int
	// changed lists, in index order, the original nodes whose inputs the rewrite changes
	// (a data input redirected to a swap-in, or control inputs added by waits).
	changed []int
	// swaps and waits describe the rewrite for Result.
	swaps []Swap
	waits []WaitInfo
}

// Build is tfswap's one builder of rewritten graphs: it performs plan on a's graph and
// returns the rewritten graph as an indexed view (DeriveGraph hands it to the simulator;
// Apply writes its GraphDef from it and Verify checks it). It changes only the consumers
// the plan names, adds the swap nodes (a swap-out per swapped tensor, then per group a gate
// of the trigger unless the graph has it already, and the swap-in) after the original nodes
// in the order of the producers' topological positions, and is deterministic.
func Build(a *Analysis, plan *Plan) (*Built, error) {
	g := a.Graph
	swaps := OrderSwaps(plan)
	n0 := len(g.Nodes)
	// Count the added nodes.
	added := 0
	for _, ps := range swaps {
		added += 1 + 2*len(ps.Groups) // a swap-out, a swap-in per group, at most a gate per group
	}
	nodes := make([]*graphdef.Node, n0, n0+added)
	copies := make([]graphdef.Node, n0)
	for i, n := range g.Nodes {
		copies[i] = *n
		nodes[i] = &copies[i]
	}
	remap := func(n *graphdef.Node) *graphdef.Node { return nodes[n.Index] }
	// redirect[node][input] = the swap-in node that input now reads.
	type redirect struct {
		node, input int
		to          *graphdef.Node
	}
	var redirects []redirect
	b := &Built{a: a, plan: plan, n0: n0}
	sh := newAddedShare()
	gates := map[*graphdef.Node]*graphdef.Node{} // trigger -> its gate node
	extraCtlOut := map[int][]*graphdef.Node{}    // original node -> added control outputs
	// fresh fails when an added node's name is taken by an original node.
	fresh := func(name string) error {
		if g.Node(name) != nil {
			return &graphdef.Error{File: g.Source, Node: name, Msg: "the graph already has a node of the name tfswap gives a swap node"}
		}
		return nil
	}
	for _, ps := range swaps {
		t := ps.Tensor
		dt, ok := t.DataType()
		if !ok {
			return nil, fmt.Errorf("tensor %s: dtype unknown", t)
		}
		host := a.Host(t.Node)
		outName := SwapNodeName(t, "swap_out")
		if err := fresh(outName); err != nil {
			return nil, err
		}
		out, err := sh.derivedSwapNode(len(nodes), outName, sh.template("Identity", "swap_out", host.String(), dt, sh.outputShapeAttr(t.Node, t.Port)), dt)
		if err != nil {
			return nil, err
		}
		out.Inputs = []graphdef.Tensor{{Node: remap(t.Node), Port: t.Port}}
		nodes = append(nodes, out)
		sw := Swap{Tensor: t.String(), Producer: t.Node.Name, DType: graphdef.DataTypeName(dt), Shape: t.Shape(), Bytes: ps.Bytes, Host: host.String(), SwapOut: outName}
		for k, grp := range ps.Groups {
			if grp.Trigger == nil || len(grp.Uses) == 0 {
				return nil, fmt.Errorf("tensor %s: swap-in %d has no trigger or no consumers", t, k)
			}
			if err := a.checkTriggerDevice(grp); err != nil {
				return nil, fmt.Errorf("tensor %s: swap-in %d: %v", t, k, err)
			}
			inName := SwapNodeName(t, "swap_in_"+strconv.Itoa(k))
			if err := fresh(inName); err != nil {
				return nil, err
			}
			dev := host
			if a.Opts.Gate == GateDevice {
				dev = a.Device(grp.Uses[0].Node)
			}
			gate := gates[grp.Trigger]
			if gate == nil {
				if have := g.Node(GateNodeName(grp.Trigger)); have != nil {
					// A gate the graph has (an offload's) is shared.
					gate = remap(have)
				} else {
					tmpl, port, gdt, err := sh.gateTemplate(grp.Trigger, a.Opts)
					if err != nil {
						return nil, fmt.Errorf("tensor %s: %v", t, err)
					}
					gate, err = sh.derivedSwapNode(len(nodes), GateNodeName(grp.Trigger), tmpl, gdt)
					if err != nil {
						return nil, err
					}
					gate.Inputs = []graphdef.Tensor{{Node: remap(grp.Trigger), Port: port}}
					nodes = append(nodes, gate)
				}
				gates[grp.Trigger] = gate
			}
			in, err := sh.derivedSwapNode(len(nodes), inName, sh.template("Identity", "swap_in", dev.String(), dt, sh.outputShapeAttr(t.Node, t.Port)), dt)
			if err != nil {
				return nil, err
			}
			in.Inputs = []graphdef.Tensor{{Node: out, Port: 0}}
			in.ControlInputs = []*graphdef.Node{gate}
			if gate.Index < n0 {
				extraCtlOut[gate.Index] = append(extraCtlOut[gate.Index], in)
			} else {
				gate.ControlOutputs = append(gate.ControlOutputs, in)
			}
			out.Consumers[0] = append(out.Consumers[0], graphdef.Use{Node: in, Input: 0})
			si := SwapIn{Node: inName, Device: dev.String(), Trigger: grp.Trigger.Name, Gate: gate.Name}
			var seen map[string]bool // the consumers' names, once there are many
			minLevel := -1
			var relayed []graphdef.Use // gradient tuple Identities that read the swap-in through a relay
			for _, u := range grp.Uses {
				if u.Input >= len(u.Node.Inputs) || u.Node.Inputs[u.Input] != t {
					return nil, fmt.Errorf("tensor %s: input %d of %q does not read it", t, u.Input, u.Node.Name)
				}
				if grp.Trigger == u.Node {
					return nil, fmt.Errorf("tensor %s: consumer %q cannot trigger its own swap-in", t, u.Node.Name)
				}
				if isRole(u.Node, "gate") {
					// A gate the graph has (an offload's) reads its trigger's output only to
					// run once it exists, right after the trigger: it keeps reading it (read
					// from a swap-in, the gate would wait for a swap-in it may itself release).
					continue
				}
				if NeedsRelay(u.Node, a.ValueDead) {
					relayed = append(relayed, u)
				} else {
					redirects = append(redirects, redirect{u.Node.Index, u.Input, in})
				}
				if seen == nil && len(si.Consumers) >= 8 {
					seen = make(map[string]bool, len(grp.Uses))
					for _, c := range si.Consumers {
						seen[c] = true
					}
				}
				if seen != nil {
					if !seen[u.Node.Name] {
						seen[u.Node.Name] = true
						si.Consumers = append(si.Consumers, u.Node.Name)
					}
				} else if !slices.Contains(si.Consumers, u.Node.Name) {
					si.Consumers = append(si.Consumers, u.Node.Name)
				}
				if minLevel < 0 || u.Node.Level < minLevel {
					minLevel = u.Node.Level
				}
			}
			si.Distance = minLevel - t.Node.Level
			sw.SwapIns = append(sw.SwapIns, si)
			nodes = append(nodes, in)
			for j, u := range relayed {
				relayName := SwapNodeName(t, "swap_in_"+strconv.Itoa(k)+"_relay_"+strconv.Itoa(j))
				if err := fresh(relayName); err != nil {
					return nil, err
				}
				// The relay takes the tuple Identity's own device string, as written: an
				// Identity left to the placer gets a relay left to the placer, which puts both
				// where it puts the Identity (a.Device would name the planner's default GPU,
				// which a session without one cannot place).
				relay, err := sh.derivedSwapNode(len(nodes), relayName, sh.template("Identity", RelayRole, u.Node.Def.GetDevice(), dt, sh.outputShapeAttr(t.Node, t.Port)), dt)
				if err != nil {
					return nil, err
				}
				relay.Inputs = []graphdef.Tensor{{Node: in, Port: 0}}
				in.Consumers[0] = append(in.Consumers[0], graphdef.Use{Node: relay, Input: 0})
				redirects = append(redirects, redirect{u.Node.Index, u.Input, relay})
				nodes = append(nodes, relay)
			}
		}
		b.swaps = append(b.swaps, sw)
	}
	waits, err := orderWaits(plan)
	if err != nil {
		return nil, err
	}
	swapOut := map[graphdef.Tensor]*graphdef.Node{}
	for _, n := range nodes[n0:] {
		if isRole(n, "swap_out") {
			swapOut[graphdef.Tensor{Node: g.Nodes[n.Inputs[0].Node.Index], Port: n.Inputs[0].Port}] = n
		}
	}
	extraIn := make([][]*graphdef.Node, n0) // original node -> added control inputs (waits)
	for _, w := range waits {
		so := swapOut[w.After]
		extraIn[w.Node.Index] = append(extraIn[w.Node.Index], so)
		b.waits = append(b.waits, WaitInfo{Node: w.Node.Name, SwapOut: so.Name})
	}
	// Which original nodes change inputs, and which producers lose consumers.
	// The redirects sorted by node (stable: of two for the same input, the later wins), and
	// first[i] the first of node i's: one array for the whole graph, no map per node.
	slices.SortStableFunc(redirects, func(x, y redirect) int { return cmp.Compare(x.node, y.node) })
	first := make([]int32, n0+1)
	for _, r := range redirects {
		first[r.node+1]++
	}
	for i := 0; i < n0; i++ {
		first[i+1] += first[i]
	}
	// redirected returns the swap-in input j of original node i reads instead, or nil.
	redirected := func(i, j int) *graphdef.Node {
		var to *graphdef.Node
		for _, r := range redirects[first[i]:first[i+1]] {
			if r.input == j {
				to = r.to
			}
		}
		return to
	}
	for i := 0; i < n0; i++ {
		if first[i] != first[i+1] || extraIn[i] != nil {
			b.changed = append(b.changed, i)
		}
	}
	// Rebuild the edge lists of the original nodes to point at the copies. Each node's lists
	// are windows of one array per kind, each window capped at the capacity a list of its
	// own would have: a million-node graph's lists are a few allocations, not millions.
	var nIn, nCtlIn, nCtlOut, nPorts, nUses int
	for i, orig := range g.Nodes {
		nIn += len(orig.Inputs)
		nCtlIn += len(orig.ControlInputs) + len(extraIn[i])
		nCtlOut += len(orig.ControlOutputs)
		nPorts += len(orig.Consumers)
		for _, uses := range orig.Consumers {
			nUses += len(uses)
		}
	}
	for _, l := range extraCtlOut {
		nCtlOut += len(l)
	}
	inSlab := make([]graphdef.Tensor, nIn)
	ctlInSlab := make([]*graphdef.Node, nCtlIn)
	ctlOutSlab := make([]*graphdef.Node, nCtlOut)
	portSlab := make([][]graphdef.Use, nPorts)
	useSlab := make([]graphdef.Use, nUses)
	for i := 0; i < n0; i++ {
		c := &copies[i]
		orig := g.Nodes[i]
		ins := inSlab[:len(orig.Inputs):len(orig.Inputs)]
		inSlab = inSlab[len(orig.Inputs):]
		for j, t := range orig.Inputs {
			if to := redirected(i, j); to != nil {
				ins[j] = graphdef.Tensor{Node: to, Port: 0}
				to.Consumers[0] = append(to.Consumers[0], graphdef.Use{Node: c, Input: j})
				continue
			}
			ins[j] = graphdef.Tensor{Node: remap(t.Node), Port: t.Port}
		}
		c.Inputs = ins
		ei := extraIn[i]
		var eo []*graphdef.Node
		if len(extraCtlOut) > 0 {
			eo = extraCtlOut[i]
		}
		if len(orig.ControlInputs) > 0 || len(ei) > 0 {
			k := len(orig.ControlInputs) + len(ei)
			ctl := ctlInSlab[:len(orig.ControlInputs):k]
			ctlInSlab = ctlInSlab[k:]
			for j, p := range orig.ControlInputs {
				ctl[j] = remap(p)
			}
			for _, so := range ei {
				ctl = append(ctl, so)
				so.ControlOutputs = append(so.ControlOutputs, c)
			}
			c.ControlInputs = ctl
		}
		if len(orig.ControlOutputs) > 0 || len(eo) > 0 {
			k := len(orig.ControlOutputs) + len(eo)
			ctl := ctlOutSlab[:0:k]
			ctlOutSlab = ctlOutSlab[k:]
			for _, p := range orig.ControlOutputs {
				ctl = append(ctl, remap(p))
			}
			c.ControlOutputs = append(ctl, eo...)
		}
		if orig.Consumers != nil {
			cons := portSlab[:len(orig.Consumers):len(orig.Consumers)]
			portSlab = portSlab[len(orig.Consumers):]
			for port, uses := range orig.Consumers {
				if len(uses) == 0 {
					continue
				}
				l := useSlab[:0:len(uses)]
				useSlab = useSlab[len(uses):]
				for _, u := range uses {
					if redirected(u.Node.Index, u.Input) != nil {
						continue
					}
					l = append(l, graphdef.Use{Node: remap(u.Node), Input: u.Input})
				}
				cons[port] = l
			}
			c.Consumers = cons
		}
	}
	// A swap-out reads its producer and a gate its trigger: each is the last consumer of what
	// it reads (highest index).
	for _, n := range nodes[n0:] {
		if isRole(n, "swap_out") || isRole(n, "gate") {
			p := n.Inputs[0]
			for len(p.Node.Consumers) <= p.Port {
				p.Node.Consumers = append(p.Node.Consumers, nil)
			}
			p.Node.Consumers[p.Port] = append(p.Node.Consumers[p.Port], graphdef.Use{Node: n, Input: 0})
		}
	}
	// The consumers of a swap-in were appended in node order already; sort to be sure.
	for _, n := range nodes[n0:] {
		slices.SortStableFunc(n.ControlOutputs, byIndex)
		slices.SortStableFunc(n.Consumers[0], func(a, b graphdef.Use) int {
			if c := cmp.Compare(a.Node.Index, b.Node.Index); c != 0 {
				return c
			}
			return cmp.Compare(a.Input, b.Input)
		})
	}
	for i := range extraCtlOut {
		slices.SortStableFunc(nodes[i].ControlOutputs, byIndex)
	}
	newDefs := make([]*npb.NodeDef, 0, len(nodes)-n0)
	for _, n := range nodes[n0:] {
		newDefs = append(newDefs, n.Def)
	}
	def := &gpb.GraphDef{Node: append(append([]*npb.NodeDef(nil), g.Def.GetNode()...), newDefs...), Versions: g.Def.GetVersions(), Library: g.Def.GetLibrary()}
	out := &graphdef.Graph{Def: def, Source: g.Source + " (planned)", Nodes: nodes}
	if err := out.SortTopo(); err != nil {
		return nil, err
	}
	b.Graph = out
	return b, nil
}

// derivedSwapNode builds the indexed node of the added node name (a swap node or a gate)
// from its template nd (see template), as graphdef.NewGraph would from its NodeDef, its
// dtypes and shapes shared through sh with the other nodes of the same values. The node's
// Def is the template until Write gives it its own.
func (sh *addedShare) derivedSwapNode(index int, name string, nd *npb.NodeDef, dt graphdef.DataType) (*graphdef.Node, error) {
	dev, ok := sh.devices[nd.GetDevice()]
	if !ok {
		var err error
		if dev, err = graphdef.ParseDevice(nd.GetDevice()); err != nil {
			return nil, err
		}
		sh.devices[nd.GetDevice()] = dev
	}
	types, ok := sh.types[dt]
	if !ok {
		types = []graphdef.DataType{dt}
		sh.types[dt] = types
	}
	n := &graphdef.Node{Index: index, Def: nd, Name: name, Op: nd.GetOp(), Device: dev,
		OutputTypes: types, Consumers: make([][]graphdef.Use, 1)}
	if v, ok := nd.GetAttr()["_output_shapes"]; ok && v.GetList() != nil && len(v.GetList().GetShape()) == 1 {
		if shapes, ok := sh.shapes[v]; ok {
			n.OutputShapes = shapes
			return n, nil
		}
		s := v.GetList().GetShape()[0]
		n.OutputShapes = make([][]int64, 1)
		if !s.GetUnknownRank() {
			dims := make([]int64, len(s.GetDim()))
			for j, d := range s.GetDim() {
				dims[j] = d.GetSize()
			}
			n.OutputShapes[0] = dims
		}
		sh.shapes[v] = n.OutputShapes
	}
	return n, nil
}

// isRole reports whether n is a tfswap node with the given role.
func isRole(n *graphdef.Node, role string) bool {
	return string(n.Def.GetAttr()[RoleAttr].GetS()) == role
}
