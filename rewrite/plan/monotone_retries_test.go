package plan

import (
	"compress/gzip"
	"github.com/tfswap/tfswap/rewrite"
	"io"
	"os"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// loadResNet50B2 loads testdata/resnet50_b2.pb.gz (ResNet-50 at batch 2, from
// testmodels/large.py).
func loadResNet50B2(t *testing.T) *graphdef.Model {
	t.Helper()
	return loadGzipped(t, "resnet50_b2.pb")
}

// loadGzipped loads the binary GraphDef testdata/NAME.gz.
func loadGzipped(t *testing.T, name string) *graphdef.Model {
	t.Helper()
	f, err := os.Open("testdata/" + name + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := graphdef.Parse(data, graphdef.FormatPB, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAutoMonotoneRecomputeRetries is TestAutoMonotoneRecompute on a graph that still needs
// the recomputed retries (issue 14 item 3): ResNet-50 at batch 100 (batch 2 planned 50
// times larger) on gtx1080ti, the sweep of bench/monotone.py at 50% and 40% of the unswapped
// peak (docs/bench/monotone.json). Without planning the tighter budgets with recomputations
// (TighterRecompute) auto's plan at 50% was slower (+13.4%, simulated when this test was
// written) than its plan at 40% (+12.7%), which fits 50% too; with them it is faster
// (+10.4%). Since auto runs every strategy again on a recomputed graph where the best plan
// that fits costs more than +50% (rerunStrategies), the plan at 50% without the retries is
// +11.6%: no longer slower than the one at 40%, still slower than with the retries. The test
// fails when the retries are off, and when they no longer change the plan at 50% (it would
// then no longer test them).
func TestAutoMonotoneRecomputeRetries(t *testing.T) {
	if testing.Short() {
		t.Skip("plans ResNet-50 at batch 100 three times (about 30 s)")
	}
	m := loadResNet50B2(t)
	prof, err := cost.LookupProfile("gtx1080ti")
	if err != nil {
		t.Fatal(err)
	}
	const loose, tight = 4337705704, 3470164563
	popts := PlanOptions{Profile: prof, Sim: cost.Options{Fetch: []string{"train"}, BatchScale: 50}}
	if !checkTighterRecomputeRetries(t, m, popts, loose, tight) {
		t.Error("the retries stopped mattering: the test no longer exercises them")
	}
}

// checkTighterRecomputeRetries plans m with auto at the budgets tight and loose (loose >
// tight) and checks the monotonicity that the recomputed retries (TighterRecompute) give:
// the plan at tight recomputes, the plan at loose fits loose and is no slower than the one
// at tight. It then plans loose again without the retries and returns whether that plan is
// slower than the one with them, that is whether the case exercises the retries.
func checkTighterRecomputeRetries(t *testing.T, m *graphdef.Model, popts PlanOptions, loose, tight int64) bool {
	t.Helper()
	plan := func(budget int64) *Planned {
		o := popts
		o.Budget = budget
		res, err := RewriteWithPlanner(m, rewrite.Options{}, o)
		if err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		return res
	}
	rt, rl := plan(tight), plan(loose)
	if len(rt.Recomputes) == 0 {
		t.Fatalf("the plan at the tighter budget recomputes nothing (%s): the test needs a recomputed plan there", rt.Eval.Strategy)
	}
	if rl.Eval.StepTime > rt.Eval.StepTime {
		t.Errorf("auto at %d bytes: step %d (%s), slower than at the tighter %d bytes: %d (%s)",
			loose, rl.Eval.StepTime, rl.Eval.Strategy, tight, rt.Eval.StepTime, rt.Eval.Strategy)
	}
	if !rl.Eval.Fits || rl.Eval.Devices[0].Peak > loose {
		t.Errorf("auto's plan at %d bytes does not fit it: %+v", loose, rl.Eval.Devices)
	}
	TighterRecompute = false
	defer func() { TighterRecompute = true }()
	r := plan(loose)
	if r.Eval.StepTime <= rl.Eval.StepTime {
		t.Logf("without recomputed retries auto at %d bytes is as fast as with them (%d, %d): the case does not exercise them",
			loose, r.Eval.StepTime, rl.Eval.StepTime)
		return false
	}
	return true
}
