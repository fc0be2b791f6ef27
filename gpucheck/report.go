package gpucheck

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/tfrun"
)

// Report kinds: what a report's figures are.
const (
	// KindMeasured: measured on the GPU the report names.
	KindMeasured = "measured"
	// KindConstructed: produced from constructed step stats (profiling/fakegpu), for
	// documentation and tests; not a measurement.
	KindConstructed = "constructed"
)

// Row statuses besides the run statuses (StatusRan, StatusOOM, ...).
const (
	// StatusNoPlan: no plan of the strategy fits the budget; nothing was run.
	StatusNoPlan = "no plan fits"
	// StatusNothingToSwap: the unswapped graph fits; the plan is the unswapped graph.
	StatusNothingToSwap = "fits unswapped"
)

// Bit-identity verdicts.
const (
	IdentityIdentical  = "bit-identical"
	IdentityDiffers    = "differs"
	IdentityNotChecked = "not checked"
)

// Report is the outcome of a check.
type Report struct {
	// Kind is KindMeasured, or KindConstructed for a report made from constructed step
	// stats; Note says more.
	Kind string `json:"kind"`
	Note string `json:"note,omitempty"`
	// TensorFlow is the runtime's version; GPU the GPU measured.
	TensorFlow string    `json:"tensorflow_version"`
	GPU        tfrun.GPU `json:"gpu"`
	// Profile is the device profile predictions are made for, ProfileReason why it was
	// chosen.
	Profile       string `json:"profile"`
	ProfileReason string `json:"profile_reason"`
	// Budget is the memory B0 and the plans fit (bytes), BudgetSource where it comes from.
	Budget       int64         `json:"budget"`
	BudgetSource string        `json:"budget_source"`
	Config       ReportConfig  `json:"config"`
	Models       []ModelReport `json:"models"`
}

// ReportConfig records how the runs were made.
type ReportConfig struct {
	Warmup           int       `json:"warmup_steps"`
	Steps            int       `json:"timed_steps"`
	IdentitySteps    int       `json:"identity_steps"`
	IdentityFraction float64   `json:"identity_budget_fraction"`
	Multiples        []float64 `json:"multiples_of_b0"`
	// GrapplerMemoryOptimizer is Grappler's memory optimizer in the runs' sessions ("off":
	// its swapping heuristics would otherwise swap the unswapped graphs).
	GrapplerMemoryOptimizer string `json:"grappler_memory_optimizer"`
}

// ModelReport is one model's part of the report.
type ModelReport struct {
	Model string `json:"model"`
	// B0 is the largest batch that fits the budget unswapped by the simulator; B0Capped says
	// the search stopped at its cap; B0Generated lists the batches generated to find it.
	B0          int   `json:"b0"`
	B0Capped    bool  `json:"b0_capped,omitempty"`
	B0Generated []int `json:"b0_graphs_generated,omitempty"`
	// PredictedPeakB0 and PredictedPeakNext are the unswapped peaks predicted at B0 and B0+1.
	PredictedPeakB0   int64 `json:"predicted_peak_b0"`
	PredictedPeakNext int64 `json:"predicted_peak_b0_plus_1"`
	// PredictedGrapplerPeakNext is B0+1's peak by Grappler's VirtualCluster rules, when it was
	// computed (tfswap's accounting fitted).
	PredictedGrapplerPeakNext int64     `json:"predicted_grappler_peak_b0_plus_1,omitempty"`
	Note                      string    `json:"note,omitempty"`
	Rows                      []Row     `json:"runs"`
	Identity                  *Identity `json:"bit_identity,omitempty"`
}

// Row is one graph at one batch: predicted, and as it ran.
type Row struct {
	Batch    int     `json:"batch"`
	Multiple float64 `json:"multiple_of_b0"`
	// Graph is "unswapped" or "auto" (tfswap's plan for the budget); Swaps and Recomputes
	// count what the plan does.
	Graph      string `json:"graph"`
	Swaps      int    `json:"swaps,omitempty"`
	Recomputes int    `json:"recomputes,omitempty"`
	// PredictedPeak and PredictedStepNS are simulated for the profile; PredictedOverhead is
	// the plan's predicted step time over the unswapped graph's at the same batch, less 1.
	PredictedPeak     int64    `json:"predicted_peak"`
	PredictedStepNS   int64    `json:"predicted_step_ns"`
	PredictedOverhead *float64 `json:"predicted_overhead,omitempty"`
	// Status is a run status (StatusRan, StatusOOM, StatusFailed, StatusCrashed), or
	// StatusNoPlan or StatusNothingToSwap for a plan that was not run; Code and Error are
	// TensorFlow's (or the planner's) message.
	Status string `json:"status"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error,omitempty"`
	// MeasuredPeak is the GPU allocator's peak in the traced step (Allocator names it),
	// MeasuredStepPeak the step's own allocations' peak; PeakRatio is MeasuredPeak over
	// PredictedPeak.
	MeasuredPeak     int64   `json:"measured_peak,omitempty"`
	Allocator        string  `json:"allocator,omitempty"`
	MeasuredStepPeak int64   `json:"measured_step_peak,omitempty"`
	PeakRatio        float64 `json:"peak_ratio,omitempty"`
	// MemoryLimit is TensorFlow's memory limit of the GPU in the run's session.
	MemoryLimit int64 `json:"memory_limit,omitempty"`
	// MeasuredStepNS is the median of the timed steps (StepNS); MeasuredOverhead the plan's
	// over the unswapped graph's at the same batch, less 1 (when both ran).
	MeasuredStepNS   int64    `json:"measured_step_ns,omitempty"`
	StepNS           []int64  `json:"step_ns,omitempty"`
	MeasuredOverhead *float64 `json:"measured_overhead,omitempty"`
	// MeasuredPerSampleVsB0 and PredictedPerSampleVsB0 are the time per sample over the
	// unswapped graph's at B0, less 1.
	MeasuredPerSampleVsB0  *float64 `json:"measured_per_sample_vs_b0,omitempty"`
	PredictedPerSampleVsB0 *float64 `json:"predicted_per_sample_vs_b0,omitempty"`
	// GPUTrace is what the device tracer recorded in the traced step.
	GPUTrace *profiling.GPUTrace `json:"gpu_trace,omitempty"`
}

// Identity is the bit-identity check of one model: the unswapped graph at Batch and a plan
// of it for Budget, each trained Steps steps with TF_DETERMINISTIC_OPS=1 from the same
// initial values and feeds.
type Identity struct {
	Batch      int       `json:"batch"`
	Budget     int64     `json:"budget"`
	Swaps      int       `json:"swaps"`
	Recomputes int       `json:"recomputes"`
	Steps      int       `json:"steps"`
	Status     string    `json:"status"`
	Detail     string    `json:"detail"`
	Losses     []float64 `json:"losses,omitempty"`
}

// fill records a run's result in the row.
func (r *Row) fill(res *RunResult) {
	r.Status, r.Code, r.Error = res.Status, res.Code, res.Error
	for _, d := range res.Devices {
		if d.Type == "GPU" && r.MemoryLimit == 0 {
			r.MemoryLimit = d.MemoryBytes
		}
	}
	if res.Status != StatusRan {
		return
	}
	r.StepNS = res.StepNS
	r.MeasuredStepNS = profiling.MedianInt64(res.StepNS)
	if m := res.Measurement; m != nil {
		r.MeasuredPeak, r.Allocator, r.MeasuredStepPeak, r.GPUTrace = m.Peak, m.Allocator, m.StepPeak, m.GPU
		if r.PredictedPeak > 0 {
			r.PeakRatio = float64(m.Peak) / float64(r.PredictedPeak)
		}
	}
}

// Outcome says in a few words how the row's run went.
func (r *Row) Outcome() string {
	switch r.Status {
	case StatusRan:
		s := "ran, median step " + fmtNS(r.MeasuredStepNS)
		if r.MeasuredPeak > 0 {
			s += fmt.Sprintf(", GPU peak %s (%.2fx predicted)", units.FormatBytes(r.MeasuredPeak), r.PeakRatio)
		} else {
			s += ", no GPU allocator in the trace"
		}
		return s
	case StatusOOM, StatusFailed, StatusCrashed:
		return r.Status + ": " + firstLine(r.Error)
	}
	return r.Status
}

func fmtNS(ns int64) string { return profiling.FormatDuration(time.Duration(ns)) }

func pct(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", 100**v)
}

// WriteMarkdown writes the report as Markdown: a heading saying what was measured (or that
// the figures are constructed), a table with a row per graph and batch, and the bit-identity
// verdicts.
func (rep *Report) WriteMarkdown(w io.Writer) {
	what := fmt.Sprintf("Measured on GPU %s", rep.GPU.Model)
	if rep.Kind == KindConstructed {
		what = fmt.Sprintf("Constructed example, not a measurement (GPU %s)", rep.GPU.Model)
	}
	fmt.Fprintf(w, "### %s\n\n", what)
	if rep.Note != "" {
		fmt.Fprintf(w, "%s\n\n", rep.Note)
	}
	fmt.Fprintf(w, "- GPU: %s, compute capability %s, %s usable by TensorFlow; TensorFlow %s.\n",
		rep.GPU.Model, rep.GPU.ComputeCapability, units.FormatBytes(rep.GPU.MemoryBytes), rep.TensorFlow)
	fmt.Fprintf(w, "- Predictions: tfswap's simulator for device profile `%s` (%s).\n", rep.Profile, rep.ProfileReason)
	fmt.Fprintf(w, "- Budget: %s (%s). B0 is the largest batch whose unswapped graph fits it by the simulator; `auto` is `tfswap rewrite --strategy auto` for it.\n",
		units.FormatBytes(rep.Budget), rep.BudgetSource)
	fmt.Fprintf(w, "- Runs: %d warm-up and %d timed steps (median) in a fresh process each, then one traced step for the GPU allocator's peak; Grappler's memory optimizer %s.\n\n",
		rep.Config.Warmup, rep.Config.Steps, rep.Config.GrapplerMemoryOptimizer)
	fmt.Fprintln(w, "| model | batch | graph | predicted peak | measured peak | measured / predicted | predicted overhead | measured overhead | per sample vs B0 (measured / predicted) | median step | result |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, m := range rep.Models {
		if len(m.Rows) == 0 {
			fmt.Fprintf(w, "| %s | – | – | – | – | – | – | – | – | – | %s |\n", m.Model, m.Note)
			continue
		}
		for _, r := range m.Rows {
			graph := r.Graph
			if r.Swaps+r.Recomputes > 0 {
				graph = fmt.Sprintf("auto (%d swaps, %d recomputes)", r.Swaps, r.Recomputes)
			}
			measured, ratio, step := "–", "–", "–"
			if r.Status == StatusRan {
				step = fmtNS(r.MeasuredStepNS)
				if r.MeasuredPeak > 0 {
					measured, ratio = units.FormatBytes(r.MeasuredPeak), fmt.Sprintf("%.2f", r.PeakRatio)
				}
			}
			pred := "–"
			if r.PredictedPeak > 0 {
				pred = units.FormatBytes(r.PredictedPeak)
			}
			result := r.Status
			if r.Status == StatusOOM || r.Status == StatusFailed || r.Status == StatusCrashed {
				result = fmt.Sprintf("%s (%s)", r.Status, shorten(firstLine(r.Error), 80))
			}
			fmt.Fprintf(w, "| %s | %d (%.2g×B0) | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s |\n", m.Model, r.Batch, r.Multiple, graph, pred, measured, ratio,
				pct(r.PredictedOverhead), pct(r.MeasuredOverhead), pct(r.MeasuredPerSampleVsB0), pct(r.PredictedPerSampleVsB0), step, result)
		}
	}
	fmt.Fprintln(w)
	for _, m := range rep.Models {
		if m.B0 > 0 {
			fmt.Fprintf(w, "- %s: B0 = %d (predicted unswapped peak %s; batch %d: %s).\n", m.Model, m.B0, units.FormatBytes(m.PredictedPeakB0), m.B0+1, m.nextPeak(rep.Budget))
		}
	}
	fmt.Fprintln(w)
	var ids []string
	for _, m := range rep.Models {
		if m.Identity == nil {
			continue
		}
		id := m.Identity
		s := fmt.Sprintf("- %s, batch %d, plan for %s (%d swaps, %d recomputes), %d steps with TF_DETERMINISTIC_OPS=1: **%s**", m.Model, id.Batch,
			units.FormatBytes(id.Budget), id.Swaps, id.Recomputes, id.Steps, id.Status)
		if id.Detail != "" {
			s += " (" + id.Detail + ")"
		}
		ids = append(ids, s)
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		fmt.Fprintf(w, "Bit identity of a swapped graph against the unswapped one:\n\n%s\n", strings.Join(ids, "\n"))
	}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// nextPeak says what B0+1's unswapped graph is predicted to need, and by whose accounting
// it does not fit budget.
func (m *ModelReport) nextPeak(budget int64) string {
	if m.B0Capped {
		return "not tried (the search's cap)"
	}
	if m.PredictedPeakNext <= budget && m.PredictedGrapplerPeakNext > budget {
		return fmt.Sprintf("%s, %s by Grappler's VirtualCluster rules", units.FormatBytes(m.PredictedPeakNext), overBudget(m.PredictedGrapplerPeakNext, budget))
	}
	return overBudget(m.PredictedPeakNext, budget)
}

// overBudget formats a peak over the budget, in bytes as well when the two look the same
// in binary units.
func overBudget(peak, budget int64) string {
	if units.FormatBytes(peak) == units.FormatBytes(budget) {
		return fmt.Sprintf("%s (%d B, over the budget's %d B)", units.FormatBytes(peak), peak, budget)
	}
	return units.FormatBytes(peak)
}
