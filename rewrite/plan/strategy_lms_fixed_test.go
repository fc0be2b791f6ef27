package plan

import (
	"bytes"
	"github.com/tfswap/tfswap/rewrite"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestFixedLMSIsRewrite: the lms-fixed strategy writes what Rewrite writes, byte for byte,
// whatever the budget, and predicts it by both accountings whether it fits or not.
func TestFixedLMSIsRewrite(t *testing.T) {
	fetch := cost.Options{Fetch: []string{"train"}}
	for _, name := range []string{"mlp", "cnn", "resnet", "lstm"} {
		m, err := graphdef.Load(filepath.Join("../../testmodels/fixtures", name+".pb"), graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range []rewrite.Options{{}, {SwapoutThreshold: 3, SwapinAhead: 1, SwapinGroupBy: -1, MinTensorBytes: -1}} {
			want, err := Rewrite(m, opts)
			if err != nil {
				t.Fatal(err)
			}
			wantBytes, _ := want.Model.Marshal()
			swapped := 0
			for _, budget := range []int64{0, 64 << 10} { // the default (fits), and one nothing fits
				p, err := RewriteWithPlanner(m, opts, PlanOptions{Strategy: "lms-fixed", Budget: budget, Sim: fetch})
				if err != nil {
					t.Fatalf("%s %+v budget %d: %v", name, opts, budget, err)
				}
				got, _ := p.Model.Marshal()
				if !bytes.Equal(got, wantBytes) {
					t.Errorf("%s %+v budget %d: lms-fixed output differs from Rewrite's", name, opts, budget)
				}
				if len(p.Swaps) != len(want.Swaps) || p.Strategy != "lms-fixed" {
					t.Errorf("%s: %d swaps (strategy %s), Rewrite made %d", name, len(p.Swaps), p.Strategy, len(want.Swaps))
				}
				swapped += len(p.Swaps)
				wantFits := budget == 0
				if p.Eval.Fits != wantFits || len(p.Eval.Devices) != 1 {
					t.Fatalf("%s budget %d: fits %v, want %v (%+v)", name, budget, p.Eval.Fits, wantFits, p.Eval.Devices)
				}
				d := p.Eval.Devices[0]
				if d.Peak <= 0 || d.GrapplerPeak <= 0 {
					t.Errorf("%s budget %d: peaks %d and %d (Grappler's): both accountings must be predicted", name, budget, d.Peak, d.GrapplerPeak)
				}
				if budget == 0 && d.Budget != DefaultBudget(p.Profile) {
					t.Errorf("%s: budget %d, want the default %d", name, d.Budget, DefaultBudget(p.Profile))
				}
			}
			if opts.SwapoutThreshold == 3 && swapped == 0 {
				t.Errorf("%s: threshold 3 swapped nothing", name)
			}
		}
	}
}
