package plan

import "testing"

// TestWithBudgetsMargin: a plan judged at a tighter budget (900) under the legacy "both"
// accounting carries its Grappler margin for that budget (20 thousandths: 18). Judged at the
// budget asked for (1000) by withBudgets, the margin is that budget's (20): a nanosecond peak
// of 981 is then over (981 + 20 > 1000), where the tighter budget's margin would let it fit.
func TestWithBudgetsMargin(t *testing.T) {
	fit := fitSet{tfswap: true, ns: true, legacy: true}
	ev := &Evaluation{Fits: false, Devices: []DevicePeak{{simName: "/device:GPU:0", fit: fit, Budget: 900, Peak: 800,
		GrapplerPeak: 981, GrapplerMargin: 18}}}
	e := withBudgets(ev, &Problem{Opts: PlanOptions{Budget: 1000}})
	d := e.Devices[0]
	if d.Budget != 1000 || d.GrapplerMargin != 20 || e.Fits || e.Excess != 1 {
		t.Errorf("judged at 1000: budget %d, margin %d, fits %v, excess %d; want 1000, 20, false, 1", d.Budget, d.GrapplerMargin, e.Fits, e.Excess)
	}
	if ev.Devices[0].Budget != 900 || ev.Devices[0].GrapplerMargin != 18 {
		t.Errorf("the evaluation judged was changed: %+v", ev.Devices[0])
	}
}
