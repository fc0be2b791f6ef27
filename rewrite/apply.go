package rewrite

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	"google.golang.org/protobuf/proto"
)

// Scope is the name scope of every node tfswap adds.
const Scope = "tfswap/"

// RoleAttr is the attr that marks a node tfswap added, with its role ("swap_out", "swap_in").
const RoleAttr = "_tfswap_role"

// idAttr carries a swap node's own name, so that no two swap nodes are identical.
const idAttr = "_tfswap_id"

// DoNotRemoveAttr is the attr Grappler honours to keep a node (GrapplerItem::NodesToPreserve).
const DoNotRemoveAttr = "_grappler_do_not_remove"

// RelayRole is the role of a relay: an Identity on its one reader's device that reads a
// swap-in (needsRelay). A gradient tuple Identity read through one keeps its input on its
// device, so Grappler's dependency optimizer bypasses it as it does in the original,
// whatever its number of readers; a product Grappler's constant push-down may rotate keeps
// both its inputs on the parent's device, which the rotation requires.
const RelayRole = "swap_relay"

// Swap describes one swapped tensor in a Result.
type Swap struct {
	// Tensor is the swapped tensor, "producer:port".
	Tensor string
	// Producer is the node that makes it.
	Producer string
	// DType and Shape describe it; Bytes is its size.
	DType string
	Shape []int64
	Bytes int64
	// Host is the device it is kept on while swapped out.
	Host string
	// SwapOut is the name of the swap-out node.
	SwapOut string
	// SwapIns are the swap-ins, in order of their earliest consumer.
	SwapIns []SwapIn
}

// WaitInfo describes one wait in a Result: Node runs only after SwapOut has received its
// tensor on the host.
type WaitInfo struct {
	Node    string
	SwapOut string
}

// SwapIn describes one swap-in of a Result.
type SwapIn struct {
	// Node is the swap-in node's name and Device its device.
	Node   string
	Device string
	// Trigger is the op whose completion releases the swap-in.
	Trigger string
	// Gate is the node the swap-in's control edge comes from: a preserved Identity (or, with
	// GateReduce, L2Loss) on the trigger's device that reads the trigger's output (see
	// GateNodeName).
	Gate string
	// Consumers are the nodes that read the swapped-in copy.
	Consumers []string
	// Distance is the topological distance (levels) from the producer to the earliest consumer.
	Distance int
}

// Result is a rewritten model and what was done to it.
type Result struct {
	// Model is the rewritten model. It shares the input model's untouched NodeDefs.
	Model *graphdef.Model
	// Swaps are the swapped tensors in topological order of their producers.
	Swaps []Swap
	// Skipped are the tensors and consumer groups that could not be swapped, with reasons
	// (unknown sizes among them).
	Skipped []Skipped
	// Waits are the ops held back until a swap-out completes, in graph order.
	Waits []WaitInfo `json:",omitempty"`
	// Recomputes are the tensors whose later readers read a recomputed copy, in topological
	// order of their producers.
	Recomputes []Recompute `json:",omitempty"`
	// Orders are the control edges planning added to order ops (the reorder pass): each
	// Node waits for After.
	Orders []OrderEdge `json:",omitempty"`
	// Bypassed are the tf.gradients tuple Identities planning bypassed (the tuple-bypass
	// pass; BypassTupleIdentities), in graph order: each name is a NoOp in the rewrite.
	Bypassed []string `json:",omitempty"`
	// Spacers are the kernels planning put between two ops where Grappler's accountings
	// would count the first's freed inputs with the second's outputs (AddSpacers).
	Spacers []Spacer `json:",omitempty"`
	// WideGates are the triggers whose L2Loss gates read their largest output instead of
	// their smallest (WidenGates), in the order widened.
	WideGates []string `json:",omitempty"`
	// Accumulators are the while loops' stack and TensorList accumulators the LMS rewrite
	// placed on the host (placeAccumulators), stacks then lists, each in graph order.
	Accumulators []Accumulator `json:",omitempty"`
	// FunctionalLoops are the functional While loops whose accumulators the LMS rewrite left
	// where they are (UnloweredLoopLimit), in graph order.
	FunctionalLoops []FunctionalLoop `json:",omitempty"`

	// built is Model's graph as the builder made it (Apply), for Verify; nil when Model was
	// built otherwise or Verify has checked it.
	built *graphdef.Graph
}

// BytesOut returns the bytes moved device-to-host per step, and BytesIn host-to-device.
// Both saturate at math.MaxInt64 rather than wrap around (each tensor is at most
// graphdef.MaxTensorBytes, but a tensor may be swapped in many times).
func (r *Result) BytesOut() int64 {
	var n int64
	for _, s := range r.Swaps {
		n = AddSat(n, s.Bytes)
	}
	return n
}

// BytesIn returns the bytes moved host-to-device per step.
func (r *Result) BytesIn() int64 {
	var n int64
	for _, s := range r.Swaps {
		b, ok := graphdef.MulBytes(s.Bytes, int64(len(s.SwapIns)), math.MaxInt64)
		if !ok {
			return math.MaxInt64
		}
		n = AddSat(n, b)
	}
	return n
}

// AddSat returns a+b for sizes, saturated at math.MaxInt64.
func AddSat(a, b int64) int64 {
	if n, ok := graphdef.AddBytes(a, b, math.MaxInt64); ok {
		return n
	}
	return math.MaxInt64
}

// CheckNotRewritten fails when g already holds nodes made by tfswap: nodes carrying idAttr
// (or RoleAttr), which every node a rewrite adds has. A node's name is not evidence: a user's
// own name scope may be called "tfswap".
func CheckNotRewritten(g *graphdef.Graph) error {
	for _, n := range g.Nodes {
		_, id := n.Def.GetAttr()[idAttr]
		if _, role := n.Def.GetAttr()[RoleAttr]; id || role {
			return &graphdef.Error{File: g.Source, Node: n.Name, Msg: "the graph was already rewritten by tfswap; rewrite the original graph instead"}
		}
	}
	return nil
}

// SwapNodeName returns the name of a swap node for tensor t: "tfswap/<producer>_<port>/<suffix>".
// Node names cannot hold ':', so the port follows an underscore; the result is unique among
// swap nodes because the port is always the last "_"-separated part of the scope.
func SwapNodeName(t graphdef.Tensor, suffix string) string {
	return Scope + t.Node.Name + "_" + strconv.Itoa(t.Port) + "/" + suffix
}

// Apply performs plan on model (whose graph is a's) and returns the rewritten model: the
// GraphDef of the graph build makes. It changes only the consumers the plan names (a copy of
// each such NodeDef, its redirected inputs renamed and the waits' control inputs appended;
// every other NodeDef is shared with model), adds the swap nodes after the original nodes,
// and is deterministic.
func Apply(model *graphdef.Model, a *Analysis, plan *Plan) (*Result, error) {
	b, err := Build(a, plan)
	if err != nil {
		return nil, err
	}
	return b.Write(model), nil
}

// Write returns the rewritten model of b's plan, for model (whose graph is the one the plan
// was built on): the GraphDef of b's graph, followed by the placement of the plan's
// accumulators on the host (placeAccumulators), after the swap nodes. It is Apply without
// building the graph again, for a planner that has built it already (to simulate the plan);
// b's graph then belongs to the result, and b must not be written twice.
func (b *Built) Write(model *graphdef.Model) *Result {
	res := applyBuilt(model, b.a, b)
	placeAccumulators(res, b.a, b.plan.Accumulators)
	return res
}

// applyBuilt is Apply given b, the builder's output for the plan (which may be the graph a
// prediction simulated: the rewrite is written from it, not built again). It takes b's
// graph over: the changed nodes' Defs become the written ones and its Def the written
// GraphDef.
func applyBuilt(model *graphdef.Model, a *Analysis, b *Built) *Result {
	out := model.Clone()
	nodes := b.Graph.Nodes
	for _, idx := range b.changed {
		n := nodes[idx]
		nd := copyNodeDef(n.Def, len(n.ControlInputs)-len(a.Graph.Nodes[idx].ControlInputs))
		// Data inputs come first in a NodeDef (graphdef.NewGraph checks it): input j of the
		// node is nd.Input[j]. An input that still reads its original tensor keeps its
		// string as the graph spelled it; one that reads an added node reads a swap-in.
		orig := a.Graph.Nodes[idx]
		for j, t := range n.Inputs {
			if t.Node.Index >= b.n0 {
				nd.Input[j] = t.Node.Name
			}
		}
		for _, c := range n.ControlInputs[len(orig.ControlInputs):] {
			nd.Input = append(nd.Input, "^"+c.Name)
		}
		out.Graph.Node[idx] = nd
		n.Def = nd
	}
	// The added nodes' Defs are templates until now (see template): each gets its own.
	for _, n := range nodes[b.n0:] {
		inputs := make([]string, 1, 1+len(n.ControlInputs))
		inputs[0] = n.Inputs[0].InputString()
		for _, c := range n.ControlInputs {
			inputs = append(inputs, "^"+c.Name)
		}
		n.Def = namedDef(n.Def, n.Name, inputs...)
		out.Graph.Node = append(out.Graph.Node, n.Def)
	}
	b.Graph.Def = out.Graph
	return &Result{Model: out, Swaps: b.swaps, Waits: b.waits, built: b.Graph}
}

// copyNodeDef returns a copy of nd to change, with its own input list (with room for extra
// further inputs) and attr map: what proto.Clone returns, without copying the attr values,
// which Parse shares between nodes already and nothing mutates. The lms-fixed rewrite of a
// million-node graph changes the inputs of hundreds of thousands of nodes: a deep copy of
// each one's attrs was most of the written graph's new memory.
func copyNodeDef(nd *npb.NodeDef, extra int) *npb.NodeDef {
	if nd.ExperimentalDebugInfo != nil || nd.ExperimentalType != nil {
		return proto.Clone(nd).(*npb.NodeDef)
	}
	c := &npb.NodeDef{Name: nd.Name, Op: nd.Op, Device: nd.Device, Attr: maps.Clone(nd.Attr)}
	if nd.Input != nil {
		c.Input = append(make([]string, 0, len(nd.Input)+extra), nd.Input...)
	}
	if u := nd.ProtoReflect().GetUnknown(); len(u) > 0 {
		c.ProtoReflect().SetUnknown(slices.Clone(u))
	}
	return c
}

// GateNodeName returns the name of the gate node of trigger: "tfswap/<trigger>/gate".
func GateNodeName(trigger *graphdef.Node) string { return Scope + trigger.Name + "/gate" }

// GatePort returns the output of n that a gate reads in a rewrite without
// Options.GateSmallestOutput (the first one holding data: not a reference, resource or
// variant) and its dtype; ok is false when n has none.
func GatePort(n *graphdef.Node) (port int, dt graphdef.DataType, ok bool) {
	for p, t := range n.OutputTypes {
		if !graphdef.IsRef(t) && !graphdef.IsHandle(t) {
			return p, t, true
		}
	}
	return 0, 0, false
}

// SmallestGatePort returns the output of n that a gate reads with
// Options.GateSmallestOutput, and its dtype: the smallest data output whose size is known and
// not zero (the first of them on a tie), else GatePort's. Every output of an op exists once
// the op has run, so a gate on any of them fires as late; Grappler's VirtualCluster, which
// counts every op output as a buffer of its own from its op's start to its last reader's end,
// then counts a gate on FusedBatchNormGradV3 as the kilobytes of its scale gradient, not the
// block-sized input gradient. An empty output is never chosen, so that a gate does not wait
// on a value Grappler could know without running the op.
func SmallestGatePort(n *graphdef.Node) (port int, dt graphdef.DataType, ok bool) {
	port, dt, ok = GatePort(n)
	best := int64(-1)
	for p, t := range n.OutputTypes {
		if graphdef.IsRef(t) || graphdef.IsHandle(t) {
			continue
		}
		b, known, _ := graphdef.Tensor{Node: n, Port: p}.Bytes()
		if known && b > 0 && (best < 0 || b < best) {
			port, dt, best = p, t, b
		}
	}
	return port, dt, ok
}

// GatePort is the output of n a gate reads under o: SmallestGatePort's with
// GateSmallestOutput, else GatePort's.
func (o Options) GatePort(n *graphdef.Node) (port int, dt graphdef.DataType, ok bool) {
	if o.GateSmallestOutput {
		return SmallestGatePort(n)
	}
	return GatePort(n)
}

// reduceGateTypes are the dtypes an L2Loss gate reads (GateReduce): L2Loss's types, each with
// a CPU and a GPU kernel in TensorFlow (kernels/l2loss_op.cc, l2loss_op_gpu.cu.cc).
var reduceGateTypes = map[graphdef.DataType]bool{
	tpb.DataType_DT_HALF: true, tpb.DataType_DT_BFLOAT16: true,
	tpb.DataType_DT_FLOAT: true, tpb.DataType_DT_DOUBLE: true,
}

// GateOp is the gate of trigger under o: its op ("Identity" or "L2Loss"), the output of
// trigger it reads and that output's dtype (the gate's T); ok is false when trigger has no
// data output. With GateReduce and a floating-point data output, the gate is an L2Loss of the
// smallest such output of known, non-zero size (the first of them when none is known), so
// that it reads as little as it can; otherwise an Identity of o.GatePort's output.
func (o Options) GateOp(trigger *graphdef.Node) (op string, port int, dt graphdef.DataType, ok bool) {
	if o.GateKind == GateReduce {
		best, found := int64(-1), false
		for p, t := range trigger.OutputTypes {
			if !reduceGateTypes[t] {
				continue
			}
			b, known, _ := graphdef.Tensor{Node: trigger, Port: p}.Bytes()
			if !found || known && b > 0 && (best < 0 || b < best) {
				port, dt, found = p, t, true
				if known && b > 0 {
					best = b
				}
			}
		}
		if found {
			return "L2Loss", port, dt, true
		}
	}
	port, dt, ok = o.GatePort(trigger)
	return "Identity", port, dt, ok
}

// IsGateOp reports whether op is an op a gate may be: an Identity, or an L2Loss
// (GateReduce). Graphs rewritten before GateReduce existed have Identity gates only.
func IsGateOp(op string) bool { return op == "Identity" || op == "L2Loss" }

// scalarShapeAttr is the _output_shapes value of an L2Loss gate: one scalar.
var scalarShapeAttr = &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{
	Shape: []*tspb.TensorShapeProto{{}},
}}}

// gateNode builds the gate of trigger: a node on the trigger's device that reads one of the
// trigger's outputs and is marked for Grappler to keep, an Identity or an L2Loss
// (Options.GateOp). Swap-ins take their control edge from
// the gate, not from the trigger itself: Grappler removes, folds or fuses original ops freely
// (a no-op Reshape or Slice, a MatMul fused with its BiasAdd), moving a control edge on such
// an op to its inputs, so that the gate would fire early or vanish. A data edge survives
// every such rewrite, because Grappler keeps the value flowing to the gate; the gate runs
// only once the trigger's value exists.
func gateNode(trigger *graphdef.Node, opts Options) (*npb.NodeDef, error) {
	return (*addedShare)(nil).gateNode(trigger, opts)
}

// gateNode is the package's gateNode, its shape value shared through sh.
func (sh *addedShare) gateNode(trigger *graphdef.Node, opts Options) (*npb.NodeDef, error) {
	tmpl, port, _, err := sh.gateTemplate(trigger, opts)
	if err != nil {
		return nil, err
	}
	return namedDef(tmpl, GateNodeName(trigger), graphdef.Tensor{Node: trigger, Port: port}.InputString()), nil
}

// gateTemplate returns the template (see template) of trigger's gate under opts, the output
// of trigger the gate reads and that output's dtype.
func (sh *addedShare) gateTemplate(trigger *graphdef.Node, opts Options) (tmpl *npb.NodeDef, port int, dt graphdef.DataType, err error) {
	op, port, dt, ok := opts.GateOp(trigger)
	if !ok {
		return nil, 0, 0, fmt.Errorf("trigger %q has no data output to gate on", trigger.Name)
	}
	shape := scalarShapeAttr
	if op != "L2Loss" {
		shape = sh.outputShapeAttr(trigger, port)
	}
	return sh.template(op, "gate", trigger.Def.GetDevice(), dt, shape), port, dt, nil
}

// The attr values every swap node and gate has alike are shared between them, not built per
// node (a million-node graph gets hundreds of thousands of swap nodes). Sharing is safe
// because a NodeDef is never mutated once built (graphdef.Model's rule): code that changes
// an attr of a node replaces the map entry of that node's own Attr map, never the value.
var (
	attrTrue   = &apb.AttrValue{Value: &apb.AttrValue_B{B: true}}
	roleValues = map[string]*apb.AttrValue{}
	typeValues sync.Map // graphdef.DataType -> *apb.AttrValue
)

func init() {
	for _, r := range []string{"swap_out", "swap_in", "gate", RelayRole} {
		roleValues[r] = &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(r)}}
	}
}

// roleAttr returns the RoleAttr value of role.
func roleAttr(role string) *apb.AttrValue {
	if v, ok := roleValues[role]; ok {
		return v
	}
	return &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(role)}}
}

// dtypeAttr returns the type attr value of dtype dt.
func dtypeAttr(dt graphdef.DataType) *apb.AttrValue {
	if v, ok := typeValues.Load(dt); ok {
		return v.(*apb.AttrValue)
	}
	v, _ := typeValues.LoadOrStore(dt, &apb.AttrValue{Value: &apb.AttrValue_Type{Type: dt}})
	return v.(*apb.AttrValue)
}

// outputShapeAttr returns the _output_shapes attr of a node whose one output is output port
// of n, or nil when n's attr does not give that port's shape. The shape message is n's own,
// shared.
func outputShapeAttr(n *graphdef.Node, port int) *apb.AttrValue {
	return (*addedShare)(nil).outputShapeAttr(n, port)
}

// addedShare holds what the nodes one build adds share beyond the attr values every swap
// node has alike: one _output_shapes value per producer shape message (graphdef.Parse
// shares those among producers of equal shapes, so that a million-node rewrite adds a few
// values instead of hundreds of thousands), and the parsed shapes and dtypes of its indexed
// nodes. A nil *addedShare shares nothing. The values are never mutated (see the shared attr
// values above); Node.OutputShapes and OutputTypes are not either (cost's batch scaling
// copies them).
type addedShare struct {
	shapeAttrs map[*tspb.TensorShapeProto]*apb.AttrValue
	shapes     map[*apb.AttrValue][][]int64
	types      map[graphdef.DataType][]graphdef.DataType
	devices    map[string]graphdef.Device
	templates  map[templateKey]*npb.NodeDef
}

func newAddedShare() *addedShare {
	return &addedShare{
		shapeAttrs: map[*tspb.TensorShapeProto]*apb.AttrValue{},
		shapes:     map[*apb.AttrValue][][]int64{},
		types:      map[graphdef.DataType][]graphdef.DataType{},
		devices:    map[string]graphdef.Device{},
		templates:  map[templateKey]*npb.NodeDef{},
	}
}

// outputShapeAttr is the package's outputShapeAttr, the value shared through sh.
func (sh *addedShare) outputShapeAttr(n *graphdef.Node, port int) *apb.AttrValue {
	v, ok := n.Def.GetAttr()["_output_shapes"]
	if !ok || port >= len(v.GetList().GetShape()) {
		return nil
	}
	shape := v.GetList().GetShape()[port]
	if sh != nil {
		if a, ok := sh.shapeAttrs[shape]; ok {
			return a
		}
	}
	a := &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{
		Shape: []*tspb.TensorShapeProto{shape},
	}}}
	if sh != nil {
		sh.shapeAttrs[shape] = a
	}
	return a
}

// swapNode builds a swap Identity.
func swapNode(name, role, input, device string, dt graphdef.DataType, producer *graphdef.Node, port int, trigger string) *npb.NodeDef {
	return (*addedShare)(nil).swapNode(name, role, input, device, dt, producer, port, trigger)
}

// swapNode is the package's swapNode, its shape value shared through sh.
func (sh *addedShare) swapNode(name, role, input, device string, dt graphdef.DataType, producer *graphdef.Node, port int, trigger string) *npb.NodeDef {
	tmpl := sh.template("Identity", role, device, dt, sh.outputShapeAttr(producer, port))
	if trigger != "" {
		return namedDef(tmpl, name, input, "^"+trigger)
	}
	return namedDef(tmpl, name, input)
}

// templateKey identifies a template: what the NodeDefs of added nodes alike share.
type templateKey struct {
	op, role, device string
	dt               graphdef.DataType
	shape            *apb.AttrValue
}

// template returns the template of an added node (a swap node or a gate) of op, role,
// device, dtype dt and _output_shapes value shape (none when nil): a NodeDef with the op,
// the device and every attr of such a node but its idAttr, and no name or inputs, shared
// through sh by the nodes of the same values. The builder's graph gives it as the Def of its
// added nodes until Write (Built.Graph), so that a planner's derived graph holds a few
// templates instead of a NodeDef and an attr map per added node: the simulators read only the
// op's attrs. namedDef makes the node's own NodeDef from it.
func (sh *addedShare) template(op, role, device string, dt graphdef.DataType, shape *apb.AttrValue) *npb.NodeDef {
	key := templateKey{op, role, device, dt, shape}
	if sh != nil {
		if t, ok := sh.templates[key]; ok {
			return t
		}
	}
	t := &npb.NodeDef{
		Op:     op,
		Device: device,
		Attr: map[string]*apb.AttrValue{
			"T":             dtypeAttr(dt),
			DoNotRemoveAttr: attrTrue,
			RoleAttr:        roleAttr(role),
		},
	}
	if shape != nil {
		t.Attr["_output_shapes"] = shape
	}
	if sh != nil {
		sh.templates[key] = t
	}
	return t
}

// namedDef returns the NodeDef of the added node name made from its template tmpl (see
// template), reading inputs: tmpl's op, device and attrs, and an idAttr of the node's own
// name. A distinct attr per node keeps the runtime's common-subexpression elimination, which
// runs on partition graphs after Grappler and ignores DoNotRemoveAttr, from merging two swap
// nodes whose inputs Grappler made identical.
func namedDef(tmpl *npb.NodeDef, name string, inputs ...string) *npb.NodeDef {
	attr := make(map[string]*apb.AttrValue, len(tmpl.Attr)+1)
	maps.Copy(attr, tmpl.Attr)
	attr[idAttr] = &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(name)}}
	return &npb.NodeDef{Name: name, Op: tmpl.Op, Input: inputs, Device: tmpl.Device, Attr: attr}
}

// WriteVerified is Write for a rewrite that planning does not follow up (LMS's): the result
// also names the tensors the planner skipped (skipped) and the functional While loops whose
// accumulators stay where they are, and it is checked by Verify. A broken invariant is an
// internal error.
func (b *Built) WriteVerified(model *graphdef.Model, skipped []Skipped) (*Result, error) {
	res := b.Write(model)
	res.Skipped = skipped
	res.FunctionalLoops = functionalLoops(b.a.Graph)
	if err := Verify(b.a.Graph, res, b.a.Opts.Gate); err != nil {
		return nil, fmt.Errorf("internal error: the rewrite breaks an invariant: %v", err)
	}
	return res, nil
}

// checkPreserve checks that every name of preserve (Options.Preserve) names a node of g.
func checkPreserve(g *graphdef.Graph, preserve []string) error {
	for _, p := range preserve {
		if g.Node(preservedNode(p)) == nil {
			return fmt.Errorf("preserved node %q is not in the graph", p)
		}
	}
	return nil
}

// preservedNode returns the node name of a preserved name: "^a" and "a:1" name node a.
func preservedNode(p string) string {
	p = strings.TrimPrefix(p, "^")
	if i := strings.LastIndexByte(p, ':'); i >= 0 {
		if _, err := strconv.Atoi(p[i+1:]); err == nil {
			p = p[:i]
		}
	}
	return p
}

// Prepare checks opts (applying defaults), indexes model's graph and refuses a graph tfswap
// already rewrote: what every rewrite does first.
func Prepare(model *graphdef.Model, opts Options) (Options, *graphdef.Graph, error) {
	return PrepareGraph(model, nil, opts)
}

// PrepareGraph is prepare given g, model's graph as graphdef.NewGraph builds it; a nil g is
// built here.
func PrepareGraph(model *graphdef.Model, g *graphdef.Graph, opts Options) (Options, *graphdef.Graph, error) {
	opts, err := opts.WithDefaults()
	if err != nil {
		return opts, nil, err
	}
	if g == nil {
		if g, err = graphdef.NewGraph(model.Graph, model.Source); err != nil {
			return opts, nil, err
		}
	}
	if err := CheckNotRewritten(g); err != nil {
		return opts, nil, err
	}
	if err := checkPreserve(g, opts.Preserve); err != nil {
		return opts, nil, err
	}
	if _, err := g.TotalBytes(); err != nil {
		return opts, nil, err
	}
	return opts, g, nil
}
