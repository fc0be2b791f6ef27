package rewrite

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/triggers"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	"google.golang.org/protobuf/proto"
)

// Variable offload keeps chosen variables, with their optimizer slots, in host memory (issue
// 15). A variable's group is the variable, the variables that share an update op with it
// (its optimizer slots, which TensorFlow also colocates with it) and every node that must run
// where they live: the ops that take their handles (reads, assignments, the optimizer's
// update) and the ops colocated with them by a `_class` "loc:@" attr (their initializers,
// the batch-norm moving-average arithmetic). Offloading a group places all of these nodes on
// the host CPU, so the update runs there with TensorFlow's CPU kernels and the gradient
// crosses to the host as soon as it is produced (a _Recv on the host completes as soon as
// the device has sent it). Each read's consumers on the compute device read a copy made on
// the host just before they need it: a host-side Identity of the read, gated exactly like a
// swap-in (a control edge from the gate of a trigger a few levels before the consumers), so
// the host-to-device copy waits for the trigger. Consumers with no op before them to trigger
// on (the first layer's) read the host tensor directly, and TensorFlow copies it at the start
// of the step.

// OffloadMode says which variables are kept on the host.
type OffloadMode string

// The offload modes.
const (
	// OffloadNone keeps every variable on its device (the default).
	OffloadNone OffloadMode = "none"
	// OffloadAll keeps every variable of a compute device, and its slots, on the host.
	OffloadAll OffloadMode = "all"
	// OffloadAuto lets the planner choose per variable group.
	OffloadAuto OffloadMode = "auto"
)

// OffloadNamed is the mode of PlanOptions.OffloadVariables: the groups holding a named
// variable move.
const OffloadNamed OffloadMode = "named"

// offloadModes lists the modes for --help.
var offloadModes = []OffloadMode{OffloadNone, OffloadAll, OffloadAuto}

// ParseOffloadMode returns the mode called s ("" means none).
func ParseOffloadMode(s string) (OffloadMode, error) {
	switch OffloadMode(s) {
	case "", OffloadNone:
		return OffloadNone, nil
	case OffloadAll, OffloadAuto:
		return OffloadMode(s), nil
	}
	return "", fmt.Errorf("unknown offload mode %q (want none, all or auto)", s)
}

// WeightInRole is the role of a host-side copy of an offloaded variable's read.
const WeightInRole = "weight_in"

// variableOps are the ops that own a variable's buffer.
var variableOps = map[string]bool{"VarHandleOp": true, "VariableV2": true, "Variable": true}

// VariableGroup is a variable with its optimizer slots and the nodes that must run where they
// live.
type VariableGroup struct {
	// Name is the group's variable: the shortest name among its variables (slots are named
	// after their variable), ties broken by graph order.
	Name string
	// Variables are the variable nodes of the group, in graph order.
	Variables []*graphdef.Node
	// Nodes are every node of the group (the variables among them), in graph order.
	Nodes []*graphdef.Node
	// Bytes is the size of the group's variables (unknown shapes count zero).
	Bytes int64
	// Unsized names the variables whose size is unknown.
	Unsized []string
	// OnHost says the group's variables already live on the host: they are resource
	// arguments of a TensorFlow 2 function graph (hostArgVariable), created there outside the
	// function. Offloading such a group moves no node; it gates the copies of its reads to
	// the compute devices.
	OnHost bool
}

// variableHandleOps are the ops that read, update or inspect a resource variable through its
// handle (hostArgVariable).
var variableHandleOps = map[string]bool{
	"ReadVariableOp": true, "AssignVariableOp": true, "AssignAddVariableOp": true,
	"AssignSubVariableOp": true, "VariableShape": true, "VarIsInitializedOp": true,
	"ResourceGather": true, "ResourceGatherNd": true,
}

// hostArgVariable reports whether n is a variable that reaches a TensorFlow 2 function graph
// as an argument and lives on the host: a resource _Arg not on a compute device whose every
// consumer is a variable op (a read, an assignment, an optimizer's ResourceApply*, a
// scatter), at least one of them. TensorFlow 2 creates variables eagerly, outside the
// function, where the program's device scope puts them, and runs every op on a resource
// where the resource lives: a function can move no variable, but a variable created on the
// host (with tf.device("/CPU:0")) is read there, and its copies to the compute devices can
// be gated like offloaded variables' (an iterator's resource argument has other consumers
// and is not one).
func hostArgVariable(a *Analysis, n *graphdef.Node) bool {
	if n.Op != "_Arg" || a.OnCompute(n) || a.Device(n).Type != "CPU" ||
		n.Def.GetAttr()["T"].GetType() != tpb.DataType_DT_RESOURCE || len(n.Consumers) == 0 {
		return false
	}
	uses := 0
	for _, u := range n.Consumers[0] {
		op := u.Node.Op
		if !variableHandleOps[op] && !strings.HasPrefix(op, "ResourceApply") &&
			!strings.HasPrefix(op, "ResourceSparseApply") && !strings.HasPrefix(op, "ResourceScatter") {
			return false
		}
		uses++
	}
	return uses > 0
}

// VariableGroups returns the groups of the variables on a's compute devices, in graph order
// of their first variable. Nodes that take a variable's handle (a ref or resource input), or
// name it in a `_class` "loc:@" colocation attr, join its group; a node tied to two groups
// merges them.
func VariableGroups(a *Analysis) []*VariableGroup {
	g := a.Graph
	parent := make([]int, len(g.Nodes))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(i, j int) {
		ri, rj := find(i), find(j)
		if ri == rj {
			return
		}
		if ri < rj {
			parent[rj] = ri
		} else {
			parent[ri] = rj
		}
	}
	linked := make([]bool, len(g.Nodes))
	for _, n := range g.Topo {
		if (variableOps[n.Op] && a.OnCompute(n)) || hostArgVariable(a, n) {
			linked[n.Index] = true
		}
	}
	// Handles flow along data edges in topological order: a node taking a linked node's
	// handle joins it (and passes the handle on when it outputs one, as an Identity does).
	for _, n := range g.Topo {
		for _, in := range n.Inputs {
			if !linked[in.Node.Index] {
				continue
			}
			dt, ok := in.DataType()
			if !ok || !(graphdef.IsRef(dt) || graphdef.IsHandle(dt)) {
				continue
			}
			linked[n.Index] = true
			union(n.Index, in.Node.Index)
		}
	}
	for _, n := range g.Nodes {
		for _, s := range n.Def.GetAttr()["_class"].GetList().GetS() {
			name, ok := strings.CutPrefix(string(s), "loc:@")
			if !ok {
				continue
			}
			if m := g.Node(name); m != nil && linked[m.Index] {
				linked[n.Index] = true
				union(n.Index, m.Index)
			}
		}
	}
	byRoot := map[int]*VariableGroup{}
	var groups []*VariableGroup
	for _, n := range g.Nodes {
		if !linked[n.Index] {
			continue
		}
		r := find(n.Index)
		vg := byRoot[r]
		if vg == nil {
			vg = &VariableGroup{}
			byRoot[r] = vg
			groups = append(groups, vg)
		}
		vg.Nodes = append(vg.Nodes, n)
		if variableOps[n.Op] || n.Op == "_Arg" {
			vg.OnHost = vg.OnHost || n.Op == "_Arg"
			vg.Variables = append(vg.Variables, n)
			if vg.Name == "" || len(n.Name) < len(vg.Name) {
				vg.Name = n.Name
			}
			if b, ok := variableBytes(n); ok {
				vg.Bytes = AddSat(vg.Bytes, b)
			} else {
				vg.Unsized = append(vg.Unsized, n.Name)
			}
		}
	}
	// A group is linked only through variables, so it has one; drop any without (none), and
	// any that holds a preserved node (Options.Preserve), which must keep its device. An
	// OnHost group moves no node and redirects no input of its own nodes: its preserved nodes
	// (Grappler preserves a function's reads and assignments) stay exactly as they are, and
	// only consumers on the compute devices read their values through gated copies.
	out := groups[:0]
	for _, vg := range groups {
		if len(vg.Variables) > 0 && (vg.OnHost || !slices.ContainsFunc(vg.Nodes, a.Preserved)) {
			out = append(out, vg)
		}
	}
	return out
}

// variableBytes returns the size of the variable n owns, from its dtype and shape attrs (a
// resource _Arg's from its _handle_dtypes and _handle_shapes).
func variableBytes(n *graphdef.Node) (int64, bool) {
	attrs := n.Def.GetAttr()
	sh, dt := attrs["shape"].GetShape(), attrs["dtype"].GetType()
	if n.Op == "_Arg" {
		shapes, types := attrs["_handle_shapes"].GetList().GetShape(), attrs["_handle_dtypes"].GetList().GetType()
		if len(shapes) != 1 || len(types) != 1 {
			return 0, false
		}
		sh, dt = shapes[0], types[0]
	}
	if sh == nil || sh.GetUnknownRank() {
		return 0, false
	}
	elem, ok := graphdef.ElementBytes(dt)
	if !ok {
		return 0, false
	}
	shape := make([]int64, len(sh.GetDim()))
	for i, d := range sh.GetDim() {
		if d.GetSize() < 0 {
			return 0, false
		}
		shape[i] = d.GetSize()
	}
	return graphdef.SizeBound(elem, shape)
}

// OffloadedVariable describes one offloaded variable group in an OffloadResult.
type OffloadedVariable struct {
	// Name is the group's variable; Variables are all of its variables (slots included).
	Name      string
	Variables []string
	// Bytes is the device memory the group's variables no longer take.
	Bytes int64
	// Host is the device the group now lives on.
	Host string
	// Nodes counts the nodes placed on the host (the variables among them).
	Nodes int
	// Reason says why the group was moved.
	Reason string `json:",omitempty"`
}

// WeightCopy is one gated host-to-device copy of a host-resident tensor (a variable's read).
type WeightCopy struct {
	// Tensor is the host tensor copied, and Variable the group it belongs to.
	Tensor   string
	Variable string
	// Node is the copy (a host-side Identity), Trigger the op it waits for and Gate the
	// preserved Identity (or L2Loss, GateReduce) its control edge comes from.
	Node, Trigger, Gate string
	// Consumers are the nodes that read the copy.
	Consumers []string
	// Bytes is the tensor's size (0 when unknown).
	Bytes int64
}

// DirectRead is a host tensor that compute-device consumers read directly (ungated): no op
// before them could trigger a copy.
type DirectRead struct {
	Tensor    string
	Consumers []string
	Reason    string
}

// OffloadResult is a model with variables moved to the host.
type OffloadResult struct {
	// Model is the rewritten model; it shares the input's untouched NodeDefs.
	Model *graphdef.Model
	// Variables are the groups moved, in graph order.
	Variables []OffloadedVariable
	// Copies are the gated copies, in graph order of the tensors they copy.
	Copies []WeightCopy
	// Direct are the reads copied ungated.
	Direct []DirectRead `json:",omitempty"`
	// Schedule says how the copies' triggers were chosen.
	Schedule string `json:",omitempty"`
}

// Bytes returns the bytes of the variables moved to the host.
func (r *OffloadResult) Bytes() int64 {
	var n int64
	for _, v := range r.Variables {
		n = AddSat(n, v.Bytes)
	}
	return n
}

// OffloadVariables moves the variable groups for which keep returns true (all when keep is
// nil) of model's compute devices to the host: see the comment at the top of this file. It
// validates the model as Rewrite does (refusing one tfswap already rewrote), uses opts'
// compute and host devices and its SwapinAhead and SwapinGroupBy for the copies' triggers
// and grouping, checks the result with VerifyOffload, and never changes model.
func OffloadVariables(model *graphdef.Model, opts Options, keep func(*VariableGroup) bool) (*OffloadResult, error) {
	opts, g, err := Prepare(model, opts)
	if err != nil {
		return nil, err
	}
	a := Analyze(g, opts)
	var sel []*VariableGroup
	for _, vg := range VariableGroups(a) {
		if keep == nil || keep(vg) {
			sel = append(sel, vg)
		}
	}
	res, err := OffloadGroups(model, a, sel, "", nil)
	if err != nil {
		return nil, err
	}
	if err := VerifyOffload(g, res); err != nil {
		return nil, fmt.Errorf("internal error: the offload breaks an invariant: %v", err)
	}
	return res, nil
}

// CopyTiming lets offloadGroups choose the copies' triggers from a predicted step: the
// start and end of every original node (an unswapped step's simulation) and the host-to-
// device link's rate (bytes/s) and per-transfer latency (ns). With a window (bytes) above
// zero the copies are scheduled forwards instead (windowStarts): each as early as the
// window allows.
type CopyTiming struct {
	Times   *triggers.Times
	Rate    float64
	Latency int64
	Window  int64
}

// windowStarts schedules copies forwards on the host-to-device link under a byte window:
// in order of their due times (due[i], the earliest consumer's predicted start; copies
// with a negative due are skipped and get -1), each copy starts as soon as the copies
// before it that are still held (from their start to the end of their last consumer,
// last[i]) leave room for its size in window, and never before the copy before it (the
// link's order). A copy larger than the window waits for every earlier copy to end. When
// the link needs more time than the step (the copies cannot all be timed backwards from
// their consumers), this keeps the link busy while copies are pending, as far as the window
// lets them be resident, instead of starting every early copy at once.
func windowStarts(due, last, size []int64, window int64) []int64 {
	order := make([]int, 0, len(due))
	starts := make([]int64, len(due))
	for i := range due {
		starts[i] = -1
		if due[i] >= 0 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(x, y int) bool { return due[order[x]] < due[order[y]] })
	// held are the scheduled copies whose last consumer may still run at the latest start.
	var held []int
	var t int64
	for _, i := range order {
		keep := held[:0]
		for _, k := range held {
			if last[k] > t {
				keep = append(keep, k)
			}
		}
		held = keep
		sort.SliceStable(held, func(x, y int) bool { return last[held[x]] < last[held[y]] })
		var total int64
		for _, k := range held {
			total = AddSat(total, size[k])
		}
		room := window - size[i]
		for j := 0; j < len(held) && total > room; j++ {
			total -= size[held[j]]
			t = max(t, last[held[j]])
		}
		starts[i] = t
		held = append(held, i)
	}
	return starts
}

// windowTrigger returns the trigger of a copy that may start no earlier than start (ns into
// the predicted step): walking back from the earliest consumer as weightTrigger does, the
// earliest eligible op of the walk that still ends at or after start, or the nearest
// eligible op when even that one ends before start. It returns nil when the walk meets no
// eligible op.
func windowTrigger(consumers []*graphdef.Node, start int64, times *triggers.Times, eligible func(*graphdef.Node) bool) *graphdef.Node {
	first := consumers[0]
	for _, c := range consumers[1:] {
		if c.Level < first.Level || (c.Level == first.Level && c.Index < first.Index) {
			first = c
		}
	}
	var cand *graphdef.Node
	for n := criticalBack(first); n != nil; n = criticalBack(n) {
		if !eligible(n) {
			continue
		}
		if e := times.EndOf(n); e >= 0 && e < start {
			if cand == nil {
				cand = n
			}
			return cand
		}
		cand = n
	}
	return cand
}

// OffloadGroups places the groups' nodes on the host and gates the copies of their data
// outputs to compute-device consumers. reason is recorded on every group. With timing, the
// copies' triggers are chosen from predicted times (timedTrigger backwards from their
// consumers, or windowTrigger forwards under the timing's byte window), else SwapinAhead
// levels before their consumers (weightTrigger).
func OffloadGroups(model *graphdef.Model, a *Analysis, groups []*VariableGroup, reason string, timing *CopyTiming) (*OffloadResult, error) {
	g := a.Graph
	out := model.Clone()
	res := &OffloadResult{Model: out}
	moved := make([]bool, len(g.Nodes))
	// stays marks the nodes of OnHost groups: already on the host, where they stay.
	stays := make([]bool, len(g.Nodes))
	groupOf := map[int]string{}
	for _, vg := range groups {
		ov := OffloadedVariable{Name: vg.Name, Bytes: vg.Bytes, Host: a.Host(vg.Variables[0]).String(), Nodes: len(vg.Nodes), Reason: reason}
		if vg.OnHost {
			ov.Host, ov.Nodes = vg.Variables[0].Def.GetDevice(), 0
			ov.Reason = "created on the host outside the function (a resource argument on " + ov.Host + "): its reads' copies are gated"
			if reason != "" {
				ov.Reason += "; " + reason
			}
		}
		for _, v := range vg.Variables {
			ov.Variables = append(ov.Variables, v.Name)
		}
		for _, n := range vg.Nodes {
			moved[n.Index] = true
			groupOf[n.Index] = vg.Name
			if vg.OnHost {
				stays[n.Index] = true
			}
		}
		res.Variables = append(res.Variables, ov)
	}
	clone := func(idx int) *npb.NodeDef {
		nd := out.Graph.Node[idx]
		if nd == g.Nodes[idx].Def {
			nd = proto.Clone(nd).(*npb.NodeDef)
			out.Graph.Node[idx] = nd
		}
		return nd
	}
	for _, n := range g.Nodes {
		if moved[n.Index] && !stays[n.Index] {
			clone(n.Index).Device = a.Host(n).String()
		}
	}
	eligible := func(n *graphdef.Node) bool { return !moved[n.Index] && a.TriggerEligible(n) }
	// The copies, in graph order of the tensors they copy.
	type pending struct {
		t     graphdef.Tensor
		dt    graphdef.DataType
		k     int
		uses  []graphdef.Use
		nodes []*graphdef.Node
		size  int64
		trig  *graphdef.Node
	}
	var copies []*pending
	for _, n := range g.Nodes {
		if !moved[n.Index] {
			continue
		}
		for port := range n.Consumers {
			t := graphdef.Tensor{Node: n, Port: port}
			dt, ok := t.DataType()
			if !ok || graphdef.IsRef(dt) || graphdef.IsHandle(dt) {
				continue
			}
			var uses []graphdef.Use
			for _, u := range t.Consumers() {
				if !moved[u.Node.Index] && a.ConsumerEligible(u) {
					uses = append(uses, u)
				}
			}
			if len(uses) == 0 {
				continue
			}
			SortUses(uses)
			size, _, _ := t.Bytes()
			for k, grp := range GroupUses(uses, a.Opts.SwapinGroupBy) {
				copies = append(copies, &pending{t: t, dt: dt, k: k, uses: grp, nodes: SwapInReaders(grp), size: size})
			}
		}
	}
	switch {
	case timing != nil && timing.Window > 0:
		res.Schedule = "forwards on the host link under a " + units.FormatBytes(timing.Window) + " window of copies held, from the unswapped step's times"
	case timing != nil:
		res.Schedule = "backwards on the host link from their consumers' times in the unswapped step"
	default:
		res.Schedule = "SwapinAhead levels before their consumers"
	}
	if timing != nil && timing.Window > 0 {
		due := make([]int64, len(copies))
		last := make([]int64, len(copies))
		sizes := make([]int64, len(copies))
		for i, c := range copies {
			due[i], last[i], sizes[i] = -1, -1, c.size
			for _, n := range c.nodes {
				if st := timing.Times.StartOf(n); st >= 0 && (due[i] < 0 || st < due[i]) {
					due[i] = st
				}
				last[i] = max(last[i], timing.Times.EndOf(n))
			}
		}
		starts := windowStarts(due, last, sizes, timing.Window)
		for i, c := range copies {
			if starts[i] < 0 {
				c.trig = weightTrigger(c.nodes, a.Opts.SwapinAhead, eligible)
				continue
			}
			c.trig = windowTrigger(c.nodes, starts[i], timing.Times, eligible)
		}
	} else if timing != nil {
		order := make([]int, len(copies))
		due := make([]int64, len(copies))
		for i, c := range copies {
			order[i] = i
			due[i] = -1
			for _, n := range c.nodes {
				if st := timing.Times.StartOf(n); st >= 0 && (due[i] < 0 || st < due[i]) {
					due[i] = st
				}
			}
		}
		// Copies are scheduled backwards from their consumers on the one host-to-device
		// engine: the latest due first, each ending when its consumer starts or when the
		// next copy on the engine starts, whichever is earlier.
		sort.SliceStable(order, func(x, y int) bool { return due[order[x]] > due[order[y]] })
		free := int64(math.MaxInt64)
		for _, i := range order {
			c := copies[i]
			if due[i] < 0 {
				c.trig = weightTrigger(c.nodes, a.Opts.SwapinAhead, eligible)
				continue
			}
			end := min(due[i], free)
			start := end - int64(float64(c.size)/timing.Rate*1e9) - timing.Latency
			free = start
			c.trig = timedTrigger(c.nodes, start, timing.Times, eligible)
		}
	} else {
		for _, c := range copies {
			c.trig = weightTrigger(c.nodes, a.Opts.SwapinAhead, eligible)
		}
	}
	gates := map[string]bool{}
	var added []*npb.NodeDef
	for _, c := range copies {
		t, n := c.t, c.t.Node
		if c.trig == nil {
			res.Direct = append(res.Direct, DirectRead{Tensor: t.String(), Consumers: nodeNames(c.nodes),
				Reason: "no op before " + c.nodes[0].Name + " can trigger the copy"})
			continue
		}
		gate := GateNodeName(c.trig)
		if !gates[gate] {
			gn, err := gateNode(c.trig, a.Opts)
			if err != nil {
				return nil, fmt.Errorf("tensor %s: %v", t, err)
			}
			gates[gate] = true
			added = append(added, gn)
		}
		name := SwapNodeName(t, WeightInRole+"_"+strconv.Itoa(c.k))
		host := a.Host(n).String()
		if stays[n.Index] {
			host = n.Def.GetDevice()
		}
		added = append(added, swapNode(name, WeightInRole, t.InputString(), host, c.dt, n, t.Port, gate))
		for _, u := range c.uses {
			clone(u.Node.Index).Input[u.Input] = name
		}
		res.Copies = append(res.Copies, WeightCopy{Tensor: t.String(), Variable: groupOf[n.Index], Node: name,
			Trigger: c.trig.Name, Gate: gate, Consumers: nodeNames(c.nodes), Bytes: c.size})
	}
	out.Graph.Node = append(out.Graph.Node, added...)
	return res, nil
}

// nodeNames returns the nodes' names.
func nodeNames(nodes []*graphdef.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// timedTrigger returns the trigger of a copy that must start by start (ns into the predicted
// step): walking back from the earliest consumer as weightTrigger does, the first eligible op
// that ends by start, or the earliest eligible op of the walk when none does (the copy is
// then as early as the graph allows). It returns nil when the walk meets no eligible op.
func timedTrigger(consumers []*graphdef.Node, start int64, times *triggers.Times, eligible func(*graphdef.Node) bool) *graphdef.Node {
	first := consumers[0]
	for _, c := range consumers[1:] {
		if c.Level < first.Level || (c.Level == first.Level && c.Index < first.Index) {
			first = c
		}
	}
	var last *graphdef.Node
	for n := criticalBack(first); n != nil; n = criticalBack(n) {
		if !eligible(n) {
			continue
		}
		last = n
		if e := times.EndOf(n); e >= 0 && e <= start {
			return n
		}
	}
	return last
}

// criticalBack returns n's input (data or control) of the highest level, ties broken by
// graph order, or nil.
func criticalBack(n *graphdef.Node) *graphdef.Node {
	var best *graphdef.Node
	consider := func(c *graphdef.Node) {
		if best == nil || c.Level > best.Level || (c.Level == best.Level && c.Index < best.Index) {
			best = c
		}
	}
	for _, in := range n.Inputs {
		consider(in.Node)
	}
	for _, c := range n.ControlInputs {
		consider(c)
	}
	return best
}

// weightTrigger returns the trigger of a copy of a host-resident tensor for consumers: the
// eligible op ahead levels before the earliest consumer on its critical path (at each step
// back, the input, data or control, of the highest level, ties broken by graph order), or
// the nearest eligible op further back when none is within ahead levels. Unlike an
// activation's swap-in, the trigger need not descend from the tensor's producer: the copy
// reads the host tensor through its data edge, and a variable's read runs at the start of
// the step. The trigger is an ancestor of the earliest consumer, so its level is below every
// consumer's and it descends from none of them: the gate cannot close a cycle. It returns
// nil when no eligible op precedes the consumer.
func weightTrigger(consumers []*graphdef.Node, ahead int, eligible func(*graphdef.Node) bool) *graphdef.Node {
	if ahead < 1 {
		ahead = 1
	}
	first := consumers[0]
	for _, c := range consumers[1:] {
		if c.Level < first.Level || (c.Level == first.Level && c.Index < first.Index) {
			first = c
		}
	}
	back := func(n *graphdef.Node) *graphdef.Node {
		var best *graphdef.Node
		consider := func(c *graphdef.Node) {
			if best == nil || c.Level > best.Level || (c.Level == best.Level && c.Index < best.Index) {
				best = c
			}
		}
		for _, in := range n.Inputs {
			consider(in.Node)
		}
		for _, c := range n.ControlInputs {
			consider(c)
		}
		return best
	}
	var best *graphdef.Node
	cur := first
	for next := back(cur); next != nil && next.Level >= first.Level-ahead; next = back(cur) {
		cur = next
		if eligible(cur) {
			best = cur
		}
	}
	if best != nil {
		return best
	}
	for next := back(cur); next != nil; next = back(next) {
		if eligible(next) {
			return next
		}
	}
	return nil
}

// VerifyOffload checks the invariants of an offload of orig into res: the rewritten graph is
// valid and acyclic; every original node is kept with its op and attrs; the nodes of every
// offloaded group, and only they, changed device, to their group's host CPU; every other
// node's changed inputs read weight copies of exactly the tensor they read before; every
// copy is a preserved host-side Identity of an offloaded group's tensor with one control
// input, a gate reading its trigger, and its trigger runs on another device than the host
// and is not a descendant of the copy's consumers in the original graph.
func VerifyOffload(orig *graphdef.Graph, res *OffloadResult) error {
	out, err := graphdef.NewGraph(res.Model.Graph, "offloaded")
	if err != nil {
		return fmt.Errorf("offloaded graph is invalid: %v", err)
	}
	if len(out.Nodes) < len(orig.Nodes) {
		return fmt.Errorf("offloaded graph has %d nodes, fewer than the original %d", len(out.Nodes), len(orig.Nodes))
	}
	hostOf := map[string]string{}
	for _, v := range res.Variables {
		if d, err := graphdef.ParseDevice(v.Host); err != nil || d.Type != "CPU" {
			return fmt.Errorf("variable %s: host %q is not a CPU", v.Name, v.Host)
		}
		for _, name := range v.Variables {
			hostOf[name] = v.Host
		}
	}
	movedCount := map[string]int{}
	for i, on := range orig.Nodes {
		nn := out.Nodes[i]
		if nn.Name != on.Name || nn.Op != on.Op {
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
		if len(nn.Inputs) != len(on.Inputs) || len(nn.ControlInputs) != len(on.ControlInputs) {
			return fmt.Errorf("node %q: number of inputs changed", on.Name)
		}
		for j, c := range on.ControlInputs {
			if nn.ControlInputs[j].Name != c.Name {
				return fmt.Errorf("node %q: control input %d changed", on.Name, j)
			}
		}
		if nn.Def.GetDevice() != on.Def.GetDevice() {
			movedCount[nn.Def.GetDevice()]++
			if d, err := graphdef.ParseDevice(nn.Def.GetDevice()); err != nil || d.Type != "CPU" {
				return fmt.Errorf("node %q moved to %q, not a host CPU", on.Name, nn.Def.GetDevice())
			}
		}
		if variableOps[on.Op] {
			if h, ok := hostOf[on.Name]; ok && nn.Def.GetDevice() != h {
				return fmt.Errorf("variable %q is on %q, not its host %q", on.Name, nn.Def.GetDevice(), h)
			}
		}
		for j, in := range on.Inputs {
			got := nn.Inputs[j]
			if got.Node.Name == in.Node.Name && got.Port == in.Port {
				// A handle must stay on its variable's device: TensorFlow runs ops on
				// resources where the resource lives.
				if dt, ok := in.DataType(); ok && (graphdef.IsHandle(dt) || graphdef.IsRef(dt)) && variableOps[in.Node.Op] {
					if out.Nodes[in.Node.Index].Def.GetDevice() != nn.Def.GetDevice() {
						return fmt.Errorf("node %q takes the handle of %q on another device (%q, %q)", on.Name, in.Node.Name, nn.Def.GetDevice(), out.Nodes[in.Node.Index].Def.GetDevice())
					}
				}
				continue
			}
			if string(got.Node.Def.GetAttr()[RoleAttr].GetS()) != WeightInRole {
				return fmt.Errorf("node %q input %d: reads %s, not a weight copy of %s", on.Name, j, got, in)
			}
			if len(got.Node.Inputs) != 1 || got.Node.Inputs[0].Node.Name != in.Node.Name || got.Node.Inputs[0].Port != in.Port {
				return fmt.Errorf("node %q input %d: weight copy %q does not copy %s", on.Name, j, got.Node.Name, in)
			}
		}
	}
	copies := 0
	for _, n := range out.Nodes[len(orig.Nodes):] {
		role := string(n.Def.GetAttr()[RoleAttr].GetS())
		switch role {
		case "gate":
			if err := verifyGate(n); err != nil {
				return err
			}
			continue
		case WeightInRole:
		default:
			return fmt.Errorf("added node %q has role %q", n.Name, role)
		}
		copies++
		if n.Op != "Identity" || !n.Def.GetAttr()[DoNotRemoveAttr].GetB() {
			return fmt.Errorf("weight copy %q is not a preserved Identity", n.Name)
		}
		if len(n.Inputs) != 1 || len(n.ControlInputs) != 1 {
			return fmt.Errorf("weight copy %q must have one data input and one control input (its gate)", n.Name)
		}
		src := n.Inputs[0].Node
		if src.Def.GetDevice() != n.Def.GetDevice() {
			return fmt.Errorf("weight copy %q is on %q, not on the host of %q (%q)", n.Name, n.Def.GetDevice(), src.Name, src.Def.GetDevice())
		}
		gate := n.ControlInputs[0]
		if string(gate.Def.GetAttr()[RoleAttr].GetS()) != "gate" || len(gate.Inputs) != 1 {
			return fmt.Errorf("weight copy %q: control input %q is not a gate", n.Name, gate.Name)
		}
		trig := gate.Inputs[0].Node
		if trig.Def.GetDevice() == n.Def.GetDevice() {
			return fmt.Errorf("weight copy %q: trigger %q runs on the host itself", n.Name, trig.Name)
		}
		ot := orig.Node(trig.Name)
		if ot == nil {
			return fmt.Errorf("weight copy %q: trigger %q is not an original node", n.Name, trig.Name)
		}
		for _, u := range n.Consumers {
			for _, c := range u {
				oc := orig.Node(c.Node.Name)
				if oc == nil {
					return fmt.Errorf("weight copy %q is read by an added node %q", n.Name, c.Node.Name)
				}
				if ot.Level >= oc.Level && orig.Descendants(oc)[ot.Index] {
					return fmt.Errorf("weight copy %q: trigger %q descends from its consumer %q", n.Name, trig.Name, oc.Name)
				}
			}
		}
	}
	if copies != len(res.Copies) {
		return fmt.Errorf("%d weight copies in the graph, %d in the result", copies, len(res.Copies))
	}
	return nil
}

// NamedGroups returns the groups, in their order, that hold a variable node named in names.
// A name no group holds is ignored: each graph a session runs holds only some variables.
func NamedGroups(groups []*VariableGroup, names []string) []*VariableGroup {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var out []*VariableGroup
	for _, grp := range groups {
		if slices.ContainsFunc(grp.Variables, func(v *graphdef.Node) bool { return want[v.Name] }) {
			out = append(out, grp)
		}
	}
	return out
}
