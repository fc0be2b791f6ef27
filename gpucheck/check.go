package gpucheck

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/tfswap/tfswap/tfrun"
)

// DefaultModels are the models the check generates (testmodels/large.py's names).
var DefaultModels = []string{"resnet50", "transformer"}

// DefaultMultiples are the batches the check trains, as multiples of B0.
var DefaultMultiples = []float64{1, 1.5, 2}

// Defaults of Config.
const (
	DefaultWarmup        = 3
	DefaultSteps         = 5
	DefaultIdentitySteps = 3
	// DefaultIdentityFraction is the budget of the bit-identity plan as a fraction of the
	// unswapped graph's predicted peak at B0: low enough that the plan must swap.
	DefaultIdentityFraction = 0.8
	DefaultMaxBatch         = 4096
	// DefaultSeed seeds the random feeds.
	DefaultSeed = 1234
)

// Config says what the check does.
type Config struct {
	// Models are the models to generate (testmodels/large.py names); Multiples the batches
	// to train, as multiples of B0 (rounded to whole batches).
	Models    []string
	Multiples []float64
	// Warmup untimed and Steps timed steps per run, then one traced step.
	Warmup, Steps int
	// IdentitySteps are the steps of the two bit-identity runs (0: no bit-identity check);
	// IdentityFraction the budget of the swapped graph they compare, as a fraction of the
	// unswapped graph's predicted peak at B0.
	IdentitySteps    int
	IdentityFraction float64
	// Budget is the memory plans and B0 must fit (0: the GPU's memory limit in TensorFlow,
	// what its allocator may hand out).
	Budget int64
	// Profile is the device profile predictions are made for (nil: MatchProfile's choice).
	Profile *cost.Profile
	// HostArch is the host's GOARCH, for MatchProfile.
	HostArch string
	// MaxBatch caps the search for B0.
	MaxBatch int
	// Dir receives the planned graphs (and, with KeepTraces, the traced steps' RunMetadata).
	Dir        string
	KeepTraces bool
	// Seed seeds the random feeds.
	Seed uint64
}

// Env holds what the check works with: the GPU measured, and the seams to generate graphs
// and run them (the real ones generate with testmodels/large.py and run in worker
// processes; tests use fakes).
type Env struct {
	GPU       tfrun.GPU
	Generator Generator
	Runner    Runner
	// TensorFlow is the runtime's version, for the report.
	TensorFlow string
	// Progress receives one line per step of the check; nil discards them.
	Progress io.Writer
}

func (c *Config) fill() {
	if len(c.Models) == 0 {
		c.Models = DefaultModels
	}
	if len(c.Multiples) == 0 {
		c.Multiples = DefaultMultiples
	}
	if c.Steps == 0 {
		c.Steps = DefaultSteps
	}
	if c.IdentityFraction == 0 {
		c.IdentityFraction = DefaultIdentityFraction
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
}

// Check runs the check on env.GPU: it picks the device profile, finds B0 of every model,
// trains each model unswapped and planned (tfswap's auto strategy for the budget) at every
// multiple of B0, compares a swapped and the unswapped graph bit for bit at B0, and returns
// the report.
func Check(cfg Config, env Env) (*Report, error) {
	cfg.fill()
	progress := func(format string, args ...any) {
		if env.Progress != nil {
			fmt.Fprintf(env.Progress, format+"\n", args...)
		}
	}
	rep := &Report{Kind: KindMeasured, TensorFlow: env.TensorFlow, GPU: env.GPU,
		Config: ReportConfig{Warmup: cfg.Warmup, Steps: cfg.Steps, IdentitySteps: cfg.IdentitySteps,
			IdentityFraction: cfg.IdentityFraction, Multiples: cfg.Multiples, GrapplerMemoryOptimizer: "off"}}
	if cfg.Profile != nil {
		rep.Profile, rep.ProfileReason = cfg.Profile.Name, "given"
	} else {
		m, err := MatchProfile(env.GPU, cost.Profiles(), cfg.HostArch)
		if err != nil {
			return nil, err
		}
		cfg.Profile = m.Profile
		rep.Profile, rep.ProfileReason = m.Profile.Name, m.Reason
	}
	rep.Budget, rep.BudgetSource = cfg.Budget, "given"
	if cfg.Budget == 0 {
		rep.Budget, rep.BudgetSource = env.GPU.MemoryBytes, "TensorFlow's memory limit of the GPU"
	}
	if rep.Budget <= 0 {
		return nil, fmt.Errorf("gpucheck: no budget: TensorFlow reports no memory for %s", env.GPU.Device)
	}
	progress("GPU: %s; predictions for profile %s (%s); budget %s (%s)", env.GPU, rep.Profile, rep.ProfileReason,
		units.FormatBytes(rep.Budget), rep.BudgetSource)
	j := Judge{Profile: cfg.Profile, Budget: rep.Budget, Fetch: []string{"train"}}
	for _, model := range cfg.Models {
		mr, err := checkModel(cfg, env, j, model, progress)
		if err != nil {
			return nil, err
		}
		rep.Models = append(rep.Models, *mr)
	}
	return rep, nil
}

// checkModel is Check for one model.
func checkModel(cfg Config, env Env, j Judge, model string, progress func(string, ...any)) (*ModelReport, error) {
	progress("%s: searching B0, the largest batch that fits %s unswapped (simulated for %s)", model, units.FormatBytes(j.Budget), j.Profile.Name)
	b0, err := FindB0(env.Generator, model, j, cfg.MaxBatch)
	if err != nil {
		return nil, err
	}
	mr := &ModelReport{Model: model, B0: b0.Batch, B0Capped: b0.Capped, B0Generated: b0.Generated,
		PredictedPeakB0: b0.At.Peak, PredictedPeakNext: b0.Next.Peak, PredictedGrapplerPeakNext: b0.Next.GrapplerPeak}
	if b0.Batch == 0 {
		mr.Note = fmt.Sprintf("not even batch 1 fits %s unswapped (predicted peak %s)", units.FormatBytes(j.Budget), units.FormatBytes(b0.Next.Peak))
		progress("%s: %s", model, mr.Note)
		return mr, nil
	}
	progress("%s: B0 = %d (predicted peak %s; batch %d: %s)", model, b0.Batch, units.FormatBytes(b0.At.Peak), b0.Batch+1, mr.nextPeak(j.Budget))
	graph := func(b int) (*Graph, error) {
		if g, ok := b0.Graphs[b]; ok {
			return g, nil
		}
		g, err := env.Generator.Generate(model, b)
		if err != nil {
			return nil, err
		}
		b0.Graphs[b] = g
		return g, nil
	}
	var base *Row // the unswapped run at B0
	seen := map[int]bool{}
	for _, mult := range cfg.Multiples {
		b := max(1, int(math.Round(mult*float64(b0.Batch))))
		if seen[b] {
			continue
		}
		seen[b] = true
		g, err := graph(b)
		if err != nil {
			return nil, err
		}
		pred, err := j.Predict(g.Graph, 1)
		if err != nil {
			return nil, err
		}
		un := &Row{Batch: b, Multiple: float64(b) / float64(b0.Batch), Graph: "unswapped", PredictedPeak: pred.Peak, PredictedStepNS: pred.StepNS}
		progress("%s: batch %d unswapped: predicted peak %s; training", model, b, units.FormatBytes(pred.Peak))
		if err := run(cfg, env, un, g, g.Path, fmt.Sprintf("%s_b%d.unswapped", model, b)); err != nil {
			return nil, err
		}
		progress("%s: batch %d unswapped: %s", model, b, un.Outcome())
		if b == b0.Batch {
			base = un
		}
		pl := &Row{Batch: b, Multiple: un.Multiple, Graph: "auto"}
		planned, err := planAuto(g, j.Profile, j.Budget)
		var nf *plan.NoFitError
		switch {
		case errors.As(err, &nf):
			pl.Status, pl.Error = StatusNoPlan, nf.Error()
		case err != nil:
			return nil, fmt.Errorf("%s: planning: %w", g.Path, err)
		case len(planned.Swaps) == 0 && len(planned.Recomputes) == 0:
			pl.Status = StatusNothingToSwap
			pl.PredictedPeak, pl.PredictedStepNS = un.PredictedPeak, un.PredictedStepNS
		default:
			pl.Swaps, pl.Recomputes = len(planned.Swaps), len(planned.Recomputes)
			pl.PredictedStepNS = planned.Eval.StepTime
			for _, d := range planned.Eval.Devices {
				pl.PredictedPeak = max(pl.PredictedPeak, d.Peak)
			}
			ov := float64(pl.PredictedStepNS)/float64(un.PredictedStepNS) - 1
			pl.PredictedOverhead = &ov
			path := filepath.Join(cfg.Dir, fmt.Sprintf("%s_b%d.auto.pb", model, b))
			if err := planned.Model.Save(path, graphdef.SaveOptions{}); err != nil {
				return nil, err
			}
			progress("%s: batch %d auto: %d swaps, %d recomputations, predicted peak %s, overhead %+.1f%%; training", model, b, pl.Swaps, pl.Recomputes, units.FormatBytes(pl.PredictedPeak), 100*ov)
			if err := run(cfg, env, pl, g, path, fmt.Sprintf("%s_b%d.auto", model, b)); err != nil {
				return nil, err
			}
			progress("%s: batch %d auto: %s", model, b, pl.Outcome())
		}
		if un.Status == StatusRan && pl.Status == StatusRan {
			ov := float64(pl.MeasuredStepNS)/float64(un.MeasuredStepNS) - 1
			pl.MeasuredOverhead = &ov
		}
		mr.Rows = append(mr.Rows, *un, *pl)
	}
	// Per-sample time against the unswapped graph at B0.
	if base != nil && base.Status == StatusRan {
		perB0 := float64(base.MeasuredStepNS) / float64(base.Batch)
		predB0 := float64(base.PredictedStepNS) / float64(base.Batch)
		for i := range mr.Rows {
			r := &mr.Rows[i]
			if r.Status == StatusRan && !(r.Graph == "unswapped" && r.Batch == base.Batch) {
				v := float64(r.MeasuredStepNS)/float64(r.Batch)/perB0 - 1
				r.MeasuredPerSampleVsB0 = &v
			}
			if r.PredictedStepNS > 0 && r.Status != StatusNothingToSwap && r.Status != StatusNoPlan && !(r.Graph == "unswapped" && r.Batch == base.Batch) {
				v := float64(r.PredictedStepNS)/float64(r.Batch)/predB0 - 1
				r.PredictedPerSampleVsB0 = &v
			}
		}
	}
	if cfg.IdentitySteps > 0 {
		g, err := graph(b0.Batch)
		if err != nil {
			return nil, err
		}
		id, err := identity(cfg, env, j, g, b0.At.Peak, progress)
		if err != nil {
			return nil, err
		}
		mr.Identity = id
	}
	return mr, nil
}

// planAuto plans g with tfswap's auto strategy for the profile and budget, as `tfswap rewrite
// MODEL --device P --budget B --fetch train` does.
func planAuto(g *Graph, p *cost.Profile, budget int64) (*plan.Planned, error) {
	return plan.RewriteWithPlanner(g.Def, rewrite.Options{}, plan.PlanOptions{
		Strategy: "auto", Profile: p, Budget: budget, Sim: cost.Options{Fetch: []string{"train"}},
	})
}

// run trains the graph at path (g or a rewrite of it) and fills r's measured side.
func run(cfg Config, env Env, r *Row, g *Graph, path, label string) error {
	spec := RunSpec{Label: label, Graph: path, Init: g.Side.InitOp, Train: g.Side.TrainOp, Loss: g.Side.Loss,
		Seed: cfg.Seed, Warmup: cfg.Warmup, Steps: cfg.Steps, Trace: true}
	if cfg.KeepTraces {
		spec.TraceFile = filepath.Join(cfg.Dir, label+".runmeta.pb")
	}
	res, err := env.Runner.Run(spec)
	if err != nil {
		return err
	}
	r.fill(res)
	return nil
}

// identity trains the unswapped graph at B0 and a plan of it for a budget it must swap to
// meet, both with deterministic kernels, and compares them bit for bit.
func identity(cfg Config, env Env, j Judge, g *Graph, unswappedPeak int64, progress func(string, ...any)) (*Identity, error) {
	budget := int64(float64(unswappedPeak) * cfg.IdentityFraction)
	id := &Identity{Batch: g.Batch, Budget: budget, Steps: cfg.IdentitySteps}
	planned, err := planAuto(g, j.Profile, budget)
	var nf *plan.NoFitError
	switch {
	case errors.As(err, &nf):
		id.Status, id.Detail = IdentityNotChecked, "no plan fits "+units.FormatBytes(budget)+": "+nf.Error()
		return id, nil
	case err != nil:
		return nil, fmt.Errorf("%s: planning for the bit-identity check: %w", g.Path, err)
	case len(planned.Swaps) == 0:
		id.Status, id.Detail = IdentityNotChecked, "the plan for "+units.FormatBytes(budget)+" swaps nothing"
		return id, nil
	}
	id.Swaps, id.Recomputes = len(planned.Swaps), len(planned.Recomputes)
	path := filepath.Join(cfg.Dir, fmt.Sprintf("%s_b%d.identity.pb", g.Model, g.Batch))
	if err := planned.Model.Save(path, graphdef.SaveOptions{}); err != nil {
		return nil, err
	}
	var vars []string
	for _, v := range g.Side.Variables {
		vars = append(vars, v.Fetch)
	}
	progress("%s: bit identity at batch %d: %d swaps, %d recomputations for %s; training both with TF_DETERMINISTIC_OPS=1", g.Model, g.Batch, id.Swaps, id.Recomputes, units.FormatBytes(budget))
	var results [2]*RunResult
	for i, p := range []string{g.Path, path} {
		label := fmt.Sprintf("%s_b%d.identity.%s", g.Model, g.Batch, []string{"unswapped", "swapped"}[i])
		res, err := env.Runner.Run(RunSpec{Label: label, Graph: p, Init: g.Side.InitOp, Train: g.Side.TrainOp, Loss: g.Side.Loss,
			Variables: vars, Seed: cfg.Seed, Steps: cfg.IdentitySteps, Deterministic: true})
		if err != nil {
			return nil, err
		}
		results[i] = res
	}
	id.compare(results[0], results[1], g.Side.Variables)
	progress("%s: bit identity: %s %s", g.Model, id.Status, id.Detail)
	return id, nil
}

// compare fills the verdict from the unswapped (a) and swapped (b) deterministic runs.
func (id *Identity) compare(a, b *RunResult, vars []Variable) {
	for _, r := range []struct {
		res  *RunResult
		name string
	}{{a, "unswapped"}, {b, "swapped"}} {
		if r.res.Status != StatusRan {
			id.Status = IdentityNotChecked
			id.Detail = fmt.Sprintf("the %s graph did not train: %s", r.name, firstLine(r.res.Code+": "+r.res.Error))
			if strings.Contains(r.res.Error, "eterminism") {
				id.Detail = fmt.Sprintf("a kernel of the %s graph has no deterministic GPU implementation: %s", r.name, firstLine(r.res.Error))
			}
			return
		}
	}
	id.Losses = b.Losses
	var diffs []string
	if len(a.LossDigests) != len(b.LossDigests) || len(a.VariableDigests) != len(b.VariableDigests) {
		diffs = append(diffs, fmt.Sprintf("%d/%d losses and %d/%d variables reported", len(a.LossDigests), len(b.LossDigests), len(a.VariableDigests), len(b.VariableDigests)))
	} else {
		for i := range a.LossDigests {
			if a.LossDigests[i] != b.LossDigests[i] {
				diffs = append(diffs, fmt.Sprintf("loss at step %d (%v vs %v)", i+1, a.Losses[i], b.Losses[i]))
			}
		}
		for i := range a.VariableDigests {
			if a.VariableDigests[i] != b.VariableDigests[i] {
				name := fmt.Sprintf("variable %d", i)
				if i < len(vars) {
					name = vars[i].Name
				}
				diffs = append(diffs, name)
			}
		}
	}
	if len(diffs) == 0 {
		id.Status = IdentityIdentical
		id.Detail = fmt.Sprintf("%d losses and %d variables after training", len(b.LossDigests), len(b.VariableDigests))
		return
	}
	id.Status = IdentityDiffers
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	id.Detail = "differ: " + strings.Join(diffs, ", ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
