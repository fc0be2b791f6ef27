package cost

import (
	"fmt"
	"sort"
	"strings"
)

// Report is the JSON form of a Result (tfswap simulate --json). Times are nanoseconds,
// sizes bytes.
type Report struct {
	Profile     string   `json:"profile"`
	Conventions string   `json:"conventions"`
	Fetch       []string `json:"fetch,omitempty"`
	BatchScale  int      `json:"batch_scale"`
	Simulated   int      `json:"simulated_nodes"`
	// UntakenNodes and CostedCalls are Result's: nodes of conditional branches not taken,
	// function calls costed from their bodies.
	UntakenNodes int `json:"untaken_branch_nodes,omitempty"`
	// PrunedNodes is Result's: nodes run as NoOps because nothing reads their value.
	PrunedNodes    int            `json:"value_dead_nodes,omitempty"`
	CostedCalls    int            `json:"calls_costed_from_bodies,omitempty"`
	StepTimeNS     int64          `json:"step_time_ns"`
	Devices        []DeviceReport `json:"devices"`
	D2H            TransferStats  `json:"d2h"`
	H2D            TransferStats  `json:"h2d"`
	UnknownOps     map[string]int `json:"unknown_ops"`
	UnsizedTensors int            `json:"unsized_tensors"`
	// GrapplerUnmodelled counts ops timed as unknown under Grappler's times
	// (Result.GrapplerUnmodelled).
	GrapplerUnmodelled map[string]int    `json:"grappler_unmodelled_ops,omitempty"`
	MeasuredNodes      int               `json:"measured_nodes"`
	MeasuredScaled     int               `json:"measured_scaled,omitempty"`
	MeasuredScale      float64           `json:"measured_scale,omitempty"`
	ScaledTensors      int               `json:"scaled_tensors,omitempty"`
	BatchPlaceholders  []string          `json:"batch_placeholders,omitempty"`
	Extra              map[string]string `json:"extra,omitempty"`
}

// DeviceReport is one device of a Report.
type DeviceReport struct {
	Name          string       `json:"name"`
	GPU           bool         `json:"gpu"`
	MemoryLimit   int64        `json:"memory_limit,omitempty"`
	PeakBytes     int64        `json:"peak_bytes"`
	PeakTimeNS    int64        `json:"peak_time_ns"`
	ResidentBytes int64        `json:"resident_bytes"`
	Ops           int          `json:"ops"`
	BusyNS        int64        `json:"busy_ns"`
	SwapInStallNS int64        `json:"swap_in_stall_ns"`
	IdleNS        int64        `json:"idle_ns"`
	LiveCount     int          `json:"live_count"`
	Live          []LiveTensor `json:"live"`
	// The microsecond peak (DeviceResult.MicrosecondPeakBytes), under GraphMemory's rule.
	PeakBytesUS  int64        `json:"peak_bytes_us,omitempty"`
	PeakTimeUSNS int64        `json:"peak_time_us_ns,omitempty"`
	LiveCountUS  int          `json:"live_count_us,omitempty"`
	LiveUS       []LiveTensor `json:"live_us,omitempty"`
}

// ConventionsName names a set of conventions: "tfswap", "grappler", or the list of rules
// switched to Grappler's.
func ConventionsName(c Conventions) string {
	if c == (Conventions{}) {
		return "tfswap"
	}
	if c == GrapplerConventions() {
		return "grappler"
	}
	var parts []string
	for _, r := range ConventionRules() {
		if r.Get(c) {
			parts = append(parts, r.Name)
		}
	}
	return strings.Join(parts, ",")
}

// ParseConventions parses "tfswap", "grappler", or a comma-separated list of rule names
// (ConventionRules) to switch to Grappler's.
func ParseConventions(spec string) (Conventions, error) {
	switch strings.TrimSpace(spec) {
	case "tfswap", "":
		return Conventions{}, nil
	case "grappler":
		return GrapplerConventions(), nil
	}
	var c Conventions
	rules := ConventionRules()
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, r := range rules {
			if r.Name == name {
				r.Set(&c, true)
				found = true
			}
		}
		if !found {
			var names []string
			for _, r := range rules {
				names = append(names, r.Name)
			}
			return c, fmt.Errorf("unknown rule %q (rules: %s; or tfswap, grappler)", name, strings.Join(names, ", "))
		}
	}
	return c, nil
}

// ConventionRule is one switchable accounting rule.
type ConventionRule struct {
	// Name is a short name ("resident-variables"); Grappler is what the rule does when set.
	Name     string
	Grappler string
	Get      func(Conventions) bool
	Set      func(*Conventions, bool)
}

// ConventionRules lists the rules in which tfswap's accounting and Grappler's differ.
func ConventionRules() []ConventionRule {
	return []ConventionRule{
		{"no-resident-variables", "variables, optimizer slots and constants are not resident; ReadVariableOp and Const outputs are ordinary tensors",
			func(c Conventions) bool { return c.NoResidentVariables }, func(c *Conventions, v bool) { c.NoResidentVariables = v }},
		{"no-aliasing", "Identity, Reshape and the like allocate their own output",
			func(c Conventions) bool { return c.NoAliasing }, func(c *Conventions, v bool) { c.NoAliasing = v }},
		{"no-forwarding", "elementwise ops never reuse an input buffer",
			func(c Conventions) bool { return c.NoForwarding }, func(c *Conventions, v bool) { c.NoForwarding = v }},
		{"no-workspace", "kernel temporaries are not counted",
			func(c Conventions) bool { return c.NoWorkspace }, func(c *Conventions, v bool) { c.NoWorkspace = v }},
		{"unknown-dims-as-one", "unknown dimensions count as 1",
			func(c Conventions) bool { return c.UnknownDimsAsOne }, func(c *Conventions, v bool) { c.UnknownDimsAsOne = v }},
		{"transient-recv", "a sent tensor stays on its producer's device until its remote consumers finish; the received copy lives only during the transfer",
			func(c Conventions) bool { return c.TransientRecv }, func(c *Conventions, v bool) { c.TransientRecv = v }},
		{"recv-ops", "a transfer is a 1 ns _Send on a channel and a 1 ns _Recv on the receiving device's compute stream, not a copy on a copy engine at the link's rate",
			func(c Conventions) bool { return c.RecvOps }, func(c *Conventions, v bool) { c.RecvOps = v }},
		{"instant-transfers", "(not one of Grappler's rules) copies take no time",
			func(c Conventions) bool { return c.InstantTransfers }, func(c *Conventions, v bool) { c.InstantTransfers = v }},
		{"delayed-free", "buffers are freed 1 ns after their last reader ends",
			func(c Conventions) bool { return c.DelayedFree }, func(c *Conventions, v bool) { c.DelayedFree = v }},
		{"tie-by-name", "ops ready at the same time run in name order",
			func(c Conventions) bool { return c.TieByName }, func(c *Conventions, v bool) { c.TieByName = v }},
		{"grappler-times", "ops take the time Grappler's OpLevelCostEstimator gives them",
			func(c Conventions) bool { return c.GrapplerTimes }, func(c *Conventions, v bool) { c.GrapplerTimes = v }},
		{"both-branches", "(not one of Grappler's rules) both branches of every conditional run, a conditional's Merge once per input that arrives (as the VirtualScheduler runs it), and an If costs both its branch functions",
			func(c Conventions) bool { return c.BothBranches }, func(c *Conventions, v bool) { c.BothBranches = v }},
		{"calls-by-bytes", "(not one of Grappler's rules) function calls are timed by their bytes only, not costed from their bodies",
			func(c Conventions) bool { return c.CallsByBytes }, func(c *Conventions, v bool) { c.CallsByBytes = v }},
		{"no-accumulators", "a while loop's stack and TensorList accumulators hold one iteration's element, not every iteration's",
			func(c Conventions) bool { return c.NoAccumulators }, func(c *Conventions, v bool) { c.NoAccumulators = v }},
		{"merge-reruns", "(what the VirtualCluster does, not part of grappler) a while loop's Merge runs again when its NextIteration ends and holds its Enter's tensor and its outputs until then",
			func(c Conventions) bool { return c.MergeReruns }, func(c *Conventions, v bool) { c.MergeReruns = v }},
		{"run-value-dead", "(what the VirtualCluster does, not part of grappler) nodes whose value nothing reads run as written instead of as the NoOps Grappler's dependency optimizer makes of them",
			func(c Conventions) bool { return c.RunValueDead }, func(c *Conventions, v bool) { c.RunValueDead = v }},
	}
}

// ReportOf builds the JSON report of r.
func ReportOf(r *Result) *Report {
	rep := &Report{
		Profile: r.Profile.Name, Conventions: ConventionsName(r.Options.Conventions), Fetch: r.Options.Fetch,
		BatchScale: r.Options.BatchScale, Simulated: r.Simulated, StepTimeNS: r.StepTime,
		UntakenNodes: r.UntakenNodes, PrunedNodes: r.PrunedNodes, CostedCalls: r.CostedCalls,
		D2H: r.D2H, H2D: r.H2D, UnknownOps: r.UnknownOps, UnsizedTensors: r.UnsizedTensors,
		GrapplerUnmodelled: r.GrapplerUnmodelled,
		MeasuredNodes:      r.MeasuredNodes, MeasuredScaled: r.MeasuredScaled, MeasuredScale: r.MeasuredScale,
	}
	if r.Shapes != nil {
		rep.ScaledTensors, rep.BatchPlaceholders = r.Shapes.Scaled, r.Shapes.BatchInputs
	}
	for _, d := range r.Devices {
		rep.Devices = append(rep.Devices, DeviceReport{
			Name: d.Name, GPU: d.GPU, MemoryLimit: d.MemoryLimit, PeakBytes: d.PeakBytes, PeakTimeNS: d.PeakTime,
			ResidentBytes: d.ResidentBytes, Ops: d.Ops, BusyNS: d.BusyTime, SwapInStallNS: d.SwapInStall,
			IdleNS: d.IdleTime, LiveCount: d.LiveCount, Live: d.Live,
			PeakBytesUS: d.MicrosecondPeakBytes, PeakTimeUSNS: d.MicrosecondPeakTime,
			LiveCountUS: d.MicrosecondLiveCount, LiveUS: d.MicrosecondLive,
		})
	}
	return rep
}

// UnknownOpList returns the op types without a cost rule, most frequent first.
func (r *Result) UnknownOpList() []string {
	ops := make([]string, 0, len(r.UnknownOps))
	for op := range r.UnknownOps {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool {
		if r.UnknownOps[ops[i]] != r.UnknownOps[ops[j]] {
			return r.UnknownOps[ops[i]] > r.UnknownOps[ops[j]]
		}
		return ops[i] < ops[j]
	})
	return ops
}
