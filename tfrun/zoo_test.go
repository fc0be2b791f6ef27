//go:build tensorflow

package tfrun

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// zooBitIDSkips are the zoo graphs TestZooBitIdenticalUnderGrappler does not train, with the
// reason.
var zooBitIDSkips = map[string]string{
	"gpt": "covered by TestGPTBitIdenticalUnderGrappler",
}

// zooRewrite is one rewrite TestZooBitIdenticalUnderGrappler trains: its name, model and the
// number of tensors it swaps or recomputes.
type zooRewrite struct {
	name  string
	model *graphdef.Model
	moved int
}

// TestZooBitIdenticalUnderGrappler trains every graph in testmodels/zoo (the directory is
// listed; shapes a graph does not record are inferred, as the CLI does) and its
// fixed-threshold LMS rewrite (threshold 4, tensors of any size), and, where the auto
// planner fits at 90% and at 70% of the simulated unswapped peak at batch x64 (x1 when the
// batch is unknown), those plans (a budget no plan fits is logged; a run over the whole zoo
// in which no 70% plan fits fails), for 3 steps in the
// two-device emulation under TensorFlow's default configuration (every default Grappler
// optimizer, the dependency optimizer too; see TestGPTBitIdenticalUnderGrappler), and
// requires the losses and every variable to be bit-identical. A rewrite that swaps nothing
// fails, and so does a run over the whole zoo whose LMS rewrites hold no relay (a gradient
// tuple Identity of several readers reading a swap-in, rewrite.RelayRole).
func TestZooBitIdenticalUnderGrappler(t *testing.T) {
	manifests, err := filepath.Glob(filepath.Join("..", "testmodels", "zoo", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(manifests) == 0 {
		t.Fatal("no graph in ../testmodels/zoo")
	}
	prof, err := cost.LookupProfile(plan.DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	cp := TwoDeviceConfig()
	cfg, err := MarshalConfig(cp)
	if err != nil {
		t.Fatal(err)
	}
	var fits70, attempted atomic.Int32 // graphs with a fitting 70% plan; graphs planned
	var relays atomic.Int32            // relays (rewrite.RelayRole) in the LMS rewrites
	toPlan := 0
	for _, mf := range manifests {
		name := filepath.Base(strings.TrimSuffix(mf, ".json"))
		if _, ok := zooBitIDSkips[name]; !ok {
			toPlan++
		}
		t.Run(name, func(t *testing.T) {
			if reason, ok := zooBitIDSkips[name]; ok {
				t.Skip(reason)
			}
			defer attempted.Add(1)
			fx, err := LoadFixture(mf)
			if err != nil {
				t.Fatal(err)
			}
			m, err := graphdef.Load(fx.GraphPath(), graphdef.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// As the CLI does: infer the shapes the graph does not record (noshapes has
			// none; without them LMS finds no tensor of known size to swap).
			if _, err := graphdef.InferShapes(m, graphdef.InferOptions{Batch: int64(fx.Batch)}); err != nil {
				t.Fatal(err)
			}
			placed := PlaceAll(m, computeDevice)
			var rewrites []zooRewrite
			lms := rewriteModel(t, placed, rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
			rewrites = append(rewrites, zooRewrite{"lms", lms.Model, len(lms.Swaps) + len(lms.Accumulators)})
			for _, n := range lms.Model.Graph.GetNode() {
				if string(n.GetAttr()[rewrite.RoleAttr].GetS()) == rewrite.RelayRole {
					relays.Add(1)
				}
			}

			g, err := graphdef.NewGraph(placed.Graph, placed.Source)
			if err != nil {
				t.Fatal(err)
			}
			// The plan is made at batch x64 (at the committed batch the weights dominate and
			// no plan fits) and trained at the committed batch: the rewrite is the same graph.
			sim := cost.Options{Fetch: []string{fx.TrainOp}, ComputeDevice: computeDevice, BatchScale: 64}
			base, err := cost.Simulate(g, prof, sim)
			if err != nil && strings.Contains(err.Error(), "cannot scale the batch") {
				sim.BatchScale = 1
				base, err = cost.Simulate(g, prof, sim)
			}
			if err != nil {
				t.Fatal(err)
			}
			peak := computePeak(base)
			// The 90% and 70% plans are trained where they fit; one that does not fit is
			// logged. The whole zoo must have at least one fitting 70% plan (checked after
			// the subtests).
			for _, pct := range []int64{90, 70} {
				planned, err := plan.RewriteWithPlanner(placed, rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice},
					plan.PlanOptions{Strategy: "auto", Budget: peak * pct / 100, Profile: prof, Sim: cost.Options{Fetch: []string{fx.TrainOp}, BatchScale: sim.BatchScale}, FitAccounting: "tfswap"})
				var nf *plan.NoFitError
				switch {
				case errors.As(err, &nf):
					t.Logf("no plan at %d%% of %d bytes (batch x%d): not trained", pct, peak, sim.BatchScale)
				case err != nil:
					t.Errorf("plan at %d%% of %d bytes (batch x%d): %v", pct, peak, sim.BatchScale, err)
				default:
					if err := rewrite.Verify(g, planned.Result, rewrite.GateHost); err != nil {
						t.Fatalf("rewrite.Verify: %v", err)
					}
					// A plan may fit by ordering edges alone (the reorder pass; cond_v1 at 90%
					// since value-dead readers no longer hold tensors): they change the graph too.
					rewrites = append(rewrites, zooRewrite{fmt.Sprintf("plan%d", pct), planned.Result.Model, len(planned.Swaps) + len(planned.Recomputes) + len(planned.Result.Orders)})
					if pct == 70 {
						fits70.Add(1)
					}
				}
			}

			origModel, fxAll := withAllVariableReads(t, placed, fx)
			want, err := Train(marshalModel(t, origModel), fxAll, 3, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkFinite(t, want)
			for _, c := range rewrites {
				t.Run(c.name, func(t *testing.T) {
					if c.moved == 0 {
						t.Fatal("the rewrite swaps, recomputes and orders nothing: nothing to check")
					}
					got, diffs := trainAgainst(t, want, c.model, fx, fxAll, 3, cfg)
					t.Logf("%d moved; losses %v; %d variables compared, %d differ", c.moved, got.LossValues, len(fxAll.Variables), diffs)
				})
			}
		})
	}
	// Only a run over the whole zoo (no -run filter on the graphs) can tell that no graph
	// had a fitting 70% plan.
	if int(attempted.Load()) == toPlan && fits70.Load() == 0 {
		t.Error("no zoo graph has a 70% plan that fits: the 70% budget trains nothing")
	}
	// Gradient tuple Identities with several readers read swap-ins through relays (the
	// CNNs' ReLU gradients, read by both convolution gradients): the run must train some.
	if int(attempted.Load()) == toPlan && relays.Load() == 0 {
		t.Error("no LMS rewrite of the zoo has a relay: the gradient tuple case is not checked")
	}
}
