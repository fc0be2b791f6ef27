package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestTupleBypassNeedsFetch: without a known fetch any tuple Identity may be what the step
// fetches, so the tuple-bypass pass does not run, even where Grappler's accountings bind
// (the ResNet fixture within 3 MiB by all three, as in TestTupleBypassPass): no plan fits
// (with the pass run, auto+bypass fitted, bypassing 66 Identities, when this was written).
func TestTupleBypassNeedsFetch(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: -1}, PlanOptions{Strategy: "auto", Budget: 3 << 20, FitAccounting: "all"})
	var nf *NoFitError
	if err != nil && !errors.As(err, &nf) {
		t.Fatal(err)
	}
	if err == nil && (len(p.Bypassed) != 0 || strings.Contains(p.Eval.Strategy, "bypass")) {
		t.Errorf("no fetch: plan from %s bypassed %d Identities, want none", p.Eval.Strategy, len(p.Bypassed))
	}
}
