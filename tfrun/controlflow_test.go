//go:build tensorflow

package tfrun

import (
	"github.com/tfswap/tfswap/rewrite/plan"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestControlFlowRewritesTrainBitIdentically is issue 12's runtime check for conditionals
// and function calls: each graph of testmodels/controlflow (a v1 tf.cond on a
// learning-phase placeholder, a v2 If, a v1 graph calling a tf.function, a
// StatefulPartitionedCall, while loops v1 and v2), placed on the emulated device, rewritten
// by LMS (thresholds lowered so that the small graphs swap something) and, for the CNNs,
// planned at 90% of the simulated unswapped peak, trains for 3 steps bit-identically to the
// original (loss and every variable) in the two-device emulation under TensorFlow's default
// Grappler configuration, and no swap touches a conditional branch; rnn_v1 is planned at 70%
// of that peak by tfswap's accounting too, which only placing its stacks on the host fits.
func TestControlFlowRewritesTrainBitIdentically(t *testing.T) {
	dir := filepath.Join("..", "testmodels", "controlflow")
	cfg := TwoDeviceConfigBytes()
	for _, name := range []string{"cond_cnn", "if_cnn", "fn_call", "stateful_call", "rnn_v1", "rnn_v2"} {
		t.Run(name, func(t *testing.T) {
			fx, err := LoadFixture(filepath.Join(dir, name+".json"))
			if err != nil {
				t.Fatalf("%v (regenerate with .venv/bin/python testmodels/controlflow.py)", err)
			}
			m, err := graphdef.Load(fx.GraphPath(), graphdef.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			placed := PlaceAll(m, computeDevice)
			g, err := graphdef.NewGraph(placed.Graph, name)
			if err != nil {
				t.Fatal(err)
			}
			branch := map[string]bool{}
			for i, in := range g.InCondBranch() {
				if in {
					branch[g.Nodes[i].Name] = true
				}
			}
			rewrites := map[string]*rewrite.Result{}
			lms := rewriteModel(t, placed, rewrite.Options{HostDevice: hostDevice, SwapoutThreshold: 3, SwapinAhead: 1, MinTensorBytes: -1})
			if len(lms.Swaps) == 0 {
				t.Fatal("LMS swapped nothing")
			}
			if name == "rnn_v1" && len(lms.Accumulators) == 0 {
				t.Fatal("LMS placed none of rnn_v1's stack accumulators on the host")
			}
			rewrites["lms"] = lms
			fetch := cost.Options{Fetch: []string{fx.TrainOp}}
			if name == "rnn_v1" {
				// At 70% of the peak by tfswap's accounting only placing the stacks on the
				// host fits (passAccumulators).
				budget := simulatedPeak(t, m, name, fetch) * 70 / 100
				p, err := plan.RewriteWithPlanner(placed, rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice},
					plan.PlanOptions{Budget: budget, Sim: fetch, FitAccounting: "tfswap"})
				if err != nil {
					t.Fatalf("planning at 70%% (%d bytes): %v", budget, err)
				}
				if len(p.Result.Accumulators) == 0 {
					t.Fatal("the 70% plan places no stack on the host")
				}
				rewrites["planned-70%"] = p.Result
			}
			if name == "cond_cnn" || name == "if_cnn" || name == "fn_call" {
				budget := simulatedPeak(t, m, name, fetch) * 90 / 100
				p, err := plan.RewriteWithPlanner(placed, rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice},
					plan.PlanOptions{Budget: budget, Sim: fetch})
				if err != nil {
					t.Fatalf("planning at 90%% (%d bytes): %v", budget, err)
				}
				if p.Unchanged() {
					t.Fatal("the 90% plan changes nothing")
				}
				rewrites["planned-90%"] = p.Result
			}
			origModel, fxAll := withAllVariableReads(t, placed, fx)
			want, err := Train(marshalModel(t, origModel), fxAll, 3, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkFinite(t, want)
			for _, kind := range []string{"lms", "planned-90%", "planned-70%"} {
				res := rewrites[kind]
				if res == nil {
					continue
				}
				for _, s := range res.Swaps {
					if branch[s.Producer] {
						t.Errorf("%s: swapped %s, made inside a conditional branch", kind, s.Tensor)
					}
					for _, in := range s.SwapIns {
						if branch[in.Trigger] || branch[in.Gate] {
							t.Errorf("%s: swap-in %s triggered inside a branch", kind, in.Node)
						}
						for _, c := range in.Consumers {
							if branch[c] {
								t.Errorf("%s: swap-in %s consumed inside a branch by %s", kind, in.Node, c)
							}
						}
					}
				}
				rw, _ := withAllVariableReads(t, res.Model, fx)
				got, err := Train(marshalModel(t, rw), fxAll, 3, cfg)
				if err != nil {
					t.Fatalf("%s: %v", kind, err)
				}
				for _, d := range want.Diff(got, variableNames(fxAll)) {
					t.Errorf("%s: %s", kind, d)
				}
				t.Logf("%s: %d swaps, %d accumulators on the host, losses %v", kind, len(res.Swaps), len(res.Accumulators), got.LossValues)
			}
		})
	}
}

// simulatedPeak returns the compute device's simulated peak of m (unplaced: simulated on the
// GPU of the default profile) for the step fetch runs.
func simulatedPeak(t *testing.T, m *graphdef.Model, name string, fetch cost.Options) int64 {
	t.Helper()
	prof, err := cost.LookupProfile(plan.DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	ug, err := graphdef.NewGraph(m.Graph, name)
	if err != nil {
		t.Fatal(err)
	}
	base, err := cost.Simulate(ug, prof, fetch)
	if err != nil {
		t.Fatal(err)
	}
	return base.Compute().PeakBytes
}
