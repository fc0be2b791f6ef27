package profiling

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tfswap/tfswap/graphdef"
	sspb "github.com/wamuir/graft/tensorflow/core/framework/step_stats_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// RunMetadata is TensorFlow's RunMetadata proto, as tfrun.Session.Run returns it.
type RunMetadata = cpb.RunMetadata

// Collector gathers the step stats of traced training steps (RunOptions FULL_TRACE) of one
// graph and turns them into per-node statistics. Add one step at a time; Result summarizes.
//
// A node's time in a step is the time its kernel ran: for a node the executor runs
// synchronously, op_end - op_start of its step-stats entry (not the time it waited for its
// inputs); for a node on a GPU whose kernels the device tracer recorded (step-stats devices
// named ".../device:GPU:0/stream:all", or ".../stream:N" when there is no stream:all), the
// summed duration of its kernels on the GPU, which replaces the executor's entry (that one
// only times the kernel launch on the host). A node that runs more than once in a step (in
// a loop) gets the sum of its runs.
type Collector struct {
	g     *graphdef.Graph
	nodes map[string]*nodeAcc
	steps []StepTiming
	// runtimeOnly counts the step-stats entries of nodes the graph does not have: nodes the
	// runtime adds (_SOURCE, _Send, _Recv, _Arg, _Retval) and nodes Grappler made.
	runtimeOnly map[string]int
	gpuKernels  bool
	peaks       map[string]int64
}

// StepTiming is one traced step: the wall time of the Session.Run call and the span of the
// step's node timings (first start to last end, over every device).
type StepTiming struct {
	Wall time.Duration
	Span time.Duration
}

// nodeAcc accumulates one graph node over the steps.
type nodeAcc struct {
	node   *graphdef.Node
	device string
	// times holds the node's time (ns) in each step it ran in, in step order.
	times []int64
	// outBytes holds the largest size seen per output port, -1 when never seen.
	outBytes []int64
}

// NewCollector returns a collector for steps of graph g.
func NewCollector(g *graphdef.Graph) *Collector {
	return &Collector{g: g, nodes: map[string]*nodeAcc{}, runtimeOnly: map[string]int{}, peaks: map[string]int64{}}
}

// isTracerDevice reports whether a step-stats device is one of the device tracer's tracks
// rather than an executor's device, and returns the device it belongs to and the track.
// TensorFlow's GPU tracer (tensorflow/core/profiler/convert/xplane_to_step_stats.cc) writes
// kernels to "/device:GPU:N/stream:S" and again to "/device:GPU:N/stream:all", copies to
// "/device:GPU:N/stream:S<MemcpyH2D>" (D2H, D2D, P2P) and again to "/device:GPU:N/memcpy",
// events of unknown kind to "/device:GPU:N/stream:", and cuStreamSynchronize calls to
// "/device:GPU:N/sync".
func isTracerDevice(name string) (parent string, stream string, ok bool) {
	for _, sep := range []string{"/stream:", "/memcpy", "/sync"} {
		if i := strings.Index(name, sep); i >= 0 {
			return name[:i], name[i+1:], true
		}
	}
	return "", "", false
}

// isKernelTrack reports whether a tracer track holds kernels: "stream:all" or "stream:S",
// not a copy stream, the memcpy or sync track, or the track of unknown events.
func isKernelTrack(stream string) bool {
	return strings.HasPrefix(stream, "stream:") && stream != "stream:" && !strings.Contains(stream, "<")
}

// execTime returns the kernel time of an executor's step-stats entry, in ns.
func execTime(ns *sspb.NodeExecStats) int64 {
	if ns.GetAllStartNanos() != 0 {
		return ns.GetOpEndRelNanos() - ns.GetOpStartRelNanos()
	}
	return (ns.GetOpEndRelMicros() - ns.GetOpStartRelMicros()) * 1000
}

// kernelTime returns the duration of a device tracer's entry (a kernel or a copy), in ns.
func kernelTime(ns *sspb.NodeExecStats) int64 {
	if ns.GetAllStartNanos() != 0 {
		return max(ns.GetAllEndRelNanos(), ns.GetOpEndRelNanos()-ns.GetOpStartRelNanos())
	}
	return max(ns.GetAllEndRelMicros(), ns.GetOpEndRelMicros()-ns.GetOpStartRelMicros()) * 1000
}

// span returns the start and end (ns) of an entry.
func span(ns *sspb.NodeExecStats) (int64, int64) {
	if ns.GetAllStartNanos() != 0 {
		return ns.GetAllStartNanos(), ns.GetAllStartNanos() + ns.GetAllEndRelNanos()
	}
	s := ns.GetAllStartMicros() * 1000
	return s, s + ns.GetAllEndRelMicros()*1000
}

// tracedNode finds the graph node a device tracer's entry belongs to: the tracer names it
// "node" or "node:OpType" (and may add further ":"-separated parts), so trailing parts are
// dropped until a graph node matches.
func (c *Collector) tracedNode(name string) *graphdef.Node {
	for {
		if n := c.g.Node(name); n != nil {
			return n
		}
		i := strings.LastIndexByte(name, ':')
		if i <= 0 {
			return nil
		}
		name = name[:i]
	}
}

// Add records one traced step: its RunMetadata and the wall time of the Run call.
func (c *Collector) Add(md *RunMetadata, wall time.Duration) error {
	devs := md.GetStepStats().GetDevStats()
	if len(devs) == 0 {
		return fmt.Errorf("profiling: the step has no step stats (was it run with FULL_TRACE?)")
	}
	step := map[string]int64{}    // node -> time this step
	device := map[string]string{} // node -> executor device
	// GPU kernels, per executor device: which tracer tracks to read.
	hasAll := map[string]bool{}
	for _, d := range devs {
		if parent, stream, ok := isTracerDevice(d.GetDevice()); ok && stream == "stream:all" {
			hasAll[parent] = true
		}
	}
	kernel := map[string]int64{}
	var first, last int64
	for _, d := range devs {
		devName := d.GetDevice()
		parent, stream, tracer := isTracerDevice(devName)
		for _, ns := range d.GetNodeStats() {
			if tracer {
				if !isKernelTrack(stream) || (hasAll[parent] && stream != "stream:all") {
					continue
				}
				if n := c.tracedNode(ns.GetNodeName()); n != nil {
					kernel[n.Name] += kernelTime(ns)
					c.gpuKernels = true
				}
				continue
			}
			s, e := span(ns)
			if first == 0 || s < first {
				first = s
			}
			if e > last {
				last = e
			}
			n := c.g.Node(ns.GetNodeName())
			if n == nil {
				c.runtimeOnly[ns.GetNodeName()]++
				continue
			}
			step[n.Name] += max(0, execTime(ns))
			device[n.Name] = devName
			c.recordOutputs(n, ns)
			c.recordMemory(ns)
		}
	}
	for name, t := range kernel {
		if _, ran := step[name]; ran {
			step[name] = t
		}
	}
	for name, t := range step {
		acc := c.acc(c.g.Node(name))
		acc.times = append(acc.times, t)
		acc.device = device[name]
	}
	c.steps = append(c.steps, StepTiming{Wall: wall, Span: time.Duration(last - first)})
	return nil
}

func (c *Collector) acc(n *graphdef.Node) *nodeAcc {
	a := c.nodes[n.Name]
	if a == nil {
		a = &nodeAcc{node: n}
		c.nodes[n.Name] = a
	}
	return a
}

// recordOutputs keeps the largest size seen for each output of n: the tensor's dtype size
// times its elements, or the bytes the allocator was asked for when the dtype has no fixed
// size.
func (c *Collector) recordOutputs(n *graphdef.Node, ns *sspb.NodeExecStats) {
	outs := ns.GetOutput()
	if len(outs) == 0 {
		return
	}
	a := c.acc(n)
	for _, o := range outs {
		slot := int(o.GetSlot())
		if slot < 0 || slot > 1<<16 {
			continue
		}
		for len(a.outBytes) <= slot {
			a.outBytes = append(a.outBytes, -1)
		}
		b := tensorBytes(o)
		if b > a.outBytes[slot] {
			a.outBytes[slot] = b
		}
	}
}

// tensorBytes returns the size of a step-stats output, or -1.
func tensorBytes(o *sspb.NodeOutput) int64 {
	td := o.GetTensorDescription()
	if td == nil {
		return -1
	}
	if elem, ok := graphdef.ElementBytes(td.GetDtype()); ok && !graphdef.IsRef(td.GetDtype()) && td.GetShape() != nil && !td.GetShape().GetUnknownRank() {
		n := elem
		for _, d := range td.GetShape().GetDim() {
			if d.GetSize() < 0 {
				n = -1
				break
			}
			n *= d.GetSize()
		}
		if n >= 0 {
			return n
		}
	}
	if ad := td.GetAllocationDescription(); ad != nil && ad.GetRequestedBytes() > 0 {
		return ad.GetRequestedBytes()
	}
	return -1
}

// recordMemory keeps, per allocator, the largest allocator_bytes_in_use a node reported.
func (c *Collector) recordMemory(ns *sspb.NodeExecStats) {
	for _, m := range ns.GetMemory() {
		if b := m.GetAllocatorBytesInUse(); b > c.peaks[m.GetAllocatorName()] {
			c.peaks[m.GetAllocatorName()] = b
		}
	}
}

// StepPeaks returns, per allocator, the peak of the bytes a step allocated (beyond what was
// allocated before it started: variables and other persistent tensors are not included),
// replaying the allocation records of md's step stats in time order. Records carry
// microsecond times; at equal times allocations are replayed before frees, so the figure
// errs high. On a GPU this is the measured side of the memory budget (allocator
// "GPU_0_bfc"); in the two-device emulation both CPU devices share one allocator ("cpu"),
// so it says nothing about either device.
func StepPeaks(md *RunMetadata) map[string]int64 {
	type rec struct{ t, b int64 }
	recs := map[string][]rec{}
	for _, d := range md.GetStepStats().GetDevStats() {
		for _, ns := range d.GetNodeStats() {
			for _, m := range ns.GetMemory() {
				for _, r := range m.GetAllocationRecords() {
					recs[m.GetAllocatorName()] = append(recs[m.GetAllocatorName()], rec{r.GetAllocMicros(), r.GetAllocBytes()})
				}
			}
		}
	}
	out := map[string]int64{}
	for name, rs := range recs {
		sort.Slice(rs, func(i, j int) bool {
			if rs[i].t != rs[j].t {
				return rs[i].t < rs[j].t
			}
			return rs[i].b > rs[j].b
		})
		var cur, peak int64
		for _, r := range rs {
			cur += r.b
			peak = max(peak, cur)
		}
		out[name] = peak
	}
	return out
}

// AllocatorPeaks returns, per allocator, the most memory a step had allocated by the
// allocator's own account: the largest allocator_bytes_in_use any node of md reported
// (which counts persistent tensors such as variables; TensorFlow's GPU allocators report
// it), or the step's own peak (StepPeaks) when that is larger. This is the measured side of
// a memory budget on a GPU.
func AllocatorPeaks(md *RunMetadata) map[string]int64 {
	out := StepPeaks(md)
	for _, d := range md.GetStepStats().GetDevStats() {
		for _, ns := range d.GetNodeStats() {
			for _, m := range ns.GetMemory() {
				if b := m.GetAllocatorBytesInUse(); b > out[m.GetAllocatorName()] {
					out[m.GetAllocatorName()] = b
				}
			}
		}
	}
	return out
}

// NodeStats are one node's measurements over the profiled steps.
type NodeStats struct {
	Node *graphdef.Node
	// Device is the device it ran on, as the runtime names it.
	Device string
	// Times are its times (ns), one per step it ran in.
	Times []int64
	// Median, Min and Max summarize Times; CV is their coefficient of variation (standard
	// deviation / mean, 0 when the mean is 0).
	Median, Min, Max int64
	CV               float64
	// OutputBytes are the largest sizes seen per output port, -1 when never seen.
	OutputBytes []int64
}

// Result is what a Collector found.
type Result struct {
	// Steps are the traced steps, in order.
	Steps []StepTiming
	// Nodes are the graph's nodes that ran in at least one step, in GraphDef order.
	Nodes []*NodeStats
	// ComputeDevice is the device that spent the most time running nodes.
	ComputeDevice string
	// RuntimeOnly are the names of step-stats entries that are not graph nodes, sorted.
	RuntimeOnly []string
	// GPUKernels says whether a device tracer's GPU kernel times were used.
	GPUKernels bool
	// AllocatorInUse is, per allocator, the most bytes in use any node reported
	// (allocator_bytes_in_use; TensorFlow reports it for GPU allocators).
	AllocatorInUse map[string]int64
}

// Result summarizes the steps added so far.
func (c *Collector) Result() *Result {
	r := &Result{Steps: append([]StepTiming(nil), c.steps...), GPUKernels: c.gpuKernels, AllocatorInUse: map[string]int64{}}
	for k, v := range c.peaks {
		r.AllocatorInUse[k] = v
	}
	busy := map[string]int64{}
	for _, n := range c.g.Nodes {
		a := c.nodes[n.Name]
		if a == nil || len(a.times) == 0 {
			continue
		}
		st := &NodeStats{Node: n, Device: a.device, Times: append([]int64(nil), a.times...), OutputBytes: append([]int64(nil), a.outBytes...)}
		st.Median, st.Min, st.Max = MedianInt64(st.Times), minOf(st.Times), maxOf(st.Times)
		st.CV = cv(st.Times)
		r.Nodes = append(r.Nodes, st)
		busy[st.Device] += st.Median
	}
	var best int64 = -1
	for d, b := range busy {
		if b > best || (b == best && d < r.ComputeDevice) {
			best, r.ComputeDevice = b, d
		}
	}
	for name := range c.runtimeOnly {
		r.RuntimeOnly = append(r.RuntimeOnly, name)
	}
	sort.Strings(r.RuntimeOnly)
	return r
}

// MedianInt64 returns the median of v (the mean of the two middle values, rounded down,
// for an even count), or 0 for none.
func MedianInt64(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func minOf(v []int64) int64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []int64) int64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// cv returns the coefficient of variation of v.
func cv(v []int64) float64 {
	if len(v) < 2 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := sum / float64(len(v))
	if mean == 0 {
		return 0
	}
	var ss float64
	for _, x := range v {
		d := float64(x) - mean
		ss += d * d
	}
	return math.Sqrt(ss/float64(len(v)-1)) / mean
}
