package rewrite

import (
	"fmt"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
)

// Gate says which swap-in node carries the trigger's control edge.
type Gate int

const (
	// GateHost pins the swap-in to the host CPU and puts the trigger's control edge on it, so
	// the host-to-device copy waits for the trigger. This is the only placement that saves
	// device memory.
	GateHost Gate = iota
	// GateDevice puts the swap-in on the consumer's device with the trigger's control edge:
	// TensorFlow copies the tensor back right after the swap-out and only the Identity waits.
	// It exists to demonstrate that failure; never use it to save memory.
	GateDevice
)

// String returns "host" or "device".
func (g Gate) String() string {
	if g == GateDevice {
		return "device"
	}
	return "host"
}

// GateKind says which op a gate is (see Options.GateKind).
type GateKind int

const (
	// GateIdentity makes each gate an Identity of one of its trigger's outputs. TensorFlow's
	// executor forwards the buffer, but Grappler's VirtualCluster counts the Identity's output
	// as a buffer of its own, as large as the tensor it reads.
	GateIdentity GateKind = iota
	// GateReduce makes each gate whose trigger has a floating-point data output (half,
	// bfloat16, float, double) an L2Loss of the smallest of them: a 4-byte scalar computed
	// from the whole tensor, so it runs only once the trigger has. Grappler neither
	// constant-folds it (its input is not a constant) nor turns it into a NoOp (the
	// dependency optimizer's SafeToConvertToNoOp keeps the nodes to preserve, and the gate
	// carries _grappler_do_not_remove). A trigger without such an output keeps an Identity
	// gate: Shape, Size and Rank, the few-byte readers of any dtype, are replaced by
	// constants by Grappler's constant folding when the shape is known, which would drop the
	// data edge the gate exists for.
	GateReduce
)

// String returns "identity" or "reduce".
func (k GateKind) String() string {
	if k == GateReduce {
		return "reduce"
	}
	return "identity"
}

// ParseGateKind returns the GateKind named s ("identity" or "reduce").
func ParseGateKind(s string) (GateKind, error) {
	switch s {
	case "identity":
		return GateIdentity, nil
	case "reduce":
		return GateReduce, nil
	}
	return 0, fmt.Errorf("unknown gate kind %q (want identity or reduce)", s)
}

// Options are the LMS-style rewrite options. The zero value of a field means its default.
type Options struct {
	// SwapoutThreshold is the least topological distance (in levels) between a tensor's
	// producer and a consumer for that consumer to read a swapped-in copy (LMS's
	// swapout_threshold). Default 10.
	SwapoutThreshold int
	// SwapinAhead is how many levels before its consumer the swap-in's trigger sits (LMS's
	// swapin_ahead). Default 2.
	SwapinAhead int
	// SwapinGroupBy lets far consumers of a tensor whose levels are within this distance of
	// the earliest of them share one swap-in (LMS's swapin_groupby). Default 5; -1 means every
	// far consumer gets its own swap-in.
	SwapinGroupBy int
	// MinTensorBytes is the smallest tensor swapped. Default 64 KiB; -1 means no minimum.
	MinTensorBytes int64
	// ExcludeScopes are name scopes whose nodes' tensors are never swapped ("a/b" excludes
	// "a/b" and "a/b/..."; not "a/bc").
	ExcludeScopes []string
	// ExcludeOps are op types whose outputs are never swapped, in addition to the ops that
	// never are (constants, variables, control flow).
	ExcludeOps []string
	// Preserve names nodes tfswap leaves exactly as they are: their outputs are never
	// swapped or recomputed, they never read a swapped-in or recomputed copy instead of
	// their input, and they neither gate a swap-in nor wait for a swap-out (no input, data or
	// control, is added to them). A name may carry a port or a leading ^ ("a:1", "^a"): the
	// node is meant. Every name must be a node of the graph.
	Preserve []string
	// ComputeDevice names the device whose tensors are swapped, e.g. "/device:GPU:0", or
	// several separated by commas, one per replica of a data-parallel step
	// (SplitComputeDevices): each has its own budget and peak, swaps to CPU:0 of its own
	// task, and gates its swap-ins by its own work only. Empty means every GPU. Nodes with no
	// device are taken to run on the default compute device: the first named when set, else
	// /device:GPU:0.
	ComputeDevice string
	// HostDevice names the device swapped tensors are kept on. Empty means CPU:0 of the
	// producer's job, replica and task.
	HostDevice string
	// Gate says which swap-in carries the trigger. Default GateHost.
	Gate Gate
	// GateSmallestOutput makes each gate read its trigger's smallest output of known size
	// (SmallestGatePort) instead of its first data output (GatePort), so that Grappler's
	// VirtualCluster, which counts a gate's output as a buffer of its own, counts a few bytes
	// where the trigger has such an output. RewriteWithPlanner sets it for every planning
	// strategy; Rewrite and the lms-fixed strategy leave it off, so their output stays the
	// bytes it was.
	GateSmallestOutput bool
	// GateKind says which op each gate is. Default GateIdentity.
	GateKind GateKind
	// Fetch names the nodes the step fetches, when known (RewriteWithPlanner takes
	// PlanOptions.Sim.Fetch when it is empty). With it, the value-dead nodes that are
	// never read from a swap-in nor trigger one include every node Grappler's dependency
	// optimizer turns into a NoOp in that step (cost.PrunedNodes), as the simulator prunes
	// them; without it, only those whose value nothing in the graph reads (valueDead).
	Fetch []string
}

// The defaults of Options.
const (
	// DefaultSwapoutThreshold is Options.SwapoutThreshold's default, in levels.
	DefaultSwapoutThreshold = 10
	// DefaultSwapinAhead is Options.SwapinAhead's default, in levels.
	DefaultSwapinAhead = 2
	// DefaultSwapinGroupBy is Options.SwapinGroupBy's default, in levels.
	DefaultSwapinGroupBy = 5
	// DefaultMinTensorBytes is Options.MinTensorBytes' default: 64 KiB.
	DefaultMinTensorBytes = 64 << 10
)

// WithDefaults returns o with zero fields replaced by their defaults, and checks it.
func (o Options) WithDefaults() (Options, error) {
	if o.SwapoutThreshold == 0 {
		o.SwapoutThreshold = DefaultSwapoutThreshold
	}
	if o.SwapinAhead == 0 {
		o.SwapinAhead = DefaultSwapinAhead
	}
	if o.SwapinGroupBy == 0 {
		o.SwapinGroupBy = DefaultSwapinGroupBy
	}
	if o.MinTensorBytes == 0 {
		o.MinTensorBytes = DefaultMinTensorBytes
	}
	if o.SwapoutThreshold < 1 {
		return o, fmt.Errorf("swapout threshold must be at least 1, not %d", o.SwapoutThreshold)
	}
	if o.SwapinAhead < 1 {
		return o, fmt.Errorf("swap-in ahead must be at least 1, not %d", o.SwapinAhead)
	}
	if o.SwapinGroupBy < -1 {
		return o, fmt.Errorf("swap-in group-by must be -1 or more, not %d", o.SwapinGroupBy)
	}
	if o.MinTensorBytes < -1 {
		return o, fmt.Errorf("minimum tensor size must be -1 or more, not %d", o.MinTensorBytes)
	}
	if o.Gate != GateHost && o.Gate != GateDevice {
		return o, fmt.Errorf("unknown gate %d", o.Gate)
	}
	if o.GateKind != GateIdentity && o.GateKind != GateReduce {
		return o, fmt.Errorf("unknown gate kind %d", o.GateKind)
	}
	if err := CheckDevices(o.ComputeDevice, o.HostDevice); err != nil {
		return o, err
	}
	return o, nil
}

// SplitComputeDevices splits a compute-device option (Options.ComputeDevice) into its
// devices: one device, or several separated by commas (one per replica of a data-parallel
// step, such as MirroredStrategy's). Spaces around a device are trimmed and empty entries
// dropped; an empty option gives no device (every GPU).
func SplitComputeDevices(compute string) []string {
	var out []string
	for _, d := range strings.Split(compute, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// ParseComputeDevices parses a compute-device option (see SplitComputeDevices) into device
// specifications, in the option's order.
func ParseComputeDevices(compute string) ([]graphdef.Device, error) {
	var out []graphdef.Device
	for _, s := range SplitComputeDevices(compute) {
		d, err := graphdef.ParseDevice(s)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// NamesComputeCPU reports whether the compute-device option compute (one device or a comma
// list, see SplitComputeDevices) names the CPU d as a compute device (the CPU emulation of
// GPUs). An option that does not parse names nothing.
func NamesComputeCPU(compute string, d graphdef.Device) bool {
	cds, err := ParseComputeDevices(compute)
	if err != nil {
		return false
	}
	for _, cd := range cds {
		if cd.Type == "CPU" && d.Matches(cd) {
			return true
		}
	}
	return false
}

// CheckDevices checks a compute-device option and a host device as Options holds them
// (either may be empty, meaning its default). The compute option is one device or a comma
// list of them (SplitComputeDevices); each is checked against the host by checkDevice, they
// must be distinct and of one device type (a data-parallel step's replicas).
func CheckDevices(compute, host string) error {
	list := SplitComputeDevices(compute)
	if len(list) == 0 {
		return checkDevice("", host)
	}
	var first graphdef.Device
	seen := map[string]bool{}
	for i, c := range list {
		if err := checkDevice(c, host); err != nil {
			return err
		}
		d, _ := graphdef.ParseDevice(c)
		if d.Index < 0 {
			d.Index = 0 // as Analyze takes it
		}
		if seen[d.String()] {
			return fmt.Errorf("compute device %q is named twice", c)
		}
		seen[d.String()] = true
		if i == 0 {
			first = d
		} else if d.Type != first.Type {
			return fmt.Errorf("compute devices %q and %q are of different types: the replicas of one step run on devices of one type", list[0], c)
		}
	}
	return nil
}

// checkDevice checks one compute device and a host device (either may be empty, meaning its
// default): each must parse; a compute device must name a device type (GPU:n, or CPU:n for
// the CPU emulation); a host device must be a CPU; and the compute device must not be the
// host its tensors would be swapped to (a CPU compute device with the default host, CPU:0 of
// its task, must not be CPU:0 itself). A swap onto the device the tensor already lives on
// moves nothing and frees nothing.
func checkDevice(compute, host string) error {
	cd, err := graphdef.ParseDevice(compute)
	if err != nil {
		return fmt.Errorf("compute device: %v", err)
	}
	hd, err := graphdef.ParseDevice(host)
	if err != nil {
		return fmt.Errorf("host device: %v", err)
	}
	if compute != "" && cd.Type == "" {
		return fmt.Errorf("compute device %q names no device type: want e.g. /device:GPU:1", compute)
	}
	if host != "" && hd.Type != "CPU" {
		return fmt.Errorf("host device %q is not a CPU: swapped tensors are kept in host memory, e.g. /device:CPU:0", host)
	}
	if cd.Type != "CPU" {
		return nil
	}
	if cd.Index < 0 {
		cd.Index = 0 // as Analyze takes it
	}
	if host == "" {
		if cd.Index == 0 {
			return fmt.Errorf("compute device %q is the host its tensors would be swapped to (CPU:0 of its task): give another --host-device, or a compute device such as /device:CPU:1", compute)
		}
		return nil
	}
	if hd.Index < 0 || cd.Matches(hd) {
		return fmt.Errorf("compute device %q and host device %q are the same device: tensors must be swapped to another device", compute, host)
	}
	return nil
}
