package plan

import (
	"strconv"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/rewrite"
)

// TestPeakFloorBelowPeak: the lower bounds on a plan's peak and step (peakFloor, stepFloor)
// are never above the peak the simulator finds for that plan's graph by tfswap's accounting,
// on the pivot's device, and its step time.
// Every strategy plans each fixture and a synthetic residual graph at 70% of the unswapped
// peak (with the floor's skip off, so that every plan is simulated), and every plan they
// evaluated is checked, as are vDNN's two static plans with and without their waits. It
// fails if the floor counts a buffer a plan frees (a swapped root) or one the simulator
// does not hold across the pivot, or a copy that need not precede or follow the pivot, and
// unless the floor is above the budget for some plan and some graph and the step floor at
// least half the step for some plan (else the skips they allow would be tested by nothing).
func TestPeakFloorBelowPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every strategy on five graphs")
	}
	defer func(v bool) { skipFloorBeaten = v }(skipFloorBeaten)
	skipFloorBeaten = false
	graphs, v100 := fixturesAndSynth400(t)
	// The same device with a host link 50 times slower: the copies dominate the step, so a
	// copy counted that overlaps another shows.
	slow := *v100
	slow.Name += "-slowlink"
	slow.D2H, slow.H2D = v100.D2H/50, v100.H2D/50
	checked, over, floors, steps, tight := 0, 0, 0, 0, 0
	var cases []struct {
		gr      namedModel
		profile *cost.Profile
	}
	for _, gr := range graphs {
		for _, p := range []*cost.Profile{v100, &slow} {
			cases = append(cases, struct {
				gr      namedModel
				profile *cost.Profile
			}{gr, p})
		}
	}
	for _, c := range cases {
		gr := c.gr
		a, po := atSeventyPercent(t, gr, PlanOptions{Profile: c.profile})
		pr, err := newProblem(gr.m, a, po)
		if err != nil {
			t.Fatal(err)
		}
		f := pr.peakFloorOf()
		if f == nil {
			t.Logf("%s: no floor", gr.name)
			continue
		}
		if f.total > 0 {
			floors++
		}
		check := func(what string, ev *Evaluation) {
			t.Helper()
			if ev.unjudged && ev.Result == nil {
				return
			}
			if st := f.stepFloor(pr, ev.Plan); st > 0 {
				steps++
				if st > ev.StepTime {
					t.Errorf("%s: %s: step floor %d above the simulated step %d (%d swaps)", gr.name, what, st, ev.StepTime, len(ev.Plan.Swaps))
				}
				if 100*st >= 50*ev.StepTime {
					tight++
				}
			}
			b := f.bytes(ev.Plan)
			for _, d := range ev.Devices {
				if d.SimulatedIndex != f.dev {
					continue
				}
				checked++
				if b > d.Peak {
					t.Errorf("%s: %s: floor %d above the simulated peak %d (%d swaps)", gr.name, what, b, d.Peak, len(ev.Plan.Swaps))
				}
				if b > f.budget {
					over++
				}
			}
		}
		for _, s := range Strategies() {
			r := pr.newRun(s.Name)
			if _, err := s.plan(r); err != nil {
				t.Fatalf("%s/%s: %v", gr.name, s.Name, err)
			}
			for key, ev := range r.cache {
				check(s.Name+" plan "+key[:min(len(key), 40)], ev)
			}
		}
		r := pr.newRun("vdnn")
		var plans []*rewrite.Plan
		for _, conv := range []bool{false, true} {
			p, _ := r.buildPlan(r.vdnnChoices(conv), layerRule(convAny))
			plans = append(plans, p, r.vdnnSync(p))
		}
		// Plans that break the floors' premises: every gap of every tensor swapped
		// (backward tensors too), waited for as vDNN waits, and the same with every swap-in
		// triggered by its tensor's producer (copied back while the step still runs ahead).
		low := r.lowestMemoryPlan()
		early := earlyTriggers(r.vdnnSync(low))
		plans = append(plans, low, r.vdnnSync(low), early)
		// And only the tensors made after the pivot: their copies out and back overlap.
		late := &rewrite.Plan{}
		for _, ps := range early.Swaps {
			if f.desc[ps.Tensor.Node.Index] {
				late.Swaps = append(late.Swaps, ps)
			}
		}
		for _, ps := range late.Swaps {
			// Each waited for by its first reader, after the pivot too.
			late.Waits = append(late.Waits, rewrite.Wait{Node: ps.Groups[0].Uses[0].Node, After: ps.Tensor})
		}
		plans = append(plans, late)
		for i, plan := range plans {
			ev, err := r.Evaluate(plan)
			if err != nil {
				t.Fatal(err)
			}
			check("static plan "+strconv.Itoa(i), ev)
		}
	}
	if checked == 0 || floors == 0 {
		t.Fatalf("checked %d plans against %d floors above zero: the test checks nothing", checked, floors)
	}
	if over == 0 {
		t.Fatalf("no plan of the %d checked has a floor above the budget: the skip it allows is not tested", checked)
	}
	if tight == 0 {
		t.Fatalf("no plan of the %d with a step floor (of %d checked) has one above half its step: the step floor is not tested", steps, checked)
	}
	t.Logf("%d plans checked, %d with the floor above the budget, %d with a step floor, %d of them at least half the step", checked, over, steps, tight)
}

// TestFloorSkipSamePlan: on a graph past auto's effort bound, a vDNN plan whose peak's lower
// bound (peakFloor) is over the budget, or whose step's (stepFloor) is longer than window's
// fitting plan's, is not simulated (floorBeaten). On a synthetic residual graph planned with the bound below its candidates,
// at budgets where that happens, the rewrite keeps the same plan by the same strategy with
// the same figures as with the skip turned off, in fewer simulations (so the skip fired).
func TestFloorSkipSamePlan(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a synthetic graph at several budgets, twice each")
	}
	skipKeepsPlan(t, 1000, []int64{80, 60, 50, 40, 30}, &skipFloorBeaten)
}

// earlyTriggers returns plan with each swap-in triggered by its tensor's producer.
func earlyTriggers(plan *rewrite.Plan) *rewrite.Plan {
	out := &rewrite.Plan{Waits: plan.Waits, Accumulators: plan.Accumulators}
	for _, ps := range plan.Swaps {
		q := ps
		q.Groups = append([]rewrite.SwapInGroup(nil), ps.Groups...)
		for i := range q.Groups {
			q.Groups[i].Trigger = ps.Tensor.Node
			q.Groups[i].TriggerWaits = false
		}
		out.Swaps = append(out.Swaps, q)
	}
	return out
}
