package rewrite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// describePlan renders a planned rewrite as golden text: the prediction, the swaps with their
// swap-ins (trigger and consumers), the waits and the recomputations.
func describePlan(p *Planned) string {
	var w strings.Builder
	fmt.Fprintf(&w, "strategy %s, plan from %s, budget %d\n", p.Strategy, p.Eval.Strategy, p.Budget)
	for _, d := range p.Eval.Devices {
		base := int64(0)
		for _, b := range p.Base.Devices {
			if b.Name == d.Name {
				base = b.Peak
			}
		}
		fmt.Fprintf(&w, "peak %s %d (unswapped %d)\n", d.Name, d.Peak, base)
	}
	fmt.Fprintf(&w, "step %d (unswapped %d)\n", p.Eval.StepTime, p.Base.StepTime)
	for _, s := range p.Swaps {
		fmt.Fprintf(&w, "swap %s %d bytes to %s\n", s.Tensor, s.Bytes, s.Host)
		for _, si := range s.SwapIns {
			fmt.Fprintf(&w, "  in %s trigger %s consumers %s\n", si.Node, si.Trigger, strings.Join(si.Consumers, ","))
		}
	}
	for _, wt := range p.Waits {
		fmt.Fprintf(&w, "wait %s for %s\n", wt.Node, wt.SwapOut)
	}
	for _, rc := range p.Recomputes {
		fmt.Fprintf(&w, "recompute %s %d bytes by %s trigger %s consumers %s\n", rc.Tensor, rc.Bytes, strings.Join(rc.Ops, ","), rc.Trigger, strings.Join(rc.Consumers, ","))
		for _, x := range rc.Also {
			fmt.Fprintf(&w, "  also %s %d bytes consumers %s\n", x.Tensor, x.Bytes, strings.Join(x.Consumers, ","))
		}
	}
	return w.String()
}

// TestPlanGoldens plans every fixture with every strategy for 80% of its unswapped peak
// (a training step: the fan-in of "train") and compares with testdata/plans, planned with
// the default accountings (all three), and with testdata/plans/both, planned with "both" (the
// earlier default, whose plans it keeps byte for byte). A budget a strategy cannot meet
// records its diagnosis instead.
func TestPlanGoldens(t *testing.T) {
	for _, acc := range []string{"", "both"} {
		planGoldens(t, acc)
	}
}

func planGoldens(t *testing.T, acc string) {
	p, err := cost.LookupProfile(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	fetch := cost.Options{Fetch: []string{"train"}}
	for _, name := range []string{"mlp", "cnn", "resnet", "lstm"} {
		path := filepath.Join("../testmodels/fixtures", name+".pb")
		m, err := graphdef.Load(path, graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := graphdef.NewGraph(m.Graph, path)
		if err != nil {
			t.Fatal(err)
		}
		base, err := cost.Simulate(g, p, fetch)
		if err != nil {
			t.Fatal(err)
		}
		budget := base.Compute().PeakBytes * 8 / 10
		steps := map[string]int64{} // fitting strategies' step times
		for _, s := range StrategyNames() {
			t.Run(acc+name+"_"+s, func(t *testing.T) {
				res, err := RewriteWithPlanner(m, Options{MinTensorBytes: -1}, PlanOptions{Strategy: s, Budget: budget, Sim: fetch, FitAccounting: acc})
				var got string
				var nf *NoFitError
				switch {
				case errors.As(err, &nf):
					got = "no fit: " + err.Error() + "\n"
				case err != nil:
					t.Fatal(err)
				default:
					if err := Verify(g, res.Result, GateHost); err != nil {
						t.Fatal(err)
					}
					for _, d := range res.Eval.Devices {
						if d.Peak > d.Budget || d.GrapplerPeak > d.Budget || acc == "" && d.GrapplerPeakUS > d.Budget {
							t.Errorf("%s peaks %d, %d and %d (us) over budget %d", d.Name, d.Peak, d.GrapplerPeak, d.GrapplerPeakUS, d.Budget)
						}
					}
					got = describePlan(res)
					steps[s] = res.Eval.StepTime
				}
				file := filepath.Join("testdata", "plans", acc, name+"_"+s+".golden")
				if *update {
					if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run go test ./rewrite -run TestPlanGoldens -update)", err)
				}
				if got != string(want) {
					t.Errorf("plan of %s with %s differs from %s:\n--- got\n%s--- want\n%s", name, s, file, got, want)
				}
			})
		}
		// auto is never worse than another strategy.
		for s, st := range steps {
			if a, ok := steps["auto"]; !ok || st < a {
				t.Errorf("%s %s: %s fits with step %d, auto %v (fits: %v)", acc, name, s, st, a, ok)
			}
		}
	}
}
