package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

func loadFixtureModel(t *testing.T, name string) *graphdef.Model {
	t.Helper()
	m, err := graphdef.Load("../../testmodels/fixtures/"+name+".pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPlanOffload plans the resnet fixture's training step with variables offloaded: "all"
// moves every group and the prediction's baseline is the original graph; "auto" moves
// nothing when the graph fits, and at a budget swapping alone cannot reach (no plan of
// "none" fits) it offloads and fits.
func TestPlanOffload(t *testing.T) {
	m := loadFixtureModel(t, "resnet")
	fetch := cost.Options{Fetch: []string{"train"}}
	all, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: 1 << 40, Offload: rewrite.OffloadAll, Sim: fetch})
	if err != nil {
		t.Fatal(err)
	}
	if all.Offload == nil || len(all.Offload.Variables) != 57 || all.Unchanged() {
		t.Fatalf("offload all: %+v", all.Offload)
	}
	if all.Base.Devices[0].Peak <= all.Eval.Devices[0].Peak {
		t.Errorf("offloading every variable did not lower the peak: %d, original %d", all.Eval.Devices[0].Peak, all.Base.Devices[0].Peak)
	}
	none, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: 1 << 40, Offload: rewrite.OffloadAuto, Sim: fetch})
	if err != nil {
		t.Fatal(err)
	}
	if none.Offload != nil || !none.Unchanged() {
		t.Errorf("auto offloaded a graph that fits: %+v", none.Offload)
	}
	// Since gradient tuple Identities read swap-ins (rewrite.tupleReader, RelayRole),
	// swapping alone fits 3150 KiB (it did not fit 3200 KiB before) and auto with offload
	// still fits 3100 KiB, not 3050 KiB. The tuple-bypass pass takes swapping alone down to
	// 2600 KiB (not 2450); with it auto with offload fits neither 2450 nor 2300 KiB (it fits
	// 2150 KiB, spaced), so the case plans without the pass: what it checks is the offload.
	// The written bypass (passWrittenBypass) fits 3100 KiB by swapping alone, so it is off
	// too.
	defer func(old, w bool) { TupleBypass, WrittenBypass = old, w }(TupleBypass, WrittenBypass)
	TupleBypass, WrittenBypass = false, false
	const tight = 3100 << 10
	if _, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: tight, Sim: fetch}); err == nil {
		t.Fatal("swapping alone fits 3100 KiB: the budget no longer tests the offload")
	}
	auto, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: tight, Offload: rewrite.OffloadAuto, Sim: fetch})
	if err != nil {
		t.Fatal(err)
	}
	if auto.Offload == nil || len(auto.Offload.Variables) == 0 || !auto.Eval.Fits {
		t.Fatalf("auto at 3100 KiB: offload %+v, fits %v", auto.Offload, auto.Eval.Fits)
	}
	t.Logf("auto: %d groups offloaded (%s), peak %d, step %d ns (original %d ns)", len(auto.Offload.Variables), auto.Offload.Variables[0].Reason,
		auto.Eval.Devices[0].Peak, auto.Eval.StepTime, auto.Base.StepTime)
}

// TestOffloadWindowBeatsBackwardSchedule plans gpt-tiny's training step with every variable
// offloaded at a 2 MiB budget on a V100 whose host-to-device link is 10 times slower: the
// copies scheduled backwards from their consumers (the only timed schedule before the byte
// windows) stall the step on copies that start too late; scheduled forwards under a byte
// window each copy starts as early as the window allows, and the simulated step is at least
// 5% shorter (1.80 ms against 1.93 ms when written). It fails when planOffloaded stops trying
// the window schedules.
func TestOffloadWindowBeatsBackwardSchedule(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/large/gpt-tiny.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prof, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	slow := *prof
	slow.H2D /= 10
	po := PlanOptions{Budget: 2 << 20, Offload: rewrite.OffloadAll, Profile: &slow, Sim: cost.Options{Fetch: []string{"train"}}}
	saved := copyWindowDivisors
	copyWindowDivisors = nil
	before, err := RewriteWithPlanner(m, rewrite.Options{}, po)
	copyWindowDivisors = saved
	if err != nil {
		t.Fatal(err)
	}
	after, err := RewriteWithPlanner(m, rewrite.Options{}, po)
	if err != nil {
		t.Fatal(err)
	}
	if after.Offload == nil || len(after.Offload.Copies) == 0 || !after.Eval.Fits {
		t.Fatalf("no fitting plan with copies: fits %v, offload %+v", after.Eval.Fits, after.Offload)
	}
	t.Logf("step %d ns with the window schedules (%s), %d ns backwards (in-core %d ns)", after.Eval.StepTime, after.Offload.Schedule, before.Eval.StepTime, after.Base.StepTime)
	if !strings.HasPrefix(after.Offload.Schedule, "forwards") || !strings.HasPrefix(before.Offload.Schedule, "backwards") {
		t.Errorf("schedules %q and %q, want forwards and backwards", after.Offload.Schedule, before.Offload.Schedule)
	}
	if after.Eval.StepTime >= before.Eval.StepTime*95/100 {
		t.Errorf("step %d ns with the window schedules, not 5%% below the backward schedule's %d ns", after.Eval.StepTime, before.Eval.StepTime)
	}
}
