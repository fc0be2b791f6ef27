package tfrun

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// ProbeScope is the name scope of the probe nodes AddProbes adds.
const ProbeScope = "tfrun_probe/"

// doNotRemoveAttr is the attr that makes Grappler keep a node.
const doNotRemoveAttr = "_grappler_do_not_remove"

// swapScope is the name scope of the nodes tfswap's rewrite adds (rewrite.Scope).
const swapScope = "tfswap/"

// Swap is one swapped tensor of a rewrite, as the checks need it: the fields of
// rewrite.Swap, copied so that this package does not depend on the rewrite's own types.
type Swap struct {
	// Tensor is the swapped tensor ("producer:port") and Producer the node that makes it.
	Tensor, Producer string
	// Host is the device the tensor is kept on; SwapOut is the swap-out node.
	Host, SwapOut string
	SwapIns       []SwapIn
}

// SwapIn is one swap-in of a Swap: the node, its device, its trigger and the consumers
// that read it.
type SwapIn struct {
	Node, Device, Trigger string
	Consumers             []string
}

// PlaceAll returns a copy of m with every node placed on device. The changed NodeDefs are
// clones; m is not modified.
func PlaceAll(m *graphdef.Model, device string) *graphdef.Model {
	out := m.Clone()
	for i, nd := range out.Graph.Node {
		c := proto.Clone(nd).(*npb.NodeDef)
		c.Device = device
		out.Graph.Node[i] = c
	}
	return out
}

// H2DSource returns the node whose output crosses from the host to the consumer device for a
// swap-in, and that device: the swap-in itself when it sits on the host (GateHost), else the
// swap-out that feeds it (GateDevice, where the swap-in is on the consumer's device).
// computeDevice is the consumers' device, used when the swap-in is on the host.
func H2DSource(sw Swap, in SwapIn, computeDevice string) (source, device string) {
	if SameDevice(in.Device, sw.Host) {
		return in.Node, computeDevice
	}
	return sw.SwapOut, in.Device
}

// AddProbes returns a copy of m with a probe for every swap-in of swaps: an Identity on the
// consumer device that reads the tensor crossing from the host (see H2DSource), marked
// _grappler_do_not_remove. The probe shares the _Recv of that tensor with the swap-in's
// consumers (the partitioner makes one _Recv per tensor and device), and has no other input,
// so its start in the step stats tells when the tensor arrived on the device, which the
// step stats do not record for _Recv itself. Swap-ins whose tensors cross through the same
// _Recv (GateDevice swap-ins of one swap-out) share a probe. Run the probes as targets
// (ProbeNames). The map gives each swap-in's probe.
func AddProbes(m *graphdef.Model, swaps []Swap, computeDevice string) (*graphdef.Model, map[string]string, error) {
	out := m.Clone()
	byName := map[string]*npb.NodeDef{}
	for _, nd := range out.Graph.Node {
		byName[nd.GetName()] = nd
	}
	probes := map[string]string{}
	for _, sw := range swaps {
		for _, in := range sw.SwapIns {
			src, dev := H2DSource(sw, in, computeDevice)
			nd := byName[src]
			if nd == nil {
				return nil, nil, fmt.Errorf("tfrun: swap node %q is not in the graph", src)
			}
			// One probe per tensor and device: they would share one _Recv anyway, and
			// Grappler merges identical Identities.
			name := ProbeScope + strings.ReplaceAll(src, "/", "_") + "/" + ShortDevice(dev)[len("/device:"):]
			name = strings.ReplaceAll(name, ":", "_")
			if byName[name] == nil {
				p := &npb.NodeDef{Name: name, Op: "Identity", Input: []string{src}, Device: dev, Attr: map[string]*apb.AttrValue{
					"T":             nd.GetAttr()["T"],
					doNotRemoveAttr: {Value: &apb.AttrValue_B{B: true}},
				}}
				out.Graph.Node = append(out.Graph.Node, p)
				byName[name] = p
			}
			probes[in.Node] = name
		}
	}
	return out, probes, nil
}

// ProbeNames returns the probes' distinct node names, sorted, to pass as run targets.
func ProbeNames(probes map[string]string) []string {
	seen := map[string]bool{}
	names := make([]string, 0, len(probes))
	for _, p := range probes {
		if !seen[p] {
			seen[p] = true
			names = append(names, p)
		}
	}
	sort.Strings(names)
	return names
}

// RunSpec describes the traced run of a rewritten graph: the graph that ran (with probes,
// if any), its feeds and fetches (tensor names) and its targets (node names). The checks use
// it to tell why a node is missing from the partition graphs: the run did not need it (the
// session pruned it), it was fed (the session replaced it by an _Arg), or Grappler removed it.
type RunSpec struct {
	Graph                   *gpb.GraphDef
	Feeds, Fetches, Targets []string
}

// FixtureRun returns the RunSpec of a fixture's training step on graph, with extra targets.
func FixtureRun(graph *gpb.GraphDef, fx *Fixture, extraTargets ...string) RunSpec {
	feeds := make([]string, 0, len(fx.Feeds))
	for _, f := range fx.Feeds {
		feeds = append(feeds, f.Name)
	}
	return RunSpec{Graph: graph, Feeds: feeds, Fetches: []string{fx.Loss}, Targets: append([]string{fx.TrainOp}, extraTargets...)}
}

// needed returns the nodes the run needs: those the fetches and targets reach through data
// and control inputs, not going past fed nodes.
func (r RunSpec) needed() map[string]bool {
	byName := map[string]*npb.NodeDef{}
	for _, nd := range r.Graph.GetNode() {
		byName[nd.GetName()] = nd
	}
	fed := map[string]bool{}
	for _, f := range r.Feeds {
		if name, _, _, err := graphdef.ParseInput(f); err == nil {
			fed[name] = true
		}
	}
	need := map[string]bool{}
	var stack []string
	push := func(name string) {
		if !need[name] {
			need[name] = true
			stack = append(stack, name)
		}
	}
	for _, f := range r.Fetches {
		if name, _, _, err := graphdef.ParseInput(f); err == nil {
			push(name)
		}
	}
	for _, t := range r.Targets {
		push(t)
	}
	for len(stack) > 0 {
		name := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if fed[name] || byName[name] == nil {
			continue
		}
		for _, in := range byName[name].GetInput() {
			if p, _, _, err := graphdef.ParseInput(in); err == nil {
				push(p)
			}
		}
	}
	return need
}

// isFed reports whether the run feeds an output of node.
func (r RunSpec) isFed(node string) bool {
	for _, f := range r.Feeds {
		if name, _, _, err := graphdef.ParseInput(f); err == nil && name == node {
			return true
		}
	}
	return false
}

// Gate is what releases a swap-in in a traced step: the trigger the rewrite planned, or,
// when Grappler removed it, the nodes its control edge was moved to.
type Gate struct {
	// Nodes are the gating nodes; the swap-in waits for all of them.
	Nodes []string
	// Last is the timing of the gate that finished last (by OpEnd).
	Last NodeTiming
	// Moved is set when the planned trigger is not in the partition graphs.
	Moved bool
}

// gateOf resolves the gate of a swap-in in a trace. It returns a Gate without Nodes when
// Grappler removed the trigger and left the swap-in no control input.
func gateOf(tr *Trace, in SwapIn) (Gate, error) {
	g := Gate{Nodes: []string{in.Trigger}}
	if _, ok := tr.Node(in.Trigger); !ok {
		g.Moved = true
		g.Nodes = tr.ControlGates(in.Node)
	}
	for i, n := range g.Nodes {
		ts := tr.TimingsOf(n)
		if len(ts) != 1 {
			return g, fmt.Errorf("tfrun: gate %q of swap-in %q has %d timings in the trace, want 1", n, in.Node, len(ts))
		}
		if i == 0 || ts[0].OpEnd > g.Last.OpEnd {
			g.Last = ts[0]
		}
	}
	return g, nil
}

// The rules CheckSwapOrder checks.
const (
	// CheckD2H: the swap-out had finished when the trigger started.
	CheckD2H = "d2h-before-trigger"
	// CheckH2DSend: the node feeding the host-to-device _Send started after the trigger
	// finished.
	CheckH2DSend = "h2d-send-after-trigger"
	// CheckH2DRecv: the tensor arrived on the device after the trigger finished.
	CheckH2DRecv = "h2d-recv-after-trigger"
)

// Violation is one way a traced step broke the swap schedule.
type Violation struct {
	// Tensor is the swapped tensor and SwapIn the swap-in concerned.
	Tensor, SwapIn string
	// Check is the rule: CheckD2H, CheckH2DSend or CheckH2DRecv.
	Check string
	// Detail says what happened, with times in microseconds from the step's start.
	Detail string
}

// Gating reports whether the violated rule is one the trigger's control edge is meant to
// guarantee (CheckH2DSend, CheckH2DRecv): such a violation means the gate does not hold
// the copy back. CheckD2H is a property of the schedule instead: nothing in the graph makes
// the trigger wait for the swap-out.
func (v Violation) Gating() bool { return v.Check != CheckD2H }

// String describes the violation in one line.
func (v Violation) String() string {
	return fmt.Sprintf("%s (swap-in %s): %s: %s", v.Tensor, v.SwapIn, v.Check, v.Detail)
}

// CheckSwapOrder checks, on a traced step of a rewritten graph, that every swap-in followed
// its trigger:
//
//   - CheckD2H: the device-to-host copy was complete before the trigger started. The
//     swap-out runs only once its _Recv on the host has the tensor, so its end bounds the
//     copy's completion from above.
//   - CheckH2DSend: the node feeding the host-to-device _Send (the swap-in on the host, or
//     with the swap-in on the device, the swap-out) started after the trigger finished.
//     TensorFlow's step stats leave out _Send and _Recv, and a _Send runs once its input is
//     ready, so its input's start bounds the send from below.
//   - CheckH2DRecv: the tensor arrived on the device after the trigger finished, as seen by
//     the probe that reads the same _Recv (AddProbes).
//
// "Finished" is the trigger's kernel end (OpEnd), which the executor records before it makes
// any successor ready; "started" is a node's Start. When Grappler removed a trigger, the
// check uses the nodes the swap-in's control edge now comes from (see Gate). Swap-ins the
// run did not need, swap nodes the runtime merged away, and swap-ins left with no gate at
// all are skipped, each with a note. It returns an error when a node the check needs is in
// the partition graphs but has no single timing.
func CheckSwapOrder(tr *Trace, swaps []Swap, probes map[string]string, computeDevice string, run RunSpec) (vs []Violation, notes []string, err error) {
	origin := tr.Origin()
	at := func(ns int64) string { return fmt.Sprintf("%.1fus", float64(ns-origin)/1000) }
	timing := func(node string) (NodeTiming, error) {
		ts := tr.TimingsOf(node)
		if len(ts) != 1 {
			return NodeTiming{}, fmt.Errorf("tfrun: node %q has %d timings in the trace, want 1", node, len(ts))
		}
		return ts[0], nil
	}
	need := run.needed()
	for _, sw := range swaps {
		if !need[sw.SwapOut] {
			notes = append(notes, fmt.Sprintf("swap of %s: not needed by the run (pruned)", sw.Tensor))
			continue
		}
		if _, ok := tr.Node(sw.SwapOut); !ok {
			notes = append(notes, fmt.Sprintf("swap of %s: swap-out %s is not in the partition graphs; not checked", sw.Tensor, sw.SwapOut))
			continue
		}
		out, err := timing(sw.SwapOut)
		if err != nil {
			return nil, nil, err
		}
		for _, in := range sw.SwapIns {
			if !need[in.Node] {
				notes = append(notes, fmt.Sprintf("swap-in %s: not needed by the run (pruned)", in.Node))
				continue
			}
			if _, ok := tr.Node(in.Node); !ok {
				notes = append(notes, fmt.Sprintf("swap-in %s is not in the partition graphs; not checked", in.Node))
				continue
			}
			gate, err := gateOf(tr, in)
			if err != nil {
				return nil, nil, err
			}
			if len(gate.Nodes) == 0 {
				notes = append(notes, fmt.Sprintf("swap-in %s: Grappler removed trigger %s and left no control input: ungated, not checked", in.Node, in.Trigger))
				continue
			}
			trig := gate.Last
			if gate.Moved {
				notes = append(notes, fmt.Sprintf("swap-in %s: Grappler removed trigger %s; the swap-in is gated by %v", in.Node, in.Trigger, gate.Nodes))
			}
			add := func(check, format string, args ...any) {
				vs = append(vs, Violation{Tensor: sw.Tensor, SwapIn: in.Node, Check: check, Detail: fmt.Sprintf(format, args...)})
			}
			if out.OpEnd > trig.Start {
				add(CheckD2H, "swap-out %s ended at %s, after trigger %s started at %s", sw.SwapOut, at(out.OpEnd), trig.Node, at(trig.Start))
			}
			src, _ := H2DSource(sw, in, computeDevice)
			st, err := timing(src)
			if err != nil {
				return nil, nil, err
			}
			if st.Start < trig.OpEnd {
				add(CheckH2DSend, "%s, which feeds the host-to-device _Send, started at %s, before trigger %s finished at %s", src, at(st.Start), trig.Node, at(trig.OpEnd))
			}
			probe, ok := probes[in.Node]
			if !ok {
				return nil, nil, fmt.Errorf("tfrun: swap-in %q has no probe", in.Node)
			}
			pt, err := timing(probe)
			if err != nil {
				return nil, nil, err
			}
			if pt.Start < trig.OpEnd {
				add(CheckH2DRecv, "the copy of %s had arrived on %s by %s (probe %s), before trigger %s finished at %s", src, ShortDevice(pt.Device), at(pt.Start), probe, trig.Node, at(trig.OpEnd))
			}
		}
	}
	return vs, notes, nil
}

// CheckSwapPartitions checks that the swap nodes of swaps survived Grappler and run where the
// rewrite put them, and that the partition graphs hold the transfers they imply: the
// producer's tensor sent to the swap-out's device (unless the producer was fed: feeds arrive
// on the host); each swap-in fed by its swap-out (through a transfer when they are on
// different devices) and gated by its trigger (a control input on the same device, or a
// control transfer from the trigger's device); and the swap-in's output sent to each
// consumer on another device.
//
// Problems are failures. Notes record what the session and the optimizers changed without
// breaking the swap: nodes the run does not need (pruned), fed producers, tensors Grappler
// replaced by constants, swap nodes merged with an identical one by the common-subexpression
// elimination that runs on partition graphs after Grappler (it does not honour
// _grappler_do_not_remove), triggers Grappler removed (the control edge moves to their
// inputs), and consumers it fused into other nodes.
func CheckSwapPartitions(tr *Trace, swaps []Swap, run RunSpec) (problems, notes []string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	need := run.needed()
	inRun := map[string]bool{}
	for _, nd := range run.Graph.GetNode() {
		inRun[nd.GetName()] = true
	}
	isSwapNode := func(name string) bool { return strings.HasPrefix(name, swapScope) }
	// origin returns the tensor ("node:port") a partition node's first data input carries,
	// seen through a transfer, and the node that makes it.
	origin := func(pn PartitionNode) (string, PartitionNode, bool) {
		inputs := pn.Def.GetInput()
		if len(inputs) == 0 || strings.HasPrefix(inputs[0], "^") {
			return "", PartitionNode{}, false
		}
		in := inputs[0]
		name, _, _, _ := graphdef.ParseInput(in)
		if r, ok := tr.Node(name); ok && IsRecv(r.Op) {
			s := tr.SendFor(r)
			if s == nil {
				return "", PartitionNode{}, false
			}
			in = s.Def.GetInput()[0]
			name, _, _, _ = graphdef.ParseInput(in)
		}
		n, ok := tr.Node(name)
		return canonicalTensor(in), n, ok
	}
	// recvReadBy returns the transfer among transfers whose _Recv is read by dst (a data
	// input, or with control set, a control input, possibly through the Identity the
	// partitioner puts after a control _Recv).
	recvReadBy := func(transfers []Transfer, dst PartitionNode, control bool) *Transfer {
		for i, tx := range transfers {
			if tx.Recv == nil || !SameDevice(tx.Recv.Device, dst.Device) {
				continue
			}
			names := map[string]bool{tx.Recv.Name: true}
			if control {
				for _, c := range tr.ConsumersOf(tx.Recv.Name) {
					if c.Op == "Identity" {
						names[c.Name] = true
					}
				}
			}
			for _, in := range dst.Def.GetInput() {
				name, _, isControl, err := graphdef.ParseInput(in)
				if err == nil && names[name] && isControl == control {
					return &transfers[i]
				}
			}
		}
		return nil
	}
	for _, sw := range swaps {
		if !need[sw.SwapOut] {
			note("swap of %s: not needed by the run (pruned)", sw.Tensor)
			continue
		}
		out, outOK := tr.Node(sw.SwapOut)
		merged := ""
		if !outOK {
			// Look for the swap-out the swap-ins read instead.
			for _, si := range sw.SwapIns {
				if in, ok := tr.Node(si.Node); ok {
					if t, _, ok := origin(in); ok && isSwapNode(t) && !strings.HasPrefix(t, sw.SwapOut+":") {
						merged = strings.TrimSuffix(t, ":0")
					}
				}
			}
			if merged != "" {
				note("swap of %s: swap-out %s was merged into the identical %s by the runtime's common-subexpression elimination", sw.Tensor, sw.SwapOut, merged)
			} else {
				bad("swap-out %s of %s is not in the partition graphs, though the run needs it", sw.SwapOut, sw.Tensor)
			}
		} else {
			if !SameDevice(out.Device, sw.Host) {
				bad("swap-out %s runs on %s, not on the host %s", sw.SwapOut, out.Device, sw.Host)
			}
			t, o, ok := origin(out)
			prod, prodOK := tr.Node(sw.Producer)
			switch {
			case !ok:
				bad("swap-out %s: cannot follow its input %v back to a node", sw.SwapOut, out.Def.GetInput())
			case t == canonicalTensor(sw.Tensor) && prodOK:
				if SameDevice(prod.Device, out.Device) {
					bad("producer %s and swap-out %s are both on %s: nothing is copied", sw.Producer, sw.SwapOut, out.Device)
				} else if recvReadBy(tr.SendOf(sw.Tensor), out, false) == nil {
					bad("no _Send/_Recv pair carries %s from %s to swap-out %s", sw.Tensor, prod.Device, sw.SwapOut)
				}
			case o.Op == "_Arg" && run.isFed(sw.Producer):
				note("swap of %s: the tensor is fed, so it arrives on %s as %s and the swap-out reads it there", sw.Tensor, ShortDevice(o.Device), o.Name)
			case !inRun[o.Name]:
				note("swap of %s: Grappler replaced the tensor by %s (%s); the swap-out reads that", sw.Tensor, o.Name, o.Op)
			case !prodOK && forwards(run.Graph, sw.Tensor, t):
				note("swap of %s: Grappler removed the %s %s; the swap-out reads %s, which it forwarded", sw.Tensor, opOf(run.Graph, sw.Producer), sw.Producer, t)
			default:
				bad("swap-out %s reads %s, not %s", sw.SwapOut, t, sw.Tensor)
			}
		}
		for _, si := range sw.SwapIns {
			if !need[si.Node] {
				note("swap-in %s: not needed by the run (pruned)", si.Node)
				continue
			}
			in, ok := tr.Node(si.Node)
			if !ok {
				bad("swap-in %s of %s is not in the partition graphs, though the run needs it", si.Node, sw.Tensor)
				continue
			}
			if !SameDevice(in.Device, si.Device) {
				bad("swap-in %s runs on %s, not on %s", si.Node, in.Device, si.Device)
			}
			if t, _, ok := origin(in); !ok || (t != sw.SwapOut+":0" && t != merged+":0") {
				bad("swap-in %s reads %s, not swap-out %s", si.Node, t, sw.SwapOut)
			} else if outOK && !SameDevice(in.Device, out.Device) && recvReadBy(tr.SendOf(sw.SwapOut+":0"), in, false) == nil {
				bad("no _Send/_Recv pair carries swap-out %s to swap-in %s", sw.SwapOut, si.Node)
			}
			if trig, ok := tr.Node(si.Trigger); ok {
				if SameDevice(trig.Device, in.Device) {
					found := false
					for _, x := range in.Def.GetInput() {
						found = found || x == "^"+si.Trigger
					}
					if !found {
						bad("swap-in %s has no control input from trigger %s: inputs %v", si.Node, si.Trigger, in.Def.GetInput())
					}
				} else if recvReadBy(tr.ControlSendOf(si.Trigger), in, true) == nil {
					bad("no control _Send/_Recv pair carries trigger %s (%s) to swap-in %s", si.Trigger, trig.Device, si.Node)
				}
			} else if gates := tr.ControlGates(si.Node); len(gates) == 0 {
				bad("swap-in %s: Grappler removed trigger %s (%s) and left no control input: the swap-in is ungated", si.Node, si.Trigger, opOf(run.Graph, si.Trigger))
			} else {
				bad("swap-in %s: Grappler removed trigger %s (%s); the control edge now comes from %v", si.Node, si.Trigger, opOf(run.Graph, si.Trigger), gates)
			}
			sends := tr.SendOf(si.Node + ":0")
			readers := 0
			for _, tx := range sends {
				if tx.Recv != nil {
					readers += len(tr.ConsumersOf(tx.Recv.Name))
				}
			}
			if !SameDevice(in.Device, sw.Host) {
				readers = len(tr.ConsumersOf(si.Node))
			}
			if readers == 0 {
				bad("nothing reads swap-in %s (or the _Recv of its output) in the partition graphs", si.Node)
			}
			for _, c := range si.Consumers {
				cn, ok := tr.Node(c)
				switch {
				case !ok && need[c]:
					note("consumer %s of swap-in %s is not in the partition graphs: Grappler replaced it", c, si.Node)
				case !ok:
					note("consumer %s of swap-in %s: not needed by the run (pruned)", c, si.Node)
				case SameDevice(cn.Device, in.Device):
				case recvReadBy(sends, cn, false) == nil:
					bad("no _Send/_Recv pair carries swap-in %s (%s) to consumer %s (%s)", si.Node, in.Device, c, cn.Device)
				}
			}
		}
	}
	return problems, notes
}

// identityOps are the ops that forward their first input unchanged.
var identityOps = map[string]bool{"Identity": true, "Snapshot": true, "StopGradient": true, "PreventGradient": true}

// forwards reports whether tensor (in g) is, through a chain of Identity-like nodes, a copy
// of other: what Grappler's dependency optimizer relies on to remove such nodes.
func forwards(g *gpb.GraphDef, tensor, other string) bool {
	byName := map[string]*npb.NodeDef{}
	for _, nd := range g.GetNode() {
		byName[nd.GetName()] = nd
	}
	t := canonicalTensor(tensor)
	for i := 0; i < len(byName); i++ {
		if t == canonicalTensor(other) {
			return true
		}
		name, port, _, err := graphdef.ParseInput(t)
		nd := byName[name]
		if err != nil || port != 0 || nd == nil || !identityOps[nd.GetOp()] || len(nd.GetInput()) == 0 || strings.HasPrefix(nd.GetInput()[0], "^") {
			return false
		}
		t = canonicalTensor(nd.GetInput()[0])
	}
	return false
}

// opOf returns the op of a node of g, or "?".
func opOf(g *gpb.GraphDef, name string) string {
	for _, nd := range g.GetNode() {
		if nd.GetName() == name {
			return nd.GetOp()
		}
	}
	return "?"
}
