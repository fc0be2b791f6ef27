//go:build tensorflow

package tfrun

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestGradientSwapInRuntime: a backward-phase tensor swapped out as soon as it is made (issue
// 14 item 5): the residual-network fixture's block4 shortcut gradient,
// gradients/block4/shortcut/conv/Conv2D_grad/Conv2DBackpropInput:0, waits for the main
// branch's gradient to be summed with it (gradients/AddN). Every read of it takes the
// swapped-in copy, and the swap-in's trigger is the main branch's Conv2DBackpropInput, an op
// that does not descend from the producer and so waits for the swap-out
// (SwapInGroup.TriggerWaits). In the two-device emulation the rewrite must pass Verify, train
// bit-identically to the original, keep its swap nodes through Grappler, release the copy only
// after the gate, and run the trigger only after the swap-out has finished.
func TestGradientSwapInRuntime(t *testing.T) {
	fx, placed := placedFixture(t, "resnet")
	opts := rewrite.Options{ComputeDevice: computeDevice, HostDevice: hostDevice}
	g, err := graphdef.NewGraph(placed.Graph, placed.Source)
	if err != nil {
		t.Fatal(err)
	}
	prod := g.Node("gradients/block4/shortcut/conv/Conv2D_grad/Conv2DBackpropInput")
	trig := g.Node("gradients/block4/a/conv/Conv2D_grad/Conv2DBackpropInput")
	if prod == nil || trig == nil {
		t.Fatal("the fixture lacks block4's shortcut or main-branch gradient")
	}
	if g.Descendants(prod)[trig.Index] {
		t.Fatalf("%s descends from %s: not a sibling trigger", trig.Name, prod.Name)
	}
	tensor := graphdef.Tensor{Node: prod, Port: 0}
	var uses []graphdef.Use
	for _, u := range tensor.Consumers() {
		uses = append(uses, u)
	}
	if len(uses) == 0 {
		t.Fatal("the shortcut gradient has no readers")
	}
	a := rewrite.Analyze(g, opts)
	bytes, _, _ := tensor.Bytes()
	plan := &rewrite.Plan{Swaps: []rewrite.PlannedSwap{{Tensor: tensor, Bytes: bytes,
		Groups: []rewrite.SwapInGroup{{Uses: uses, Trigger: trig, TriggerWaits: true}}}}}
	res, err := rewrite.Apply(placed, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := rewrite.Verify(g, res, opts.Gate); err != nil {
		t.Fatalf("rewrite.Verify: %v", err)
	}
	// Without the wait, the same trigger is refused: nothing would order it after the swap-out.
	plan.Swaps[0].Groups[0].TriggerWaits = false
	if bad, err := rewrite.Apply(placed, a, plan); err != nil {
		t.Fatal(err)
	} else if err := rewrite.Verify(g, bad, opts.Gate); err == nil {
		t.Error("Verify accepts a sibling trigger that does not wait for the swap-out")
	}
	if len(res.Swaps) != 1 || len(res.Waits) != 1 || res.Waits[0].Node != trig.Name || res.Waits[0].SwapOut != res.Swaps[0].SwapOut {
		t.Fatalf("swaps %+v, waits %+v: want one swap whose trigger %s waits for its swap-out", res.Swaps, res.Waits, trig.Name)
	}

	checkTrainsLike(t, placed, res.Model, fx, 5)

	cfg := TwoDeviceConfigBytes()
	probed, probes, err := AddProbes(res.Model, swapsOf(res), computeDevice)
	if err != nil {
		t.Fatal(err)
	}
	targets := ProbeNames(probes)
	tr, err := TraceStep(marshalModel(t, probed), fx, cfg, 2, targets...)
	if err != nil {
		t.Fatal(err)
	}
	run := FixtureRun(probed.Graph, fx, targets...)
	problems, _ := CheckSwapPartitions(tr, swapsOf(res), run)
	for _, p := range problems {
		t.Error(p)
	}
	vs, _, err := CheckSwapOrder(tr, swapsOf(res), probes, computeDevice, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Gating() {
			t.Error(v)
		}
	}
	w := res.Waits[0]
	ws, so := tr.TimingsOf(w.Node), tr.TimingsOf(w.SwapOut)
	if len(ws) != 1 || len(so) != 1 {
		t.Fatalf("trigger %s and swap-out %s: %d and %d timings in the trace, want 1 each", w.Node, w.SwapOut, len(ws), len(so))
	}
	if ws[0].Start < so[0].OpEnd {
		t.Errorf("trigger %s started at %d, before the swap-out %s finished at %d", w.Node, ws[0].Start, w.SwapOut, so[0].OpEnd)
	}
}
