package cost_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// vclusterOut is the JSON tools/vcluster/vcluster.py prints.
type vclusterOut struct {
	TensorFlowVersion string `json:"tensorflow_version"`
	Graphs            []struct {
		Path    string `json:"path"`
		Devices map[string]struct {
			PeakBytes   int64 `json:"peak_bytes"`
			PeakBytesUS int64 `json:"peak_bytes_us"`
		} `json:"devices"`
		CostEstimate float64 `json:"cost_estimate_s"`
	} `json:"graphs"`
}

// venvPython returns the project venv's python, or "" when it is missing.
func venvPython(t *testing.T) string {
	if p := os.Getenv("TFSWAP_PYTHON"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := filepath.Abs("../.venv/bin/python")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TestVirtualClusterAgreement runs every fixture graph (and, with TFSWAP_VCLUSTER_LARGE set,
// every graph testmodels/large.py wrote), original and rewritten by tfswap,
// through Grappler's VirtualCluster (tools/vcluster/vcluster.py) on the v100-16gb profile
// and checks that tfswap's predicted peak on the compute device, accounted by Grappler's
// conventions, is within 10% of VirtualCluster's. tfswap's own accounting differs from
// Grappler's in ways docs/SIMULATOR.md explains rule by rule; that difference is logged.
func TestVirtualClusterAgreement(t *testing.T) {
	py := venvPython(t)
	if py == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("the project venv (.venv/bin/python, or $TFSWAP_PYTHON) is missing; run scripts/setup.sh")
		}
		t.Skip("no project venv (.venv/bin/python): run scripts/setup.sh to enable the VirtualCluster check")
	}
	fixtures, err := filepath.Glob("../testmodels/fixtures/*.pb")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	sort.Strings(fixtures)
	if os.Getenv("TFSWAP_VCLUSTER_LARGE") != "" {
		// The large models of testmodels/large.py too (about a minute more).
		large, _ := filepath.Glob("../testmodels/large/*.pb")
		sort.Strings(large)
		fixtures = append(fixtures, large...)
	}
	tmp := t.TempDir()
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := cost.MarshalProfile(p)
	if err != nil {
		t.Fatal(err)
	}
	profPath := filepath.Join(tmp, "v100-16gb.json")
	if err := os.WriteFile(profPath, prof, 0o644); err != nil {
		t.Fatal(err)
	}
	var graphs []string
	fetch := map[string]string{}
	for _, f := range fixtures {
		side := struct {
			TrainOp string `json:"train_op"`
		}{}
		data, err := os.ReadFile(strings.TrimSuffix(f, ".pb") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &side); err != nil || side.TrainOp == "" {
			t.Fatalf("%s: sidecar has no train_op: %v", f, err)
		}
		m, err := graphdef.Load(f, graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := rewrite.Rewrite(m, rewrite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(tmp, strings.TrimSuffix(filepath.Base(f), ".pb")+".swap.pb")
		if err := res.Model.Save(out, graphdef.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		graphs = append(graphs, f, out)
		fetch[f], fetch[out] = side.TrainOp, side.TrainOp
	}
	// All fixtures share the fetch name; one checker run does every graph.
	args := []string{"../tools/vcluster/vcluster.py", "--device-file", profPath, "--json", "--fetch", fetch[graphs[0]]}
	cmd := exec.Command(py, append(args, graphs...)...)
	cmd.Env = append(os.Environ(), "TF_CPP_MIN_LOG_LEVEL=3")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vcluster.py: %v\n%s", err, stderr.String())
	}
	var vc vclusterOut
	if err := json.Unmarshal(out, &vc); err != nil {
		t.Fatalf("vcluster.py output: %v\n%s", err, out)
	}
	if len(vc.Graphs) != len(graphs) {
		t.Fatalf("vcluster.py reported %d graphs, want %d", len(vc.Graphs), len(graphs))
	}
	for i, path := range graphs {
		got := vc.Graphs[i]
		m, err := graphdef.Load(path, graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := graphdef.NewGraph(m.Graph, path)
		if err != nil {
			t.Fatal(err)
		}
		grappler, err := cost.Simulate(g, p, cost.Options{Fetch: []string{fetch[path]}, Conventions: cost.GrapplerConventions()})
		if err != nil {
			t.Fatal(err)
		}
		own, err := cost.Simulate(g, p, cost.Options{Fetch: []string{fetch[path]}})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		devs := make([]string, 0, len(got.Devices))
		for dev := range got.Devices {
			devs = append(devs, dev)
		}
		sort.Strings(devs)
		for _, dev := range devs {
			want := got.Devices[dev]
			d := grappler.Device(dev)
			if d == nil {
				if want.PeakBytes > 0 {
					t.Errorf("%s: VirtualCluster has %s (peak %d), tfswap has no such device", name, dev, want.PeakBytes)
				}
				continue
			}
			diff := relDiff(d.PeakBytes, want.PeakBytes)
			t.Logf("%-16s %-14s VirtualCluster %9d  tfswap(grappler rules) %9d (%+.2f%%)  tfswap %9d (%+.1f%%)",
				name, dev, want.PeakBytes, d.PeakBytes, 100*diff, own.Device(dev).PeakBytes, 100*relDiff(own.Device(dev).PeakBytes, want.PeakBytes))
			if d.GPU && math.Abs(diff) > 0.10 {
				t.Errorf("%s %s: tfswap predicts a peak of %d bytes with Grappler's accounting, VirtualCluster %d (%+.1f%%, more than 10%%)",
					name, dev, d.PeakBytes, want.PeakBytes, 100*diff)
			}
		}
	}
}

func relDiff(a, b int64) float64 {
	if b == 0 {
		if a == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return float64(a-b) / float64(b)
}
