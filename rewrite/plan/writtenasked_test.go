package plan

import (
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestAutoMonotoneWrittenAsked: where the written bypass may win at a tighter budget only,
// it is tried at the budget asked for too (issue 14 item 3). The ResNet fixture on v100-16gb,
// by every accounting: at 3100 KiB the written-bypass pass runs (+29.0%, simulated when this
// test was written); at 3136 KiB it does not, and the written bypass at 95% of that budget
// alone gave +32.7%. The test fails when the plan for the larger budget is slower than the one
// for the smaller, and when turning WrittenAsked off no longer makes it slower (the case would
// no longer test it).
func TestAutoMonotoneWrittenAsked(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prof, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	const tight, loose = 3100 << 10, 3136 << 10
	plan, pt, _ := planMonotonePair(t, m, rewrite.Options{MinTensorBytes: -1}, prof, tight, loose, &WrittenAsked, "+wbypass")
	if off := plan(loose, false); off.Eval.StepTime <= pt.Eval.StepTime {
		t.Errorf("without the written bypass at the budget asked for the plan at %d (%s %+.2f%%) is no slower than the one at %d: the test no longer exercises it", loose, off.Eval.Strategy, 100*off.Eval.Overhead, tight)
	}
}
