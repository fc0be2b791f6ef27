//go:build tensorflow

package tfrun

import (
	"github.com/tfswap/tfswap/rewrite/plan"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestGPTBitIdenticalUnderGrappler is issue 12, item 2: the zoo's GPT-style decoder, built
// from Keras MultiHeadAttention, LayerNormalization and Dense layers and trained with Adam
// (testmodels/zoo/gpt), and two rewrites of it (fixed LMS thresholds: threshold 4, tensors of
// any size; the auto planner at 90% of the simulated unswapped peak) train bit-identically
// for 3 steps, every variable compared, in the two-device emulation under TensorFlow's
// default configuration (every default Grappler optimizer on, the dependency optimizer
// too). This holds because the rewrite keeps the decisions Grappler takes from fan-out
// (rewrite/grappler_fanout.go: no swap-out or gate on a gradient tuple's Identity, a sum
// folded into its reader, a product of a product tree or a no-op reshape; Identities and
// such ops, and value-dead readers, keep reading the original). Before those rules one more
// reader on a tuple Identity kept it where the original's was bypassed, and 112 of 116
// variables differed. The rules leave LMS 50 swaps (77 before the rules, 41 while they
// refused every product of a product tree, 46 while no gradient tuple Identity read a
// swap-in) and no plan at 70% of the peak. Products of
// product trees (the layer norms' batchnorm/mul, read by the forward products and by the
// gradient) are swapped and gradient products read their swap-ins: Grappler regroups products only through products with
// one reader, and the test fails if LMS no longer swaps such a product. Gradient tuple
// Identities with one reader read swap-ins too (their bypass is decided alike), and the test
// fails if LMS no longer gives one a swap-in.
// productOps are the products Grappler regroups in trees (rewrite's factorOps).
var productOps = map[string]bool{"Mul": true, "Div": true, "RealDiv": true}

func TestGPTBitIdenticalUnderGrappler(t *testing.T) {
	fx, err := LoadFixture(filepath.Join("..", "testmodels", "zoo", "gpt.json"))
	if err != nil {
		t.Fatalf("%v (regenerate with .venv/bin/python testmodels/zoo.py --only gpt)", err)
	}
	m, err := graphdef.Load(fx.GraphPath(), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	placed := PlaceAll(m, computeDevice)
	g, err := graphdef.NewGraph(placed.Graph, placed.Source)
	if err != nil {
		t.Fatal(err)
	}
	// The step tfswap finds by default is the fixture's training op.
	if f := graphdef.DefaultFetch(g); len(f.Nodes) != 1 || f.Nodes[0] != fx.TrainOp {
		t.Errorf("default fetch %v (%s), want %s", f.Nodes, f.Reason, fx.TrainOp)
	}
	prof, err := cost.LookupProfile(plan.DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	sim := cost.Options{Fetch: []string{fx.TrainOp}, ComputeDevice: computeDevice}
	base, err := cost.Simulate(g, prof, sim)
	if err != nil {
		t.Fatal(err)
	}
	peak := computePeak(base)
	if peak == 0 {
		t.Fatalf("no peak simulated on %s", computeDevice)
	}
	budget := peak * 9 / 10

	lms := rewriteModel(t, placed, rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
	// The shape the fan-out rules once refused: a product of a tree of products (read by
	// another product) swapped, and a product reading its swap-in.
	var treeSwaps []string
	for _, s := range lms.Swaps {
		p := g.Node(s.Producer)
		if p == nil || !productOps[p.Op] {
			continue
		}
		readByProduct := false
		for _, uses := range p.Consumers {
			for _, u := range uses {
				readByProduct = readByProduct || productOps[u.Node.Op]
			}
		}
		for _, in := range s.SwapIns {
			for _, c := range in.Consumers {
				if n := g.Node(c); readByProduct && n != nil && productOps[n.Op] {
					treeSwaps = append(treeSwaps, s.Tensor+" -> "+c)
				}
			}
		}
	}
	if len(treeSwaps) == 0 {
		t.Errorf("LMS swaps no product of a product tree into a product: the case the test guards is gone")
	}
	t.Logf("products of product trees swapped into products: %v", treeSwaps)
	// The shape the tuple rule admits: a gradient tuple's Identity (one with control inputs)
	// reading a swap-in, which Grappler's dependency optimizer bypasses as in the original.
	var tupleReads []string
	for _, s := range lms.Swaps {
		for _, in := range s.SwapIns {
			for _, c := range in.Consumers {
				if n := g.Node(c); n != nil && n.Op == "Identity" && len(n.ControlInputs) > 0 {
					tupleReads = append(tupleReads, s.Tensor+" -> "+c)
				}
			}
		}
	}
	if len(tupleReads) == 0 {
		t.Errorf("LMS swaps nothing into a gradient tuple Identity: the case the test guards is gone")
	}
	t.Logf("gradient tuple Identities reading swap-ins: %d, e.g. %v", len(tupleReads), tupleReads[:min(3, len(tupleReads))])
	planned, err := plan.RewriteWithPlanner(placed, rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice},
		plan.PlanOptions{Strategy: "auto", Budget: budget, Profile: prof, Sim: cost.Options{Fetch: []string{fx.TrainOp}}, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatalf("plan at 90%% of %d bytes: %v", peak, err)
	}
	if err := rewrite.Verify(g, planned.Result, rewrite.GateHost); err != nil {
		t.Fatalf("rewrite.Verify: %v", err)
	}
	if len(planned.Eval.Devices) == 0 || !planned.Eval.Fits {
		t.Fatalf("the 90%% plan does not fit (%d devices judged)", len(planned.Eval.Devices))
	}
	t.Logf("unswapped peak %d bytes; LMS: %d swaps; 90%% plan (%s): %d swaps, %d recomputations, peak %d of %d", peak, len(lms.Swaps),
		planned.Eval.Strategy, len(planned.Swaps), len(planned.Recomputes), planned.Eval.Devices[0].Peak, budget)
	// Copies read only by value-dead nodes (issue 15): the planner may recompute a tensor for
	// the gradient of the attention scale constant, which Grappler drops; at this size it
	// plans none, so the test recomputes each such forward tensor for its dead reader, gated
	// by the producer of the reader's other input, as the planner would.
	an := rewrite.Analyze(g, rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice})
	var deadRcs []*rewrite.PlannedRecompute
	var deadReads []string
	for _, n := range g.Topo {
		if n.Op != "Mul" || !strings.HasSuffix(n.Name, "Mul_grad/Mul_1") || len(n.Inputs) != 2 || !valueDeadNode(n, map[*graphdef.Node]bool{}) {
			continue
		}
		fwd, other := n.Inputs[0], n.Inputs[1].Node
		for other.Op == "Identity" && len(other.Inputs) > 0 {
			other = other.Inputs[0].Node
		}
		if strings.HasPrefix(fwd.Node.Name, "gradients/") || len(fwd.Node.ControlInputs) > 0 {
			continue
		}
		deadRcs = append(deadRcs, &rewrite.PlannedRecompute{Tensor: fwd, Chain: []*graphdef.Node{fwd.Node},
			Uses: []graphdef.Use{{Node: n, Input: 0}}, Trigger: other})
		deadReads = append(deadReads, fwd.String()+" -> "+n.Name)
	}
	if len(deadRcs) == 0 {
		t.Fatal("no forward tensor read by a value-dead product: the case the test guards is gone")
	}
	deadModel, _, err := rewrite.ApplyRecomputes(placed, an, deadRcs)
	if err != nil {
		t.Fatalf("recompute for value-dead readers: %v", err)
	}
	t.Logf("recomputed for value-dead readers: %v", deadReads)

	cp := TwoDeviceConfig()
	cfg, err := MarshalConfig(cp)
	if err != nil {
		t.Fatal(err)
	}
	origModel, fxAll := withAllVariableReads(t, placed, fx)
	want, err := Train(marshalModel(t, origModel), fxAll, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkFinite(t, want)
	for _, c := range []struct {
		name  string
		model *graphdef.Model
		swaps int
	}{
		{"lms", lms.Model, len(lms.Swaps)},
		{"plan90", planned.Result.Model, len(planned.Swaps) + len(planned.Recomputes)},
		{"dead-reader-copies", deadModel, len(deadRcs)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.swaps == 0 {
				t.Fatal("the rewrite swaps and recomputes nothing: nothing to check")
			}
			got, diffs := trainAgainst(t, want, c.model, fx, fxAll, 3, cfg)
			t.Logf("losses %v; %d variables compared, %d differ", got.LossValues, len(fxAll.Variables), diffs)
		})
	}
}

// valueDeadNode reports whether nobody uses n's value: it is an Identity with control inputs
// and no reader at all (the unused half of a gradient tuple), or every node reading its
// outputs, at least one, is value-dead (rewrite's valueDead, restated for the test; seen
// holds the nodes on the current path).
func valueDeadNode(n *graphdef.Node, seen map[*graphdef.Node]bool) bool {
	if seen[n] {
		return false
	}
	seen[n] = true
	defer delete(seen, n)
	readers := 0
	for _, uses := range n.Consumers {
		for _, u := range uses {
			readers++
			if !valueDeadNode(u.Node, seen) {
				return false
			}
		}
	}
	if readers > 0 {
		return true
	}
	return n.Op == "Identity" && len(n.ControlInputs) > 0 && len(n.ControlOutputs) == 0
}
