package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"math/rand"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/testmodels/synth"
)

// TestSwapStepAgreesWithSweep checks that the incremental simulator (cost.SwapStep) made
// from a prepared sweep and changed decision by decision answers what a step swept afresh
// answers for the same decisions (its peaks read from the edits, not from a curve with the
// edits applied): every device's peak and its time, and the stall, over
// random sequences of changes (one buffer's swaps dropped or taken back, or two buffers set
// alike, some changes undone) of vDNN_all's synchronised plan on the fixtures' graphs and a
// synthetic training graph, with slow and fast links so that copies queue and stall. It
// also checks auto's pruning answers (the plan without each buffer's swaps) against fresh
// sweeps of those plans.
func TestSwapStepAgreesWithSweep(t *testing.T) {
	fast := slowProfile()
	fast.D2H, fast.H2D = 1<<30, 1<<30
	models := map[string]*graphdef.Model{}
	names := []string{"cnn", "resnet", "mlp", "lstm", "synth1000"}
	for _, f := range names[:4] {
		m, err := graphdef.Load("../../testmodels/fixtures/"+f+".pb", graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		models[f] = m
	}
	sm := graphdef.NewModel(synth.Generate(synth.Config{Nodes: 1000}))
	sm.Source = "synth1000"
	models["synth1000"] = sm
	stalls, changes := 0, 0
	for _, name := range names {
		for pi, prof := range []*cost.Profile{slowProfile(), fast} {
			m := models[name]
			gr, err := graphdef.NewGraph(m.Graph, name)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := newProblemRun(m, rewrite.Analyze(gr, rewrite.Options{}), PlanOptions{Profile: prof, Budget: 1 << 20, FitAccounting: "tfswap"})
			if err != nil {
				t.Fatal(err)
			}
			cs := pr.vdnnChoices(false)
			if len(cs) < 2 {
				t.Fatalf("%s: %d vDNN choices", name, len(cs))
			}
			groups, _ := pr.groupsOf(cs, layerRule(convAny))
			drop := pr.newDropSweep(groups)
			if drop.prep == nil {
				t.Fatalf("%s: the drop sweep was not prepared", name)
			}
			prep := drop.prep
			nb := len(prep.bufs)
			rng := rand.New(rand.NewSource(int64(nb) + int64(pi)))
			keep := make([]bool, nb)
			for i := range keep {
				keep[i] = rng.Intn(2) == 0
			}
			same := func(what string, step *cost.SwapStep) {
				t.Helper()
				want := prep.result(append([]bool(nil), keep...))
				for dev, lt := range want.base {
					if lt == nil {
						continue
					}
					wp, wt := want.peak(dev)
					gp, gt := step.Peak(dev)
					if wp != gp || wt != gt {
						t.Fatalf("%s/%d %s: device %d peak %d at %d, fresh sweep %d at %d", name, pi, what, dev, gp, gt, wp, wt)
					}
				}
				if want.stall != step.Stall() {
					t.Fatalf("%s/%d %s: stall %d, fresh sweep %d", name, pi, what, step.Stall(), want.stall)
				}
				if want.stall > 0 {
					stalls++
				}
			}
			step := prep.swapStep(append([]bool(nil), keep...))
			same("prepared", step)
			for k := 0; k < 80; k++ {
				changes++
				a, b := rng.Intn(nb), rng.Intn(nb)
				old := append([]bool(nil), keep...)
				if rng.Intn(4) == 0 {
					v := rng.Intn(2) == 0
					keep[a], keep[b] = v, v
					step.Set(v, a, b)
				} else {
					keep[a] = !keep[a]
					step.Set(keep[a], a)
				}
				same("after a change", step)
				if rng.Intn(3) == 0 {
					copy(keep, old)
					step.Undo()
					same("after an undo", step)
				}
			}
			same("swept afresh", prep.swapStep(append([]bool(nil), keep...)))
			// auto's pruning: the synchronised plan's swaps without one buffer's.
			plan, _ := assemble(groups, nil)
			plan = pr.vdnnSync(plan)
			wo := pr.newWithoutSweep(plan)
			for _, u := range pr.unitsOf(plan) {
				want := pr.fast.predict(without(plan, u))
				peak := wo.peakWithout(u)
				for dev, lt := range want.base {
					if lt == nil {
						continue
					}
					if wp, _ := want.peak(dev); wp != peak(dev) {
						t.Fatalf("%s/%d: without unit %v: device %d peak %d, fresh sweep %d", name, pi, u, dev, peak(dev), wp)
					}
				}
			}
		}
	}
	// Some answers stall: copies queue, and the replays carry the delays forward.
	if stalls == 0 {
		t.Fatalf("none of %d answers stalls", changes)
	}
}
