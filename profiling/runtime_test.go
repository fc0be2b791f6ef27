//go:build tensorflow

package profiling

import (
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/tfrun"
)

func TestMain(m *testing.M) {
	if err := tfrun.ReexecWithOneDNNOff(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// loadFixture loads a testmodels fixture, its GraphDef and its graph.
func loadFixture(t *testing.T, name string) (*tfrun.Fixture, []byte, *graphdef.Graph) {
	t.Helper()
	fx, err := tfrun.LoadFixture("../testmodels/fixtures/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	gd, err := fx.GraphDef()
	if err != nil {
		t.Fatal(err)
	}
	m, err := graphdef.Parse(gd, graphdef.FormatPB, fx.GraphPath())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	return fx, gd, g
}

func profileFixture(t *testing.T, fx *tfrun.Fixture, gd []byte, g *graphdef.Graph, cfg []byte) *Result {
	t.Helper()
	r, err := Run(gd, g, Options{Init: fx.InitOp, Targets: []string{fx.TrainOp}, Fetches: []string{fx.Loss}, Feeds: fx.FeedTensors, Warmup: 2, Iterations: 5, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestProfileCNN checks the CNN fixture's profile against an independently traced step:
// an entry for every graph node that ran (by the step stats of that step, cross-checked
// with its partition graphs), none for the others, positive times, outputs sized as the
// graph says; and a second profile within a sane band of the first.
func TestProfileCNN(t *testing.T) {
	fx, gd, g := loadFixture(t, "cnn")
	cfg := tfrun.TwoDeviceConfigBytes() // fixed thread pools; nodes without a device run on CPU:0
	r := profileFixture(t, fx, gd, g, cfg)

	tr, err := tfrun.TraceStep(gd, fx, cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, nt := range tr.Timings {
		if g.Node(nt.Node) != nil {
			ran[nt.Node] = true
		}
	}
	inPartitions := map[string]bool{}
	for _, pn := range tr.Nodes {
		inPartitions[pn.Name] = true
	}
	for name := range ran {
		if !inPartitions[name] {
			t.Errorf("node %s has step stats but is in no partition graph", name)
		}
	}
	if len(ran) == 0 || len(ran) == len(g.Nodes) {
		t.Fatalf("%d of %d graph nodes ran: the check needs some that did not", len(ran), len(g.Nodes))
	}
	m := r.Measured(Info{Graph: "cnn.pb", TensorFlowVersion: tfrun.Version()})
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseMeasured(data); err != nil {
		t.Fatalf("the profile does not parse: %v", err)
	}
	got := map[string]bool{}
	for _, nd := range m.Nodes {
		got[nd.Name] = true
		if !ran[nd.Name] {
			t.Errorf("profile has node %s, which did not run", nd.Name)
		}
		if *nd.ComputeNS <= 0 {
			t.Errorf("node %s: compute_ns %d, want > 0", nd.Name, *nd.ComputeNS)
		}
		if !tfrun.SameDevice(nd.Device, "/device:CPU:0") {
			t.Errorf("node %s ran on %s", nd.Name, nd.Device)
		}
		n := g.Node(nd.Name)
		if len(nd.OutputBytes) != len(n.OutputTypes) {
			t.Errorf("node %s: %d output sizes for %d outputs", nd.Name, len(nd.OutputBytes), len(n.OutputTypes))
		}
		for port, b := range nd.OutputBytes {
			if want, ok, _ := (graphdef.Tensor{Node: n, Port: port}).Bytes(); ok && b >= 0 && b != want {
				t.Errorf("%s:%d: measured %d bytes, the graph says %d", nd.Name, port, b, want)
			}
		}
	}
	var missing []string
	for name := range ran {
		if !got[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("nodes that ran but have no profile entry: %v", missing)
	}
	if conv := byName(m.Nodes, "block1/conv/Conv2D"); conv == nil || conv.OutputBytes[0] != 8*28*28*16*4 {
		t.Errorf("block1/conv/Conv2D entry %+v", conv)
	}
	if !tfrun.SameDevice(m.Device.Name, "/device:CPU:0") || m.Iterations != 5 {
		t.Errorf("device %q, iterations %d", m.Device.Name, m.Iterations)
	}

	// A second profile of the same graph profiles the same nodes. How its times compare with
	// the first is logged, not checked: wall times on a shared machine are not a unit test's
	// business (bench/ measures speed).
	r2 := profileFixture(t, fx, gd, g, cfg)
	if len(r2.Nodes) != len(r.Nodes) {
		t.Errorf("second profile has %d nodes, the first %d", len(r2.Nodes), len(r.Nodes))
	}
	sum := func(r *Result) float64 {
		var s int64
		for _, st := range r.Nodes {
			s += st.Median
		}
		return float64(s)
	}
	t.Logf("CNN: %d of %d nodes ran; median step %s and %s; summed op time %.0fus and %.0fus",
		len(ran), len(g.Nodes), medianDuration(r.StepWall()), medianDuration(r2.StepWall()), sum(r)/1e3, sum(r2)/1e3)
}
