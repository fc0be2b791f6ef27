package profiling

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// UnstableCV is the variation above which the summary reports an op as unstable: its times
// across the measured steps have a coefficient of variation (standard deviation / mean) above
// 20%.
const UnstableCV = 0.20

// Info is what a profile records besides the measurements.
type Info struct {
	// Graph names the profiled graph file.
	Graph string
	// TensorFlowVersion is the runtime's version (tfrun.Version).
	TensorFlowVersion string
	// Machine describes the computer.
	Machine *cost.MeasuredMachine
	// DeviceModel describes the compute device's hardware; DeviceProfile names the tfswap
	// device profile it corresponds to (optional).
	DeviceModel, DeviceProfile string
}

// Measured returns the profile in the measured-profile format the simulator reads
// (cost.Measured): for every node that ran, its median time, the device it ran on and the
// sizes of its outputs (one entry per output port of the node, -1 for a port never seen).
func (r *Result) Measured(info Info) *cost.Measured {
	m := &cost.Measured{
		Format: cost.MeasuredFormat, Version: cost.MeasuredVersion,
		Device:            cost.MeasuredDevice{Name: r.ComputeDevice, Model: info.DeviceModel, Profile: info.DeviceProfile},
		TensorFlowVersion: info.TensorFlowVersion,
		Graph:             info.Graph,
		Iterations:        len(r.Steps),
		Machine:           info.Machine,
		Nodes:             []cost.MeasuredNode{},
	}
	for _, st := range r.Nodes {
		ns := st.Median
		mn := cost.MeasuredNode{Name: st.Node.Name, Op: st.Node.Op, Device: st.Device, ComputeNS: &ns}
		nOut := len(st.Node.OutputTypes)
		if nOut == 0 {
			nOut = len(st.OutputBytes)
		}
		if nOut > 0 {
			mn.OutputBytes = make([]int64, nOut)
			for i := range mn.OutputBytes {
				mn.OutputBytes[i] = -1
				if i < len(st.OutputBytes) {
					mn.OutputBytes[i] = st.OutputBytes[i]
				}
			}
		}
		m.Nodes = append(m.Nodes, mn)
	}
	return m
}

// StepWall returns the wall times of the steps.
func (r *Result) StepWall() []time.Duration {
	out := make([]time.Duration, len(r.Steps))
	for i, s := range r.Steps {
		out[i] = s.Wall
	}
	return out
}

// Unstable returns the nodes whose times vary by more than UnstableCV across the steps,
// the slowest (by median) first.
func (r *Result) Unstable() []*NodeStats {
	var out []*NodeStats
	for _, st := range r.Nodes {
		if len(st.Times) >= 2 && st.CV > UnstableCV {
			out = append(out, st)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Median > out[j].Median })
	return out
}

// Slowest returns the n nodes with the largest median time, slowest first.
func (r *Result) Slowest(n int) []*NodeStats {
	s := append([]*NodeStats(nil), r.Nodes...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Median > s[j].Median })
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// medianDuration returns the median of d.
func medianDuration(d []time.Duration) time.Duration {
	v := make([]int64, len(d))
	for i, x := range d {
		v[i] = int64(x)
	}
	return time.Duration(MedianInt64(v))
}

// WriteSummary writes the human-readable summary of a profile: step times, the top slowest
// ops, and the ops whose times varied by more than UnstableCV (at most top of them listed).
func (r *Result) WriteSummary(w io.Writer, top int) {
	wall := r.StepWall()
	if len(wall) == 0 {
		fmt.Fprintln(w, "no measured steps")
		return
	}
	mn, mx := wall[0], wall[0]
	for _, d := range wall {
		mn, mx = min(mn, d), max(mx, d)
	}
	fmt.Fprintf(w, "step time over %d traced steps: median %s, min %s, max %s\n", len(wall), fmtDur(medianDuration(wall)), fmtDur(mn), fmtDur(mx))
	var total int64
	devs := map[string]int{}
	for _, st := range r.Nodes {
		total += st.Median
		devs[ShortDevice(st.Device)]++
	}
	var dl []string
	for d, n := range devs {
		dl = append(dl, fmt.Sprintf("%s %d", d, n))
	}
	sort.Strings(dl)
	fmt.Fprintf(w, "nodes that ran: %d (%s); compute device %s; %d runtime node(s) not in the graph\n", len(r.Nodes), strings.Join(dl, ", "), ShortDevice(r.ComputeDevice), len(r.RuntimeOnly))
	if strings.Contains(r.ComputeDevice, "GPU") && !r.GPUKernels {
		fmt.Fprintln(w, "warning: no GPU kernel times were traced (is CUPTI loadable?): GPU op times are the executor's, which time kernel launches only")
	}
	slowest, un := r.Slowest(top), r.Unstable()
	width := 0
	for i, st := range append(append([]*NodeStats(nil), slowest...), un...) {
		if i < len(slowest) || i-len(slowest) < top {
			width = max(width, min(len(st.Node.Name), maxNameWidth))
		}
	}
	fmt.Fprintf(w, "slowest ops (median; share of the summed op time %s):\n", fmtDur(time.Duration(total)))
	for _, st := range slowest {
		share := 0.0
		if total > 0 {
			share = 100 * float64(st.Median) / float64(total)
		}
		fmt.Fprintf(w, "  %-*s  %-22s %10s %5.1f%%  %s\n", width, clipName(st.Node.Name), st.Node.Op, fmtDur(time.Duration(st.Median)), share, ShortDevice(st.Device))
	}
	fmt.Fprintf(w, "stability: %d of %d ops vary by more than %.0f%% across steps (coefficient of variation)", len(un), len(r.Nodes), 100*UnstableCV)
	if len(un) == 0 {
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintln(w, "; the slowest of them:")
	for i, st := range un {
		if i >= top {
			fmt.Fprintf(w, "  ... %d more\n", len(un)-top)
			break
		}
		fmt.Fprintf(w, "  %-*s  %-22s median %10s  min %10s  max %10s  cv %3.0f%%\n", width, clipName(st.Node.Name), st.Node.Op, fmtDur(time.Duration(st.Median)), fmtDur(time.Duration(st.Min)), fmtDur(time.Duration(st.Max)), 100*st.CV)
	}
}

// maxNameWidth is the widest node name the summary prints; longer names keep their end.
const maxNameWidth = 60

// clipName shortens a node name to maxNameWidth characters, keeping its end (the op's own
// name) after "...".
func clipName(name string) string {
	if len(name) <= maxNameWidth {
		return name
	}
	return "..." + name[len(name)-maxNameWidth+3:]
}

// fmtDur formats a duration with three significant figures.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3gs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	case d >= time.Microsecond:
		return fmt.Sprintf("%.3gµs", float64(d)/1e3)
	}
	return fmt.Sprintf("%dns", int64(d))
}

// FormatDuration formats a duration as the profile summary does (three significant figures).
func FormatDuration(d time.Duration) string { return fmtDur(d) }

// ShortDevice returns "/device:CPU:1" for "/job:localhost/replica:0/task:0/device:CPU:1";
// names it cannot parse are returned as they are.
func ShortDevice(name string) string {
	d, err := graphdef.ParseDevice(name)
	if err != nil || d.Type == "" {
		return name
	}
	return graphdef.Device{Replica: -1, Task: -1, Type: d.Type, Index: d.Index}.String()
}
