package cost_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	"github.com/tfswap/tfswap/rewrite"
)

// vclusterOut is the JSON tools/vcluster/vcluster.py prints (with --trace).
type vclusterOut struct {
	TensorFlowVersion string `json:"tensorflow_version"`
	Graphs            []struct {
		Path    string `json:"path"`
		Devices map[string]struct {
			PeakBytes   int64 `json:"peak_bytes"`
			PeakBytesUS int64 `json:"peak_bytes_us"`
		} `json:"devices"`
		CostEstimate float64 `json:"cost_estimate_s"`
		// Trace lists every op the VirtualScheduler ran: device, node, op, start, end (ns),
		// and its outputs' shapes as Grappler inferred them.
		Trace [][6]any `json:"trace"`
	} `json:"graphs"`
}

// requireVenv returns the project venv's python (venvPython); it skips the test when the venv
// is missing, and fails it on CI, where scripts/setup.sh has made it.
func requireVenv(t *testing.T) string {
	t.Helper()
	py := venvPython(t)
	if py == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("the project venv (.venv/bin/python, or $TFSWAP_PYTHON) is missing; run scripts/setup.sh")
		}
		t.Skip("no project venv (.venv/bin/python): run scripts/setup.sh to enable the checks against TensorFlow")
	}
	return py
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
// every graph testmodels/large.py wrote), original, rewritten by tfswap's LMS defaults and
// planned by vDNN (waits) and (fixtures) with every recomputation candidate recomputed, through
// Grappler's VirtualCluster (tools/vcluster/vcluster.py) on the v100-16gb profile, and
// simulates each with Grappler's conventions. It requires the simulation to reproduce the
// VirtualCluster's step: every op of the graph starts and ends at the nanosecond the
// VirtualScheduler's trace says (Grappler's op times and scheduling), and each device's
// two GraphMemory peaks are TensorFlow's to the byte: the nanosecond re-timing
// (DeviceResult.PeakBytes against the checker's peak_bytes) and the microsecond one
// (MicrosecondPeakBytes against DeterminePeakMemoryUsage). tfswap's own accounting differs
// from Grappler's in ways docs/SIMULATOR.md explains rule by rule; that difference is logged.
func TestVirtualClusterAgreement(t *testing.T) {
	py := requireVenv(t)
	fixtures, err := filepath.Glob("../testmodels/fixtures/*.pb")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	sort.Strings(fixtures)
	if os.Getenv("TFSWAP_VCLUSTER_LARGE") != "" {
		// The large models of testmodels/large.py too (a few minutes more).
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
		res, err := plan.Rewrite(m, rewrite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		stem := filepath.Join(tmp, strings.TrimSuffix(filepath.Base(f), ".pb"))
		out := stem + ".swap.pb"
		if err := res.Model.Save(out, graphdef.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		graphs = append(graphs, f, out)
		fetch[f], fetch[out] = side.TrainOp, side.TrainOp
		// Planned graphs too: vDNN's, whose waits put control edges from host swap-outs on
		// GPU ops, and (fixtures) one recomputing every candidate, whose copies and gates the
		// scheduler places among other work.
		plans := []plan.PlanOptions{{Strategy: "vdnn-all"}}
		if !strings.Contains(f, "/large/") {
			plans = append(plans, plan.PlanOptions{Strategy: "window", Recompute: "max"})
		}
		for _, po := range plans {
			po.Profile, po.Budget, po.FitAccounting = p, 1<<40, "tfswap"
			po.Sim = cost.Options{Fetch: []string{side.TrainOp}}
			pl, err := plan.RewriteWithPlanner(m, rewrite.Options{}, po)
			if err != nil {
				t.Fatalf("%s: planning with %s: %v", f, po.Strategy, err)
			}
			out := stem + "." + po.Strategy + ".pb"
			if err := pl.Model.Save(out, graphdef.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			graphs = append(graphs, out)
			fetch[out] = side.TrainOp
		}
	}
	// All fixtures share the fetch name; one checker run does every graph.
	args := []string{"../tools/vcluster/vcluster.py", "--device-file", profPath, "--json", "--trace", "--fetch", fetch[graphs[0]]}
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
		_, g := testgraph.Load(t, path)
		// The VirtualCluster runs the graph as written: value-dead nodes too, which Grappler's
		// dependency optimizer would turn into NoOps before a real run (Conventions.RunValueDead).
		vc := cost.GrapplerConventions()
		vc.RunValueDead = true
		grappler, err := cost.Simulate(g, p, cost.Options{Fetch: []string{fetch[path]}, Conventions: vc, Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		own, err := cost.Simulate(g, p, cost.Options{Fetch: []string{fetch[path]}})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		if len(grappler.GrapplerUnmodelled) > 0 {
			t.Errorf("%s: ops whose Grappler times are not reproduced: %v", name, grappler.GrapplerUnmodelled)
		}
		checkTrace(t, name, grappler, got.Trace)
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
			t.Logf("%-18s %-14s VirtualCluster ns %10d us %10d  tfswap(grappler) ns %10d us %10d  tfswap %10d (%+.1f%% of ns)",
				name, dev, want.PeakBytes, want.PeakBytesUS, d.PeakBytes, d.MicrosecondPeakBytes,
				own.Device(dev).PeakBytes, 100*relDiff(own.Device(dev).PeakBytes, want.PeakBytes))
			if d.PeakBytes != want.PeakBytes {
				t.Errorf("%s %s: tfswap's Grappler accounting gives a nanosecond peak of %d bytes, the VirtualCluster's trace %d (%+d)",
					name, dev, d.PeakBytes, want.PeakBytes, d.PeakBytes-want.PeakBytes)
			}
			if d.MicrosecondPeakBytes != want.PeakBytesUS {
				t.Errorf("%s %s: tfswap's Grappler accounting gives a microsecond peak of %d bytes, DeterminePeakMemoryUsage %d (%+d)",
					name, dev, d.MicrosecondPeakBytes, want.PeakBytesUS, d.MicrosecondPeakBytes-want.PeakBytesUS)
			}
			if d.MicrosecondPeakBytes < d.PeakBytes {
				t.Errorf("%s %s: microsecond peak %d below the nanosecond peak %d", name, dev, d.MicrosecondPeakBytes, d.PeakBytes)
			}
		}
	}
}

// checkTrace requires every op of the graph in the VirtualScheduler's trace to run in the
// simulation r on the same device from the same start to the same end (ns), with outputs of
// the shapes Grappler inferred (cost.GrapplerShapes; every unknown dimension as -1).
func checkTrace(t *testing.T, name string, r *cost.Result, trace [][6]any) {
	t.Helper()
	if len(trace) == 0 {
		t.Fatalf("%s: the checker reported no trace", name)
	}
	type span struct {
		dev        string
		start, end int64
	}
	sim := map[string]span{}
	nodes := map[string]*graphdef.Node{}
	for _, o := range r.Timeline.Ops {
		sim[o.Node.Name] = span{r.Devices[o.Device].Name, o.Start, o.End}
		nodes[o.Node.Name] = o.Node
	}
	bad, badShapes, compared := 0, 0, 0
	for _, e := range trace {
		dev, _ := e[0].(string)
		node, _ := e[1].(string)
		op, _ := e[2].(string)
		start, _ := e[3].(float64)
		end, _ := e[4].(float64)
		if op == "_Send" || op == "_Recv" {
			continue // the scheduler's own nodes: the simulation's transfers
		}
		compared++
		s, ok := sim[node]
		if !ok {
			bad++
			if bad <= 10 {
				t.Errorf("%s: the VirtualCluster ran %s (%s), the simulation did not", name, node, op)
			}
			continue
		}
		if s.dev != dev || s.start != int64(start) || s.end != int64(end) {
			bad++
			if bad <= 10 {
				t.Errorf("%s: %s (%s) ran on %s %d-%d ns in the VirtualCluster, %s %d-%d in the simulation",
					name, node, op, dev, int64(start), int64(end), s.dev, s.start, s.end)
			}
		}
		shapes, _ := e[5].([]any)
		for port, sh := range shapes {
			want := "?"
			if dims, ok := sh.([]any); ok {
				v := make([]int64, len(dims))
				for i, d := range dims {
					v[i] = max(int64(d.(float64)), -1) // symbolic unknown dimensions are negative
				}
				want = fmt.Sprint(v)
			}
			got := "?"
			if g := r.Shapes.Out(nodes[node], port); g != nil {
				got = fmt.Sprint(g)
			}
			if got != want {
				badShapes++
				if badShapes <= 10 {
					t.Errorf("%s: %s:%d (%s) has shape %s in Grappler, %s in the simulation", name, node, port, op, want, got)
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("%s: %d of %d ops differ", name, bad, compared)
	}
	if badShapes > 10 {
		t.Errorf("%s: %d outputs have other shapes than Grappler's", name, badShapes)
	}
	if compared != len(r.Timeline.Ops) {
		t.Errorf("%s: the VirtualCluster ran %d ops of the graph, the simulation %d", name, compared, len(r.Timeline.Ops))
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
