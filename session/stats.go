package session

import (
	"sort"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/tfswap/tfswap/tfrun"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// StepStats is what a traced training step's RunMetadata says about memory and transfers.
type StepStats struct {
	// Loss is the step's loss.
	Loss float64
	// Devices are the devices that ran nodes in the step, by name.
	Devices []DeviceStats
	// ToDevice and ToHost count the tensors the step sent from a host to a compute device
	// and back (the _Send/_Recv pairs of the partition graphs; fed and fetched tensors among
	// them). SwapIns and SwapOuts are those of tfswap's swap-ins and swap-outs.
	ToDevice, ToHost  int
	SwapIns, SwapOuts int
	// Controls counts the control edges that cross between a host and a compute device
	// (each carries a small constant; the edge from a swap-in's gate among them).
	Controls int
	// Metadata is the step's RunMetadata: its step stats and partition graphs.
	Metadata *RunMetadata
}

// DeviceStats is one device's share of a traced step.
type DeviceStats struct {
	// Device is the device's full name, "/job:localhost/replica:0/task:0/device:GPU:0".
	Device string
	// Compute says whether it is a compute device (a GPU, or CPU:1 of the two-device
	// emulation) rather than a host.
	Compute bool
	// Nodes counts the nodes it ran (the step stats leave out _Send and _Recv).
	Nodes int
	// Allocator is the allocator its nodes allocated from ("GPU_0_bfc" for GPU 0; the
	// host's otherwise) and PeakBytes the most that allocator had allocated during the step
	// by its own account, the variables included: on a GPU, the measured side of a budget.
	// Shared says that other devices of the step allocate from it too, as both CPUs of the
	// two-device emulation do (always set there); its peak is then theirs together.
	Allocator string
	PeakBytes int64
	Shared    bool
	// Kernels, CopiesToDevice and CopiesToHost are what TensorFlow's GPU tracer recorded on
	// the device: kernels launched and memory copies each way (0 where nothing was traced,
	// as on a CPU).
	Kernels, CopiesToDevice, CopiesToHost int
}

// NewStepStats reads a traced step's RunMetadata (RunOptions FULL_TRACE with partition
// graphs). twoDevice says that it comes from the two-device emulation, where CPU:1 is the
// compute device; otherwise GPUs are. Loss is left zero.
func NewStepStats(md *RunMetadata, twoDevice bool) *StepStats {
	st := &StepStats{Metadata: md}
	compute := func(name string) (bool, bool) {
		d, err := graphdef.ParseDevice(name)
		if err != nil || d.Type == "" {
			return false, false
		}
		return d.Type == "GPU" || (twoDevice && d.Type == "CPU" && d.Index == 1), true
	}
	peaks := profiling.AllocatorPeaks(md)
	users := map[string]int{}
	for _, ds := range md.GetStepStats().GetDevStats() {
		isCompute, ok := compute(ds.GetDevice())
		if !ok {
			continue // a GPU tracer's track, such as /device:GPU:0/stream:all
		}
		dv := DeviceStats{Device: ds.GetDevice(), Compute: isCompute, Nodes: len(ds.GetNodeStats())}
		used := map[string]int{}
		for _, ns := range ds.GetNodeStats() {
			for _, m := range ns.GetMemory() {
				used[m.GetAllocatorName()]++
			}
		}
		dv.Allocator = ownAllocator(ds.GetDevice(), used)
		dv.PeakBytes = peaks[dv.Allocator]
		if dv.Allocator != "" {
			users[dv.Allocator]++
		}
		st.Devices = append(st.Devices, dv)
	}
	traces := profiling.GPUTraces(md)
	for i := range st.Devices {
		d := &st.Devices[i]
		d.Shared = d.Allocator != "" && (users[d.Allocator] > 1 || twoDevice)
		if tr := traces[tfrun.ShortDevice(d.Device)]; tr != nil {
			d.Kernels, d.CopiesToDevice, d.CopiesToHost = tr.Kernels, tr.H2D, tr.D2H
		}
	}
	sort.Slice(st.Devices, func(i, j int) bool { return st.Devices[i].Device < st.Devices[j].Device })

	tr := tfrun.NewTrace(md)
	for _, x := range tr.Transfers() {
		from, okFrom := compute(x.Send.SendDevice)
		to, okTo := compute(x.Send.RecvDevice)
		if !okFrom || !okTo || from == to {
			continue
		}
		if src, ok := tr.Node(inputNode(x.Send.Def)); ok && isControlCarrier(src.Def) {
			st.Controls++
			continue
		}
		if to {
			st.ToDevice++
			if src, ok := tr.Node(inputNode(x.Send.Def)); ok && role(src.Def) == "swap_in" {
				st.SwapIns++
			}
			continue
		}
		st.ToHost++
		if x.Recv != nil {
			for _, c := range tr.ConsumersOf(x.Recv.Name) {
				if role(c.Def) == "swap_out" {
					st.SwapOuts++
					break
				}
			}
		}
	}
	return st
}

// ownAllocator picks, among the allocators a device's nodes used (with how many records
// each), the device's own: "GPU_N_bfc" for GPU N; for a CPU the one most used that is not a
// GPU's (ties by name).
func ownAllocator(device string, used map[string]int) string {
	d, err := graphdef.ParseDevice(device)
	if err != nil {
		return ""
	}
	if d.Type == "GPU" {
		name := "GPU_" + strconv.Itoa(d.Index) + "_bfc"
		if used[name] > 0 {
			return name
		}
		return ""
	}
	best := ""
	for name, n := range used {
		if profiling.IsGPUAllocator(name) || strings.HasPrefix(name, "gpu_host") {
			continue
		}
		if best == "" || n > used[best] || (n == used[best] && name < best) {
			best = name
		}
	}
	return best
}

// inputNode returns the node of a node's first data input.
func inputNode(nd *npb.NodeDef) string {
	if len(nd.GetInput()) == 0 {
		return ""
	}
	name, _, _, err := graphdef.ParseInput(nd.GetInput()[0])
	if err != nil {
		return ""
	}
	return name
}

// isControlCarrier reports whether a node is the constant TensorFlow's partitioner sends in
// place of a control edge that crosses devices: a Const with control inputs only.
func isControlCarrier(nd *npb.NodeDef) bool {
	if nd.GetOp() != "Const" || len(nd.GetInput()) == 0 {
		return false
	}
	for _, in := range nd.GetInput() {
		if !strings.HasPrefix(in, "^") {
			return false
		}
	}
	return true
}

// role returns a node's tfswap role attr, or "".
func role(nd *npb.NodeDef) string { return string(nd.GetAttr()[rewrite.RoleAttr].GetS()) }
