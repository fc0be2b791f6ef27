package rewrite

import (
	"fmt"
	"github.com/tfswap/tfswap/triggers"
	"sort"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// neverSwappedOps are ops whose outputs are never swapped: constants (Grappler folds them),
// variables and their reads (the variable keeps its buffer, so a swap frees nothing), and
// control flow (an edge into or out of a while loop frame must go through Enter/Exit).
var neverSwappedOps = map[string]bool{
	"Const": true, "HostConst": true,
	"Variable": true, "VariableV2": true, "VarHandleOp": true, "ReadVariableOp": true,
	"VarIsInitializedOp": true, "TemporaryVariable": true,
	"Enter": true, "RefEnter": true, "Exit": true, "RefExit": true, "Switch": true,
	"RefSwitch": true, "Merge": true, "RefMerge": true, "NextIteration": true,
	"RefNextIteration": true, "LoopCond": true, "ControlTrigger": true,
	"_Send": true, "_Recv": true, "_HostSend": true, "_HostRecv": true, "_Arg": true, "_Retval": true,
	// Shape arithmetic: small int32 tensors that TensorFlow keeps in host memory on GPUs and
	// that Grappler folds into constants when shapes are static.
	"Shape": true, "ShapeN": true, "Size": true, "Rank": true, "ConcatOffset": true,
	"BroadcastGradientArgs": true,
}

// removableOps are ops Grappler's dependency and arithmetic optimizers remove or bypass
// (moving their control edges to their inputs): a trigger among them would fire earlier than
// planned, or vanish with its gate.
var removableOps = map[string]bool{
	"NoOp": true, "Identity": true, "IdentityN": true, "Snapshot": true, "StopGradient": true,
	"PreventGradient": true, "CheckNumerics": true, "Print": true,
}

// collectiveOps are the cross-replica collectives of a data-parallel step
// (tf.distribute's MirroredStrategy and MultiWorkerMirroredStrategy, Horovod-like NCCL
// all-reduces): each replica's op meets its peers' at run time by group and instance key,
// not by graph edges. Their outputs are never swapped, their inputs never redirected to a
// swap-in, and they never gate a swap-in: a collective waits for every replica, so a trigger
// on it would tie one replica's prefetch to the slowest peer, and the collectives stay
// exactly as the program built them.
var collectiveOps = map[string]bool{
	"CollectiveReduce": true, "CollectiveReduceV2": true, "CollectiveReduceV3": true,
	"CollectiveGather": true, "CollectiveGatherV2": true,
	"CollectiveBcastSend": true, "CollectiveBcastRecv": true,
	"CollectiveBcastSendV2": true, "CollectiveBcastRecvV2": true,
	"CollectiveAllToAllV2": true, "CollectiveAllToAllV3": true,
	"CollectiveReduceScatterV2": true, "CollectiveAssignGroupV2": true,
	"CollectiveInitializeCommunicator": true, "CollectivePermute": true,
	"NcclAllReduce": true, "NcclReduce": true, "NcclBroadcast": true,
	"_NcclReduceSend": true, "_NcclReduceRecv": true, "_NcclBroadcastSend": true, "_NcclBroadcastRecv": true,
}

// IsCollective reports whether op is a cross-replica collective (see collectiveOps).
func IsCollective(op string) bool { return collectiveOps[op] }

// notConsumers are ops whose inputs are never redirected to a swapped-in copy.
var notConsumers = map[string]bool{
	"Enter": true, "RefEnter": true, "Exit": true, "RefExit": true, "Switch": true,
	"RefSwitch": true, "Merge": true, "RefMerge": true, "NextIteration": true,
	"RefNextIteration": true, "LoopCond": true, "_Send": true, "_HostSend": true, "_Retval": true,
}

// Analysis is what the planners know of a graph beyond its structure: which device each
// node runs on, which nodes are compute nodes, and which sit in while loops or conditional
// branches.
type Analysis struct {
	Graph *graphdef.Graph
	Opts  Options

	ComputeSpec   graphdef.Device   // the first compute device; zero Type means "every GPU"
	computeSpecs  []graphdef.Device // every compute device named, indices defaulted to 0
	defaultDevice graphdef.Device   // where nodes without a device run
	hostSpec      graphdef.Device   // zero when the host is derived per producer
	inLoop        []bool
	conditional   []bool
	inBranch      []bool
	Foldable      []bool
	ValueDead     []bool
	excludedOps   map[string]bool
	preserved     map[string]bool // Options.Preserve, by node name
	// Setup caches the per-node set-up of the simulations of Graph and of its planned
	// graphs, for every problem planned on the analysis (newProblemWith).
	Setup *cost.SetupCache
}

// Analyze prepares the analysis of g under opts (whose defaults must be applied).
func Analyze(g *graphdef.Graph, opts Options) *Analysis {
	a := &Analysis{Graph: g, Opts: opts, excludedOps: map[string]bool{}}
	specs, _ := ParseComputeDevices(opts.ComputeDevice)
	for _, d := range specs {
		if d.Index < 0 {
			d.Index = 0
		}
		a.computeSpecs = append(a.computeSpecs, d)
	}
	a.ComputeSpec = graphdef.Device{Replica: -1, Task: -1, Index: -1}
	if len(specs) > 0 {
		a.ComputeSpec = specs[0]
	}
	a.hostSpec, _ = graphdef.ParseDevice(opts.HostDevice)
	if a.ComputeSpec.Type != "" {
		// Nodes without a device run on the first compute device named.
		a.defaultDevice = a.computeSpecs[0]
	} else {
		a.defaultDevice = graphdef.Device{Replica: -1, Task: -1, Type: "GPU", Index: 0}
	}
	for _, op := range opts.ExcludeOps {
		a.excludedOps[op] = true
	}
	for _, p := range opts.Preserve {
		if a.preserved == nil {
			a.preserved = map[string]bool{}
		}
		a.preserved[preservedNode(p)] = true
	}
	// An Exit runs in its loop's frame; a Merge's output is live whichever branch ran.
	a.inLoop = a.reachFrom(func(n *graphdef.Node) bool { return n.Op == "Enter" || n.Op == "RefEnter" },
		func(n *graphdef.Node) bool { return n.Op == "Exit" || n.Op == "RefExit" }, true)
	a.Foldable = foldable(g)
	a.ValueDead = valueDead(g)
	if len(opts.Fetch) > 0 {
		// The simulator's pruned set (cost.PrunedNodes) for the fetched step: a node read
		// only through control edges, or only by nodes outside the step, runs as a NoOp
		// too, and a swap-in for it would run (swap nodes are kept) and read nothing.
		if pruned, err := cost.PrunedNodes(g, opts.Fetch); err == nil {
			for i, p := range pruned {
				a.ValueDead[i] = a.ValueDead[i] || p
			}
		}
	}
	// Only conditionals' Switches start a conditional region: a while loop's Switch (its
	// predicate a LoopCond) feeds the loop's Exit, and what follows the loop runs whenever
	// the step does (issue 12: marking it made LMS find no trigger after rnn_v1's loop).
	a.conditional = a.reachFrom(func(n *graphdef.Node) bool {
		_, cond := graphdef.CondPred(n)
		return cond
	}, func(n *graphdef.Node) bool { return n.Op == "Merge" || n.Op == "RefMerge" }, false)
	// The branches of v1 conditionals as TensorFlow's executor decides them (dead-ness),
	// which also covers what follows an inner conditional's Merge inside an outer branch, and
	// leaves out what follows a while loop's Exit (downstream of the loop's Switch, above).
	a.inBranch = g.InCondBranch()
	for i, in := range a.inBranch {
		a.conditional[i] = a.conditional[i] || in
	}
	return a
}

// reachFrom marks the nodes reachable (by data or control edges, loop back edges included)
// from the outputs of nodes for which start holds, not going past nodes for which stop holds
// (those are marked only when markStop is set). The start nodes themselves are marked.
func (a *Analysis) reachFrom(start, stop func(*graphdef.Node) bool, markStop bool) []bool {
	mark := make([]bool, len(a.Graph.Nodes))
	var stack []*graphdef.Node
	for _, n := range a.Graph.Nodes {
		if start(n) {
			mark[n.Index] = true
			stack = append(stack, n)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if stop(n) {
			if !markStop {
				mark[n.Index] = false
			}
			continue
		}
		visit := func(c *graphdef.Node) {
			if !mark[c.Index] {
				mark[c.Index] = true
				stack = append(stack, c)
			}
		}
		for _, uses := range n.Consumers {
			for _, u := range uses {
				visit(u.Node)
			}
		}
		for _, c := range n.ControlOutputs {
			visit(c)
		}
	}
	return mark
}

// Device returns the device node n runs on: its own device, or the default compute device
// when it has none.
func (a *Analysis) Device(n *graphdef.Node) graphdef.Device {
	if n.Device.IsZero() || n.Device.Type == "" {
		d := a.defaultDevice
		if !n.Device.IsZero() {
			d.Job, d.Replica, d.Task = n.Device.Job, n.Device.Replica, n.Device.Task
		}
		return d
	}
	return n.Device
}

// OnCompute reports whether n runs on a compute device: one of those named by
// Options.ComputeDevice, or any GPU when none is named.
func (a *Analysis) OnCompute(n *graphdef.Node) bool {
	d := a.Device(n)
	if a.ComputeSpec.Type == "" {
		return d.Type == "GPU"
	}
	for _, spec := range a.computeSpecs {
		if d.Type == spec.Type && d.Index == spec.Index && d.Matches(spec) {
			return true
		}
	}
	return false
}

// IsComputeDevice reports whether device d (a node's device, as Device returns it) is a
// compute device, by the rule of OnCompute.
func (a *Analysis) IsComputeDevice(d graphdef.Device) bool {
	return a.OnCompute(&graphdef.Node{Device: d})
}

// Host returns the device a tensor made by producer is swapped to: Options.HostDevice, or
// CPU:0 of the producer's job, replica and task.
func (a *Analysis) Host(producer *graphdef.Node) graphdef.Device {
	if a.hostSpec.Type != "" {
		return a.hostSpec
	}
	return a.Device(producer).WithDevice("CPU", 0)
}

// InLoop reports whether n is inside a while loop frame.
func (a *Analysis) InLoop(n *graphdef.Node) bool { return a.inLoop[n.Index] }

// Conditional reports whether n may be dead: it is downstream of a Switch before its Merge.
func (a *Analysis) Conditional(n *graphdef.Node) bool { return a.conditional[n.Index] }

// InBranch reports whether n is inside a branch of a v1 conditional (graphdef.Graph.Conds):
// it runs only when the conditional's predicate has one value.
func (a *Analysis) InBranch(n *graphdef.Node) bool { return a.inBranch[n.Index] }

// Preserved reports whether n is one of the nodes Options.Preserve names, which tfswap
// leaves exactly as they are.
func (a *Analysis) Preserved(n *graphdef.Node) bool { return a.preserved[n.Name] }

// Excluded reports whether n's outputs are never swapped, and why.
func (a *Analysis) Excluded(n *graphdef.Node) (bool, string) {
	if neverSwappedOps[n.Op] {
		return true, "op " + n.Op + " is never swapped"
	}
	if collectiveOps[n.Op] {
		return true, "op " + n.Op + " is a cross-replica collective"
	}
	if _, ok := n.Def.GetAttr()[RoleAttr]; ok {
		// A recomputed copy is made just before its readers; swapping it could also make a
		// wait depend on the swap-ins its chain reads, a cycle.
		return true, "made by tfswap (a recomputation)"
	}
	if aliasesVariable(n) {
		return true, "reads a variable, which keeps its buffer"
	}
	if r := a.swapOutSensitive(n); r != "" {
		return true, r
	}
	if a.excludedOps[n.Op] {
		return true, "op " + n.Op + " is excluded"
	}
	if a.Preserved(n) {
		return true, "the node is preserved"
	}
	for _, s := range a.Opts.ExcludeScopes {
		s = strings.TrimSuffix(s, "/")
		if n.Name == s || strings.HasPrefix(n.Name, s+"/") {
			return true, "scope " + s + " is excluded"
		}
	}
	if a.InLoop(n) {
		return true, "inside a while loop"
	}
	if a.InBranch(n) {
		// A tensor of the branch not taken is dead: its swap-out would be dead, and so would
		// every swap-in and wait hung on it.
		return true, "inside a conditional branch"
	}
	return false, ""
}

// TriggerEligible reports whether n may gate a swap-in: it runs on a compute device, outside
// while loops and conditional branches (a dead trigger would make the swap-in dead), and is
// an op that does work, not one Grappler removes (NoOp, Identity, ...) or folds (constants,
// shape arithmetic).
func (a *Analysis) TriggerEligible(n *graphdef.Node) bool {
	if !a.OnCompute(n) || a.InLoop(n) || a.Conditional(n) {
		return false
	}
	if a.Preserved(n) {
		return false // a trigger may be made to wait for a swap-out: a control input
	}
	if _, ok := n.Def.GetAttr()[RoleAttr]; ok {
		return false // a node tfswap added (a recomputation planned before the swaps)
	}
	if a.Foldable[n.Index] {
		return false // constant folding replaces it, and moves its control edges
	}
	if collectiveOps[n.Op] {
		return false // it waits for every replica (collectiveOps)
	}
	if removableOps[n.Op] || (neverSwappedOps[n.Op] && n.Op != "Merge" && n.Op != "RefMerge") {
		return false // a Merge's output is live whichever branch ran
	}
	if FanoutSensitive(n) != "" || a.ValueDead[n.Index] {
		// The gate would be the reader that changes Grappler's decision, or the one that
		// keeps a value nobody reads from being pruned.
		return false
	}
	switch n.Op {
	case "Placeholder", "PlaceholderWithDefault":
		return false
	}
	_, _, hasData := GatePort(n)
	return hasData // the gate reads a data output of the trigger
}

// checkTriggerDevice fails when grp's trigger runs on another compute device than one of its
// consumers: with several compute devices (the replicas of a data-parallel step), a swap-in
// is gated only by work of its own replica, never by a peer's.
func (a *Analysis) checkTriggerDevice(grp SwapInGroup) error {
	if len(a.computeSpecs) < 2 && a.ComputeSpec.Type != "" {
		return nil
	}
	td := a.Device(grp.Trigger)
	for _, u := range grp.Uses {
		if cd := a.Device(u.Node); cd != td && a.IsComputeDevice(cd) && a.IsComputeDevice(td) {
			return fmt.Errorf("internal error: trigger %q runs on %s, its consumer %q on %s: a swap-in is gated only by its own device's work", grp.Trigger.Name, td, u.Node.Name, cd)
		}
	}
	return nil
}

// shapeReaders read only the shapes of their inputs, never the data (issue 12, item 6).
var shapeReaders = map[string]bool{"Shape": true, "ShapeN": true, "Size": true, "Rank": true}

// aggregationOps are the sums Grappler's arithmetic optimizer treats as aggregations: it
// collapses trees of them into one AddN (AddOpsRewrite), and its canonicaliser
// (CanonicalizeNode) sorts their data inputs by input name. A float sum of three or more
// terms is computed in that order, so renaming one input (to a swap-in) can reorder it and
// change its last bits (issue 12, item 2: the GPT's gradient AddNs came out in another
// order). Two terms may come in either order: IEEE addition is commutative.
var aggregationOps = map[string]bool{"Add": true, "AddV2": true, "AddN": true, "AccumulateNV2": true}

// factorOps are the products HoistCommonFactorOutOfAggregation matches, by input name, in the
// terms of an aggregation: a factor read from a swap-in in one term and from the original in
// another is no longer common, and the sum is computed another way.
var factorOps = map[string]bool{"Mul": true, "Div": true, "RealDiv": true}

// The reasons ConsumerExclusion (and RecomputeExclusion) give for a read that must keep
// reading the original tensor.
const (
	// ReasonShapeReader is the reason of a read that needs only the tensor's shape.
	ReasonShapeReader = "reads only the shape: it keeps reading the original, which the executor lets it read as soon as the tensor is made"
	// ReasonSumOrder is the reason of a term of a sum whose terms Grappler orders by name.
	ReasonSumOrder = "a sum of three or more terms whose order Grappler sorts by input name: a swap-in's name could reorder it"
	// ReasonFactor is the reason of a product among the terms of a sum of products.
	ReasonFactor = "a product in the terms of a sum whose terms are all products: Grappler hoists factors common to the terms by input name"
	// ReasonProduct is the reason of a product in a tree of products Grappler may regroup.
	ReasonProduct = "a product reading a product that has no other reader: Grappler's constant folding and arithmetic optimizer regroup such products"
)

// ConsumerExclusion returns why use u must keep reading the original tensor whatever
// device it runs on, or "".
//
// Shape readers (Shape, ShapeN, Size, Rank) need only the shape, known once the tensor is
// made: TensorFlow's executor runs such a reader as soon as its inputs are ready, so reading
// the original costs nothing, and a swap-in made for it would move the whole tensor back to
// read its shape (issue 12, item 6). Rewiring a late shape reader to a Shape op taken just
// after the producer would let the original go too, but Verify admits only inputs changed to
// a swap-in or recomputed copy carrying the very tensor, so they read the original.
//
// Sums and the products in their terms are excluded where Grappler's default arithmetic
// optimizer would compute the rewritten graph in another order than the original
// (aggregationOps, factorOps), so that training stays bit-identical (issue 12, item 2): a
// product is excluded only where Grappler could hoist a common factor from the sum it feeds
// (hoistableSumReads), where it reads a product that has no other reader (severalReaders),
// which a swap-in would take out of its tree, or where constant push-down may rotate it
// (pushDownChild): the rotation moves one of its inputs up the tree only if that input is on
// the parent's device, which a swap-in, made on the host, is not. A recomputed copy is
// judged by copyExclusion.
func ConsumerExclusion(u graphdef.Use) string { return ConsumerExclusionWith(u, nil) }

// ConsumerExclusionWith is ConsumerExclusion with the value-dead nodes of the graph (valueDead),
// which Grappler prunes and which therefore do not count as readers; nil counts every reader.
// A gradient tuple's Identity may read the swap-in when tupleReader finds the one op that
// reads its value once Grappler has bypassed it: that op then reads the swap-in in Grappler's
// later passes, so it is judged as a reader of the swap-in.
func ConsumerExclusionWith(u graphdef.Use, dead []bool) string {
	swapped := u.Node.Inputs[u.Input]
	if r := tupleReader(u.Node); r != nil {
		if readerExclusion(*r, swapped, dead) != "" {
			return ReasonIdentityReader
		}
		return ""
	}
	if rs := tupleReaders(u.Node); rs != nil {
		for _, r := range rs {
			if readerExclusion(r, swapped, dead) != "" {
				return ReasonIdentityReader
			}
		}
		return ""
	}
	return readerExclusion(u, swapped, dead)
}

// readerExclusion returns why use u, which reads the tensor swapped or, through a gradient
// tuple's Identity Grappler bypasses, its value, must keep reading the original, or "".
func readerExclusion(u graphdef.Use, swapped graphdef.Tensor, dead []bool) string {
	c := u.Node
	switch {
	case shapeReaders[c.Op]:
		return ReasonShapeReader
	case identityReaderSensitive(c):
		return ReasonIdentityReader
	case factorOps[c.Op]:
		if hoistableSumReads(c) {
			return ReasonFactor
		}
		if x := swapped.Node; factorOps[x.Op] && !severalReaders(x, dead) {
			return ReasonProduct
		}
		if pushDownChild(c, dead) && !pushDownOrderKept(c, u.Node.Inputs[u.Input], swapped) {
			return ReasonProduct
		}
	case aggregationOps[c.Op]:
		if !sumOrderKept(u, swapped) {
			return ReasonSumOrder
		}
	}
	return ""
}

// sumOrderKept reports whether the terms of the sum u's consumer belongs to keep their order
// by name when u's input, or any other term, is renamed to a node of tfswap's scope. The sum
// is the tree Grappler collapses into one AddN: aggregations read by a single aggregation.
// A sum of at most two terms keeps its value in any order. swapped is the tensor whose
// swap-in u would read: u's input, or the input of the gradient tuple Identity u reads.
func sumOrderKept(u graphdef.Use, swapped graphdef.Tensor) bool {
	terms := sumTerms(u.Node)
	if len(terms) <= 2 {
		return true
	}
	// Grappler sorts the terms by the names its dependency optimizer leaves them: those of
	// the tensors the Identities on the way pass on (rootName).
	s := u.Node.Inputs[u.Input]
	for _, w := range terms {
		if w == s {
			continue
		}
		a, b := rootName(s), rootName(w)
		ka, kb := swapKey(swapped), swapKey(w)
		if strings.HasPrefix(b, ka) || strings.HasPrefix(a, kb) {
			return false
		}
		want := strings.Compare(a, b)
		if strings.Compare(ka, b) != want || strings.Compare(a, kb) != want || strings.Compare(ka, kb) != want {
			return false
		}
	}
	return true
}

// swapKey is the prefix every node tfswap adds for tensor t shares (SwapNodeName).
func swapKey(t graphdef.Tensor) string {
	return Scope + t.Node.Name + "_" + strconv.Itoa(t.Port) + "/"
}

// singleReader returns the node that reads n's outputs when it is the only one (data and
// control), or nil.
func singleReader(n *graphdef.Node) *graphdef.Node {
	if len(n.ControlOutputs) > 0 {
		return nil
	}
	var r *graphdef.Node
	for _, uses := range n.Consumers {
		for _, x := range uses {
			if r != nil && x.Node != r {
				return nil
			}
			r = x.Node
		}
	}
	return r
}

// ConsumerEligible reports whether use may be redirected to a swapped-in copy: not a
// preserved node (Options.Preserve), not inside a
// while loop or a conditional branch (a swap-in read only by a branch would run, and hold
// device memory, whichever side is taken), no control-flow op, no collective (collectiveOps),
// and no objection from ConsumerExclusion.
//
// A gradient tuple's Identity that may read a swap-in (tupleReader) needs its reader, which
// then runs after the swap-in too, to be movable as well.
func (a *Analysis) ConsumerEligible(u graphdef.Use) bool {
	if !a.ConsumerMovable(u) || ConsumerExclusionWith(u, a.ValueDead) != "" {
		return false
	}
	if r := tupleReader(u.Node); r != nil {
		return a.ConsumerMovable(*r) && a.Device(r.Node) == a.Device(u.Node)
	}
	for _, r := range tupleReaders(u.Node) {
		if !a.ConsumerMovable(r) || a.Device(r.Node) != a.Device(u.Node) {
			return false
		}
	}
	return true
}

// ConsumerMovable reports whether use u may read another node than its original input as far
// as its place in the graph goes (ConsumerEligible without ConsumerExclusion's rules).
func (a *Analysis) ConsumerMovable(u graphdef.Use) bool {
	return a.OnCompute(u.Node) && !notConsumers[u.Node.Op] && !collectiveOps[u.Node.Op] && !a.Preserved(u.Node) && !a.InLoop(u.Node) && !a.InBranch(u.Node) && !a.ValueDead[u.Node.Index]
}

// Candidate is a tensor that may be swapped: made on a compute device, of known size, by an
// op that is not excluded.
type Candidate struct {
	Tensor graphdef.Tensor
	Bytes  int64
}

// Skipped is a tensor that was not swapped, with the reason.
type Skipped struct {
	Tensor string
	Reason string
}

// Candidates returns the graph's swap candidates in topological order of their producers
// (ports ascending), and the tensors on compute devices that cannot be swapped because
// their size is unknown.
func (a *Analysis) Candidates() (cands []Candidate, unsized []Skipped) {
	for _, n := range a.Graph.Topo {
		if !a.OnCompute(n) {
			continue
		}
		if ex, _ := a.Excluded(n); ex {
			continue
		}
		for port, uses := range n.Consumers {
			if len(uses) == 0 {
				continue
			}
			t := graphdef.Tensor{Node: n, Port: port}
			if dt, ok := t.DataType(); ok && (graphdef.IsRef(dt) || graphdef.IsHandle(dt)) {
				continue // ref, resource and variant tensors are handles, not data
			}
			if dt, ok := t.DataType(); ok && dt == tpb.DataType_DT_INT32 {
				continue // TensorFlow keeps int32 tensors of GPU kernels in host memory
			}
			size, ok, reason := t.Bytes()
			if !ok {
				unsized = append(unsized, Skipped{Tensor: t.String(), Reason: reason})
				continue
			}
			if a.Opts.MinTensorBytes > 0 && size < a.Opts.MinTensorBytes {
				continue
			}
			cands = append(cands, Candidate{Tensor: t, Bytes: size})
		}
	}
	return cands, unsized
}

// SortUses orders uses by consumer level, then graph order, then input index.
func SortUses(uses []graphdef.Use) {
	sort.SliceStable(uses, func(i, j int) bool {
		a, b := uses[i].Node, uses[j].Node
		if la, lb := DeferredNode(a).Level, DeferredNode(b).Level; la != lb {
			return la < lb
		}
		if a.Level != b.Level {
			return a.Level < b.Level
		}
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return uses[i].Input < uses[j].Input
	})
}

// Resident reports whether n's outputs stay where they are made for the whole step whatever
// a plan does: the outputs of the ops never swapped (constants, variables and their reads,
// control flow, shape arithmetic) and of an op that aliases a variable's value. A planner
// counts them as live on their device throughout.
func Resident(n *graphdef.Node) bool {
	return neverSwappedOps[n.Op] || aliasesVariable(n)
}

// aliasesVariable reports whether n's output is (or may share its buffer with) a variable's
// value: an Identity or Snapshot of a ref tensor or of a variable read. Swapping it frees
// nothing while the variable lives.
func aliasesVariable(n *graphdef.Node) bool {
	if n.Op != "Identity" && n.Op != "Snapshot" && n.Op != "RefIdentity" {
		return false
	}
	if len(n.Inputs) == 0 {
		return false
	}
	in := n.Inputs[0]
	if dt, ok := in.DataType(); ok && graphdef.IsRef(dt) {
		return true
	}
	return neverSwappedOps[in.Node.Op] && (in.Node.Op == "ReadVariableOp" || in.Node.Op == "VariableV2" || in.Node.Op == "Variable")
}

// foldable marks the nodes Grappler's constant folding can replace by constants: stateless
// ops whose data inputs all come from constants or other foldable nodes (a Tile or Reshape of
// constants, the shape arithmetic of a gradient). Placeholders, variables and stateful ops
// are never foldable. Like a removed op, a folded one hands its control edges to others, so
// it must not gate a swap-in or hold back an op.
func foldable(g *graphdef.Graph) []bool {
	f := make([]bool, len(g.Nodes))
	for _, n := range g.Topo {
		switch {
		case n.Op == "Const" || n.Op == "HostConst":
			f[n.Index] = true
		case len(n.Inputs) == 0 || graphdef.IsStatefulOp(n.Op) || !graphdef.KnownOp(n.Op) || neverSwappedOps[n.Op] && n.Op != "Shape" && n.Op != "ShapeN" && n.Op != "Size" && n.Op != "Rank" && n.Op != "BroadcastGradientArgs" && n.Op != "ConcatOffset":
			// Sources other than constants, state, unknown ops and control flow stay.
		default:
			all := true
			for _, in := range n.Inputs {
				if !f[in.Node.Index] {
					all = false
					break
				}
			}
			f[n.Index] = all
		}
	}
	return f
}

// NoTriggerWhy says why no op on the path ByDistance walks back from the earliest of consumers
// to producer (triggers.Ancestry) may trigger a swap-in: how many of those ops lie inside a
// while loop (NoTriggerInLoop when all do), inside a conditional branch, off the compute
// device, or do no work a trigger may be hung on.
func (a *Analysis) NoTriggerWhy(producer *graphdef.Node, consumers []*graphdef.Node) string {
	path := triggers.Ancestry(producer, consumers)
	if len(path) == 0 {
		return "no op lies between them"
	}
	var loop, cond, off, other int
	for _, n := range path {
		switch {
		case a.InLoop(n):
			loop++
		case a.Conditional(n):
			cond++
		case !a.OnCompute(n):
			off++
		default:
			other++
		}
	}
	if loop == len(path) {
		return fmt.Sprintf("all %d ops between them lie %s", len(path), NoTriggerInLoop)
	}
	return fmt.Sprintf("of the %d ops between them, %d lie inside a while loop, %d inside a conditional branch, %d off the compute device, and %d do no work a trigger can be hung on", len(path), loop, cond, off, other)
}

// GroupUses splits uses (sorted by consumer level) into groups whose consumers lie within
// groupBy levels of the group's first; groupBy < 0 gives one group per consumer node.
func GroupUses(uses []graphdef.Use, groupBy int) [][]graphdef.Use {
	var groups [][]graphdef.Use
	for _, u := range uses {
		if n := len(groups); n > 0 {
			first := groups[n-1][0].Node
			if u.Node == first || (groupBy >= 0 && DeferredNode(u.Node).Level-DeferredNode(first).Level <= groupBy) {
				groups[n-1] = append(groups[n-1], u)
				continue
			}
		}
		groups = append(groups, []graphdef.Use{u})
	}
	return groups
}

// SwapInReaders returns the distinct nodes whose runs the swap-in read by uses must precede,
// in order, the ones its trigger is searched back from: the consumers, a gradient tuple
// Identity replaced by its reader (deferredNode), which the trigger rules then search back
// from (the Identity itself waits only for the swap-in and its tuple, both early). Tools that
// place triggers themselves (package tune) use it so that their candidates match the
// planners'.
func SwapInReaders(uses []graphdef.Use) []*graphdef.Node {
	var nodes []*graphdef.Node
	seen := map[*graphdef.Node]bool{}
	for _, u := range uses {
		for _, n := range StandIns(u.Node) {
			if !seen[n] {
				seen[n] = true
				nodes = append(nodes, n)
			}
		}
	}
	return nodes
}

// NoTriggerInLoop is the phrase a Skipped reason holds when no swap-in trigger could be found
// because every op between the producer and its consumer lies inside a while loop.
const NoTriggerInLoop = "inside a while loop"

// DeadCopyRead reports whether the later read u, by a value-dead node (valueDead: the unused
// half of a gradient tuple and the ops only it reads, such as the gradient of the attention
// scores' scale constant), may read a recomputed copy of its tensor. Grappler prunes the tuple
// member and its dependency optimizer turns the rest into NoOps, so after Grappler nothing
// reads the tensor there; but TensorFlow's executor before Grappler, tfswap's simulator and
// the VirtualCluster run the dead reader, which keeps the original live until the backward
// pass (a GPT's raw attention scores, one [B,A,S,S] tensor a layer). A swap-in would keep the
// dead chain across devices, which the dependency optimizer does not convert, so it keeps
// reading the original (consumerMovable); a recomputed copy is made on the reader's own
// device, and the dead chain, the copy with it when only dead nodes read it, becomes NoOps
// as in the original. Its value is never read, so how Grappler regroups the dead products
// changes no live value: a rotation or a sum tree only takes inner nodes whose one reader is
// in the tree, all of them dead below a dead root.
func (a *Analysis) DeadCopyRead(u graphdef.Use) bool {
	c := u.Node
	if !a.ValueDead[c.Index] || !a.OnCompute(c) || notConsumers[c.Op] || collectiveOps[c.Op] || a.Preserved(c) || a.InLoop(c) || a.InBranch(c) {
		return false
	}
	return a.Device(c) == a.Device(c.Inputs[u.Input].Node)
}
