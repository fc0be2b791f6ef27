package gpucheck

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling/fakegpu"
)

func TestMLPGraphSimulates(t *testing.T) {
	gen := &mlpGenerator{dir: t.TempDir()}
	g, err := gen.Generate("mlp", 256)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cost.LookupProfile("v100-16gb")
	r, err := cost.Simulate(g.Graph, p, cost.Options{Fetch: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak %d resident %d step %d unknown %v unsized %d", r.Compute().PeakBytes, r.Compute().ResidentBytes, r.StepTime, r.UnknownOps, r.UnsizedTensors)
}

// TestCheckWithFakeGPU runs the whole check on a fake GPU (a V100 as TensorFlow lists one,
// with 64 MiB for TensorFlow) whose runs are steps constructed by profiling/fakegpu: B0 is
// where the simulator says, the unswapped graph runs out of memory beyond it, the plans run,
// and the report's figures are the runs' figures.
func TestCheckWithFakeGPU(t *testing.T) {
	dir := t.TempDir()
	gen := &mlpGenerator{dir: dir}
	runner := &fakeGPURunner{limit: 64 << 20}
	rep, err := Check(Config{Models: []string{"mlp"}, Warmup: 1, Steps: 3, IdentitySteps: 2, Dir: dir, HostArch: "amd64"},
		Env{GPU: testGPU(), Generator: gen, Runner: runner, TensorFlow: "2.18.0"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Profile != "v100-16gb" || !strings.Contains(rep.ProfileReason, "Tesla V100-SXM2-16GB") || rep.Budget != 64<<20 {
		t.Errorf("profile %s (%s), budget %d", rep.Profile, rep.ProfileReason, rep.Budget)
	}
	if len(rep.Models) != 1 {
		t.Fatalf("%d models", len(rep.Models))
	}
	m := rep.Models[0]
	p, _ := cost.LookupProfile("v100-16gb")
	j := Judge{Profile: p, Budget: rep.Budget, Fetch: []string{"train"}}
	fit := func(b int) Prediction {
		g, err := (&mlpGenerator{dir: t.TempDir()}).Generate("mlp", b)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := j.Predict(g.Graph, 1)
		if err != nil {
			t.Fatal(err)
		}
		return pr
	}
	if m.B0 < 100 || !fit(m.B0).Fits || fit(m.B0+1).Fits || m.PredictedPeakB0 != fit(m.B0).Peak {
		t.Errorf("B0 %d: fits %v, B0+1 fits %v", m.B0, fit(m.B0).Fits, fit(m.B0+1).Fits)
	}
	if len(m.B0Generated) > 6 {
		t.Errorf("B0 took %d generated graphs: %v", len(m.B0Generated), m.B0Generated)
	}
	if len(m.Rows) != 6 {
		t.Fatalf("%d rows", len(m.Rows))
	}
	rows := map[string]Row{}
	for _, r := range m.Rows {
		rows[fmt.Sprintf("%s@%.1f", r.Graph, r.Multiple)] = r
	}
	if r := rows["unswapped@1.0"]; r.Status != StatusRan || r.MeasuredPeak <= 0 || r.Allocator != "GPU_0_bfc" || r.MeasuredPeak > runner.limit {
		t.Errorf("unswapped at B0: %+v", r)
	}
	for _, k := range []string{"unswapped@1.5", "unswapped@2.0"} {
		if r := rows[k]; r.Status != StatusOOM || r.Code != "RESOURCE_EXHAUSTED" || !strings.Contains(r.Error, "OOM when allocating") || r.PredictedPeak <= rep.Budget {
			t.Errorf("%s: %+v", k, r)
		}
	}
	if r := rows["auto@1.0"]; r.Status != StatusNothingToSwap || r.PredictedPerSampleVsB0 != nil {
		t.Errorf("auto at B0: %+v", r)
	}
	r := rows["auto@1.5"]
	if r.Status != StatusRan || r.Swaps+r.Recomputes == 0 || r.PredictedPeak > rep.Budget || r.PredictedOverhead == nil || r.MeasuredOverhead != nil {
		t.Fatalf("auto at 1.5 x B0: %+v", r)
	}
	// The row's figures are the run's: the GPU peak of the step constructed for the planned
	// graph, and the median of its timed steps.
	planned, err := graphdef.Load(filepath.Join(dir, fmt.Sprintf("mlp_b%d.auto.pb", r.Batch)), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pg, _ := graphdef.NewGraph(planned.Graph, planned.Source)
	st, err := fakegpu.Construct(pg, p, fakegpu.Options{Fetch: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.MeasuredPeak != st.Peak || r.PeakRatio != float64(st.Peak)/float64(r.PredictedPeak) || r.MeasuredStepNS != st.StepNS*103/100 || len(r.StepNS) != 3 {
		t.Errorf("auto at 1.5 x B0: measured %d (constructed %d), ratio %v, step %d (constructed %d)", r.MeasuredPeak, st.Peak, r.PeakRatio, r.MeasuredStepNS, st.StepNS)
	}
	base := rows["unswapped@1.0"]
	want := float64(r.MeasuredStepNS)/float64(r.Batch)/(float64(base.MeasuredStepNS)/float64(base.Batch)) - 1
	if r.MeasuredPerSampleVsB0 == nil || *r.MeasuredPerSampleVsB0 != want {
		t.Errorf("per sample vs B0: %v, want %v", r.MeasuredPerSampleVsB0, want)
	}
	// Every run but the deterministic ones is traced; those fetch the variables; all share
	// the seed.
	for _, s := range runner.specs {
		if s.Trace == s.Deterministic || (s.Deterministic && len(s.Variables) != mlpLayers) || s.Seed != DefaultSeed || s.Steps == 0 {
			t.Errorf("spec %+v", s)
		}
	}
	id := m.Identity
	if id == nil || id.Status != IdentityIdentical || id.Batch != m.B0 || id.Swaps == 0 || id.Budget >= m.PredictedPeakB0 || !strings.Contains(id.Detail, "8 variables") {
		t.Errorf("identity: %+v", id)
	}
}

// TestIdentityVerdicts checks the bit-identity verdicts: a variable that differs is named,
// and a kernel without a deterministic implementation leaves the check undone, saying so.
func TestIdentityVerdicts(t *testing.T) {
	for _, c := range []struct {
		runner *fakeGPURunner
		status string
		detail string
	}{
		{&fakeGPURunner{limit: 64 << 20, differ: "layer3"}, IdentityDiffers, "differ: layer3/w"},
		{&fakeGPURunner{limit: 64 << 20, determinismError: "Determinism is not yet supported in GPU implementation of FooGrad."},
			IdentityNotChecked, "has no deterministic GPU implementation"},
	} {
		dir := t.TempDir()
		rep, err := Check(Config{Models: []string{"mlp"}, Multiples: []float64{1}, Steps: 1, IdentitySteps: 2, Dir: dir},
			Env{GPU: testGPU(), Generator: &mlpGenerator{dir: dir}, Runner: c.runner})
		if err != nil {
			t.Fatal(err)
		}
		id := rep.Models[0].Identity
		if id == nil || id.Status != c.status || !strings.Contains(id.Detail, c.detail) {
			t.Errorf("identity %+v, want %s with %q", id, c.status, c.detail)
		}
	}
}

// TestCheckTooSmall: when not even batch 1 fits, the model is reported and nothing runs.
func TestCheckTooSmall(t *testing.T) {
	dir := t.TempDir()
	runner := &fakeGPURunner{limit: 4 << 20}
	rep, err := Check(Config{Models: []string{"mlp"}, Steps: 1, Dir: dir}, Env{GPU: fakeGPU("Tesla V100-SXM2-16GB", "7.0", 4<<20), Generator: &mlpGenerator{dir: dir}, Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Models[0]
	if m.B0 != 0 || len(m.Rows) != 0 || !strings.Contains(m.Note, "not even batch 1 fits") || len(runner.specs) != 0 {
		t.Errorf("%+v, %d runs", m, len(runner.specs))
	}
	var b strings.Builder
	rep.WriteMarkdown(&b)
	if !strings.Contains(b.String(), "| mlp | – |") {
		t.Errorf("markdown:\n%s", b.String())
	}
}
