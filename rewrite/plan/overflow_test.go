package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestPlanningRefusesOverflowingBatchScale: planning at a batch scale whose sizes int64
// cannot count fails naming the tensor, instead of panicking (10000000000) or planning with
// wrapped-around sizes (2^62) (issue 11, item 5).
func TestPlanningRefusesOverflowingBatchScale(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, scale := range []int{10000000000, 1 << 62} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("batch scale %d: panic %v", scale, r)
				}
			}()
			_, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Sim: cost.Options{BatchScale: scale}})
			if err == nil || !strings.Contains(err.Error(), "tensor ") || !strings.Contains(err.Error(), "1 PiB") {
				t.Errorf("batch scale %d: %v", scale, err)
			}
		}()
	}
}
