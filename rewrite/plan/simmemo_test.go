package plan

import (
	"bytes"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/rewrite"
)

// TestSimMemoKeepsPlans: sharing the simulations of one planning's problems (simMemo,
// ShareSimulations) leaves auto's outcome as it was: on the fixtures and a synthetic residual
// graph (the training step, fetch "train") at 80%, 60% and 50% of the unswapped peak on
// v100-16gb, the plans with and without sharing write the same graph, with the same
// strategy, step and peaks by every accounting, or both fail with the same message. The test
// fails unless sharing saved simulations somewhere (it would then test nothing).
func TestSimMemoKeepsPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("plans five graphs at three budgets twice")
	}
	defer func(saved bool) { ShareSimulations = saved }(ShareSimulations)
	saved := false
	for _, c := range plannedAtShares(t, 80, 60, 50) {
		ShareSimulations = true
		on, errOn := c.plan(t, nil)
		ShareSimulations = false
		off, errOff := c.plan(t, nil)
		if (errOn != nil) != (errOff != nil) || (errOn != nil && errOn.Error() != errOff.Error()) {
			t.Fatalf("%s at %d%%: sharing simulations %v, not sharing %v", c.name, c.pct, errOn, errOff)
		}
		if errOn != nil {
			continue
		}
		wOn, err := proto.MarshalOptions{Deterministic: true}.Marshal(on.Result.Model.Graph)
		if err != nil {
			t.Fatal(err)
		}
		wOff, err := proto.MarshalOptions{Deterministic: true}.Marshal(off.Result.Model.Graph)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(wOn, wOff) || on.Eval.Strategy != off.Eval.Strategy || on.Eval.StepTime != off.Eval.StepTime {
			t.Errorf("%s at %d%%: sharing simulations wrote another graph or plan (%s, step %d) than not sharing (%s, step %d)",
				c.name, c.pct, on.Eval.Strategy, on.Eval.StepTime, off.Eval.Strategy, off.Eval.StepTime)
		}
		for i, d := range on.Eval.Devices {
			if e := off.Eval.Devices[i]; d.Peak != e.Peak || d.GrapplerPeak != e.GrapplerPeak || d.GrapplerPeakUS != e.GrapplerPeakUS {
				t.Errorf("%s at %d%%: %s's peaks %d/%d/%d sharing simulations, %d/%d/%d not", c.name, c.pct, d.Name,
					d.Peak, d.GrapplerPeak, d.GrapplerPeakUS, e.Peak, e.GrapplerPeak, e.GrapplerPeakUS)
			}
		}
		if on.Simulations > off.Simulations {
			t.Errorf("%s at %d%%: %d simulations sharing, %d not", c.name, c.pct, on.Simulations, off.Simulations)
		}
		saved = saved || on.Simulations < off.Simulations
	}
	if !saved {
		t.Fatal("no simulation was shared: nothing checked")
	}
}

// TestSimMemoAnswersAsFresh: every simulation the planning's memo (simMemo) answers instead
// of simulating is what simulating the asking problem's plan would give, every graph with
// recomputations it answers is what rewrite.ApplyRecomputes would make of the asking
// problem's graph, and every LMS peak it hands a problem is what that problem's fast model
// predicts: auto plans the fixtures and a synthetic residual graph (the training step)
// at 60% and 50% of the unswapped peak on v100-16gb with the memo recording its answers, and
// each is checked against a fresh simulation, recomputation or LMS peak prediction. It fails
// unless answers of every kind were checked.
func TestSimMemoAnswersAsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("plans five graphs at two budgets and simulates every shared simulation again")
	}
	sims, graphsChecked, lmsChecked := 0, 0, 0
	for _, c := range plannedAtShares(t, 60, 50) {
		var hits []memoHit
		po := c.po
		po.memo = newSimMemo()
		po.memo.hits = &hits
		c.plan(t, &po)
		for _, h := range hits {
			switch {
			case h.lmsPeaks != nil:
				// Predicted again by the asking problem, without the memo.
				h.pr.Opts.memo, h.pr.lms = nil, nil
				for key, peaks := range h.lmsPeaks {
					r := h.pr.fast.predict(h.pr.lmsPlan(key[0], key[1], key[2]))
					for i := range peaks {
						if p, _ := r.peak(i); r.base[i] != nil && p != peaks[i] {
							t.Errorf("%s at %d%%: the memo's LMS peak %d of device %d for %v differs from a fresh prediction, %d", c.name, c.pct, peaks[i], i, key, p)
						}
					}
					lmsChecked++
				}
			case h.model != nil:
				m2, descs, err := rewrite.ApplyRecomputes(h.pr.Model, h.pr.Analysis, h.sel)
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(m2.Graph, h.model.Graph) || !reflect.DeepEqual(descs, h.descs) {
					t.Errorf("%s at %d%%: the memo's graph with %d recomputations differs from ApplyRecomputes'", c.name, c.pct, len(h.sel))
				}
				graphsChecked++
			default:
				g, err := h.pr.newRun("").graphFor(h.plan)
				if err != nil {
					t.Fatal(err)
				}
				fresh, err := cost.Simulate(g, h.pr.Profile, h.opts)
				if err != nil {
					t.Fatal(err)
				}
				fresh.Shapes = fresh.Shapes.Summary()
				got := *h.res
				got.Options.Setup, fresh.Options.Setup = nil, nil
				if !reflect.DeepEqual(&got, fresh) {
					t.Errorf("%s at %d%%: the memo's simulation of plan %s (%s) differs from a fresh one: step %d against %d",
						c.name, c.pct, planKey(h.plan), cost.ConventionsName(h.opts.Conventions), got.StepTime, fresh.StepTime)
				}
				sims++
			}
		}
	}
	if sims == 0 || graphsChecked == 0 || lmsChecked == 0 {
		t.Fatalf("nothing checked: %d simulations, %d recomputed graphs and %d LMS peaks answered by the memo", sims, graphsChecked, lmsChecked)
	}
}
