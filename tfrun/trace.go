package tfrun

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	sspb "github.com/wamuir/graft/tensorflow/core/framework/step_stats_go_proto"
)

// NodeTiming is when one node ran on one device during a traced step, in nanoseconds of
// the process clock (all devices of a process share it).
//
// Start and End span everything the executor did for the node (all_start .. all_end): End
// comes after the node's outputs were handed to its successors, so a successor may start
// before End. OpStart and OpEnd span the kernel itself; for an asynchronous kernel such as
// _Recv, OpEnd is when the kernel signalled completion (the tensor has arrived). To ask
// whether B ran after A finished, compare B.Start with A.OpEnd: the executor records OpEnd
// before it makes any successor ready.
type NodeTiming struct {
	Node   string
	Device string
	// Label is the step stats' timeline label, e.g. "MatMul = MatMul(a, b)".
	Label                      string
	Start, End, OpStart, OpEnd int64
	Thread                     uint32
}

// Relative formats the timing for failure messages, in microseconds after origin.
func (n NodeTiming) Relative(origin int64) string {
	return fmt.Sprintf("%s on %s [%d..%d]us (op %d..%d)", n.Node, ShortDevice(n.Device),
		(n.Start-origin)/1000, (n.End-origin)/1000, (n.OpStart-origin)/1000, (n.OpEnd-origin)/1000)
}

// PartitionNode is a node of one partition graph, with the transfer attributes of _Send and
// _Recv nodes decoded.
type PartitionNode struct {
	Def *npb.NodeDef
	// Partition is the index of the graph in RunMetadata.partition_graphs.
	Partition int
	Name, Op  string
	// Device is the node's (full) device.
	Device string
	// TensorName, SendDevice and RecvDevice are the _Send/_Recv attributes that pair a send
	// with its receive (empty for other ops).
	TensorName, SendDevice, RecvDevice string
}

// Transfer is one cross-device edge of the partitioned graph: a _Send and the _Recv in
// another partition that has the same tensor_name, send_device and recv_device. Recv is nil
// when no partition holds a matching receive.
type Transfer struct {
	Send PartitionNode
	Recv *PartitionNode
}

// Trace is a traced step's RunMetadata, indexed: node timings per device from StepStats,
// and the partition graphs.
type Trace struct {
	Metadata *RunMetadata
	// Timings are all node timings, ordered by Start.
	Timings []NodeTiming
	// PartitionGraphs are RunMetadata.partition_graphs: what ran, after Grappler.
	PartitionGraphs []*gpb.GraphDef
	// Nodes are the nodes of all partition graphs, in order.
	Nodes []PartitionNode

	byName map[string][]int // node name -> indices in Timings
	nodeIx map[string][]int // node name -> indices in Nodes
}

// NewTrace indexes md. Node times are taken from the *_nanos fields when they are set and
// from the *_micros fields otherwise.
func NewTrace(md *RunMetadata) *Trace {
	t := &Trace{Metadata: md, byName: map[string][]int{}, nodeIx: map[string][]int{}}
	for _, dev := range md.GetStepStats().GetDevStats() {
		for _, ns := range dev.GetNodeStats() {
			t.Timings = append(t.Timings, timingOf(dev.GetDevice(), ns))
		}
	}
	sort.SliceStable(t.Timings, func(i, j int) bool { return t.Timings[i].Start < t.Timings[j].Start })
	for i, nt := range t.Timings {
		t.byName[nt.Node] = append(t.byName[nt.Node], i)
	}
	t.PartitionGraphs = md.GetPartitionGraphs()
	for p, g := range t.PartitionGraphs {
		for _, nd := range g.GetNode() {
			pn := PartitionNode{Def: nd, Partition: p, Name: nd.GetName(), Op: nd.GetOp(), Device: nd.GetDevice()}
			if a := nd.GetAttr(); a != nil {
				pn.TensorName = string(a["tensor_name"].GetS())
				pn.SendDevice = string(a["send_device"].GetS())
				pn.RecvDevice = string(a["recv_device"].GetS())
			}
			t.nodeIx[pn.Name] = append(t.nodeIx[pn.Name], len(t.Nodes))
			t.Nodes = append(t.Nodes, pn)
		}
	}
	return t
}

// timingOf converts one NodeExecStats.
func timingOf(device string, ns *sspb.NodeExecStats) NodeTiming {
	nt := NodeTiming{Node: ns.GetNodeName(), Device: device, Label: ns.GetTimelineLabel(), Thread: ns.GetThreadId()}
	if ns.GetAllStartNanos() != 0 {
		nt.Start = ns.GetAllStartNanos()
		nt.End = nt.Start + ns.GetAllEndRelNanos()
		nt.OpStart = nt.Start + ns.GetOpStartRelNanos()
		nt.OpEnd = nt.Start + ns.GetOpEndRelNanos()
	} else {
		nt.Start = ns.GetAllStartMicros() * 1000
		nt.End = nt.Start + ns.GetAllEndRelMicros()*1000
		nt.OpStart = nt.Start + ns.GetOpStartRelMicros()*1000
		nt.OpEnd = nt.Start + ns.GetOpEndRelMicros()*1000
	}
	return nt
}

// ShortDevice returns the device part of a full device name: "/device:CPU:1" for
// "/job:localhost/replica:0/task:0/device:CPU:1". Names it cannot parse are returned as is.
func ShortDevice(name string) string {
	d, err := graphdef.ParseDevice(name)
	if err != nil || d.Type == "" {
		return name
	}
	return graphdef.Device{Replica: -1, Task: -1, Type: d.Type, Index: d.Index}.String()
}

// SameDevice reports whether two device names denote the same device, comparing the device
// type and index, and job, replica and task where both names set them. "/cpu:1",
// "/device:CPU:1" and "/job:localhost/replica:0/task:0/device:CPU:1" are the same device.
func SameDevice(a, b string) bool {
	if a == b {
		return true
	}
	da, err1 := graphdef.ParseDevice(a)
	db, err2 := graphdef.ParseDevice(b)
	if err1 != nil || err2 != nil || da.Type == "" || db.Type == "" || da.Index < 0 || db.Index < 0 {
		return false
	}
	return da.Type == db.Type && da.Index == db.Index && da.Matches(db)
}

// Devices returns the devices that have step stats, sorted.
func (t *Trace) Devices() []string {
	seen := map[string]bool{}
	var out []string
	for _, nt := range t.Timings {
		if !seen[nt.Device] {
			seen[nt.Device] = true
			out = append(out, nt.Device)
		}
	}
	sort.Strings(out)
	return out
}

// Timeline returns the timings on one device (any spelling SameDevice accepts), by Start.
func (t *Trace) Timeline(device string) []NodeTiming {
	var out []NodeTiming
	for _, nt := range t.Timings {
		if SameDevice(nt.Device, device) {
			out = append(out, nt)
		}
	}
	return out
}

// TimingsOf returns every timing recorded for a node, on any device.
func (t *Trace) TimingsOf(node string) []NodeTiming {
	var out []NodeTiming
	for _, i := range t.byName[node] {
		out = append(out, t.Timings[i])
	}
	return out
}

// Timing returns the timing of a node on a device; device "" accepts any device. When the
// node ran more than once (it should not, outside loops) the first run is returned.
func (t *Trace) Timing(node, device string) (NodeTiming, bool) {
	for _, i := range t.byName[node] {
		if device == "" || SameDevice(t.Timings[i].Device, device) {
			return t.Timings[i], true
		}
	}
	return NodeTiming{}, false
}

// Origin returns the earliest Start of the step, to print times relative to it.
func (t *Trace) Origin() int64 {
	if len(t.Timings) == 0 {
		return 0
	}
	return t.Timings[0].Start
}

// Node returns the partition-graph node with the given name, if any partition holds it.
func (t *Trace) Node(name string) (PartitionNode, bool) {
	if ix := t.nodeIx[name]; len(ix) > 0 {
		return t.Nodes[ix[0]], true
	}
	return PartitionNode{}, false
}

// ConsumersOf returns the partition-graph nodes with a data input reading tensor
// ("node" or "node:port", port 0 by default), in partition order.
func (t *Trace) ConsumersOf(tensor string) []PartitionNode {
	want := canonicalTensor(tensor)
	var out []PartitionNode
	for _, pn := range t.Nodes {
		for _, in := range pn.Def.GetInput() {
			if !strings.HasPrefix(in, "^") && canonicalTensor(in) == want {
				out = append(out, pn)
				break
			}
		}
	}
	return out
}

// canonicalTensor spells a tensor "node:port".
func canonicalTensor(s string) string {
	name, port, _, err := graphdef.ParseInput(s)
	if err != nil {
		return s
	}
	return fmt.Sprintf("%s:%d", name, port)
}

// IsSend reports whether op sends a tensor to another device: _Send, or _HostSend, which the
// partitioner uses for tensors kept in host memory (int32 shape tensors, for example).
func IsSend(op string) bool { return op == "_Send" || op == "_HostSend" }

// IsRecv reports whether op receives a tensor from another device: _Recv or _HostRecv.
func IsRecv(op string) bool { return op == "_Recv" || op == "_HostRecv" }

// SendOf returns the cross-device transfers of a producer's output: every _Send (or
// _HostSend) whose data input is producer ("node" for every port, or "node:port" for one),
// each with its matching _Recv.
func (t *Trace) SendOf(producer string) []Transfer {
	var out []Transfer
	for _, pn := range t.Nodes {
		if !IsSend(pn.Op) || len(pn.Def.GetInput()) == 0 {
			continue
		}
		in := pn.Def.GetInput()[0]
		name, port, _, err := graphdef.ParseInput(in)
		if err != nil {
			continue
		}
		if strings.Contains(producer, ":") {
			if fmt.Sprintf("%s:%d", name, port) != canonicalTensor(producer) {
				continue
			}
		} else if name != producer {
			continue
		}
		out = append(out, Transfer{Send: pn, Recv: t.RecvFor(pn)})
	}
	return out
}

// ControlSendOf returns the transfers that carry a control edge out of node to another
// device. The partitioner turns such an edge into a small constant on node's device, with a
// control input from node, feeding a _Send; the _Recv on the other device then gates the
// dependent node.
func (t *Trace) ControlSendOf(node string) []Transfer {
	var out []Transfer
	for _, pn := range t.Nodes {
		if !IsSend(pn.Op) || len(pn.Def.GetInput()) == 0 {
			continue
		}
		name, _, _, err := graphdef.ParseInput(pn.Def.GetInput()[0])
		if err != nil {
			continue
		}
		src, ok := t.Node(name)
		if !ok {
			continue
		}
		for _, in := range src.Def.GetInput() {
			if in == "^"+node {
				out = append(out, Transfer{Send: pn, Recv: t.RecvFor(pn)})
				break
			}
		}
	}
	return out
}

// RecvFor returns the _Recv (or _HostRecv) matching a _Send (same tensor_name, send_device
// and recv_device, in another partition), or nil.
func (t *Trace) RecvFor(send PartitionNode) *PartitionNode {
	for i := range t.Nodes {
		r := &t.Nodes[i]
		if IsRecv(r.Op) && r.Partition != send.Partition && r.TensorName == send.TensorName &&
			r.SendDevice == send.SendDevice && r.RecvDevice == send.RecvDevice {
			return r
		}
	}
	return nil
}

// Transfers returns every _Send (and _HostSend) of the partition graphs with its matching
// _Recv.
func (t *Trace) Transfers() []Transfer {
	var out []Transfer
	for _, pn := range t.Nodes {
		if IsSend(pn.Op) {
			out = append(out, Transfer{Send: pn, Recv: t.RecvFor(pn)})
		}
	}
	return out
}

// ControlGates returns the nodes whose completion a partition-graph node waits for through
// its control inputs, seen through the partitioner's rewriting of cross-device control
// edges: an edge ^X from another device arrives as a control input from an Identity that
// reads a _Recv, whose _Send sends a constant that has the control input ^X. Control inputs
// from the same device are returned as they are. The result is in input order.
func (t *Trace) ControlGates(node string) []string {
	pn, ok := t.Node(node)
	if !ok {
		return nil
	}
	var gates []string
	for _, in := range pn.Def.GetInput() {
		if !strings.HasPrefix(in, "^") {
			continue
		}
		gates = append(gates, t.controlSource(in[1:])...)
	}
	return gates
}

// controlSource follows a control input back across a device boundary, if it crosses one.
func (t *Trace) controlSource(name string) []string {
	n, ok := t.Node(name)
	if !ok {
		return []string{name}
	}
	recvName := name
	if n.Op == "Identity" && len(n.Def.GetInput()) == 1 {
		recvName, _, _, _ = graphdef.ParseInput(n.Def.GetInput()[0])
	}
	r, ok := t.Node(recvName)
	if !ok || !IsRecv(r.Op) {
		return []string{name}
	}
	if s := t.SendFor(r); s != nil {
		src, _, _, _ := graphdef.ParseInput(s.Def.GetInput()[0])
		c, ok := t.Node(src)
		if !ok {
			return []string{name}
		}
		var out []string
		for _, in := range c.Def.GetInput() {
			if strings.HasPrefix(in, "^") {
				out = append(out, in[1:])
			}
		}
		if len(out) > 0 && c.Op == "Const" {
			return out
		}
	}
	return []string{name}
}

// SendFor returns the _Send matching a _Recv, or nil.
func (t *Trace) SendFor(recv PartitionNode) *PartitionNode {
	for i := range t.Nodes {
		s := &t.Nodes[i]
		if IsSend(s.Op) && s.Partition != recv.Partition && s.TensorName == recv.TensorName &&
			s.SendDevice == recv.SendDevice && s.RecvDevice == recv.RecvDevice && len(s.Def.GetInput()) > 0 {
			return s
		}
	}
	return nil
}

// OriginOf returns the node whose output a data input string of a partition-graph node
// ("name" or "name:port") carries, looking through a _Recv to the input of its _Send: the
// producer on the other side of a transfer. ok is false when a node on the way is missing.
func (t *Trace) OriginOf(input string) (PartitionNode, bool) {
	name, _, _, err := graphdef.ParseInput(input)
	if err != nil {
		return PartitionNode{}, false
	}
	n, ok := t.Node(name)
	if !ok || !IsRecv(n.Op) {
		return n, ok
	}
	s := t.SendFor(n)
	if s == nil {
		return PartitionNode{}, false
	}
	src, _, _, err := graphdef.ParseInput(s.Def.GetInput()[0])
	if err != nil {
		return PartitionNode{}, false
	}
	return t.Node(src)
}

// FedNode returns the _Arg node that replaced a fed tensor ("node:port") in the partition
// graphs: a session turns every feed into an _Arg named "_arg_<node>_<port>_<index>" on the
// client device, so the fed node itself does not appear.
func (t *Trace) FedNode(tensor string) (PartitionNode, bool) {
	name, port, _, err := graphdef.ParseInput(tensor)
	if err != nil {
		return PartitionNode{}, false
	}
	prefix := fmt.Sprintf("_arg_%s_%d_", name, port)
	for _, pn := range t.Nodes {
		if pn.Op == "_Arg" && strings.HasPrefix(pn.Name, prefix) {
			return pn, true
		}
	}
	return PartitionNode{}, false
}
