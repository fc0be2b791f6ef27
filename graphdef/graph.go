package graphdef

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/internal/minheap"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// Graph is an indexed, validated view of a GraphDef. It is read-only: build a new Graph
// after changing the GraphDef.
type Graph struct {
	// Def is the GraphDef the view was built from.
	Def *gpb.GraphDef
	// Source names where the graph came from, for errors.
	Source string
	// Nodes are the graph's nodes in GraphDef order; Nodes[i].Index == i.
	Nodes []*Node
	// Topo is a topological order of the nodes (data and control edges, loop back edges
	// from NextIteration excluded), stable: among nodes whose inputs are all placed, the one
	// earliest in the GraphDef comes first.
	Topo []*Node

	byName map[string]*Node
}

// Node is one node of a Graph with its edges resolved.
type Node struct {
	// Index is the node's position in the GraphDef.
	Index int
	// Def is the node's NodeDef. It must not be mutated.
	Def *npb.NodeDef
	// Name and Op are Def's name and op.
	Name, Op string
	// Device is Def's device string parsed; the zero Device (IsZero) when it is empty.
	Device Device
	// Inputs are the tensors read by the node's data inputs, in input order.
	Inputs []Tensor
	// ControlInputs are the nodes the node has control dependencies on, in input order.
	ControlInputs []*Node
	// Consumers lists, per output port, the data inputs that read that output, ordered by
	// consumer index and then input index.
	Consumers [][]Use
	// ControlOutputs are the nodes that have a control dependency on this one, by index.
	ControlOutputs []*Node
	// OutputTypes are the dtypes of the node's outputs; nil when they are not known (see
	// TypeError).
	OutputTypes []DataType
	// TypeError says why OutputTypes is nil, or is nil.
	TypeError error
	// OutputShapes are the shapes from the node's _output_shapes attr, per port: nil for a
	// port whose shape (or rank) is unknown; dimensions of -1 are unknown. OutputShapes is nil
	// when the attr is missing or does not match the outputs.
	OutputShapes [][]int64
	// TopoIndex is the node's position in Graph.Topo.
	TopoIndex int
	// Level is the length of the longest path of data and control edges from a node with no
	// inputs to this node (0 for such nodes): the "topological level" distances are counted in.
	Level int

	reach *reachIndex // the graph's reachability labels (Reaches), set by SortTopo
}

// Tensor names one output of a node.
type Tensor struct {
	Node *Node
	Port int
}

// Use is one data input of a node: Node's input number Input.
type Use struct {
	Node  *Node
	Input int
}

// String returns the tensor's name, "node:port".
func (t Tensor) String() string { return t.Node.Name + ":" + strconv.Itoa(t.Port) }

// InputString returns the tensor as a NodeDef input string: "node" for port 0, else "node:port".
func (t Tensor) InputString() string {
	if t.Port == 0 {
		return t.Node.Name
	}
	return t.String()
}

// DataType returns the tensor's dtype and whether it is known.
func (t Tensor) DataType() (DataType, bool) {
	if t.Port < len(t.Node.OutputTypes) {
		return t.Node.OutputTypes[t.Port], true
	}
	return 0, false
}

// Shape returns the tensor's shape from _output_shapes, or nil when unknown.
func (t Tensor) Shape() []int64 {
	if t.Port < len(t.Node.OutputShapes) {
		return t.Node.OutputShapes[t.Port]
	}
	return nil
}

// Consumers returns the data inputs that read the tensor.
func (t Tensor) Consumers() []Use {
	if t.Port < len(t.Node.Consumers) {
		return t.Node.Consumers[t.Port]
	}
	return nil
}

// Bytes returns the tensor's size in bytes. ok is false, with a reason, when the size is not
// known: unknown dtype or shape, a dimension of unknown size, or a dtype without a fixed
// element size (string, resource, variant).
func (t Tensor) Bytes() (n int64, ok bool, reason string) {
	dt, ok := t.DataType()
	if !ok {
		if t.Node.TypeError != nil {
			return 0, false, "dtype unknown: " + t.Node.TypeError.Error()
		}
		return 0, false, "dtype unknown"
	}
	elem, ok := ElementBytes(dt)
	if !ok {
		return 0, false, "dtype " + DataTypeName(dt) + " has no fixed size"
	}
	if t.Node.OutputShapes == nil {
		return 0, false, "no _output_shapes"
	}
	shape := t.Shape()
	if shape == nil {
		return 0, false, "shape unknown"
	}
	for _, d := range shape {
		if d < 0 {
			return 0, false, "shape " + FormatShape(shape) + " is not fully known"
		}
	}
	// NewGraph refused shapes over MaxTensorBytes, so the product cannot wrap around; a
	// Graph whose nodes were built by hand is checked all the same.
	n = elem
	for _, d := range shape {
		if n, ok = MulBytes(n, d, MaxTensorBytes); !ok {
			return 0, false, "shape " + FormatShape(shape) + " is larger than 1 PiB"
		}
	}
	return n, true, ""
}

// FormatShape formats a shape as TensorFlow prints it: "(8, 32, 32, 3)", "?" for unknown dims.
func FormatShape(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		if d < 0 {
			parts[i] = "?"
		} else {
			parts[i] = strconv.FormatInt(d, 10)
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Node returns the node with the given name, or nil.
func (g *Graph) Node(name string) *Node { return g.byName[name] }

// ParseInput splits a NodeDef input string into the producer's name, its output port, and
// whether it is a control input ("^name").
func ParseInput(s string) (name string, port int, control bool, err error) {
	if strings.HasPrefix(s, "^") {
		if len(s) == 1 {
			return "", 0, true, fmt.Errorf("empty control input")
		}
		return s[1:], -1, true, nil
	}
	if s == "" {
		return "", 0, false, fmt.Errorf("empty input")
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		p, err := strconv.Atoi(s[i+1:])
		if err != nil || p < 0 {
			return "", 0, false, fmt.Errorf("input %q: bad output port %q", s, s[i+1:])
		}
		return s[:i], p, false, nil
	}
	return s, 0, false, nil
}

// isLoopBackEdge reports whether an edge out of op is a while loop's back edge, which
// TensorFlow's executor and topological orders skip.
func isLoopBackEdge(op string) bool { return op == "NextIteration" || op == "RefNextIteration" }

// NewGraph indexes and validates def. source names the graph in errors (usually its file).
// It fails, with an *Error naming the node, on: nodes without a name or op, names TensorFlow
// rejects (ValidNodeName), duplicate node names, inputs that name missing nodes or ports,
// data inputs after control inputs, device strings that do not parse, dtype attrs with values TensorFlow does not define, and cycles.
// Nodes whose op is not in TensorFlow's registry (custom ops, function calls) are accepted
// with unknown output types.
func NewGraph(def *gpb.GraphDef, source string) (*Graph, error) {
	g := &Graph{Def: def, Source: source, byName: make(map[string]*Node, len(def.GetNode()))}
	g.Nodes = make([]*Node, len(def.GetNode()))
	// The nodes are allocated together, and so are their data inputs (each node's a slice
	// of one array, capped so that an append copies); the devices, and the shapes of the
	// nodes that share one _output_shapes value (Parse shares equal ones), are parsed once.
	// On a large graph, one allocation a node and input instead of several and shared shapes
	// are a large part of the index's time and memory.
	slab := make([]Node, len(def.GetNode()))
	inputs := 0
	for _, nd := range def.GetNode() {
		inputs += len(nd.GetInput())
	}
	arena := make([]Tensor, 0, inputs)
	devices := map[string]Device{}
	shapes := map[*apb.AttrValue][][]int64{}
	for i, nd := range def.GetNode() {
		if nd.GetName() == "" {
			return nil, errorf(source, "", "node #%d has no name", i)
		}
		if !ValidNodeName(nd.GetName()) {
			return nil, errorf(source, nd.GetName(), "is not a name TensorFlow accepts (parts matching [A-Za-z0-9.][A-Za-z0-9_./-]*, joined by '>')")
		}
		if nd.GetOp() == "" {
			return nil, errorf(source, nd.GetName(), "has no op")
		}
		if prev, dup := g.byName[nd.GetName()]; dup {
			return nil, errorf(source, nd.GetName(), "duplicate node name (nodes #%d and #%d)", prev.Index, i)
		}
		dev, ok := devices[nd.GetDevice()]
		if !ok {
			var err error
			if dev, err = ParseDevice(nd.GetDevice()); err != nil {
				return nil, &Error{File: source, Node: nd.GetName(), Msg: "bad device", Err: err}
			}
			devices[nd.GetDevice()] = dev
		}
		n := &slab[i]
		*n = Node{Index: i, Def: nd, Name: nd.GetName(), Op: nd.GetOp(), Device: dev}
		if err := checkDataTypes(nd); err != nil {
			return nil, &Error{File: source, Node: nd.GetName(), Err: err}
		}
		n.OutputTypes, n.TypeError = outputTypes(nd)
		if n.TypeError != nil {
			n.OutputTypes = nil
		}
		n.OutputShapes = sharedOutputShapes(shapes, nd, len(n.OutputTypes), n.TypeError == nil)
		if err := checkSizes(n); err != nil {
			return nil, &Error{File: source, Node: nd.GetName(), Err: err}
		}
		g.byName[n.Name] = n
		g.Nodes[i] = n
	}
	for _, n := range g.Nodes {
		seenControl := false
		first := len(arena)
		for j, in := range n.Def.GetInput() {
			name, port, control, err := ParseInput(in)
			if err != nil {
				return nil, &Error{File: source, Node: n.Name, Msg: fmt.Sprintf("input %d", j), Err: err}
			}
			p := g.byName[name]
			if p == nil {
				return nil, errorf(source, n.Name, "input %d %q names node %q, which does not exist", j, in, name)
			}
			if control {
				seenControl = true
				n.ControlInputs = append(n.ControlInputs, p)
				p.ControlOutputs = append(p.ControlOutputs, n)
				continue
			}
			if seenControl {
				return nil, errorf(source, n.Name, "data input %d %q comes after a control input", j, in)
			}
			if p.OutputTypes != nil && port >= len(p.OutputTypes) {
				return nil, errorf(source, n.Name, "input %d %q reads output %d of %q, which has %d output(s)", j, in, port, name, len(p.OutputTypes))
			}
			for len(p.Consumers) <= port {
				p.Consumers = append(p.Consumers, nil)
			}
			p.Consumers[port] = append(p.Consumers[port], Use{Node: n, Input: len(arena) - first})
			arena = append(arena, Tensor{Node: p, Port: port})
		}
		if len(arena) > first {
			n.Inputs = arena[first:len(arena):len(arena)]
		}
	}
	for _, n := range g.Nodes {
		if n.OutputTypes != nil {
			for len(n.Consumers) < len(n.OutputTypes) {
				n.Consumers = append(n.Consumers, nil)
			}
		}
		sort.SliceStable(n.ControlOutputs, func(a, b int) bool { return n.ControlOutputs[a].Index < n.ControlOutputs[b].Index })
	}
	if err := g.SortTopo(); err != nil {
		return nil, err
	}
	return g, nil
}

// checkDataTypes fails when a type or list(type) attr of nd holds a value that is not a dtype.
func checkDataTypes(nd *npb.NodeDef) error {
	valid := true
	for _, v := range nd.GetAttr() {
		valid = valid && validDataTypes(v)
	}
	if valid {
		return nil
	}
	// The first invalid attr in key order is the one reported.
	keys := make([]string, 0, len(nd.GetAttr()))
	for k := range nd.GetAttr() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := nd.GetAttr()[k]
		if v.GetList() != nil {
			for _, dt := range v.GetList().GetType() {
				if !ValidDataType(dt) {
					return fmt.Errorf("attr %q holds unknown dtype %d", k, int32(dt))
				}
			}
		}
		if tv, isType := v.GetValue().(*apb.AttrValue_Type); isType {
			if t := tv.Type; !ValidDataType(t) {
				return fmt.Errorf("attr %q holds unknown dtype %d", k, int32(t))
			}
		}
	}
	return nil
}

// validDataTypes reports whether every dtype attr value v holds is one TensorFlow defines.
func validDataTypes(v *apb.AttrValue) bool {
	if v.GetList() != nil {
		for _, dt := range v.GetList().GetType() {
			if !ValidDataType(dt) {
				return false
			}
		}
	}
	if tv, isType := v.GetValue().(*apb.AttrValue_Type); isType && !ValidDataType(tv.Type) {
		return false
	}
	return true
}

// outputShapes reads the _output_shapes attr of nd, which must list one shape per output.
func outputShapes(nd *npb.NodeDef, nOutputs int, typesKnown bool) [][]int64 {
	return sharedOutputShapes(nil, nd, nOutputs, typesKnown)
}

// sharedOutputShapes is outputShapes, the shapes of one attr value parsed once and shared
// through cache (nil: not shared). Node.OutputShapes is never mutated in place.
func sharedOutputShapes(cache map[*apb.AttrValue][][]int64, nd *npb.NodeDef, nOutputs int, typesKnown bool) [][]int64 {
	v, ok := nd.GetAttr()["_output_shapes"]
	if !ok || v.GetList() == nil {
		return nil
	}
	shapes := v.GetList().GetShape()
	if typesKnown && len(shapes) != nOutputs {
		return nil
	}
	if out, ok := cache[v]; ok {
		return out
	}
	out := make([][]int64, len(shapes))
	if cache != nil {
		cache[v] = out
	}
	for i, s := range shapes {
		if s.GetUnknownRank() {
			continue
		}
		dims := make([]int64, len(s.GetDim()))
		for j, d := range s.GetDim() {
			dims[j] = d.GetSize()
		}
		out[i] = dims
	}
	return out
}

// SortTopo computes Topo, and each node's TopoIndex and Level, from the nodes' edges with
// Kahn's algorithm, taking ready nodes in GraphDef order, and fails on a cycle. NewGraph calls
// it; a package that builds a Graph's nodes and edges itself (a planner deriving a rewritten
// graph without serialising it) calls it to order them.
func (g *Graph) SortTopo() error {
	n := len(g.Nodes)
	indeg := make([]int, n)
	for _, nd := range g.Nodes {
		nd.Level = 0
		for _, in := range nd.Inputs {
			if !isLoopBackEdge(in.Node.Op) {
				indeg[nd.Index]++
			}
		}
		for _, c := range nd.ControlInputs {
			if !isLoopBackEdge(c.Op) {
				indeg[nd.Index]++
			}
		}
	}
	// The ready nodes are taken least index first. Those at or after the scan's cursor are
	// marked ahead and found by moving the cursor; only those readied behind it (a node
	// whose input comes later in GraphDef order, such as a planner's added node) go to the
	// heap, whose nodes are therefore all before the cursor and taken first.
	var ready minheap.Heap[minheap.Int]
	ahead := make([]bool, n)
	for i := range g.Nodes {
		ahead[i] = indeg[i] == 0
	}
	cursor := 0
	g.Topo = make([]*Node, 0, n)
	ri := &reachIndex{g: g}
	for _, nd := range g.Nodes {
		nd.reach = ri
	}
	release := func(from, to *Node) {
		if to.Level < from.Level+1 {
			to.Level = from.Level + 1
		}
		indeg[to.Index]--
		if indeg[to.Index] == 0 {
			if to.Index >= cursor {
				ahead[to.Index] = true
			} else {
				ready.Push(minheap.Int(to.Index))
			}
		}
	}
	for {
		var next int
		if ready.Len() > 0 {
			next = int(ready.Pop())
		} else {
			for cursor < n && !ahead[cursor] {
				cursor++
			}
			if cursor == n {
				break
			}
			next = cursor
			cursor++
		}
		nd := g.Nodes[next]
		nd.TopoIndex = len(g.Topo)
		g.Topo = append(g.Topo, nd)
		if isLoopBackEdge(nd.Op) {
			continue
		}
		for _, uses := range nd.Consumers {
			for _, u := range uses {
				release(nd, u.Node)
			}
		}
		for _, c := range nd.ControlOutputs {
			release(nd, c)
		}
	}
	if len(g.Topo) != n {
		// Name a node on a cycle: follow unplaced inputs until one repeats.
		var start *Node
		for _, nd := range g.Nodes {
			if indeg[nd.Index] > 0 {
				start = nd
				break
			}
		}
		cycle := findCycle(start, indeg)
		return errorf(g.Source, start.Name, "the graph has a cycle: %s", strings.Join(cycle, " -> "))
	}
	return nil
}

func findCycle(start *Node, indeg []int) []string {
	seen := map[*Node]int{}
	var path []*Node
	cur := start
	for {
		if i, ok := seen[cur]; ok {
			var names []string
			for _, p := range path[i:] {
				names = append(names, p.Name)
			}
			return append(names, cur.Name)
		}
		seen[cur] = len(path)
		path = append(path, cur)
		var next *Node
		for _, in := range cur.Inputs {
			if indeg[in.Node.Index] > 0 && !isLoopBackEdge(in.Node.Op) {
				next = in.Node
				break
			}
		}
		if next == nil {
			for _, c := range cur.ControlInputs {
				if indeg[c.Index] > 0 && !isLoopBackEdge(c.Op) {
					next = c
					break
				}
			}
		}
		if next == nil {
			return []string{start.Name}
		}
		cur = next
	}
}

// FanIn marks, by node index, the roots and every node they reach through data and control
// inputs: what a session step that fetches or targets the roots executes.
func (g *Graph) FanIn(roots []*Node) []bool {
	mark := make([]bool, len(g.Nodes))
	stack := make([]*Node, 0, len(roots))
	visit := func(n *Node) {
		if !mark[n.Index] {
			mark[n.Index] = true
			stack = append(stack, n)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, in := range n.Inputs {
			visit(in.Node)
		}
		for _, c := range n.ControlInputs {
			visit(c)
		}
	}
	return mark
}

// Descendants marks, by node index, the nodes reachable from n through data and control
// edges (n itself excluded; while loops' back edges are not followed, as in Topo): the nodes
// that cannot run before n has.
func (g *Graph) Descendants(n *Node) []bool {
	mark := make([]bool, len(g.Nodes))
	stack := []*Node{n}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if isLoopBackEdge(p.Op) {
			continue
		}
		visit := func(c *Node) {
			if !mark[c.Index] {
				mark[c.Index] = true
				stack = append(stack, c)
			}
		}
		for _, uses := range p.Consumers {
			for _, u := range uses {
				visit(u.Node)
			}
		}
		for _, c := range p.ControlOutputs {
			visit(c)
		}
	}
	return mark
}
