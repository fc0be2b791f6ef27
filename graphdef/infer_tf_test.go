//go:build tensorflow

package graphdef_test

import (
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestInferShapesTensorFlow strips the shapes of every committed zoo graph and requires
// TensorFlow-backed inference (import into a TF_Graph) to find the shapes TensorFlow's Python
// wrote for all but a sliver of their bytes, and never a different shape.
func TestInferShapesTensorFlow(t *testing.T) {
	if !graphdef.HaveTensorFlowInference() {
		t.Fatal("a -tags tensorflow build has no TensorFlow-backed inference")
	}
	// Shares of the bytes to find: TensorFlow's import does not see through a v1 while
	// loop's back edges, nor the TensorList of a v2 one (tfswap's own inference completes
	// part of the former).
	minShare := map[string]float64{"rnn_v1": 0.85, "rnn_v2": 0.98}
	for _, name := range []string{"mobilenetv2", "gpt", "cond_v1", "cond_v2", "rnn_v1", "rnn_v2", "tffunction", "concrete"} {
		t.Run(name, func(t *testing.T) {
			want, m := stripShapes(t, name)
			st, err := graphdef.InferShapes(m, graphdef.InferOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if st.Engine != graphdef.EngineTensorFlow {
				t.Fatalf("engine %q, want %q", st.Engine, graphdef.EngineTensorFlow)
			}
			total, known, wrong := compareShapes(t, want, m)
			t.Logf("%s: inferred %d outputs, %d of %d unknown; %.3f%% of %d bytes known", name, st.Inferred, st.Unknown, st.Outputs, 100*float64(known)/float64(total), total)
			if len(wrong) > 0 {
				t.Errorf("%d outputs inferred with a shape TensorFlow's Python does not give, e.g. %v", len(wrong), wrong[:min(5, len(wrong))])
			}
			least := 0.999
			if s, ok := minShare[name]; ok {
				least = s
			}
			if share := float64(known) / float64(total); share < least {
				t.Errorf("inferred %.2f%% of the bytes, want at least %.1f%%", 100*share, 100*least)
			}
		})
	}
	// The noshapes graph is mobilenetv2 written without shapes: inference gives it the
	// same sizes.
	m, err := graphdef.Load(filepath.Join("..", "testmodels", "zoo", "noshapes.pb"), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := graphdef.InferShapes(m, graphdef.InferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Warning() != "" {
		t.Errorf("noshapes after inference: %s", st.Warning())
	}
	want, _ := stripShapes(t, "mobilenetv2")
	total, known, wrong := compareShapes(t, want, m)
	if len(wrong) > 0 || known < total*999/1000 {
		t.Errorf("noshapes: %d of %d bytes known, wrong %v", known, total, wrong)
	}
}
