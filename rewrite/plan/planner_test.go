package plan

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
)

// big is a 2 MiB float32 activation: above AutoSwap's 1 MiB candidate size.
var big = []int64{512, 1024}

// planChain is chainGraph with 2 MiB activations: a forward chain f1..fn of Relus and its
// backward chain g_n..g_1, g_i reading f_i.
func planChain(n int, device string) *gpb.GraphDef {
	b := newBuilder()
	b.op("x", "Placeholder", device, big)
	prev := "x"
	for i := 1; i <= n; i++ {
		prev = b.op(fmt.Sprintf("f%d", i), "Relu", device, big, prev).Name
	}
	grad := b.op("loss_grad", "Relu", device, big, prev).Name
	for i := n; i >= 1; i-- {
		grad = b.op(fmt.Sprintf("g%d", i), "ReluGrad", device, big, grad, fmt.Sprintf("f%d", i)).Name
	}
	b.op("train", "NoOp", device, nil, "^"+grad)
	return b.g
}

// slowProfile makes every op of the chain take 1 ms (4 MiB touched at 4 MiB/ms) and a 2 MiB
// copy 0.1 ms each way: swaps can hide entirely behind compute, so the best plan of any budget
// the chain can meet has no overhead.
func slowProfile() *cost.Profile {
	return &cost.Profile{Name: "slow", MemoryBytes: 1 << 30, FP32: 1e12, FP16: 1e12, MemBandwidth: 4 << 30,
		D2H: 20 << 30, H2D: 20 << 30, Duplex: true, TransferLatency: 1e-6, HostFLOPS: 1e12, HostMemBandwidth: 50e9}
}

// chainBase returns the unswapped peak of planChain(n).
func chainBase(t *testing.T, g *gpb.GraphDef) *cost.Result {
	t.Helper()
	gr, err := graphdef.NewGraph(g, "chain")
	if err != nil {
		t.Fatal(err)
	}
	r, err := cost.Simulate(gr, slowProfile(), cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func planModel(t *testing.T, g *gpb.GraphDef, strategy string, budget int64) (*Planned, error) {
	t.Helper()
	return planWith(t, g, slowProfile(), strategy, "", budget)
}

func swappedNames(p *Planned) []string {
	var out []string
	for _, s := range p.Swaps {
		out = append(out, s.Tensor)
	}
	return out
}

// TestStrategiesOnChain: the unswapped chain of 8 holds f1..f8 at the end of the forward
// pass. A budget 3 activations below that peak needs three of them absent; the earliest
// have the longest gaps, and the copies hide behind 1 ms ops, so the optimum has no overhead.
func TestStrategiesOnChain(t *testing.T) {
	const n = 8
	act := int64(512 * 1024 * 4)
	base := chainBase(t, planChain(n, ""))
	peak := base.Compute().PeakBytes
	budget := peak - 3*act
	cases := []struct {
		strategy string
		// maxOverhead is the overhead the strategy is allowed; swaps checks the swapped set.
		maxOverhead float64
		check       func(t *testing.T, p *Planned)
	}{
		{"auto", 1e-4, func(t *testing.T, p *Planned) {
			if got := strings.Join(swappedNames(p), " "); got != "f1:0 f2:0 f3:0" {
				t.Errorf("auto swapped %s, want the three with the longest gaps, f1:0 f2:0 f3:0", got)
			}
		}},
		{"lms", 0.05, nil},
		{"vdnn-dyn", 0.05, nil},
		{"autoswap", 0.02, func(t *testing.T, p *Planned) {
			// Every candidate's lifetime spans the peak (the end of the forward pass).
			for _, s := range p.Swaps {
				if !strings.HasPrefix(s.Tensor, "f") && s.Tensor != "x:0" {
					t.Errorf("autoswap swapped %s, whose lifetime does not span the peak", s.Tensor)
				}
			}
		}},
		{"window", 0.05, func(t *testing.T, p *Planned) {
			if len(p.Swaps) != 3 {
				t.Errorf("window swapped %v, want three", swappedNames(p))
			}
		}},
		{"vdnn-all", 1, func(t *testing.T, p *Planned) {
			// Every feature map a layer reads and the backward pass reads again.
			got := map[string]bool{}
			for _, s := range swappedNames(p) {
				got[s] = true
			}
			for i := 1; i < n; i++ {
				if !got[fmt.Sprintf("f%d:0", i)] {
					t.Errorf("vdnn-all did not offload f%d (swapped %v)", i, swappedNames(p))
				}
			}
			if len(p.Waits) == 0 {
				t.Error("vdnn-all has no waits: vDNN synchronises after each offload")
			}
		}},
	}
	steps := map[string]int64{}
	for _, tc := range cases {
		t.Run(tc.strategy, func(t *testing.T) {
			p, err := planModel(t, planChain(n, ""), tc.strategy, budget)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range p.Eval.Devices {
				if d.Peak > budget {
					t.Errorf("%s peak %d over the budget %d", d.Name, d.Peak, budget)
				}
			}
			if p.Eval.Overhead > tc.maxOverhead {
				t.Errorf("overhead %.3f, want at most %.3f", p.Eval.Overhead, tc.maxOverhead)
			}
			g, _ := graphdef.NewGraph(planChain(n, ""), "chain")
			if err := rewrite.Verify(g, p.Result, rewrite.GateHost); err != nil {
				t.Error(err)
			}
			if tc.check != nil {
				tc.check(t, p)
			}
			t.Logf("%s: swaps %v waits %d peak %d (budget %d, base %d) overhead %.4f", tc.strategy, swappedNames(p), len(p.Waits), p.Eval.Devices[0].Peak, budget, peak, p.Eval.Overhead)
			steps[tc.strategy] = p.Eval.StepTime
		})
	}
	for s, st := range steps {
		if st < steps["auto"] {
			t.Errorf("%s's step %d beats auto's %d", s, st, steps["auto"])
		}
	}
	// vDNN_conv offloads only convolutions' inputs: the chain has none.
	var nf *NoFitError
	if _, err := planModel(t, planChain(n, ""), "vdnn-conv", budget); !errors.As(err, &nf) {
		t.Errorf("vdnn-conv on a chain without convolutions: %v, want a NoFitError", err)
	}
}

// TestVDNNConvOffloadsConvolutionInputs: on the CNN fixture every vdnn-conv swap is the
// data input of a convolution, and vdnn-dyn offloads no more than vdnn-all.
func TestVDNNConvOffloadsConvolutionInputs(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/cnn.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: "vdnn-conv", Budget: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := graphdef.NewGraph(m.Graph, "cnn")
	if len(p.Swaps) == 0 {
		t.Fatal("vdnn-conv swapped nothing")
	}
	for _, s := range p.Swaps {
		conv := false
		for _, u := range g.Node(s.Producer).Consumers[0] {
			conv = conv || (convForward(u.Node) && u.Input == 0)
		}
		if !conv {
			t.Errorf("%s is not a convolution's input", s.Tensor)
		}
	}
	all, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: "vdnn-all", Budget: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Swaps) <= len(p.Swaps) {
		t.Errorf("vdnn-all swaps %d, vdnn-conv %d", len(all.Swaps), len(p.Swaps))
	}
	// With room to spare, vDNN_dyn offloads nothing.
	dyn, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: "vdnn-dyn", Budget: 1 << 40})
	if err != nil || len(dyn.Swaps) != 0 {
		t.Errorf("vdnn-dyn with room to spare: %v swaps, %v", len(dyn.Swaps), err)
	}
}

// TestVDNNSkipsTupleFanoutInputs is the bench note's finding 4 (VGG-16 on titanx: +26.8% ->
// +85.4% simulated overhead at the same peak, bisected to 467c9c8): a gradient of the
// backward pass, gt, read first by a layer (bgrad, as BiasAddGrad reads ReluGrad's output)
// and late by a gradient tuple Identity with two readers, is no layer's input feature map
// reused in the backward pass, so vdnn-all does not offload it, although it may be swapped
// (LMS swaps it, the tuple reading its swap-in through a relay) and vdnn-all offloads the
// forward feature maps f1..f7.
func TestVDNNSkipsTupleFanoutInputs(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", big)
	prev := "x"
	for i := 1; i <= 8; i++ {
		prev = b.op(fmt.Sprintf("f%d", i), "Relu", "", big, prev).Name
	}
	grad := b.op("loss_grad", "Relu", "", big, prev).Name
	for i := 8; i >= 1; i-- {
		grad = b.op(fmt.Sprintf("g%d", i), "ReluGrad", "", big, grad, fmt.Sprintf("f%d", i)).Name
		if i == 6 {
			grad = b.op("gt", "Relu", "", big, grad).Name
			b.op("bgrad", "Relu", "", big, "gt")
			b.op("group_deps", "NoOp", "", nil, "^gt", "^bgrad")
			b.op("tuple", "Identity", "", big, "gt", "^group_deps")
		}
	}
	b.op("ra", "AddV2", "", big, grad, "tuple")
	b.op("rb", "AddV2", "", big, grad, "tuple")
	b.op("train", "NoOp", "", nil, "^ra", "^rb", "^bgrad")
	m := graphdef.NewModel(b.g)
	g, err := graphdef.NewGraph(b.g, "tuple")
	if err != nil {
		t.Fatal(err)
	}
	if !rewrite.TupleFanout(g.Node("tuple")) {
		t.Fatal("tuple is no gradient tuple Identity with several readers")
	}
	swapped := func(p *Planned) map[string]bool {
		got := map[string]bool{}
		for _, s := range p.Swaps {
			got[s.Tensor] = true
		}
		return got
	}
	lms, err := Rewrite(m, rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
	if err != nil {
		t.Fatal(err)
	}
	lmsSwapped := false
	for _, s := range lms.Swaps {
		lmsSwapped = lmsSwapped || s.Tensor == "gt:0"
	}
	if !lmsSwapped {
		t.Fatalf("LMS did not swap gt:0 (swaps %v, skipped %v): the test needs it swappable", lms.Swaps, lms.Skipped)
	}
	p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: "vdnn-all", Budget: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	got := swapped(p)
	if got["gt:0"] {
		t.Errorf("vdnn-all offloaded gt:0, the input of a gradient tuple Identity (swapped %v)", swappedNames(p))
	}
	for i := 1; i < 8; i++ {
		if !got[fmt.Sprintf("f%d:0", i)] {
			t.Errorf("vdnn-all did not offload f%d (swapped %v)", i, swappedNames(p))
		}
	}
	if err := rewrite.Verify(g, p.Result, rewrite.GateHost); err != nil {
		t.Error(err)
	}
}

// TestNoFit: a budget below what must stay live fails with the diagnosis.
func TestNoFit(t *testing.T) {
	_, err := planModel(t, planChain(4, ""), "auto", 3<<20)
	var nf *NoFitError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want a NoFitError", err)
	}
	if nf.Peak <= nf.Budget || nf.Device != "/device:GPU:0" || nf.Activations == 0 || len(nf.Largest) == 0 || len(nf.Advice) == 0 {
		t.Errorf("diagnosis incomplete: %+v", nf)
	}
	for _, want := range []string{"no plan fits /device:GPU:0", "live at that moment", "what would have to change", "a budget of at least"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%s", want, err)
		}
	}
}

// TestNoFitNamesAccumulators checks that a no-fit diagnosis on the control-flow rnn_v1 (a v1
// loop's stacks hold every iteration's pushed tensors at the peak) counts the accumulators
// left on the device apart from the activations and says how to move them (here preserved:
// --preserve keeps every StackV2 where it is), that without them preserved the lowest plan
// places them on the host and counts none, and that one on a graph without loops
// (planChain) counts none.
func TestNoFitNamesAccumulators(t *testing.T) {
	m, g := loadTestModel(t, "controlflow", "rnn_v1", "regenerate with .venv/bin/python testmodels/controlflow.py")
	p, err := cost.LookupProfile(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	var stacks []string
	for _, n := range g.Nodes {
		if n.Op == "StackV2" {
			stacks = append(stacks, n.Name)
		}
	}
	po := PlanOptions{Budget: 1 << 10, Profile: p, Sim: cost.Options{Fetch: []string{"train"}}, FitAccounting: "tfswap"}
	_, err = RewriteWithPlanner(m, rewrite.Options{Preserve: stacks}, po)
	var nf *NoFitError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want a NoFitError", err)
	}
	if nf.Accumulators <= 0 || !strings.Contains(err.Error(), "while loops' accumulators") {
		t.Errorf("accumulators %d B, message:\n%s", nf.Accumulators, err)
	}
	kept := nf.Peak
	_, err = RewriteWithPlanner(m, rewrite.Options{}, po)
	if !errors.As(err, &nf) || nf.Accumulators != 0 || nf.Peak >= kept {
		t.Errorf("with the stacks free to move: %v", err)
	}
	_, err = planModel(t, planChain(4, ""), "auto", 3<<20)
	if !errors.As(err, &nf) || nf.Accumulators != 0 || strings.Contains(err.Error(), "accumulators") {
		t.Errorf("a graph without loops: %v", err)
	}
}

// TestPlanningDeterministic: the same input and options give byte-identical output.
func TestPlanningDeterministic(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var outs [][]byte
	for i := 0; i < 2; i++ {
		p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: 5 << 20, Explain: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.Model.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, append(b, []byte(FormatExplanation(p.Explanation, func(n int64) string { return fmt.Sprint(n) }))...))
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Error("two plans of the same graph differ")
	}
}

// TestWaitsApplied: a plan's waits become control inputs on the swap-outs, Verify accepts
// them, and the derived graph the planner simulates matches the applied one.
func TestWaitsApplied(t *testing.T) {
	m := graphdef.NewModel(planChain(4, ""))
	g, _ := graphdef.NewGraph(m.Graph, "chain")
	opts, _ := rewrite.Options{}.WithDefaults()
	a := rewrite.Analyze(g, opts)
	f1 := graphdef.Tensor{Node: g.Node("f1"), Port: 0}
	plan := &rewrite.Plan{
		Swaps: []rewrite.PlannedSwap{{Tensor: f1, Bytes: 2 << 20, Groups: []rewrite.SwapInGroup{{Uses: []graphdef.Use{{Node: g.Node("g1"), Input: 1}}, Trigger: g.Node("g3")}}}},
		Waits: []rewrite.Wait{{Node: g.Node("f3"), After: f1}},
	}
	res, err := rewrite.Apply(m, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := rewrite.Verify(g, res, rewrite.GateHost); err != nil {
		t.Fatal(err)
	}
	out, _ := graphdef.NewGraph(res.Model.Graph, "applied")
	if in := out.Node("f3").Def.GetInput(); len(in) != 2 || in[1] != "^tfswap/f1_0/swap_out" {
		t.Errorf("f3 inputs %v", in)
	}
	if len(res.Waits) != 1 || res.Waits[0].Node != "f3" {
		t.Errorf("waits %+v", res.Waits)
	}
	d, err := rewrite.DeriveGraph(a, plan)
	if err != nil {
		t.Fatal(err)
	}
	if msg := testgraph.Same(d, out); msg != "" {
		t.Error(msg)
	}
	// A wait for a tensor the plan does not swap is refused.
	plan.Waits[0].After = graphdef.Tensor{Node: g.Node("f2"), Port: 0}
	if _, err := rewrite.Apply(m, a, plan); err == nil {
		t.Error("Apply accepted a wait for an unswapped tensor")
	}
}

// towers is planChain on two GPUs of two tasks, named tower0/ and tower1/.
func towers(n int) *gpb.GraphDef {
	g := &gpb.GraphDef{}
	for i, dev := range []string{"/job:worker/replica:0/task:0/device:GPU:0", "/job:worker/replica:0/task:1/device:GPU:1"} {
		t := planChain(n, dev)
		prefix := fmt.Sprintf("tower%d/", i)
		for _, nd := range t.Node {
			nd.Name = prefix + nd.Name
			for j, in := range nd.Input {
				if strings.HasPrefix(in, "^") {
					nd.Input[j] = "^" + prefix + in[1:]
				} else {
					nd.Input[j] = prefix + in
				}
			}
		}
		g.Node = append(g.Node, t.Node...)
	}
	return g
}

// TestMultiGPUBudgetsAndHosts: per-device budgets hold on each tower's GPU, each tensor goes
// to its own task's CPU, and GPUs sharing a host link are planned with the link shared.
func TestMultiGPUBudgetsAndHosts(t *testing.T) {
	act := int64(512 * 1024 * 4)
	g := towers(6)
	gr, _ := graphdef.NewGraph(g, "towers")
	base, err := cost.Simulate(gr, slowProfile(), cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gpu0, gpu1 := "/job:worker/replica:0/task:0/device:GPU:0", "/job:worker/replica:0/task:1/device:GPU:1"
	peak0 := base.Device(gpu0).PeakBytes
	for _, shared := range []bool{false, true} {
		// The budgets are worked out with tfswap's and the nanosecond accounting (the
		// microsecond one counts the swap-ins' 1 ns neighbours together: see
		// TestMicrosecondAccounting).
		po := PlanOptions{Profile: slowProfile(), Budget: 1 << 40, DeviceBudgets: map[string]int64{gpu0: peak0 - 2*act},
			FitAccounting: "tfswap,grappler-ns"}
		if shared {
			po.Sim.SharedLinks = [][]string{{gpu0, gpu1}}
			po.DeviceBudgets[gpu1] = peak0 - 2*act
		}
		m := graphdef.NewModel(towers(6))
		p, err := RewriteWithPlanner(m, rewrite.Options{}, po)
		if err != nil {
			t.Fatal(err)
		}
		on := map[string]int{}
		for _, s := range p.Swaps {
			task := strings.TrimPrefix(s.Producer[:6], "tower")
			if !strings.Contains(s.Host, "/task:"+task+"/") || !strings.HasSuffix(s.Host, "CPU:0") {
				t.Errorf("%s is swapped to %s, not its own task's CPU", s.Tensor, s.Host)
			}
			on[s.Producer[:6]]++
		}
		for _, d := range p.Eval.Devices {
			if d.Peak > d.Budget {
				t.Errorf("shared=%v: %s peak %d over its budget %d", shared, d.Name, d.Peak, d.Budget)
			}
		}
		if on["tower0"] == 0 || (!shared && on["tower1"] != 0) {
			t.Errorf("shared=%v: swaps per tower %v", shared, on)
		}
	}
}

// TestPlanTwoDeviceEmulation: the runtime tests place the fixture on /device:CPU:1, which
// stands for the GPU, and swap to /device:CPU:0. Planning simulates CPU:1 as a GPU, so the
// plan swaps to CPU:0 and fits the budget there; its devices are named as the graph names them
// (CPU:1, not the GPU:1 it is simulated as).
func TestPlanTwoDeviceEmulation(t *testing.T) {
	m := resnetOnCPU1(t)
	g, _ := graphdef.NewGraph(m.Graph, "resnet")
	opts := rewrite.Options{ComputeDevice: "/device:CPU:1", HostDevice: "/device:CPU:0"}
	p, err := RewriteWithPlanner(m, opts, PlanOptions{Budget: 6 << 20, Sim: cost.Options{Fetch: []string{"train"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Swaps) == 0 || len(p.Eval.Devices) != 1 || p.Eval.Devices[0].Name != "/device:CPU:1" || p.Eval.Devices[0].Peak > 6<<20 {
		t.Fatalf("plan: %d swaps, devices %+v", len(p.Swaps), p.Eval.Devices)
	}
	for _, s := range p.Swaps {
		if s.Host != "/device:CPU:0" {
			t.Errorf("%s swapped to %s", s.Tensor, s.Host)
		}
		for _, si := range s.SwapIns {
			if si.Device != "/device:CPU:0" {
				t.Errorf("%s swapped in on %s", s.Tensor, si.Device)
			}
		}
	}
	if err := rewrite.Verify(g, p.Result, rewrite.GateHost); err != nil {
		t.Fatal(err)
	}
	for _, n := range p.Model.Graph.Node[:len(g.Nodes)] {
		if n.Device != "/device:CPU:1" {
			t.Fatalf("node %s moved to %q", n.Name, n.Device)
		}
	}
}

// TestAutoNeverWorse: on the residual-network fixture at several budgets, auto fits whenever
// another strategy does, with a step no longer than any of theirs.
func TestAutoNeverWorse(t *testing.T) {
	m, fetch, _, base := resnetFixture(t)
	for _, pct := range []int64{90, 70, 60} {
		budget := base.Compute().PeakBytes * pct / 100
		steps := map[string]int64{}
		for _, s := range StrategyNames() {
			res, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: s, Budget: budget, Sim: fetch})
			if err == nil {
				steps[s] = res.Eval.StepTime
			}
		}
		a, ok := steps["auto"]
		for s, st := range steps {
			if !ok || st < a {
				t.Errorf("%d%%: %s fits with step %d; auto %d (fits %v)", pct, s, st, a, ok)
			}
		}
	}
}

// TestFitAccounting: a graph whose Identity copies Grappler counts and TensorFlow does not
// fits a budget of three activations by tfswap's accounting (two are live) but not by
// Grappler's (four), and nothing can be swapped to change that. With all accountings (the
// default), with "both" (the earlier default) or with Grappler's alone, planning fails and
// says why; with tfswap's alone the unswapped graph fits, and Grappler's figures are reported
// without judging it.
func TestFitAccounting(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", big)
	b.op("a", "Relu", "", big, "x")
	b.op("i1", "Identity", "", big, "a")
	b.op("i2", "Identity", "", big, "i1")
	b.op("c", "AddN", "", big, "a", "i1", "i2")
	b.op("train", "NoOp", "", nil, "^c")
	act := int64(512 * 1024 * 4)
	plan := func(acc string) (*Planned, error) {
		return RewriteWithPlanner(graphdef.NewModel(b.g), rewrite.Options{}, PlanOptions{Profile: slowProfile(), Budget: 3 * act, FitAccounting: acc})
	}
	for _, acc := range []string{"", "all", "both", "grappler-ns", "tfswap,grappler-us"} {
		_, err := plan(acc)
		var nf *NoFitError
		if !errors.As(err, &nf) {
			t.Fatalf("%q: got %v, want a NoFitError", acc, err)
		}
		if nf.Peak != 2*act || nf.GrapplerPeak != 4*act || nf.GrapplerPeakUS < 4*act {
			t.Errorf("%q: peaks %d (tfswap), %d and %d (Grappler ns and us), want %d, %d and at least %d", acc, nf.Peak, nf.GrapplerPeak, nf.GrapplerPeakUS, 2*act, 4*act, 4*act)
		}
		for _, want := range []string{"by Grappler's VirtualCluster", "--fit-accounting tfswap", "i2:0"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error does not mention %q:\n%v", acc, want, err)
			}
		}
	}
	p, err := plan("tfswap")
	if err != nil {
		t.Fatal(err)
	}
	d := p.Eval.Devices[0]
	if len(p.Swaps) != 0 || d.GrapplerPeak != 4*act || d.GrapplerPeakUS < 4*act || strings.Join(d.Judged(), ",") != "tfswap" ||
		strings.Join(p.Accountings, ",") != "tfswap" {
		t.Errorf("tfswap accounting: %d swaps, Grappler peaks %d and %d, judged by %v (%v); want the unswapped graph, both figures reported, judged by tfswap's alone",
			len(p.Swaps), d.GrapplerPeak, d.GrapplerPeakUS, d.Judged(), p.Accountings)
	}
	for _, bad := range []string{"grappler-only", "tfswap,both", "tfswap,"} {
		if _, err := plan(bad); err == nil || !strings.Contains(err.Error(), "fit accounting") {
			t.Errorf("unknown accounting %q: got %v", bad, err)
		}
	}
	for acc, want := range map[string]string{"": "tfswap,grappler-ns,grappler-us", "all": "tfswap,grappler-ns,grappler-us",
		"both": "tfswap,grappler-ns", "grappler-us, tfswap": "tfswap,grappler-us"} {
		if got, err := ParseFitAccounting(acc); err != nil || strings.Join(got, ",") != want {
			t.Errorf("ParseFitAccounting(%q) = %v, %v; want %s", acc, got, err, want)
		}
	}
}

// TestMicrosecondAccounting: the microsecond figure judges alone when asked to. x is
// released 1 ns after a ends, and i1 (an Identity: 1 ns) and c start in that same
// microsecond, so GraphMemory's microsecond reading counts all four activations together
// where the nanosecond one never sees more than three: the unswapped graph fits tfswap's and
// the nanosecond figure, not the microsecond one, and nothing swapped can change that.
func TestMicrosecondAccounting(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", big)
	b.op("a", "Relu", "", big, "x")
	b.op("i1", "Identity", "", big, "a")
	b.op("c", "AddN", "", big, "a", "i1")
	b.op("train", "NoOp", "", nil, "^c")
	act := int64(512 * 1024 * 4)
	plan := func(acc string) (*Planned, error) {
		return RewriteWithPlanner(graphdef.NewModel(b.g), rewrite.Options{}, PlanOptions{Profile: slowProfile(), Budget: 3 * act, FitAccounting: acc})
	}
	p, err := plan("tfswap,grappler-ns")
	if err != nil {
		t.Fatal(err)
	}
	d := p.Eval.Devices[0]
	if d.GrapplerPeak > 3*act || d.GrapplerPeakUS <= 3*act {
		t.Fatalf("peaks %d (ns) and %d (us); the test wants the nanosecond one within %d and the microsecond one over", d.GrapplerPeak, d.GrapplerPeakUS, 3*act)
	}
	_, err = plan("grappler-us")
	var nf *NoFitError
	if !errors.As(err, &nf) || nf.GrapplerPeakUS != d.GrapplerPeakUS {
		t.Fatalf("grappler-us: got %v, want a NoFitError at %d", err, d.GrapplerPeakUS)
	}
	if !strings.Contains(err.Error(), "--fit-accounting tfswap,grappler-ns") {
		t.Errorf("the advice does not offer the nanosecond accounting:\n%v", err)
	}
}

// TestPlannedPeaksAreTheOutputs: for every strategy on the residual-network fixture, the
// peaks planning reports for a plan that fits (both accountings) are exactly what the
// simulator says of the rewritten graph that was written: the graph planning simulates
// (DeriveGraph) is the graph Apply builds, as far as memory and time go.
func TestPlannedPeaksAreTheOutputs(t *testing.T) {
	m, fetch, prof, base := resnetFixture(t)
	fitted := 0
	for _, pct := range []int64{75, 55} {
		budget := base.Compute().PeakBytes * pct / 100
		for _, s := range StrategyNames() {
			p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: s, Budget: budget, Sim: fetch})
			if err != nil {
				continue
			}
			fitted++
			out, err := graphdef.NewGraph(p.Model.Graph, "out")
			if err != nil {
				t.Fatal(err)
			}
			for _, conv := range []cost.Conventions{{}, cost.GrapplerConventions()} {
				o := fetch
				o.Conventions = conv
				r, err := cost.Simulate(out, prof, o)
				if err != nil {
					t.Fatal(err)
				}
				d := p.Eval.Devices[0]
				want := d.Peak
				if conv != (cost.Conventions{}) {
					want = d.GrapplerPeak
					if us := r.Device(d.Name).MicrosecondPeakBytes; us != d.GrapplerPeakUS || us > budget {
						t.Errorf("%d%% %s: the output's microsecond peak is %d, planning said %d (budget %d)", pct, s, us, d.GrapplerPeakUS, budget)
					}
				}
				got := r.Device(d.Name).PeakBytes
				if got != want || got > budget {
					t.Errorf("%d%% %s, %s accounting: the output's peak is %d, planning said %d (budget %d)", pct, s, cost.ConventionsName(conv), got, want, budget)
				}
				if conv == (cost.Conventions{}) && r.StepTime != p.Eval.StepTime {
					t.Errorf("%d%% %s: the output's step is %d ns, planning said %d", pct, s, r.StepTime, p.Eval.StepTime)
				}
			}
		}
	}
	if fitted < 6 {
		t.Errorf("only %d plans fitted; the check needs plans", fitted)
	}
}

// resnetFixture loads the residual-network fixture and simulates one unswapped training step
// of it on the default device: the model, the simulation options, the profile and the result.
func resnetFixture(t *testing.T) (*graphdef.Model, cost.Options, *cost.Profile, *cost.Result) {
	t.Helper()
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fetch := cost.Options{Fetch: []string{"train"}}
	g, _ := graphdef.NewGraph(m.Graph, "resnet")
	prof, _ := cost.LookupProfile(DefaultDevice)
	base, err := cost.Simulate(g, prof, fetch)
	if err != nil {
		t.Fatal(err)
	}
	return m, fetch, prof, base
}

// TestAutoMonotone: auto's plan for a budget is never slower than its plan for a tighter
// budget (issue 14 item 3). On the ResNet fixture at its batch, auto's search alone finds a
// plan of 1.090067 ms at 70% of the unswapped peak but only one of 1.097339 ms at 75%;
// planning again at tighter budgets (TighterBudgets) finds a faster one at 75% too. The
// test also checks that the search alone is not monotone there, so that it keeps testing the
// retries. (It used 82% and 84% at twice the batch until tfswap's gates stopped running as
// value-dead NoOps: the search alone is monotone there, and from 76% to 90% in steps of 2,
// since. At batch 2 it was not monotone between 58% and 60%, nor 68% and 70%, and the
// retries did not repair those: see issue 14 item 3.)
func TestAutoMonotone(t *testing.T) {
	m, fetch, prof, _ := resnetFixture(t)
	g, _ := graphdef.NewGraph(m.Graph, "resnet")
	base, err := cost.Simulate(g, prof, fetch)
	if err != nil {
		t.Fatal(err)
	}
	steps := func() (lo, hi int64) {
		for i, pct := range []int64{70, 75} {
			res, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: base.Compute().PeakBytes * pct / 100, Sim: fetch})
			if err != nil {
				t.Fatalf("%d%%: %v", pct, err)
			}
			if i == 0 {
				lo = res.Eval.StepTime
			} else {
				hi = res.Eval.StepTime
			}
		}
		return lo, hi
	}
	tight, loose := steps()
	if loose > tight {
		t.Errorf("auto at 75%% of the peak: step %d, slower than at 70%%: %d", loose, tight)
	}
	saved := TighterBudgets
	TighterBudgets = nil
	defer func() { TighterBudgets = saved }()
	if tight, loose := steps(); loose <= tight {
		t.Logf("without retries auto is monotone on the fixture too (%d at 75%%, %d at 70%%): the test no longer exercises them", loose, tight)
		t.Fail()
	}
}

// TestAutoMonotoneRecompute: a plan with recomputations found for a tighter budget is a
// candidate at every larger one (issue 14 item 3). On the CNN fixture at 80% of the unswapped
// peak, auto's swap-only retries at tighter budgets find nothing better than its
// window+recompute plan, while auto at 95% of that budget finds a faster plan with
// recomputations (the recompute pass screens larger levels of recomputation there), which
// fits 80% too. Planning the tighter budgets with recomputations (TighterRecompute) finds it
// at 80%. The test also checks that without that the sweep is not monotone, so that it keeps
// testing the retries.
func TestAutoMonotoneRecompute(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/cnn.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fetch := cost.Options{Fetch: []string{"train"}}
	g, _ := graphdef.NewGraph(m.Graph, "cnn")
	prof, _ := cost.LookupProfile(DefaultDevice)
	base, err := cost.Simulate(g, prof, fetch)
	if err != nil {
		t.Fatal(err)
	}
	loose := base.Compute().PeakBytes * 80 / 100
	tight := loose * 950 / 1000
	// Since value-dead readers stopped holding tensors (8e64d51) the sweep on this fixture is
	// monotone without the recomputed retries too (385819 ns at both budgets), so they are
	// not exercised here (logged); no other budget or batch of the fixture tried (76-84%, x2)
	// shows the case. TestAutoMonotoneRecomputeRetries exercises them on ResNet-50.
	checkTighterRecomputeRetries(t, m, PlanOptions{Sim: fetch}, loose, tight)
}
