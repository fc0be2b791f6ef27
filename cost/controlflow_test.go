package cost_test

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// cfGraph loads a graph of testmodels/controlflow (testmodels/controlflow.py).
func cfGraph(t *testing.T, name string) *graphdef.Graph {
	t.Helper()
	return loadTestGraph(t, "controlflow", name)
}

func cfSim(t *testing.T, g *graphdef.Graph, conv cost.Conventions) *cost.Result {
	t.Helper()
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	r, err := cost.Simulate(g, p, cost.Options{Fetch: []string{"train"}, Conventions: conv, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ran(r *cost.Result, node string) bool {
	for _, op := range r.Timeline.Ops {
		if op.Node.Name == node {
			return true
		}
	}
	return false
}

// absDiff returns |a-b|/b.
func absDiff(a, b int64) float64 { return math.Abs(relDiff(a, b)) }

// TestCondAlternatives is issue 12's item 3: a v1 tf.cond on a learning-phase placeholder
// costs its larger branch, the training one (its gradient included), in both accountings.
// Without the cond the same model (cond_cnn_twin) peaks within 10% of it by tfswap's
// accounting (the difference is the zero gradient tf.cond builds for the side not taken) and
// within 20% by Grappler's (which also gives every Switch and Merge output its own buffer),
// and takes within 5% of its step;
// counting both branches (the both-branches convention) peaks higher. The branch left out
// is the other one, and its paired zero gradients (gradients/zeros_1, ...) do not run.
func TestCondAlternatives(t *testing.T) {
	cond, twin := cfGraph(t, "cond_cnn"), cfGraph(t, "cond_cnn_twin")
	for _, acc := range []struct {
		name string
		conv cost.Conventions
		tol  float64
	}{{"tfswap", cost.Conventions{}, 0.10}, {"grappler", cost.GrapplerConventions(), 0.20}} {
		both := acc.conv
		both.BothBranches = true
		rc, rb, rt := cfSim(t, cond, acc.conv), cfSim(t, cond, both), cfSim(t, twin, acc.conv)
		pc, pb, pt := rc.Compute().PeakBytes, rb.Compute().PeakBytes, rt.Compute().PeakBytes
		t.Logf("%s: cond_cnn peak %d (both branches %d), twin %d; steps %d, %d, %d ns", acc.name, pc, pb, pt, rc.StepTime, rb.StepTime, rt.StepTime)
		if pc >= pb {
			t.Errorf("%s: the cond's peak %d is not below both branches' %d", acc.name, pc, pb)
		}
		if d := absDiff(pc, pt); d > acc.tol {
			t.Errorf("%s: the cond's peak %d is %.1f%% off its twin's %d", acc.name, pc, 100*d, pt)
		}
		if d := absDiff(rc.StepTime, rt.StepTime); d > 0.05 {
			t.Errorf("%s: the cond's step %d is %.1f%% off its twin's %d", acc.name, rc.StepTime, 100*d, rt.StepTime)
		}
		if rc.UntakenNodes == 0 || rb.UntakenNodes != 0 {
			t.Errorf("%s: %d untaken nodes (both branches: %d)", acc.name, rc.UntakenNodes, rb.UntakenNodes)
		}
		for _, n := range []string{"cond/block/a", "gradients/cond/Conv2D_grad/Conv2DBackpropFilter", "gradients/zeros"} {
			if !ran(rc, n) {
				t.Errorf("%s: %s, of the training branch, did not run", acc.name, n)
			}
		}
		for _, n := range []string{"cond/mul", "gradients/zeros_1", "gradients/cond/mul_grad/Mul"} {
			if ran(rc, n) {
				t.Errorf("%s: %s, of the other branch, ran", acc.name, n)
			}
			if !ran(rb, n) {
				t.Errorf("%s: %s did not run with both branches", acc.name, n)
			}
		}
	}
	// v2: an If costs its larger branch function; both with both-branches.
	ifg := cfGraph(t, "if_cnn")
	ri, rib := cfSim(t, ifg, cost.Conventions{}), cfSim(t, ifg, cost.Conventions{BothBranches: true})
	rc := cfSim(t, cond, cost.Conventions{})
	t.Logf("if_cnn: step %d ns (both branches %d), peak %d (%d); cond_cnn step %d", ri.StepTime, rib.StepTime, ri.Compute().PeakBytes, rib.Compute().PeakBytes, rc.StepTime)
	if ri.CostedCalls != 2 {
		t.Errorf("if_cnn: %d calls costed from their bodies, want 2 (the If and its gradient)", ri.CostedCalls)
	}
	if d := absDiff(ri.StepTime, rc.StepTime); d > 0.10 {
		t.Errorf("if_cnn's step %d is %.1f%% off cond_cnn's %d", ri.StepTime, 100*d, rc.StepTime)
	}
	if rib.StepTime <= ri.StepTime {
		t.Errorf("if_cnn with both branches costed takes %d, not more than %d", rib.StepTime, ri.StepTime)
	}
}

// TestFunctionCallsFromBodies is issue 12's item 4: a tf.function called from a v1 graph
// (PartitionedCall, its gradient another call), a StatefulPartitionedCall and a v2 while
// loop are costed from their bodies: the call graph's step is within 2% of the same model
// written inline (cond_cnn_twin), where timing calls by their bytes (calls-by-bytes)
// underestimates it by more than 20%, and no call is left among the ops without a rule.
func TestFunctionCallsFromBodies(t *testing.T) {
	twin := cfSim(t, cfGraph(t, "cond_cnn_twin"), cost.Conventions{})
	for _, c := range []struct {
		graph, op string
		calls     int
	}{{"fn_call", "PartitionedCall", 2}, {"stateful_call", "StatefulPartitionedCall", 1}, {"rnn_v2", "While", 2}} {
		g := cfGraph(t, c.graph)
		r := cfSim(t, g, cost.Conventions{})
		rb := cfSim(t, g, cost.Conventions{CallsByBytes: true})
		t.Logf("%s: step %d ns from bodies, %d by bytes; peak %d, %d; %d calls costed", c.graph, r.StepTime, rb.StepTime, r.Compute().PeakBytes, rb.Compute().PeakBytes, r.CostedCalls)
		if r.CostedCalls < c.calls {
			t.Errorf("%s: %d calls costed from their bodies, want at least %d", c.graph, r.CostedCalls, c.calls)
		}
		if r.UnknownOps[c.op] != 0 || rb.UnknownOps[c.op] == 0 {
			t.Errorf("%s: %s among the ops without a rule: %d from bodies, %d by bytes", c.graph, c.op, r.UnknownOps[c.op], rb.UnknownOps[c.op])
		}
		if r.StepTime <= rb.StepTime {
			t.Errorf("%s: the step from bodies (%d) is not longer than by bytes (%d)", c.graph, r.StepTime, rb.StepTime)
		}
		if c.graph == "fn_call" {
			if d := absDiff(r.StepTime, twin.StepTime); d > 0.02 {
				t.Errorf("fn_call's step %d is %.1f%% off the inline model's %d", r.StepTime, 100*d, twin.StepTime)
			}
			if d := absDiff(rb.StepTime, twin.StepTime); d < 0.20 {
				t.Errorf("by bytes, fn_call's step %d is only %.1f%% off the inline model's %d: the test shows nothing", rb.StepTime, 100*d, twin.StepTime)
			}
		}
	}
}

// TestControlFlowVirtualCluster checks the control-flow graphs against Grappler's
// VirtualCluster where it can judge. The VirtualCluster times a function call by its bytes
// and runs both sides of a v1 conditional, so tfswap is compared with it under Grappler's
// conventions plus calls-by-bytes and both-branches: the graphs with calls (fn_call,
// stateful_call, if_cnn), the conditional's twin and the conditional itself, cond_cnn, whose
// Merges run as the VirtualScheduler runs them (once per input, see
// TestBothBranchesMergeRunsPerInput), must match its nanosecond and microsecond peaks to the
// byte.
func TestControlFlowVirtualCluster(t *testing.T) {
	names := []string{"cond_cnn_twin", "fn_call", "stateful_call", "if_cnn", "cond_cnn"}
	var paths []string
	for _, n := range names {
		paths = append(paths, "../testmodels/controlflow/"+n+".pb")
	}
	vc := runVCluster(t, paths)
	conv := cost.GrapplerConventions()
	conv.CallsByBytes, conv.BothBranches, conv.RunValueDead = true, true, true
	for i, n := range names {
		want := vc.Graphs[i].Devices["/device:GPU:0"]
		r := cfSim(t, cfGraph(t, n), conv)
		d := r.Compute()
		t.Logf("%-14s VirtualCluster ns %9d us %9d; tfswap (Grappler's rules, calls by bytes, both branches) ns %9d us %9d", n, want.PeakBytes, want.PeakBytesUS, d.PeakBytes, d.MicrosecondPeakBytes)
		if d.PeakBytes != want.PeakBytes || d.MicrosecondPeakBytes != want.PeakBytesUS {
			t.Errorf("%s: peaks %d and %d (ns, us), VirtualCluster %d and %d", n, d.PeakBytes, d.MicrosecondPeakBytes, want.PeakBytes, want.PeakBytesUS)
		}
	}
}

// runVCluster runs the graphs at paths (fetch train) through Grappler's VirtualCluster
// (tools/vcluster/vcluster.py, profile v100-16gb) and returns its report; it skips the test
// when the project venv is missing (outside CI).
func runVCluster(t *testing.T, paths []string) *vclusterOut {
	t.Helper()
	py := requireVenv(t)
	p, _ := cost.LookupProfile("v100-16gb")
	prof, err := cost.MarshalProfile(p)
	if err != nil {
		t.Fatal(err)
	}
	profPath := filepath.Join(t.TempDir(), "v100-16gb.json")
	if err := os.WriteFile(profPath, prof, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"../tools/vcluster/vcluster.py", "--device-file", profPath, "--json", "--fetch", "train"}, paths...)
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "TF_CPP_MIN_LOG_LEVEL=3")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vcluster.py: %v", err)
	}
	var vc vclusterOut
	if err := json.Unmarshal(out, &vc); err != nil || len(vc.Graphs) != len(paths) {
		t.Fatalf("vcluster.py output (%d graphs): %v", len(vc.Graphs), err)
	}
	return &vc
}

// TestLoopVirtualCluster checks the v1 while loops (dynamic_rnn with v1 control flow: the
// zoo's rnn_v1, built through Keras, and testmodels/controlflow's) against Grappler's
// VirtualCluster. Under the VirtualCluster's own conventions (Grappler's rules, both branches,
// calls by bytes, value-dead nodes run, one element per accumulator push, and a loop's Merge
// run again when its NextIteration ends, MergeReruns) tfswap's peak must be within 10% of the
// VirtualCluster's nanosecond peak. Without MergeReruns it falls short by a fifth to a third:
// the VirtualScheduler holds each loop Enter's tensor and its Merge's output until the
// NextIteration ends, the gradient accumulators' among them (docs/SIMULATOR.md). The rest
// of the difference is op times and sizes: Grappler's shape inference leaves the dimensions
// of stack pops and TensorArray reads unknown (counted as 1), which tfswap's Grappler
// shapes do not model; the figures are logged.
func TestLoopVirtualCluster(t *testing.T) {
	paths := []string{"../testmodels/zoo/rnn_v1.pb", "../testmodels/controlflow/rnn_v1.pb"}
	vc := runVCluster(t, paths)
	conv := cost.GrapplerConventions()
	conv.CallsByBytes, conv.BothBranches, conv.RunValueDead = true, true, true
	for i, path := range paths {
		_, g := testgraph.Load(t, path)
		want := vc.Graphs[i].Devices["/device:GPU:0"].PeakBytes
		without := cfSim(t, g, conv).Compute().PeakBytes
		reruns := conv
		reruns.MergeReruns = true
		got := cfSim(t, g, reruns).Compute().PeakBytes
		t.Logf("%-36s VirtualCluster %7d; tfswap (its conventions) %7d (%+.1f%%), without merge-reruns %7d (%+.1f%%)",
			path, want, got, 100*relDiff(got, want), without, 100*relDiff(without, want))
		if d := relDiff(got, want); d > 0.10 || d < -0.10 {
			t.Errorf("%s: tfswap under the VirtualCluster's conventions predicts a peak of %d bytes, the VirtualCluster %d (%+.1f%%, over 10%%)", path, got, want, 100*d)
		}
	}
}

// TestFunctionBodiesScaleWithBatch is issue 12's finding that --batch-scale left function
// bodies at the graph's batch: fn_call (its conv block a tf.function, and the block's
// gradient another call) at batch x8 must take the step and reach the peak of the same model
// written inline (cond_cnn_twin) at x8, within 3% and 10% as at x1 (TestFunctionCallsFromBodies),
// where bodies costed at x1 fall far short.
func TestFunctionBodiesScaleWithBatch(t *testing.T) {
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	sim := func(name string) *cost.Result {
		r, err := cost.Simulate(cfGraph(t, name), p, cost.Options{Fetch: []string{"train"}, BatchScale: 8})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	twin, call := sim("cond_cnn_twin"), sim("fn_call")
	t.Logf("x8: step %d ns with calls, %d inline; peak %d, %d", call.StepTime, twin.StepTime, call.Compute().PeakBytes, twin.Compute().PeakBytes)
	if call.CostedCalls < 2 {
		t.Fatalf("%d calls costed from their bodies, want 2", call.CostedCalls)
	}
	if d := absDiff(call.StepTime, twin.StepTime); d > 0.03 {
		t.Errorf("fn_call's step at x8 (%d ns) is %.1f%% off the inline model's (%d ns)", call.StepTime, 100*d, twin.StepTime)
	}
	if d := absDiff(call.Compute().PeakBytes, twin.Compute().PeakBytes); d > 0.10 {
		t.Errorf("fn_call's peak at x8 (%d) is %.1f%% off the inline model's (%d)", call.Compute().PeakBytes, 100*d, twin.Compute().PeakBytes)
	}
}

// TestBothBranchesMergeRunsPerInput: with both branches of a v1 conditional run (the
// both-branches convention, with Grappler's accounting as the VirtualCluster has it), a
// conditional's Merge runs as Grappler's VirtualScheduler runs it: as soon as its first input
// arrives, handing its output to its consumers then, and again when each later input arrives,
// holding its inputs (the paired zero gradient of one side beside the gradient of the other)
// until its last run ends. On cond_cnn's gradient Merges, whose zero-gradient inputs arrive
// long before the gradients, the Merge starts before its last input's producer has ended,
// some consumer starts before that too, and the Merge ends after every input's producer.
func TestBothBranchesMergeRunsPerInput(t *testing.T) {
	g := cfGraph(t, "cond_cnn")
	conv := cost.GrapplerConventions()
	conv.BothBranches, conv.RunValueDead = true, true
	r := cfSim(t, g, conv)
	spans := map[string]cost.OpSpan{}
	for _, op := range r.Timeline.Ops {
		if _, dup := spans[op.Node.Name]; dup {
			t.Errorf("%s: more than one span in the timeline", op.Node.Name)
		}
		spans[op.Node.Name] = op
	}
	early := 0
	for _, n := range g.Nodes {
		m, ok := spans[n.Name]
		if n.Op != "Merge" || !ok || len(n.Inputs) < 2 {
			continue
		}
		var first, last int64 = math.MaxInt64, 0
		for _, in := range n.Inputs {
			p, ok := spans[in.Node.Name]
			if !ok {
				t.Fatalf("%s: input %s did not run with both branches", n.Name, in.Node.Name)
			}
			first, last = min(first, p.End), max(last, p.End)
		}
		if m.Start < first {
			t.Errorf("%s started at %d ns, before its first input arrived at %d ns", n.Name, m.Start, first)
		}
		if m.End < last {
			t.Errorf("%s ended at %d ns, before its last input arrived at %d ns", n.Name, m.End, last)
		}
		if m.Start >= last {
			continue // its inputs arrived together
		}
		early++
		consumerEarly := false
		for _, uses := range n.Consumers {
			for _, u := range uses {
				if c, ok := spans[u.Node.Name]; ok && c.Start < last {
					consumerEarly = true
				}
			}
		}
		if !consumerEarly {
			t.Errorf("%s: no consumer started before its last input arrived at %d ns (the first run hands the output on)", n.Name, last)
		}
	}
	if early == 0 {
		t.Fatal("no Merge of cond_cnn ran before its last input arrived: the VirtualScheduler's Merge rule is not applied")
	}
	// Without both-branches a conditional runs one side: each Merge runs once its one input
	// in the step has arrived.
	one := cfSim(t, g, cost.GrapplerConventions())
	ends := map[string]int64{}
	for _, op := range one.Timeline.Ops {
		ends[op.Node.Name] = op.End
	}
	for _, op := range one.Timeline.Ops {
		for _, in := range op.Node.Inputs {
			if e, ok := ends[in.Node.Name]; ok && op.Node.Op == "Merge" && op.Start < e {
				t.Errorf("one branch taken: %s started at %d ns, before its input %s ended at %d ns", op.Node.Name, op.Start, in.Node.Name, e)
			}
		}
	}
}
