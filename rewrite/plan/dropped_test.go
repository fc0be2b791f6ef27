package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/internal/testgraph"
	"github.com/tfswap/tfswap/rewrite"
)

// TestWrittenBypassErrorDropped: an internal error while the written bypass spaces a
// candidate fails the rewrite under StrictPasses (as under go test), and otherwise drops the
// candidate: on the ResNet fixture within 3 MiB (TestWrittenBypassPass's case, where only
// the written bypass fits) the rewrite then finds no plan, as with the pass off, instead of
// failing with the error, and the no-fit message names the error (NoFitError.Dropped).
func TestWrittenBypassErrorDropped(t *testing.T) {
	m, _ := testgraph.Load(t, "../../testmodels/fixtures/resnet.pb")
	injected := errors.New("injected spacing failure")
	plan := func(budget int64, strict, on, fail bool) (*Planned, error) {
		defer func(old, w, s bool, f func(*planRun, *stage, []string) (*Evaluation, writtenState, error)) {
			TupleBypass, WrittenBypass, StrictPasses, spaceWrittenFn = old, w, s, f
		}(TupleBypass, WrittenBypass, StrictPasses, spaceWrittenFn)
		TupleBypass, WrittenBypass, StrictPasses = false, on, strict
		if fail {
			spaceWrittenFn = func(*planRun, *stage, []string) (*Evaluation, writtenState, error) {
				return nil, writtenState{}, injected
			}
		}
		return RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: -1}, PlanOptions{Strategy: "auto", Budget: budget,
			Sim: cost.Options{Fetch: []string{"train"}}})
	}
	if _, err := plan(3<<20, true, true, true); !errors.Is(err, injected) {
		t.Errorf("strict: %v, want the injected error", err)
	}
	var nf *NoFitError
	_, err := plan(3<<20, false, true, true)
	if !errors.As(err, &nf) {
		t.Fatalf("not strict: %v, want no plan to fit (the candidate dropped)", err)
	}
	if len(nf.Dropped) == 0 || !strings.Contains(nf.Dropped[0], injected.Error()) || !strings.Contains(err.Error(), injected.Error()) {
		t.Errorf("not strict: Dropped %q; the message does not name the injected error:\n%v", nf.Dropped, err)
	}
	_, off := plan(3<<20, false, false, false)
	if !errors.As(off, &nf) || len(nf.Dropped) != 0 || strings.Contains(off.Error(), "dropped") {
		t.Errorf("the pass off: %v, want no plan to fit and nothing dropped", off)
	}
}

// TestWrittenBypassCountsItsSimulations: the simulations spaceWritten spends (on the input's
// problem, by Grappler's accounting) count in the report's total. On TestWrittenBypassPass's
// case (the ResNet fixture within 3 MiB, the tuple-bypass pass off, where the written
// bypass's plan is the one that fits) a spaceWritten that reports 1000 more simulations per
// call must raise Planned.Simulations by 1000 per call; it did not when they were left out.
func TestWrittenBypassCountsItsSimulations(t *testing.T) {
	if testing.Short() {
		t.Skip("plans the ResNet fixture twice with the written bypass")
	}
	m, _ := testgraph.Load(t, "../../testmodels/fixtures/resnet.pb")
	defer func(old, w bool, f func(*planRun, *stage, []string) (*Evaluation, writtenState, error)) {
		TupleBypass, WrittenBypass, spaceWrittenFn = old, w, f
	}(TupleBypass, WrittenBypass, spaceWrittenFn)
	TupleBypass, WrittenBypass = false, true
	plan := func() *Planned {
		t.Helper()
		p, err := RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: -1}, PlanOptions{Strategy: "auto", Budget: 3 << 20,
			Sim: cost.Options{Fetch: []string{"train"}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := plan()
	calls := 0
	spaceWrittenFn = func(top *planRun, f *stage, names []string) (*Evaluation, writtenState, error) {
		calls++
		ev, ws, err := spaceWritten(top, f, names)
		top.sims += 1000
		return ev, ws, err
	}
	padded := plan()
	if calls == 0 || !strings.Contains(padded.Eval.Strategy, "+wbypass") {
		t.Fatalf("spaceWritten ran %d times, plan from %s: the case no longer tests the written bypass", calls, padded.Eval.Strategy)
	}
	if got, want := padded.Simulations-plain.Simulations, 1000*calls; got != want {
		t.Errorf("%d more simulations reported with spaceWritten's padded by 1000 per call (%d calls), want %d", got, calls, want)
	}
	t.Logf("%d simulations, %d spaceWritten calls", plain.Simulations, calls)
}
