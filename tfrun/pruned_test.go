//go:build tensorflow

package tfrun

import (
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestValueDeadNodesDoNotRun checks the simulator's value-dead nodes (cost.Result.Pruned)
// against what TensorFlow ran, measured on CPU under its default configuration (Grappler on):
// every node the simulator runs as a NoOp, because nothing reads its value, is absent from
// the partition graphs of a traced training step or is a NoOp (or a folded Const) there, so
// it read none of the tensors it reads in the graph. On the zoo GPT that includes the
// gradients of the attention scale constant (Mul_grad/Mul_1), which kept the scores alive.
func TestValueDeadNodesDoNotRun(t *testing.T) {
	prof, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(fixtureDir, "mlp.json"), filepath.Join(fixtureDir, "cnn.json"),
		filepath.Join(fixtureDir, "lstm.json"), filepath.Join("..", "testmodels", "zoo", "gpt.json"),
	} {
		fx, err := LoadFixture(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fx.Name, func(t *testing.T) {
			gd, err := fx.GraphDef()
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
			// The traced step fetches the loss and runs the training op.
			loss, _, _ := ParseTensorName(fx.Loss)
			res, err := cost.Simulate(g, prof, cost.Options{Fetch: []string{fx.TrainOp, loss}})
			if err != nil {
				t.Fatal(err)
			}
			if res.PrunedNodes == 0 {
				t.Fatal("the simulator prunes no node: nothing to check")
			}
			tr, err := TraceStep(gd, fx, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			ran := map[string]string{}
			for _, n := range tr.Nodes {
				ran[n.Name] = n.Op
			}
			scale, noop, gone := 0, 0, 0
			for i, p := range res.Pruned {
				if !p {
					continue
				}
				n := g.Nodes[i]
				op, ok := ran[n.Name]
				switch {
				case !ok:
					gone++
				case op == "NoOp" || op == "Const":
					noop++
				default:
					t.Errorf("%s (%s) ran as %s: the simulator runs it as a NoOp", n.Name, n.Op, op)
				}
				if n.Op == "Mul" && filepath.Base(n.Name) == "Mul_1" {
					scale++
				}
			}
			t.Logf("%d nodes pruned by the simulator: %d absent after Grappler, %d NoOps; %d constant gradients (Mul_grad/Mul_1)", res.PrunedNodes, gone, noop, scale)
			if fx.Name == "gpt" && scale == 0 {
				t.Error("no gradient of the attention scale constant pruned on the GPT")
			}
		})
	}
}

// TestGatesRunUnderGrappler checks the other side of the simulator's value-dead nodes on a
// rewritten graph, measured on CPU under TensorFlow's default configuration in the two-device
// emulation: tfswap's gates (Identities of a trigger's output that the swap-ins read through
// control edges only) carry _grappler_do_not_remove, which puts them among Grappler's nodes
// to preserve, so the dependency optimizer keeps them and they run as Identities in the
// traced step; the simulator runs them too (cost.PrunedNodes leaves them out), reading the
// trigger's output. It fails if the rewrite of the cnn fixture makes no gate.
func TestGatesRunUnderGrappler(t *testing.T) {
	prof, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	fx, err := LoadFixture(filepath.Join(fixtureDir, "cnn.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := graphdef.Load(fx.GraphPath(), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := rewriteModel(t, PlaceAll(m, computeDevice), rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
	var gates []string
	for _, n := range res.Model.Graph.GetNode() {
		if string(n.GetAttr()[rewrite.RoleAttr].GetS()) == "gate" {
			gates = append(gates, n.GetName())
		}
	}
	if len(gates) == 0 {
		t.Fatal("the rewrite made no gate: nothing to check")
	}
	g, err := graphdef.NewGraph(res.Model.Graph, res.Model.Source)
	if err != nil {
		t.Fatal(err)
	}
	loss, _, _ := ParseTensorName(fx.Loss)
	sim, err := cost.Simulate(g, prof, cost.Options{Fetch: []string{fx.TrainOp, loss}, ComputeDevice: computeDevice})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := TraceStep(marshalModel(t, res.Model), fx, TwoDeviceConfigBytes(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]string{}
	for _, n := range tr.Nodes {
		ran[n.Name] = n.Op
	}
	for _, name := range gates {
		if op := ran[name]; op != "Identity" {
			t.Errorf("gate %s ran as %q after Grappler, want Identity", name, op)
		}
		if n := g.Node(name); sim.Pruned != nil && sim.Pruned[n.Index] {
			t.Errorf("the simulator runs gate %s as a NoOp; Grappler keeps it", name)
		}
	}
	t.Logf("%d gates, all run by TensorFlow and by the simulator; %d other nodes pruned by the simulator", len(gates), sim.PrunedNodes)
}
