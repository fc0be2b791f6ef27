//go:build tensorflow

package tune

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"os"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/tfswap/tfswap/tfrun"
)

func TestMain(m *testing.M) {
	if err := tfrun.ReexecWithOneDNNOff(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// emulated is the compute device of the two-device emulation.
const emulated = "/device:CPU:1"

// TestTuneResNetTwoDevice tunes the residual-network fixture's triggers in the two-device
// emulation: memory predicted for a V100 from times measured here (scaled), step times
// measured in sessions with /device:CPU:1 standing for the GPU. It checks that the search
// converges within its bound and that the tuned graph trains bit-identically to the
// original, and reports the tuned plan's measured step time against the untuned (LMS) plan's.
func TestTuneResNetTwoDevice(t *testing.T) {
	fx, err := tfrun.LoadFixture("../testmodels/fixtures/resnet.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := graphdef.Load(fx.GraphPath(), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tfrun.TwoDeviceConfigBytes()
	step := []string{fx.TrainOp, fx.Loss}

	// Measured op times of the original graph, in the emulation.
	placed := Place(m, emulated)
	pdata, err := placed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pg, err := graphdef.NewGraph(placed.Graph, "placed")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := profiling.Run(pdata, pg, profiling.Options{Init: fx.InitOp, Targets: []string{fx.TrainOp}, Fetches: []string{fx.Loss},
		Feeds: fx.FeedTensors, Warmup: 2, Iterations: 5, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	measured := prof.Measured(profiling.Info{Graph: "resnet.pb", TensorFlowVersion: tfrun.Version()})
	if !tfrun.SameDevice(measured.Device.Name, emulated) {
		t.Fatalf("profile's compute device %s, want %s", measured.Device.Name, emulated)
	}
	// Parse it back, as the simulator needs (ParseMeasured indexes it).
	data, _ := measured.Marshal()
	if measured, err = cost.ParseMeasured(data, "resnet.profile"); err != nil {
		t.Fatal(err)
	}

	opts := rewrite.Options{SwapoutThreshold: rewrite.DefaultSwapoutThreshold, SwapinAhead: rewrite.DefaultSwapinAhead,
		SwapinGroupBy: rewrite.DefaultSwapinGroupBy, MinTensorBytes: rewrite.DefaultMinTensorBytes}
	a := rewrite.Analyze(g, opts)
	base, _ := plan.PlanLMS(a)
	p, err := NewProblem(m, a, base)
	if err != nil {
		t.Fatal(err)
	}
	v100, _ := cost.LookupProfile("v100-16gb")
	pr := &Predictor{Profile: v100, Analysis: a, Sim: cost.Options{Fetch: step, Measured: measured, ScaleMeasured: true}}
	latest, _, err := predictAt(p, pr, p.Latest())
	if err != nil {
		t.Fatal(err)
	}
	all, _, _ := predictAt(p, pr, p.Clamp(fill(len(p.Groups), 1<<20)))
	budget := latest.Peak + (all.Peak-latest.Peak)/2
	rt := &TFRunner{Config: cfg, Place: emulated, Init: fx.InitOp, Targets: []string{fx.TrainOp}, Fetches: []string{fx.Loss}, Feeds: fx.FeedTensors, Warmup: 2}
	var lines []string
	res, err := Tune(p, pr, rt, Options{Budget: budget, Rounds: 16, Report: func(r Round) { lines = append(lines, r.String()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("budget %d B (latest triggers %d, all earliest %d); rounds:\n%s", budget, latest.Peak, all.Peak, strings.Join(lines, "\n"))
	if !res.Converged {
		t.Errorf("did not converge in %d rounds", len(res.Rounds)-1)
	}
	if res.Predicted.Peak > budget {
		t.Errorf("tuned plan's predicted peak %d over the budget %d", res.Predicted.Peak, budget)
	}
	if err := rewrite.Verify(g, res.Rewrite, rewrite.GateHost); err != nil {
		t.Fatal(err)
	}

	// Training results: the tuned graph against the original, bit for bit.
	tdata, err := Place(res.Rewrite.Model, emulated).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := tfrun.Train(pdata, fx, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tuned, err := tfrun.Train(tdata, fx, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range fx.Variables {
		names = append(names, v.Name)
	}
	if d := orig.Diff(tuned, names); d != nil {
		t.Errorf("the tuned graph trains differently:\n%s", strings.Join(d, "\n"))
	}

	// The benchmark figure: the untuned LMS plan against the tuned plan, interleaved.
	lms, err := rewrite.Apply(m, a, base)
	if err != nil {
		t.Fatal(err)
	}
	tl, tt, err := Benchmark(rt, lms.Model, res.Rewrite.Model, 20)
	if err != nil {
		t.Fatal(err)
	}
	lpd, _ := pr.Predict(lms.Model)
	_, ratio, k, pval := Slower(tl, tt, DefaultTolerance)
	t.Logf("measured on CPU, two-device emulation, 20 interleaved steps: untuned (LMS, swapin_ahead %d) median %s, tuned %s; paired ratio tuned/untuned %.3f, tuned slower in %d/20 pairs (sign test p %.3f); predicted V100 peak %d vs %d B",
		opts.SwapinAhead, Median(tl), Median(tt), ratio, k, pval, lpd.Peak, res.Predicted.Peak)
}
