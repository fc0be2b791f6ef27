package cost_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestVirtualClusterZoo runs zoo graphs built through Keras (testmodels/zoo) through
// Grappler's VirtualCluster (tools/vcluster/vcluster.py, profile v100-16gb, fetch train) and
// requires the peak tfswap predicts with Grappler's accounting, after its shape inference
// (graphdef.InferShapes, as every command runs it), to be within 10% of the VirtualCluster's:
// on MobileNetV2 with shapes and written without them (for which the VirtualCluster infers
// shapes itself, and must give the same peak), on the GPT, and on MobileNetV2 with an unknown
// batch given as 4 (against the same model written at batch 4), and on cond_v1, a Keras
// learning-phase v1 tf.cond, with both branches run (Conventions.BothBranches): the
// VirtualCluster runs both sides of a conditional and its Merges once per input (see vsMerge),
// which the runtime never does, so that it judges a conditional only under that convention.
// tfswap's own accounting, which differs by design (docs/SIMULATOR.md), is logged.
func TestVirtualClusterZoo(t *testing.T) {
	py := requireVenv(t)
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := cost.MarshalProfile(p)
	if err != nil {
		t.Fatal(err)
	}
	profPath := filepath.Join(t.TempDir(), "v100-16gb.json")
	if err := os.WriteFile(profPath, prof, 0o644); err != nil {
		t.Fatal(err)
	}
	zoo := "../testmodels/zoo/"
	judged := []string{"mobilenetv2", "noshapes", "gpt", "cond_v1"}
	args := []string{"../tools/vcluster/vcluster.py", "--device-file", profPath, "--json", "--fetch", "train"}
	for _, n := range judged {
		args = append(args, zoo+n+".pb")
	}
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "TF_CPP_MIN_LOG_LEVEL=3")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vcluster.py: %v\n%s", err, stderr.String())
	}
	var vc vclusterOut
	if err := json.Unmarshal(out, &vc); err != nil || len(vc.Graphs) != len(judged) {
		t.Fatalf("vcluster.py output (%v): %s", err, out)
	}
	const gpu = "/device:GPU:0"
	vcPeak := map[string]int64{}
	for i, n := range judged {
		vcPeak[n] = vc.Graphs[i].Devices[gpu].PeakBytes
		if vcPeak[n] <= 0 {
			t.Fatalf("%s: the VirtualCluster reports no %s peak: %s", n, gpu, out)
		}
	}
	if vcPeak["noshapes"] != vcPeak["mobilenetv2"] {
		t.Errorf("VirtualCluster: noshapes peak %d, mobilenetv2 %d: the same model should give the same peak", vcPeak["noshapes"], vcPeak["mobilenetv2"])
	}
	for _, tc := range []struct {
		graph, judge string
		batch        int64
		bothBranches bool
	}{
		{"mobilenetv2", "mobilenetv2", 0, false}, {"noshapes", "noshapes", 0, false}, {"gpt", "gpt", 0, false},
		{"unknown_batch", "mobilenetv2", 4, false}, {"cond_v1", "cond_v1", 0, true},
	} {
		m, err := graphdef.Load(zoo+tc.graph+".pb", graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := graphdef.InferShapes(m, graphdef.InferOptions{Batch: tc.batch})
		if err != nil {
			t.Fatal(err)
		}
		g, err := graphdef.NewGraph(m.Graph, m.Source)
		if err != nil {
			t.Fatal(err)
		}
		// The VirtualCluster runs the graph as written, value-dead nodes too (the gradient of
		// the GPT's attention scale), which Grappler's dependency optimizer would turn into
		// NoOps before a real run: compare with Conventions.RunValueDead.
		vc := cost.GrapplerConventions()
		vc.RunValueDead, vc.BothBranches = true, tc.bothBranches
		grappler, err := cost.Simulate(g, p, cost.Options{Fetch: []string{"train"}, Conventions: vc})
		if err != nil {
			t.Fatal(err)
		}
		own, err := cost.Simulate(g, p, cost.Options{Fetch: []string{"train"}})
		if err != nil {
			t.Fatal(err)
		}
		want := vcPeak[tc.judge]
		got := grappler.Device(gpu).PeakBytes
		t.Logf("%-14s (shapes by %-10s %d of %d unknown) VirtualCluster %10d  tfswap(grappler) %10d (%+.1f%%)  tfswap %10d",
			tc.graph, st.Engine+",", st.Unknown, st.Outputs, want, got, 100*relDiff(got, want), own.Device(gpu).PeakBytes)
		if d := relDiff(got, want); d > 0.10 || d < -0.10 {
			t.Errorf("%s: tfswap's Grappler accounting predicts a peak of %d bytes, the VirtualCluster %d (%+.1f%%, over 10%%)", tc.graph, got, want, 100*d)
		}
	}
}
