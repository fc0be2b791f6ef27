package tfswap

import (
	"fmt"
	"testing"

	"github.com/tfswap/tfswap/rewrite/plan"
)

// TestPruneHalvesKeepsTheExamplesPlan plans the session Example's problem (the residual
// fixture on /device:CPU:1 for 6 MiB, fetching train) with and without plan.PruneHalves. There
// the simulator rejects a half the fast model said fits; that rejected half must cost
// improve's pruning no try, or the pruning ends early and the plan is slower (5 swaps at
// +0.67% instead of 6 at +0.00%, simulated, when it counted). So both plans must be the same,
// and the simulation counts must differ, which shows that a half was judged.
func TestPruneHalvesKeepsTheExamplesPlan(t *testing.T) {
	planned := func(halves bool) *Result {
		t.Helper()
		defer func(v bool) { plan.PruneHalves = v }(plan.PruneHalves)
		plan.PruneHalves = halves
		placed, err := load(t, "resnet").Place("/device:CPU:1")
		if err != nil {
			t.Fatal(err)
		}
		res, err := Plan(placed, Options{Budget: 6 << 20, Fetch: []string{"train"}, ComputeDevice: "/device:CPU:1"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	one, half := planned(false), planned(true)
	summary := func(r *Result) string {
		s := fmt.Sprintf("step %v, peak %d, %d swaps:", r.Report.Prediction.StepTime, r.Report.Prediction.Devices[0].Peak, len(r.Report.Swaps))
		for _, sw := range r.Report.Swaps {
			s += " " + sw.Tensor
			for _, in := range sw.SwapIns {
				s += " (" + in.Trigger + ")"
			}
		}
		return s
	}
	if a, b := summary(one), summary(half); a != b {
		t.Errorf("the plan with halves differs from the plan without:\nwithout: %s\nwith:    %s", a, b)
	}
	if one.Report.Prediction.Simulations == half.Report.Prediction.Simulations {
		t.Errorf("%d simulations with and without halves; want a half judged (the test's premise)", one.Report.Prediction.Simulations)
	}
	t.Logf("simulations: %d without halves, %d with", one.Report.Prediction.Simulations, half.Report.Prediction.Simulations)
}
