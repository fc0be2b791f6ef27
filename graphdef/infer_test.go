package graphdef_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// stripShapes returns the zoo graph name loaded twice: as written, and with every
// _output_shapes attr removed.
func stripShapes(t *testing.T, name string) (withShapes, stripped *graphdef.Model) {
	t.Helper()
	path := filepath.Join("..", "testmodels", "zoo", name+".pb")
	a, err := graphdef.Load(path, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := graphdef.Load(path, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range b.Graph.GetNode() {
		delete(n.Attr, "_output_shapes")
	}
	return a, b
}

// compareShapes compares the shapes inferred into got with those TensorFlow wrote into want:
// it returns the bytes of want's fully known outputs, the bytes of those got knows, and the
// outputs got knows with a different shape.
func compareShapes(t *testing.T, want, got *graphdef.Model) (total, known int64, wrong []string) {
	missing := map[string]int64{}
	defer func() {
		if known < total {
			t.Logf("bytes not inferred, by op: %v", missing)
		}
	}()
	t.Helper()
	gw, err := graphdef.NewGraph(want.Graph, want.Source)
	if err != nil {
		t.Fatal(err)
	}
	gg, err := graphdef.NewGraph(got.Graph, got.Source)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range gw.Nodes {
		m := gg.Node(n.Name)
		for port := range n.OutputTypes {
			b, ok, _ := graphdef.Tensor{Node: n, Port: port}.Bytes()
			if !ok {
				continue
			}
			total += b
			gs := graphdef.Tensor{Node: m, Port: port}.Shape()
			if gs == nil || m.OutputShapes == nil {
				missing[n.Op] += b
				continue
			}
			ws := graphdef.Tensor{Node: n, Port: port}.Shape()
			if fmt.Sprint(gs) != fmt.Sprint(ws) {
				if len(gs) == len(ws) {
					partial := true
					for i := range gs {
						if gs[i] >= 0 && gs[i] != ws[i] {
							partial = false
						}
					}
					if partial {
						missing[n.Op] += b
						continue // less known, not wrong
					}
				}
				wrong = append(wrong, fmt.Sprintf("%s:%d (%s) %v, TensorFlow %v", n.Name, port, n.Op, gs, ws))
				continue
			}
			known += b
		}
	}
	return total, known, wrong
}

// TestInferShapesPure strips the shapes of zoo graphs and requires tfswap's own inference to
// find the shapes TensorFlow wrote (as_graph_def(add_shapes=True)) for nearly all their
// bytes, and never a different shape.
func TestInferShapesPure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		minShare float64
	}{
		{"mobilenetv2", 0.999}, {"gpt", 0.995}, {"cond_v1", 0.99}, {"rnn_v1", 0.7}, {"tffunction", 0.65},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, m := stripShapes(t, tc.name)
			before, err := graphdef.NewGraph(m.Graph, m.Source)
			if err != nil {
				t.Fatal(err)
			}
			if s := graphdef.Stats(before); s.Unknown != s.Outputs || s.Outputs == 0 {
				t.Fatalf("stripped graph: %d of %d outputs unknown, want all", s.Unknown, s.Outputs)
			}
			st, err := graphdef.InferShapes(m, graphdef.InferOptions{Engine: graphdef.EngineTfswap})
			if err != nil {
				t.Fatal(err)
			}
			total, known, wrong := compareShapes(t, want, m)
			t.Logf("%s: %s inferred %d outputs, %d of %d unknown; %.2f%% of %d bytes known", tc.name, st.Engine, st.Inferred, st.Unknown, st.Outputs, 100*float64(known)/float64(total), total)
			if len(wrong) > 0 {
				t.Errorf("%d outputs inferred with a shape TensorFlow does not give, e.g. %v", len(wrong), wrong[:min(5, len(wrong))])
			}
			if share := float64(known) / float64(total); share < tc.minShare {
				t.Errorf("inferred %.1f%% of the bytes, want at least %.0f%%", 100*share, 100*tc.minShare)
			}
		})
	}
}

// TestInferShapesBatch gives the unknown batch of zoo graph unknown_batch and requires its
// sizes to become known, equal to those of mobilenetv2 (the same model at batch 4).
func TestInferShapesBatch(t *testing.T) {
	m, err := graphdef.Load(filepath.Join("..", "testmodels", "zoo", "unknown_batch.pb"), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	before := graphdef.Stats(g)
	if before.UnknownShare() <= graphdef.UnknownWarnShare || before.Warning() == "" {
		t.Fatalf("unknown_batch: %d of %d unknown, want over %.0f%% and a warning", before.Unknown, before.Outputs, 100*graphdef.UnknownWarnShare)
	}
	st, err := graphdef.InferShapes(m, graphdef.InferOptions{Batch: 4, Engine: graphdef.EngineTfswap})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: %d of %d unknown; after --batch 4: %d unknown (%v)", before.Unknown, before.Outputs, st.Unknown, st.Examples)
	if st.Warning() != "" || st.Inferred == 0 {
		t.Errorf("after --batch 4: %d of %d unknown, warning %q", st.Unknown, st.Outputs, st.Warning())
	}
	g2, _ := graphdef.NewGraph(m.Graph, m.Source)
	in := g2.Node("input")
	if sh := (graphdef.Tensor{Node: in, Port: 0}).Shape(); fmt.Sprint(sh) != "[4 32 32 3]" {
		t.Errorf("input's shape %v, want [4 32 32 3]", sh)
	}
	if _, err := graphdef.InferShapes(m, graphdef.InferOptions{Batch: -1}); err == nil {
		t.Error("a negative batch was accepted")
	}
}
