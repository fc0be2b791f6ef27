//go:build tensorflow

package tfrun

import (
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
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
