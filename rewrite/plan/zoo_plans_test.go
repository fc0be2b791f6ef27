package plan

import (
	"encoding/json"
	"errors"
	"github.com/tfswap/tfswap/rewrite"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// zooManifest is the part of a testmodels/zoo manifest the zoo plan test reads.
type zooManifest struct {
	Name    string `json:"name"`
	TrainOp string `json:"train_op"`
	Batch   int64  `json:"batch"`
}

// zooPlanScale is the batch scale (the simulator's --batch-scale) at which the zoo graphs are
// planned: at their committed batch the weights dominate the peak, so a budget cut of 10-50%
// cannot be met by moving activations and every plan ends no-fit; scaled, the activations
// dominate and the plans check something.
const zooPlanScale = 64

// TestZooPlans plans every graph in testmodels/zoo (the directory is listed, so a new graph is
// covered without editing the test; shapes a graph does not record are inferred) with auto at 90, 70 and 50% of its unswapped peak (a
// training step at batch x zooPlanScale). Each plan either fits by both accountings (tfswap's
// and Grappler's nanosecond figure) and passes Verify, moving something, or ends in a
// NoFitError that names what is live at the lowest peak reached; at least one plan in the zoo
// must fit, so the test checks more than diagnoses.
func TestZooPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("plans every zoo graph")
	}
	p, err := cost.LookupProfile(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := filepath.Glob("../../testmodels/zoo/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(manifests) == 0 {
		t.Fatal("no graph in ../../testmodels/zoo")
	}
	fits := 0 // plans that fit, over the whole zoo
	for _, mf := range manifests {
		raw, err := os.ReadFile(mf)
		if err != nil {
			t.Fatal(err)
		}
		var man zooManifest
		if err := json.Unmarshal(raw, &man); err != nil {
			t.Fatalf("%s: %v", mf, err)
		}
		if man.TrainOp == "" {
			t.Fatalf("%s names no train_op", mf)
		}
		path := strings.TrimSuffix(mf, ".json") + ".pb"
		t.Run(filepath.Base(strings.TrimSuffix(mf, ".json")), func(t *testing.T) {
			m, err := graphdef.Load(path, graphdef.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// As the CLI does: infer the shapes the graph does not record (noshapes has none,
			// unknown_batch an unknown batch dimension), with the manifest's batch.
			if _, err := graphdef.InferShapes(m, graphdef.InferOptions{Batch: man.Batch}); err != nil {
				t.Fatal(err)
			}
			g, err := graphdef.NewGraph(m.Graph, path)
			if err != nil {
				t.Fatal(err)
			}
			if reason, ok := zooPlanSkips[man.Name]; ok {
				t.Skip(reason)
			}
			sim := cost.Options{Fetch: []string{man.TrainOp}, BatchScale: zooPlanScale}
			base, err := cost.Simulate(g, p, sim)
			if err != nil && strings.Contains(err.Error(), "cannot scale the batch") {
				// A graph whose batch dimension is unknown (noshapes, unknown_batch) is
				// planned at the batch its feeds give.
				t.Logf("planned unscaled: %v", err)
				sim.BatchScale = 1
				base, err = cost.Simulate(g, p, sim)
			}
			if err != nil {
				t.Fatal(err)
			}
			peak := base.Compute().PeakBytes
			for _, pct := range []int64{90, 70, 50} {
				budget := peak * pct / 100
				res, err := RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: -1}, PlanOptions{Strategy: "auto", Budget: budget, Sim: sim, FitAccounting: "both"})
				var nf *NoFitError
				if errors.As(err, &nf) {
					if len(nf.Largest) == 0 && nf.Activations+nf.Weights+nf.Slots == 0 {
						t.Errorf("%d%%: the no-fit diagnosis names nothing live: %v", pct, err)
					}
					t.Logf("%d%% (%d of %d bytes): no fit: %v", pct, budget, peak, err)
					continue
				}
				if err != nil {
					t.Fatalf("%d%%: %v", pct, err)
				}
				if err := rewrite.Verify(g, res.Result, rewrite.GateHost); err != nil {
					t.Fatalf("%d%%: %v", pct, err)
				}
				if len(res.Swaps) == 0 && len(res.Recomputes) == 0 {
					t.Errorf("%d%%: the plan swaps and recomputes nothing", pct)
				}
				for _, d := range res.Eval.Devices {
					if d.Over() > 0 || d.GrapplerPeak == 0 || d.GrapplerPeak > d.Budget {
						t.Errorf("%d%%: %s peaks %d, by Grappler's rules %d, over budget %d or not judged", pct, d.Name, d.Peak, d.GrapplerPeak, d.Budget)
					}
				}
				fits++
				t.Logf("%d%% (%d of %d bytes): fits with %d swaps, %d recomputes", pct, budget, peak, len(res.Swaps), len(res.Recomputes))
			}
		})
	}
	if fits == 0 {
		t.Error("no zoo graph has a plan that fits: the test checks only no-fit diagnoses")
	}
}

// zooPlanSkips are the zoo graphs TestZooPlans does not plan, with the reason (none at
// present: cond_v1, whose planned rewrite had a cycle through a v1 Merge, is planned since
// the fix).
var zooPlanSkips = map[string]string{}
