// Package fakegpu constructs the step stats a traced training step (RunOptions FULL_TRACE)
// of a graph would have on one NVIDIA GPU under TensorFlow 2.18's DirectSession, so that the
// GPU code paths of profiling, tune and the gpu-check command can be tested on machines
// without a GPU. The figures are constructed, not measured: op times and copies come from
// tfswap's simulator (cost.Simulate) for a device profile, memory from the simple model
// described at Step.
//
// The structure follows TensorFlow's sources:
//
//   - The executor's entries, one DeviceStepStats per device named
//     "/job:localhost/replica:0/task:0/device:GPU:0" (and CPU:0), carry per node its times
//     (both the *_micros and the *_nanos fields), its outputs' tensor descriptions and its
//     memory: AllocatorMemoryUsed with the allocator's name ("GPU_0_bfc", the name
//     gpu_process_state.cc gives GPU 0's BFC allocator), the node's total, peak and live
//     bytes, its allocation records (alloc_micros, alloc_bytes; frees negative) and the
//     allocator's bytes in use when the node finished
//     (tensorflow/core/common_runtime/step_stats_collector.cc, NodeExecStatsWrapper::
//     AddAllocation and Finalize). On a GPU the executor's times span the kernel launch.
//   - The device tracer's entries (tensorflow/core/profiler/convert/xplane_to_step_stats.cc,
//     ConvertGpuXSpaceToStepStats, which DeviceProfilerSession::CollectData calls): kernels on
//     "/device:GPU:0/stream:N" and again on "/device:GPU:0/stream:all", named
//     "node:OpType" (the op's full name) with the kernel's name in the timeline label;
//     copies on "/device:GPU:0/stream:N<MemcpyH2D>" (or D2H) and again on
//     "/device:GPU:0/memcpy"; cuStreamSynchronize calls on "/device:GPU:0/sync". Tracer
//     entries have microsecond times only, op_start_rel_micros 0 and op_end_rel_micros =
//     all_end_rel_micros = the event's duration.
//   - _Send and _Recv have no entries (StepStatsCollector skips transfer nodes): a
//     swapped-in or fed tensor's GPU buffer shows in the allocator's bytes in use but in no
//     node's allocation records.
package fakegpu

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	adpb "github.com/wamuir/graft/tensorflow/core/framework/allocation_description_go_proto"
	sspb "github.com/wamuir/graft/tensorflow/core/framework/step_stats_go_proto"
	tdpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_description_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// Device names as TensorFlow's executor and device tracer write them for GPU 0.
const (
	GPUDevice     = "/job:localhost/replica:0/task:0/device:GPU:0"
	HostDevice    = "/job:localhost/replica:0/task:0/device:CPU:0"
	GPUAllocator  = "GPU_0_bfc"
	streamAll     = "/device:GPU:0/stream:all"
	computeStream = "/device:GPU:0/stream:7"
	h2dStream     = "/device:GPU:0/stream:13<MemcpyH2D>"
	d2hStream     = "/device:GPU:0/stream:14<MemcpyD2H>"
	memcpyTrack   = "/device:GPU:0/memcpy"
	syncTrack     = "/device:GPU:0/sync"
)

// DefaultBaseMicros is the wall-clock time (µs since the epoch) the constructed step starts
// at unless Options say otherwise.
const DefaultBaseMicros = 1_700_000_000_000_000

// launchMicros is how long the executor's entry of a GPU node lasts: the kernel launch on
// the host, a few microseconds.
const launchMicros = 4

// Options say what step to construct.
type Options struct {
	// Fetch names the nodes the step runs (cost.Options.Fetch); empty means every node.
	Fetch []string
	// BaseMicros is the step's start on the wall clock; 0 means DefaultBaseMicros.
	BaseMicros int64
	// NoTracer leaves out the device tracer's entries (CUPTI not loaded).
	NoTracer bool
}

// Step is a constructed traced step.
type Step struct {
	Metadata *cpb.RunMetadata
	// Peak is the most bytes GPU_0_bfc had in use after any node (the largest
	// allocator_bytes_in_use written), Resident the bytes held before the step began
	// (variables), StepPeak the most bytes the step's own allocation records had live.
	Peak, Resident, StepPeak int64
	// KernelNS is, per node that ran on the GPU, the summed duration of its kernel entries
	// (as written: whole microseconds, in ns).
	KernelNS map[string]int64
	// H2DNS and D2HNS sum the copies' durations (as written, in ns); H2DCopies and D2HCopies
	// count them.
	H2DNS, D2HNS         int64
	H2DCopies, D2HCopies int
	// StepNS is the simulated step time.
	StepNS int64
}

// forwards lists ops whose output shares an input's buffer or a variable's: they allocate
// nothing on the device.
var forwards = map[string]bool{
	"Identity": true, "IdentityN": true, "Reshape": true, "Squeeze": true, "ExpandDims": true,
	"StopGradient": true, "Snapshot": true, "ReadVariableOp": true, "PreventGradient": true,
	"NoOp": true, "VarHandleOp": true, "Const": true, "Placeholder": true,
}

// buffer is one GPU allocation of the model.
type buffer struct {
	alloc, free int64 // ns
	bytes       int64
	owner       string // node whose records hold it; "" for a _Recv's
}

// Construct builds the step stats of one traced step of g on GPU 0 of profile p.
//
// Memory model: the variables (VarHandleOp/VariableV2 placed on the GPU) are resident. Every
// output of a GPU node that is not a forwarding op (Identity, Reshape, ReadVariableOp, ...)
// is a new buffer, rounded up to 256 bytes as TensorFlow's BFC allocator rounds, allocated
// when the op starts and freed when the last reader that reads it (directly or through
// forwarding ops) has finished, or a copy of it to the host has. A tensor fed or copied to
// the GPU gets a buffer when the copy starts, recorded by no node. allocator_bytes_in_use of a
// node is the resident bytes plus everything live when it finished.
func Construct(g *graphdef.Graph, p *cost.Profile, opts Options) (*Step, error) {
	res, err := cost.Simulate(g, p, cost.Options{Fetch: opts.Fetch, Timeline: true, TopLive: -1})
	if err != nil {
		return nil, err
	}
	base := opts.BaseMicros
	if base == 0 {
		base = DefaultBaseMicros
	}
	gpu := -1
	for i, d := range res.Devices {
		if d.GPU && gpu < 0 {
			gpu = i
		}
	}
	if gpu < 0 {
		return nil, fmt.Errorf("fakegpu: nothing of %s runs on a GPU", g.Source)
	}
	ops := append([]cost.OpSpan(nil), res.Timeline.Ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start < ops[j].Start })
	onGPU := map[string]bool{}
	end := map[string]int64{}
	for _, o := range ops {
		end[o.Node.Name] = max(end[o.Node.Name], o.End)
		if o.Device == gpu {
			onGPU[o.Node.Name] = true
		}
	}
	// readEnd is when the last GPU reader of a tensor finished, looking through forwarding ops.
	var readEnd func(t graphdef.Tensor, seen map[string]bool) int64
	readEnd = func(t graphdef.Tensor, seen map[string]bool) int64 {
		var last int64
		for _, u := range t.Consumers() {
			c := u.Node
			if !onGPU[c.Name] || seen[c.Name] {
				continue
			}
			last = max(last, end[c.Name])
			if forwards[c.Op] {
				seen[c.Name] = true
				for port := range c.OutputTypes {
					last = max(last, readEnd(graphdef.Tensor{Node: c, Port: port}, seen))
				}
			}
		}
		return last
	}
	xferEnd := map[string]int64{} // GPU tensor -> end of its last copy to the host
	var bufs []buffer
	s := &Step{KernelNS: map[string]int64{}, StepNS: res.StepTime}
	for _, x := range res.Timeline.Xfers {
		if strings.HasPrefix(x.Tensor, "^") {
			continue
		}
		if x.Src == gpu {
			xferEnd[x.Tensor] = max(xferEnd[x.Tensor], x.End)
		}
		if x.Dst == gpu && x.Bytes > 0 {
			node, port, _, err := graphdef.ParseInput(x.Tensor)
			if err != nil || g.Node(node) == nil {
				continue
			}
			free := readEnd(graphdef.Tensor{Node: g.Node(node), Port: port}, map[string]bool{})
			bufs = append(bufs, buffer{alloc: x.Start, free: max(free, x.End), bytes: round256(x.Bytes)})
		}
	}
	type feedCopy struct{ start, end, bytes int64 }
	var feeds []feedCopy
	for _, o := range ops {
		if o.Node.Op != "Placeholder" || o.Device != gpu {
			continue
		}
		t := graphdef.Tensor{Node: o.Node}
		b, ok, _ := t.Bytes()
		if !ok || b == 0 {
			continue
		}
		// The feed is copied to the GPU at the step's start, at the profile's host link rate.
		d := int64(float64(b)/p.H2D*1e9) + int64(p.TransferLatency*1e9)
		feeds = append(feeds, feedCopy{o.Start, o.Start + d, b})
		bufs = append(bufs, buffer{alloc: o.Start, free: max(readEnd(t, map[string]bool{}), o.Start+d), bytes: round256(b)})
	}
	for _, n := range g.Nodes {
		if (n.Op == "VarHandleOp" || n.Op == "VariableV2") && (n.Device.IsZero() || strings.EqualFold(n.Device.Type, "GPU")) {
			s.Resident += round256(variableBytes(n))
		}
	}
	for _, o := range ops {
		n := o.Node
		if o.Device != gpu || forwards[n.Op] {
			continue
		}
		for port := range n.OutputTypes {
			t := graphdef.Tensor{Node: n, Port: port}
			b, ok, _ := t.Bytes()
			if !ok || b == 0 {
				continue
			}
			free := max(readEnd(t, map[string]bool{}), xferEnd[fmt.Sprintf("%s:%d", n.Name, port)], o.End)
			if len(t.Consumers()) == 0 {
				free = res.StepTime
			}
			bufs = append(bufs, buffer{alloc: o.Start, free: free, bytes: round256(b), owner: n.Name})
		}
	}
	inUse := func(t int64) int64 {
		live := s.Resident
		for _, b := range bufs {
			if b.alloc <= t && b.free > t {
				live += b.bytes
			}
		}
		return live
	}

	us := func(ns int64) int64 { return ns / 1000 }
	gpuExec := &sspb.DeviceStepStats{Device: GPUDevice}
	hostExec := &sspb.DeviceStepStats{Device: HostDevice}
	for _, d := range []*sspb.DeviceStepStats{gpuExec, hostExec} {
		d.NodeStats = append(d.NodeStats, execEntry("_SOURCE", base, 0, 1, 0))
	}
	feedIndex := 0
	for _, o := range ops {
		n := o.Node
		start := base*1000 + o.Start
		if n.Op == "Placeholder" {
			// A fed placeholder does not run: the session feeds an _Arg on the host, and
			// the tensor is copied to the GPU (buffer and copy added above).
			e := execEntry(fmt.Sprintf("_arg_%s_0_%d", n.Name, feedIndex), 0, 0, 0, 0)
			setNanos(e, start, 1000, 2000)
			e.TimelineLabel = fmt.Sprintf("_arg_%s_0_%d = _Arg()", n.Name, feedIndex)
			hostExec.NodeStats = append(hostExec.NodeStats, e)
			feedIndex++
			continue
		}
		if o.Device != gpu {
			e := execEntry(n.Name, 0, 0, 0, 0)
			setNanos(e, start, o.End-o.Start, o.End-o.Start)
			e.TimelineLabel = fmt.Sprintf("%s = %s(%s)", n.Name, n.Op, strings.Join(dataInputs(n), ", "))
			hostExec.NodeStats = append(hostExec.NodeStats, e)
			continue
		}
		e := execEntry(n.Name, 0, 0, 0, 0)
		setNanos(e, start, launchMicros*1000, (launchMicros+2)*1000)
		e.TimelineLabel = fmt.Sprintf("%s = %s(%s)", n.Name, n.Op, strings.Join(dataInputs(n), ", "))
		mem := &sspb.AllocatorMemoryUsed{AllocatorName: GPUAllocator}
		var live, cur int64
		for _, b := range bufs {
			if b.owner != n.Name {
				continue
			}
			mem.TotalBytes += b.bytes
			cur += b.bytes
			mem.PeakBytes = max(mem.PeakBytes, cur)
			mem.AllocationRecords = append(mem.AllocationRecords, &sspb.AllocationRecord{AllocMicros: base + us(b.alloc), AllocBytes: b.bytes})
			if b.free < res.StepTime {
				mem.AllocationRecords = append(mem.AllocationRecords, &sspb.AllocationRecord{AllocMicros: base + us(b.free), AllocBytes: -b.bytes})
			} else {
				live += b.bytes
			}
		}
		if !forwards[n.Op] {
			for port := range n.OutputTypes {
				if out := nodeOutput(graphdef.Tensor{Node: n, Port: port}); out != nil {
					e.Output = append(e.Output, out)
				}
			}
		}
		if mem.TotalBytes > 0 {
			// Only a node that allocated through the allocator has a memory entry (the
			// executor records the allocators the kernel's context wrapped).
			mem.LiveBytes = live
			mem.AllocatorBytesInUse = inUse(o.End)
			s.Peak = max(s.Peak, mem.AllocatorBytesInUse)
			e.Memory = append(e.Memory, mem)
		}
		gpuExec.NodeStats = append(gpuExec.NodeStats, e)
	}
	// The step's own peak: every recorded allocation, replayed in time order.
	{
		type ev struct{ t, b int64 }
		var evs []ev
		for _, b := range bufs {
			if b.owner == "" {
				continue
			}
			evs = append(evs, ev{us(b.alloc), b.bytes})
			if b.free < res.StepTime {
				evs = append(evs, ev{us(b.free), -b.bytes})
			}
		}
		sort.SliceStable(evs, func(i, j int) bool {
			if evs[i].t != evs[j].t {
				return evs[i].t < evs[j].t
			}
			return evs[i].b > evs[j].b
		})
		var cur int64
		for _, e := range evs {
			cur += e.b
			s.StepPeak = max(s.StepPeak, cur)
		}
	}
	md := &cpb.RunMetadata{StepStats: &sspb.StepStats{DevStats: []*sspb.DeviceStepStats{gpuExec, hostExec}}}
	if !opts.NoTracer {
		all := &sspb.DeviceStepStats{Device: streamAll}
		stream := &sspb.DeviceStepStats{Device: computeStream}
		h2d := &sspb.DeviceStepStats{Device: h2dStream}
		d2h := &sspb.DeviceStepStats{Device: d2hStream}
		memcpy := &sspb.DeviceStepStats{Device: memcpyTrack}
		sync := &sspb.DeviceStepStats{Device: syncTrack}
		for _, o := range ops {
			n := o.Node
			if o.Device != gpu || forwards[n.Op] || o.End <= o.Start {
				continue
			}
			dur := max(1, us(o.End-o.Start))
			e := tracerEntry(n.Name+":"+n.Op, base+us(o.Start), dur, kernelName(n.Op)+" regs:32 static_shared:0 dynamic_shared:0 grid:80,1,1 block:256,1,1")
			stream.NodeStats = append(stream.NodeStats, e)
			all.NodeStats = append(all.NodeStats, cloneEntry(e))
			s.KernelNS[n.Name] += dur * 1000
		}
		copies := append([]cost.XferSpan(nil), res.Timeline.Xfers...)
		for _, f := range feeds {
			copies = append(copies, cost.XferSpan{Src: -1, Dst: gpu, Start: f.start, End: f.end, Bytes: f.bytes})
		}
		sort.SliceStable(copies, func(i, j int) bool { return copies[i].Start < copies[j].Start })
		for _, x := range copies {
			if strings.HasPrefix(x.Tensor, "^") || x.Bytes == 0 || (x.Src != gpu && x.Dst != gpu) {
				continue
			}
			dur := max(1, us(x.End-x.Start))
			name, track := "MemcpyH2D", h2d
			if x.Src == gpu {
				name, track = "MemcpyD2H", d2h
				s.D2HNS += dur * 1000
				s.D2HCopies++
			} else {
				s.H2DNS += dur * 1000
				s.H2DCopies++
			}
			e := tracerEntry(name, base+us(x.Start), dur, fmt.Sprintf("%s size:%d async:1", name, x.Bytes))
			track.NodeStats = append(track.NodeStats, e)
			memcpy.NodeStats = append(memcpy.NodeStats, cloneEntry(e))
		}
		sync.NodeStats = append(sync.NodeStats, tracerEntry("cuStreamSynchronize", base+us(res.StepTime), 2, "ThreadId 1"))
		for _, d := range []*sspb.DeviceStepStats{stream, h2d, d2h, all, memcpy, sync} {
			if len(d.NodeStats) > 0 {
				md.StepStats.DevStats = append(md.StepStats.DevStats, d)
			}
		}
	}
	s.Metadata = md
	return s, nil
}

func round256(b int64) int64 { return (b + 255) / 256 * 256 }

// variableBytes is the size of a variable node's value: its dtype and shape attrs.
func variableBytes(n *graphdef.Node) int64 {
	a := n.Def.GetAttr()
	elem, ok := graphdef.ElementBytes(a["dtype"].GetType())
	if !ok {
		return 0
	}
	sh := a["shape"].GetShape()
	if sh == nil || sh.GetUnknownRank() {
		return 0
	}
	for _, d := range sh.GetDim() {
		if d.GetSize() < 0 {
			return 0
		}
		elem *= d.GetSize()
	}
	return elem
}

func dataInputs(n *graphdef.Node) []string {
	var out []string
	for _, in := range n.Def.GetInput() {
		if !strings.HasPrefix(in, "^") {
			out = append(out, in)
		}
	}
	return out
}

// execEntry is an executor entry with microsecond times.
func execEntry(name string, startMicros, opStart, opEnd, allEnd int64) *sspb.NodeExecStats {
	return &sspb.NodeExecStats{NodeName: name, AllStartMicros: startMicros, OpStartRelMicros: opStart, OpEndRelMicros: opEnd, AllEndRelMicros: allEnd, ThreadId: 1}
}

// setNanos sets an executor entry's times from ns: the executor writes both the micros and
// the nanos fields. The op runs from the start for opNS; the entry ends at allNS.
func setNanos(e *sspb.NodeExecStats, startNS, opNS, allNS int64) {
	e.AllStartNanos, e.OpStartRelNanos, e.OpEndRelNanos, e.AllEndRelNanos = startNS, 0, opNS, allNS
	e.AllStartMicros, e.OpStartRelMicros, e.OpEndRelMicros, e.AllEndRelMicros = startNS/1000, 0, opNS/1000, allNS/1000
}

// tracerEntry is a device tracer's entry: microseconds only, the op spanning the event.
func tracerEntry(name string, startMicros, durMicros int64, label string) *sspb.NodeExecStats {
	return &sspb.NodeExecStats{NodeName: name, AllStartMicros: startMicros, OpStartRelMicros: 0, OpEndRelMicros: durMicros,
		AllEndRelMicros: durMicros, TimelineLabel: label, ThreadId: 1}
}

func cloneEntry(e *sspb.NodeExecStats) *sspb.NodeExecStats {
	return proto.Clone(e).(*sspb.NodeExecStats)
}

// kernelName is a plausible CUDA kernel name for an op; tfswap reads kernel names nowhere.
func kernelName(op string) string {
	switch {
	case strings.Contains(op, "MatMul"):
		return "volta_sgemm_128x64_nn"
	case strings.HasPrefix(op, "Conv2D"):
		return "volta_scudnn_128x64_relu_interior_nn_v1"
	}
	return "void Eigen::internal::EigenMetaKernel<" + op + ">"
}

// nodeOutput describes one output as the executor does (Tensor::FillDescription): dtype,
// shape and the allocation.
func nodeOutput(t graphdef.Tensor) *sspb.NodeOutput {
	dt, ok := t.DataType()
	if !ok {
		return nil
	}
	td := &tdpb.TensorDescription{Dtype: tpb.DataType(dt)}
	if sh := t.Shape(); sh != nil {
		td.Shape = &tspb.TensorShapeProto{}
		for _, d := range sh {
			td.Shape.Dim = append(td.Shape.Dim, &tspb.TensorShapeProto_Dim{Size: d})
		}
	}
	if b, ok, _ := t.Bytes(); ok {
		td.AllocationDescription = &adpb.AllocationDescription{RequestedBytes: b, AllocatedBytes: round256(b), AllocatorName: GPUAllocator}
	}
	return &sspb.NodeOutput{Slot: int32(t.Port), TensorDescription: td}
}
