package plan

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// newProblemRun makes a problem as newProblem does and starts a planning run of it, for tests
// that search or evaluate directly.
func newProblemRun(model *graphdef.Model, a *rewrite.Analysis, po PlanOptions) (*planRun, error) {
	pr, err := newProblem(model, a, po)
	if err != nil {
		return nil, err
	}
	return pr.newRun(""), nil
}

// atSeventyPercent analyzes gr's graph and returns the analysis and po with its budget set
// to 70% of the unswapped peak (as po simulates it).
func atSeventyPercent(t *testing.T, gr namedModel, po PlanOptions) (*rewrite.Analysis, PlanOptions) {
	t.Helper()
	g, err := graphdef.NewGraph(gr.m.Graph, gr.name)
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, rewrite.Options{})
	p0, err := newProblem(gr.m, a, po)
	if err != nil {
		t.Fatal(err)
	}
	po.Budget = maxPeak(p0.Base) * 7 / 10
	return a, po
}

// runOutcome is what a strategy's run on a problem gives that the order of runs must not
// change: the plan, its simulated outcome, the strategy credited and the simulations spent.
func runOutcome(ev *Evaluation, sims int) string {
	if ev == nil {
		return fmt.Sprintf("no plan, %d simulations", sims)
	}
	return fmt.Sprintf("by %s, step %d, fits %v, excess %d, moved %d, %d simulations, plan %s",
		ev.Strategy, ev.StepTime, ev.Fits, ev.Excess, ev.Transferred, sims, planKey(ev.Plan))
}

// TestProblemSharedByRuns: a Problem is read-only to planning (its memos answer from its
// inputs alone), so two strategies run one after the other on one problem, each in a run of
// its own, plan as they do in the other order: each strategy's plan, its credit, its
// simulated outcome and its simulation count are the same whether it ran first (on fresh
// memos) or second (on memos the other filled). Were the search state still shared through
// the problem (the cache of evaluated plans, the best plan, the counts), the second strategy
// would find the first's plans, credited to it, and count fewer simulations. It runs pairs of
// strategies, auto with one it requires among them, on the fixtures and a synthetic residual
// graph at 70% of each unswapped peak, and fails unless some plan swaps.
func TestProblemSharedByRuns(t *testing.T) {
	graphs, v100 := fixturesAndSynth400(t)
	pairs := [][2]string{{"lms", "vdnn-dyn"}, {"window", "autoswap"}, {"auto", "lms"}}
	swapped := 0
	for _, gr := range graphs {
		a, po := atSeventyPercent(t, gr, PlanOptions{Profile: v100, FitAccounting: "tfswap"})
		for _, pair := range pairs {
			// got[i][name] is the outcome of strategy name on the problem that ran pair in
			// order i (0: as listed, 1: reversed).
			var got [2]map[string]string
			for order := range got {
				pr, err := newProblem(gr.m, a, po)
				if err != nil {
					t.Fatal(err)
				}
				got[order] = map[string]string{}
				names := []string{pair[order], pair[1-order]}
				for _, name := range names {
					s, err := LookupStrategy(name)
					if err != nil {
						t.Fatal(err)
					}
					r := pr.newRun(name)
					ev, err := s.plan(r)
					if err != nil {
						t.Fatalf("%s, %s after %s: %v", gr.name, name, names[0], err)
					}
					if ev != nil && ev.Plan != nil && len(ev.Plan.Swaps) > 0 {
						swapped++
					}
					got[order][name] = runOutcome(ev, r.sims)
				}
			}
			for _, name := range pair {
				if got[0][name] != got[1][name] {
					t.Errorf("%s: %s planned differently run first and run second on one problem:\n%s\n%s",
						gr.name, name, got[idx(pair, name)][name], got[1-idx(pair, name)][name])
				}
			}
		}
	}
	if swapped == 0 {
		t.Fatal("no strategy swapped anything: the test compares nothing")
	}
}

// idx returns the index of name in pair: the order in which name ran first.
func idx(pair [2]string, name string) int {
	if pair[0] == name {
		return 0
	}
	return 1
}

// TestProblemReadOnly: planning does not write a Problem once it is made. Every strategy runs
// on a problem of each fixture and of a synthetic residual graph at 70% of the unswapped
// peak, and afterwards the problem's fields, its memos aside (seqs, budgets, lms, elig,
// memos, floor), are what they were (pointers not reassigned, values equal), and so is its unswapped
// step, Base, down to each device's figures. It fails unless some strategy's run evaluated
// plans beyond the unswapped step.
func TestProblemReadOnly(t *testing.T) {
	graphs, v100 := fixturesAndSynth400(t)
	searched := 0
	for _, gr := range graphs {
		a, po := atSeventyPercent(t, gr, PlanOptions{Profile: v100, Explain: true})
		for _, s := range Strategies() {
			pr, err := newProblem(gr.m, a, po)
			if err != nil {
				t.Fatal(err)
			}
			before := *pr
			base := *pr.Base
			base.Devices = append([]DevicePeak(nil), pr.Base.Devices...)
			r := pr.newRun(s.Name)
			if _, err := s.plan(r); err != nil {
				t.Fatalf("%s/%s: %v", gr.name, s.Name, err)
			}
			if len(r.cache) > 1 {
				searched++
			}
			after := *pr
			for _, p := range []*Problem{&before, &after} {
				p.seqs, p.budgets, p.lms, p.elig, p.memos, p.floor, p.floorDone = nil, nil, nil, nil, nil, nil, false
			}
			// DeepEqual takes pointers, maps and slices that are the same as equal: a field
			// reassigned differs, what it points to is not compared (Base is, below).
			if !reflect.DeepEqual(before, after) {
				t.Errorf("%s/%s: planning changed the problem's fields:\n%s", gr.name, s.Name, problemFieldsChanged(before, after))
			}
			if !reflect.DeepEqual(base, *pr.Base) {
				t.Errorf("%s/%s: planning changed the problem's unswapped step:\n%+v\nwas\n%+v", gr.name, s.Name, *pr.Base, base)
			}
		}
	}
	if searched == 0 {
		t.Fatal("no strategy evaluated a plan: the test checks nothing")
	}
}

// problemFieldsChanged names the fields of a and b that differ, for TestProblemReadOnly's
// message: pointers, maps and slices by address (and length), other fields by value.
func problemFieldsChanged(a, b Problem) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := 0; i < va.NumField(); i++ {
		fa, fb := va.Field(i), vb.Field(i)
		var same bool
		switch fa.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan:
			same = fa.Pointer() == fb.Pointer()
		case reflect.Slice:
			same = fa.Pointer() == fb.Pointer() && fa.Len() == fb.Len()
		default:
			same = fmt.Sprint(fa) == fmt.Sprint(fb)
		}
		if !same {
			out = append(out, va.Type().Field(i).Name)
		}
	}
	return strings.Join(out, ", ")
}
