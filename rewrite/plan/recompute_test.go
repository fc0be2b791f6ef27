package plan

import (
	"errors"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
)

// slowLinkProfile is slowProfile with a host link 100 times slower: a 2 MiB copy takes 10 ms
// each way against 1 ms per op, so swapping stalls the chain and recomputing an activation
// (one 1 ms Relu) is the cheaper way to free it.
func slowLinkProfile() *cost.Profile {
	p := slowProfile()
	p.Name = "slowlink"
	p.D2H, p.H2D = 200<<20, 200<<20
	return p
}

func planWith(t *testing.T, g *gpb.GraphDef, p *cost.Profile, strategy, recompute string, budget int64) (*Planned, error) {
	t.Helper()
	m := graphdef.NewModel(g)
	m.Source = "chain"
	return RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: strategy, Profile: p, Budget: budget, Recompute: recompute, FitAccounting: "tfswap"})
}

func recomputedNames(p *Planned) []string {
	var out []string
	for _, rc := range p.Recomputes {
		out = append(out, rc.Tensor)
	}
	sort.Strings(out)
	return out
}

// TestRecomputeOnSlowLink: on the chain f1..f8 (f_i = Relu(f_{i-1}), g_i reads f_i) with a
// link too slow to hide a copy, a budget three activations below the peak is met best by
// recomputing three activations at the cost of three Relus: three non-neighbouring f_i each
// from its kept predecessor, or a segment of consecutive ones by one chain whose copies serve
// each. f1 cannot be recomputed (its input, the fed x, is not kept).
func TestRecomputeOnSlowLink(t *testing.T) {
	const n = 8
	act := int64(512 * 1024 * 4)
	prof := slowLinkProfile()
	gr, err := graphdef.NewGraph(planChain(n, ""), "chain")
	if err != nil {
		t.Fatal(err)
	}
	base, err := cost.Simulate(gr, prof, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	budget := base.Compute().PeakBytes - 3*act

	withRC, err := planWith(t, planChain(n, ""), prof, "auto", "auto", budget)
	if err != nil {
		t.Fatal(err)
	}
	swapOnly, err := planWith(t, planChain(n, ""), prof, "auto", "off", budget)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with recomputation: %+v swaps %v, step %d (overhead %.3f); swap only: step %d (overhead %.3f)",
		withRC.Recomputes, swappedNames(withRC), withRC.Eval.StepTime, withRC.Eval.Overhead, swapOnly.Eval.StepTime, swapOnly.Eval.Overhead)
	if len(withRC.Swaps) != 0 {
		t.Errorf("swapped %v: recomputation alone meets the budget", swappedNames(withRC))
	}
	// Every recomputed tensor, by its own chain or served by another's, is some f_i (i >= 2)
	// read by g_i; the chains' ops are Relus f_j.
	served := map[int]bool{}
	check := func(tensor string, consumers []string) {
		var i int
		if _, err := fmt.Sscanf(tensor, "f%d:0", &i); err != nil || i < 2 {
			t.Errorf("recomputed %s, want one of f2..f8", tensor)
		}
		served[i] = true
		if want := fmt.Sprintf("g%d", i); strings.Join(consumers, ",") != want {
			t.Errorf("%s: copy read by %v, want %s", tensor, consumers, want)
		}
	}
	ops := 0
	for _, rc := range withRC.Recomputes {
		check(rc.Tensor, rc.Consumers)
		for _, x := range rc.Also {
			check(x.Tensor, x.Consumers)
		}
		for _, op := range rc.Ops {
			var j int
			if _, err := fmt.Sscanf(op, "f%d", &j); err != nil || j < 2 {
				t.Errorf("%s recomputed by op %s, want Relus f2..f8", rc.Tensor, op)
			}
		}
		ops += len(rc.Ops)
	}
	if len(served) != 3 || ops != 3 {
		t.Errorf("recomputed %v by %d ops, want three tensors by three Relus", served, ops)
	}
	// Three extra 1 ms ops, against a step of 2n+2 ops.
	if extra := withRC.Eval.StepTime - withRC.Base.StepTime; extra > 3_100_000 {
		t.Errorf("recomputation adds %d ns, want about three 1 ms ops", extra)
	}
	if withRC.Eval.StepTime >= swapOnly.Eval.StepTime {
		t.Errorf("with recomputation step %d, swap only %d: recomputation should win on a slow link", withRC.Eval.StepTime, swapOnly.Eval.StepTime)
	}
	for _, d := range withRC.Eval.Devices {
		if d.Peak > budget {
			t.Errorf("peak %d over budget %d", d.Peak, budget)
		}
	}
	if withRC.Eval.Overhead != float64(withRC.Eval.StepTime-withRC.Base.StepTime)/float64(withRC.Base.StepTime) {
		t.Errorf("overhead %.4f is not against the unrecomputed step", withRC.Eval.Overhead)
	}
}

// TestRecomputeNotOnFastLink: where the link hides every copy (slowProfile), swapping is free
// and auto recomputes nothing.
func TestRecomputeNotOnFastLink(t *testing.T) {
	const n = 8
	act := int64(512 * 1024 * 4)
	peak := chainBase(t, planChain(n, "")).Compute().PeakBytes
	p, err := planWith(t, planChain(n, ""), slowProfile(), "auto", "auto", peak-3*act)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Recomputes) != 0 {
		t.Errorf("recomputed %v although swaps hide behind compute", recomputedNames(p))
	}
}

// TestRecomputeModes: the papers' strategies recompute only with "max"; "max" recomputes
// every candidate; an unknown mode is an error.
func TestRecomputeModes(t *testing.T) {
	const n = 8
	act := int64(512 * 1024 * 4)
	prof := slowLinkProfile()
	peak := chainBase(t, planChain(n, "")).Compute().PeakBytes
	budget := peak - 3*act
	p, err := planWith(t, planChain(n, ""), prof, "window", "auto", budget)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Recomputes) != 0 {
		t.Errorf("window recomputed %v with --recompute auto", recomputedNames(p))
	}
	p, err = planWith(t, planChain(n, ""), prof, "window", "max", peak)
	if err != nil {
		t.Fatal(err)
	}
	// f2..f7 are targets (f8 is read right after it is made, f1's input is not kept);
	// chains make a recomputed predecessor again (some targets served by a neighbour's chain),
	// so all six are recomputed.
	served := len(p.Recomputes)
	for _, rc := range p.Recomputes {
		served += len(rc.Also)
		if len(rc.Ops) > recomputeDepth {
			t.Errorf("%s recomputed by %d ops, more than %d", rc.Tensor, len(rc.Ops), recomputeDepth)
		}
	}
	if served < n-2 {
		t.Errorf("max recomputed %d tensors (%v), want at least %d", served, recomputedNames(p), n-2)
	}
	if _, err := planWith(t, planChain(n, ""), prof, "auto", "sometimes", budget); err == nil || !strings.Contains(err.Error(), "recompute") {
		t.Errorf("unknown mode: %v", err)
	}
	var nf *NoFitError
	if _, err := planWith(t, planChain(n, ""), prof, "auto", "auto", act); !errors.As(err, &nf) {
		t.Errorf("an impossible budget: %v, want a NoFitError", err)
	} else if nf.Unswapped != peak {
		t.Errorf("no-fit reports the unswapped peak %d, want %d", nf.Unswapped, peak)
	}
}

// TestRecomputeServedByChain: when a chain makes another recomputed tensor before that
// tensor's later reads, they read the chain's copy; Verify accepts the result, and a copy
// whose input is redirected elsewhere is refused.
func TestRecomputeServedByChain(t *testing.T) {
	const n = 8
	prof := slowLinkProfile()
	p, err := planWith(t, planChain(n, ""), prof, "window", "max", chainBase(t, planChain(n, "")).Compute().PeakBytes)
	if err != nil {
		t.Fatal(err)
	}
	also := 0
	for _, rc := range p.Recomputes {
		for _, x := range rc.Also {
			also++
			var i int
			fmt.Sscanf(x.Tensor, "f%d:0", &i)
			if strings.Join(x.Consumers, ",") != fmt.Sprintf("g%d", i) {
				t.Errorf("%s served to %v, want g%d", x.Tensor, x.Consumers, i)
			}
		}
	}
	if also == 0 {
		t.Error("no chain serves another recomputed tensor")
	}
	g, _ := graphdef.NewGraph(planChain(n, ""), "chain")
	if err := rewrite.Verify(g, p.Result, rewrite.GateHost); err != nil {
		t.Fatal(err)
	}
	// Break it: make the first copy read a different tensor.
	rc := p.Recomputes[0]
	for _, nd := range p.Model.Graph.Node {
		if nd.Name == rc.Copies[0] {
			nd.Input[0] = "x"
			if nd.Name == "tfswap/f2_0/recompute/f2" {
				nd.Input[0] = "f3"
			}
		}
	}
	if err := rewrite.Verify(g, p.Result, rewrite.GateHost); err == nil {
		t.Error("Verify accepted a copy that reads another tensor")
	}
}

// TestRecomputeSingleChains: with chains limited to one large output (rcPlanner.single, the
// retry auto makes when Grappler's accounting, which forwards no buffer, is what keeps a
// faster plan from fitting), every chain on the Relu chain f1..f8 re-runs one op, where the
// unlimited planner, recomputing everything, re-makes consecutive activations in one chain.
func TestRecomputeSingleChains(t *testing.T) {
	g, err := graphdef.NewGraph(planChain(8, ""), "chain")
	if err != nil {
		t.Fatal(err)
	}
	m := graphdef.NewModel(planChain(8, ""))
	m.Source = "chain"
	opts, err := rewrite.Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	pr, err := newProblem(m, rewrite.Analyze(g, opts), PlanOptions{Profile: slowLinkProfile(), Budget: 1 << 20, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	longest := func(single bool) (n, most int) {
		for _, rc := range pr.newRCPlanner(single).plan(-1) {
			n++
			most = max(most, len(rc.Chain))
		}
		return n, most
	}
	if n, most := longest(false); n == 0 || most < 2 {
		t.Errorf("unlimited: %d chains, the longest of %d ops; want one of at least 2", n, most)
	}
	if n, most := longest(true); n == 0 || most != 1 {
		t.Errorf("single: %d chains, the longest of %d ops; want chains of one op", n, most)
	}
}

// TestRecomputeTargetsUnderConsumerRules: the rules that keep some reads of a tensor on the
// original (ConsumerExclusion) do not make its recomputation impossible where a recomputed
// copy keeps the original graph's meaning. On a chain f1..f8 whose backward reads f_i after
// the peak: f3's late Shape reader keeps reading the original and does not stop f3 being a
// target (it lost BERT-base its recomputations, docs/BENCHMARKS.md); f5's only product
// reader, a Mul in the terms of a sum, reads the copy with its other reads, so Grappler finds
// the same common factors; f6, read by such a Mul late and early by another product in the
// terms of a sum, stays no target (Grappler would see the factor by two names); f7, read late by a sum of three terms that a
// tfswap name would reorder, stays no target too.
func TestRecomputeTargetsUnderConsumerRules(t *testing.T) {
	const n = 8
	b := newBuilder()
	b.op("x", "Placeholder", "", big)
	b.op("c", "Placeholder", "", big)
	prev := "x"
	for i := 1; i <= n; i++ {
		prev = b.op(fmt.Sprintf("f%d", i), "Relu", "", big, prev).Name
	}
	b.op("early6", "Mul", "", big, "f6", "c")
	b.op("early6_read", "AddV2", "", big, "early6", "c")
	grad := b.op("loss_grad", "Relu", "", big, prev, "^early6_read").Name
	sinks := []string{}
	for i := n; i >= 1; i-- {
		gi := fmt.Sprintf("g%d", i)
		switch i {
		case 5, 6:
			b.op(gi+"_mul", "Mul", "", big, grad, fmt.Sprintf("f%d", i))
			b.op(gi+"_other", "ReluGrad", "", big, grad, fmt.Sprintf("f%d", i))
			grad = b.op(gi, "AddV2", "", big, gi+"_mul", gi+"_other").Name
		case 7:
			b.op(gi+"_a", "ReluGrad", "", big, grad, "f8")
			grad = b.op(gi, "AddN", "", big, gi+"_a", grad, "f7").Name
		default:
			grad = b.op(gi, "ReluGrad", "", big, grad, fmt.Sprintf("f%d", i)).Name
		}
		if i == 4 {
			// A shape reader of f3 that runs after the peak (it waits for g4).
			sinks = append(sinks, "^"+b.op("shape3", "Shape", "", []int64{2}, "f3", "^g4").Name)
		}
	}
	b.op("train", "NoOp", "", nil, append([]string{"^" + grad}, sinks...)...)
	gr, err := graphdef.NewGraph(b.g, "chain")
	if err != nil {
		t.Fatal(err)
	}
	m := graphdef.NewModel(b.g)
	m.Source = "chain"
	pr, err := newProblem(m, rewrite.Analyze(gr, rewrite.Options{}), PlanOptions{Profile: slowLinkProfile(), Budget: 1 << 20, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	if s := pr.timing.times.Start[gr.Node("shape3").Index]; s < pr.Base.Devices[0].PeakTime {
		t.Fatalf("shape3 starts at %d, before the peak at %d: the test needs a late shape reader", s, pr.Base.Devices[0].PeakTime)
	}
	got := map[string][]string{}
	for _, rt := range pr.recomputeTargets() {
		var readers []string
		for _, u := range rt.far {
			readers = append(readers, u.Node.Name)
		}
		sort.Strings(readers)
		got[rt.t.String()] = readers
	}
	t.Logf("targets: %v", got)
	want := map[string]string{"f3:0": "g3", "f5:0": "g5_mul,g5_other"}
	for tensor, readers := range want {
		if r, ok := got[tensor]; !ok || strings.Join(r, ",") != readers {
			t.Errorf("target %s read by %v (target: %v), want read by %s", tensor, r, ok, readers)
		}
	}
	for _, tensor := range []string{"f6:0", "f7:0"} {
		if r, ok := got[tensor]; ok {
			t.Errorf("%s is a target (its copy read by %v): a Grappler rule needs its reads on one name", tensor, r)
		}
	}
}

// TestRecomputeForValueDeadReader checks that a tensor whose only later read is by a
// value-dead node (the GPT's raw attention scores, read in the backward pass by the gradient
// of their scale constant, which Grappler drops) can be recomputed for that reader: without
// it the scores stay on the GPU from the forward to the backward pass in tfswap's simulator
// and the VirtualCluster, and a 1.5-billion-parameter GPT does not fit a 16 GB V100 with its
// variables offloaded (issue 15). Live product readers keep their rules (rewrite.RecomputeExclusion).
func TestRecomputeForValueDeadReader(t *testing.T) {
	m, err := graphdef.Load(filepath.Join("..", "..", "testmodels", "fixtures", "large", "gpt-tiny.pb"), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, rewrite.Options{})
	scores, dead := g.Node("layer_0/attention/MatMul"), g.Node("gradients/layer_0/attention/mul_grad/Mul_1")
	softmax := g.Node("layer_0/attention/Softmax")
	if scores == nil || dead == nil || softmax == nil {
		t.Fatal("gpt-tiny has no layer_0 attention scores, their scale's gradient or Softmax")
	}
	if !a.ValueDead[dead.Index] {
		t.Fatalf("%s is not value-dead: the test needs the gradient of the scale constant", dead.Name)
	}
	for _, uses := range scores.Consumers {
		for _, u := range uses {
			if got, want := a.DeadCopyRead(u), u.Node == dead; got != want {
				t.Errorf("deadCopyRead(%s reads %s) = %v, want %v", u.Node.Name, scores.Name, got, want)
			}
		}
	}
	// The Softmax's live product reader keeps the original (Grappler's constant push-down).
	for _, uses := range softmax.Consumers {
		for _, u := range uses {
			if u.Node.Name == "gradients/layer_0/attention/Softmax_grad/mul_1" && (a.DeadCopyRead(u) || rewrite.RecomputeExclusion(u) == "") {
				t.Errorf("%s may read a copy of %s: Grappler pushes the scale constant down through it", u.Node.Name, softmax.Name)
			}
		}
	}
	// On a chain f1..f8 whose backward reads f_i after the peak, f3 is read late only by a
	// value-dead product (the unused half of a gradient tuple): its copy is made for it.
	gr, cm := deadReaderChain(t)
	ca := rewrite.Analyze(gr, rewrite.Options{})
	if !ca.ValueDead[gr.Node("d3").Index] {
		t.Fatal("d3 is not value-dead: the test needs the unused half of a gradient tuple")
	}
	pr, err := newProblem(cm, ca, PlanOptions{Profile: slowLinkProfile(), Budget: 1 << 20, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	if s := pr.timing.times.Start[gr.Node("d3").Index]; s < pr.Base.Devices[0].PeakTime {
		t.Fatalf("d3 starts at %d, before the peak at %d: the test needs a late dead reader", s, pr.Base.Devices[0].PeakTime)
	}
	found := false
	for _, rt := range pr.recomputeTargets() {
		if rt.t.Node.Name != "f3" {
			continue
		}
		found = true
		if len(rt.far) != 1 || rt.far[0].Node.Name != "d3" {
			t.Errorf("f3's copy read by %v, want only d3", rt.far)
		}
	}
	if !found {
		t.Error("f3 is no recomputation target: its value-dead reader keeps it on the GPU")
	}
}

// TestBufferEndsAtLastLiveReader: with the step's fetch known, a reader whose value nothing
// reads (d3, the unused half of a gradient tuple, which Grappler's dependency optimizer turns
// into a NoOp) is no read of the planner's buffer, so f3's buffer ends after f4, its last
// live reader, instead of in the backward pass; without a fetch (Grappler converts nothing)
// d3 still reads it. It fails with the planner counting every reader.
func TestBufferEndsAtLastLiveReader(t *testing.T) {
	gr, cm := deadReaderChain(t)
	// The step fetches g1 (as a stateful update reading it would); train alone would leave
	// every node's value unread.
	for _, fetch := range [][]string{{"train", "g1"}, nil} {
		pr, err := newProblem(cm, rewrite.Analyze(gr, rewrite.Options{}), PlanOptions{Profile: slowLinkProfile(), Budget: 1 << 20, FitAccounting: "tfswap", Sim: cost.Options{Fetch: fetch}})
		if err != nil {
			t.Fatal(err)
		}
		buf := pr.bufOf[graphdef.Tensor{Node: gr.Node("f3")}]
		if buf == nil {
			t.Fatalf("fetch %v: f3 has no buffer", fetch)
		}
		var readers []string
		for _, x := range buf.accesses {
			readers = append(readers, x.u.Node.Name)
		}
		want, end := []string{"f4"}, pr.timing.times.End[gr.Node("f4").Index]
		if fetch == nil {
			want, end = []string{"f4", "d3"}, pr.timing.times.End[gr.Node("d3").Index]
		}
		if !slices.Equal(readers, want) || buf.lastEnd != end {
			t.Errorf("fetch %v: f3 read by %v until %d, want %v until %d", fetch, readers, buf.lastEnd, want, end)
		}
	}
}

// TestValueDeadFollowsGrapplersNoOps checks that the analysis's value-dead nodes agree with
// the simulator's pruned set (cost.PrunedNodes) once the fetch is known. side, a Mul of a
// late gradient and f2 whose only out-edge is a control edge into the step's NoOp, is not
// value-dead by the fetch-free rule (it has no data reader, and a node nothing reads may be
// fetched) but Grappler's dependency optimizer turns it into a NoOp when train and g1 are
// fetched,
// and the simulator prunes it: before Options.Fetch, the analysis let it read a swap-in of
// f2, which would run (swap nodes are kept) for a reader that reads nothing. With the fetch,
// every node the simulator prunes is value-dead, side is not an eligible consumer nor
// trigger, and LMS gives it no swap-in.
func TestValueDeadFollowsGrapplersNoOps(t *testing.T) {
	const n = 8
	b := newBuilder()
	b.op("x", "Placeholder", "", big)
	grad := b.reluForward(n)
	for i := n; i >= 1; i-- {
		grad = b.op(fmt.Sprintf("g%d", i), "ReluGrad", "", big, grad, fmt.Sprintf("f%d", i)).Name
		if i == 3 {
			b.op("side", "Mul", "", big, grad, "f2")
		}
	}
	b.op("train", "NoOp", "", nil, "^"+grad, "^side")
	g, err := graphdef.NewGraph(b.g, "side")
	if err != nil {
		t.Fatal(err)
	}
	side := g.Node("side")
	use := graphdef.Use{Node: side, Input: 1}
	// The step fetches g1 (as a stateful update reading it would); train alone would leave
	// every node's value unread.
	fetch := []string{"train", "g1"}
	pruned, err := cost.PrunedNodes(g, fetch)
	if err != nil {
		t.Fatal(err)
	}
	if pruned == nil || !pruned[side.Index] {
		t.Fatal("the simulator does not prune side: the case is not exercised")
	}
	opts, err := rewrite.Options{MinTensorBytes: -1}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if a := rewrite.Analyze(g, opts); a.ValueDead[side.Index] || !a.ConsumerEligible(use) {
		t.Fatal("without a fetch side is value-dead already: the fetch-free rule changed, revisit this test")
	}
	opts.Fetch = fetch
	a := rewrite.Analyze(g, opts)
	for i, p := range pruned {
		if p && !a.ValueDead[i] {
			t.Errorf("%s is pruned by the simulator but not value-dead for the analysis", g.Nodes[i].Name)
		}
	}
	if a.ConsumerEligible(use) || a.TriggerEligible(side) {
		t.Error("side, run as a NoOp, may still read a swap-in or trigger one")
	}
	m := graphdef.NewModel(b.g)
	m.Source = "side"
	res, err := Rewrite(m, rewrite.Options{MinTensorBytes: -1, Fetch: fetch})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Swaps) == 0 {
		t.Fatalf("LMS swapped nothing: the test checks nothing (%+v)", res.Skipped)
	}
	for _, s := range res.Swaps {
		for _, in := range s.SwapIns {
			for _, c := range in.Consumers {
				if c == "side" {
					t.Errorf("swap-in %s of %s feeds side, a NoOp in the step", in.Node, s.Tensor)
				}
			}
		}
	}
}

// deadReaderChain builds a chain f1..f8 of Relus and its backward half, in which f3 is read in
// the backward pass only by d3, a product whose value nothing reads (the unused half of a
// gradient tuple: d3_tuple waits for it through deps3), and returns its graph and model.
func deadReaderChain(t *testing.T) (*graphdef.Graph, *graphdef.Model) {
	t.Helper()
	const n = 8
	b := newBuilder()
	b.op("x", "Placeholder", "", big)
	grad := b.reluForward(n)
	for i := n; i >= 1; i-- {
		gi := fmt.Sprintf("g%d", i)
		if i == 3 {
			b.op("d3", "Mul", "", big, grad, "f3")
			b.op("deps3", "NoOp", "", nil, "^d3", "^"+grad)
			b.op("d3_tuple", "Identity", "", big, "d3", "^deps3")
			grad = b.op(gi, "Relu", "", big, grad, "^deps3").Name
			continue
		}
		grad = b.op(gi, "ReluGrad", "", big, grad, fmt.Sprintf("f%d", i)).Name
	}
	b.op("train", "NoOp", "", nil, "^"+grad)
	gr, err := graphdef.NewGraph(b.g, "chain")
	if err != nil {
		t.Fatal(err)
	}
	cm := graphdef.NewModel(b.g)
	cm.Source = "chain"
	return gr, cm
}
