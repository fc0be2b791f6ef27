package tune

import (
	"errors"
	"github.com/tfswap/tfswap/rewrite/plan"
	"strings"
	"testing"
	"time"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// resnetProblem is the residual-network fixture with the LMS swap set, simulated on a V100.
func resnetProblem(t *testing.T) (*Problem, *Predictor) {
	t.Helper()
	m, err := graphdef.Load("../testmodels/fixtures/resnet.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, rewrite.Options{SwapoutThreshold: 10, SwapinAhead: 2, SwapinGroupBy: 5, MinTensorBytes: 64 << 10})
	plan, _ := plan.PlanLMS(a)
	p, err := NewProblem(m, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	return p, &Predictor{Profile: prof, Analysis: a, Sim: cost.Options{Fetch: []string{"train", "loss"}}}
}

func TestChains(t *testing.T) {
	p, _ := resnetProblem(t)
	if len(p.Groups) == 0 {
		t.Fatal("no swap-ins")
	}
	for _, g := range p.Groups {
		grp := p.Base.Swaps[g.Swap].Groups[g.Index]
		prod := p.Base.Swaps[g.Swap].Tensor.Node
		prev := 1 << 30
		for _, n := range g.Chain {
			if !p.Analysis.TriggerEligible(n) || n.Level <= prod.Level || n.Level >= prev {
				t.Fatalf("%s: chain entry %s (level %d) after level %d, producer level %d", prod.Name, n.Name, n.Level, prev, prod.Level)
			}
			prev = n.Level
			// A gradient tuple Identity that reads the swap-in is deferred to its readers
			// (rewrite.SwapInReaders): the trigger must precede them, not the Identity.
			for _, r := range rewrite.SwapInReaders(grp.Uses) {
				if n.Level >= r.Level {
					t.Fatalf("%s: trigger candidate %s is not before reader %s", prod.Name, n.Name, r.Name)
				}
			}
		}
	}
	// Every choice of triggers gives a valid rewrite.
	for _, pos := range []Positions{p.Latest(), Capped(fill(len(p.Groups), 5), 2), p.Clamp(fill(len(p.Groups), 1000))} {
		res, err := p.Apply(pos)
		if err != nil {
			t.Fatal(err)
		}
		if err := rewrite.Verify(p.Analysis.Graph, res, rewrite.GateHost); err != nil {
			t.Fatalf("positions %v: %v", pos, err)
		}
	}
}

func fill(n, v int) Positions {
	p := make(Positions, n)
	for i := range p {
		p[i] = v
	}
	return p
}

func TestEarliestSafe(t *testing.T) {
	p, pr := resnetProblem(t)
	latest, _, err := predictAt(p, pr, p.Latest())
	if err != nil {
		t.Fatal(err)
	}
	earliestAll, _, _ := predictAt(p, pr, p.Clamp(fill(len(p.Groups), 1<<20)))
	budget := latest.Peak + (earliestAll.Peak-latest.Peak)/2
	pos, pd, sims, err := EarliestSafe(p, pr, budget)
	if err != nil {
		t.Fatal(err)
	}
	if pd.Peak > budget {
		t.Fatalf("peak %d over budget %d", pd.Peak, budget)
	}
	moved := 0
	for i, g := range p.Groups {
		if pos[i] > 0 {
			moved++
		}
		if pos[i] == len(g.Chain)-1 {
			continue
		}
		// One step further must not fit: the position is the earliest safe one.
		try := append(Positions(nil), pos...)
		try[i]++
		if tp, _, _ := predictAt(p, pr, try); tp.Peak <= budget {
			t.Errorf("group %d: position %d could move to %d (peak %d within %d)", i, pos[i], try[i], tp.Peak, budget)
		}
	}
	if moved == 0 {
		t.Errorf("no trigger moved earlier")
	}
	t.Logf("budget %d: %d of %d triggers moved, mean distance %.1f -> %.1f levels, %d simulations",
		budget, moved, len(p.Groups), p.Distance(p.Latest()), p.Distance(pos), sims)

	var be *BudgetError
	if _, _, _, err := EarliestSafe(p, pr, latest.Peak-1); !errors.As(err, &be) || be.Peak != latest.Peak {
		t.Errorf("budget below the least peak: %v", err)
	}
}

// fakeRunner times a plan by its triggers: a step takes 10 ms plus 1 ms for every swap-in
// whose trigger is fewer than stallBelow chain entries from its use.
type fakeRunner struct {
	p          *Problem
	stallBelow int
	opened     int
}

type fakeSession struct{ d time.Duration }

func (s fakeSession) Step() (time.Duration, error) { return s.d, nil }
func (s fakeSession) Close() error                 { return nil }

func (f *fakeRunner) Open(m *graphdef.Model) (Session, error) {
	f.opened++
	trig := map[string]string{} // swap-in name -> trigger
	for _, nd := range m.Graph.Node {
		if strings.HasPrefix(nd.GetName(), rewrite.Scope) {
			for _, in := range nd.GetInput() {
				if strings.HasPrefix(in, "^") {
					// The control edge comes from the trigger's gate, tfswap/<trigger>/gate.
					trig[nd.GetName()] = strings.TrimSuffix(strings.TrimPrefix(in[1:], rewrite.Scope), "/gate")
				}
			}
		}
	}
	d := 10 * time.Millisecond
	for _, g := range f.p.Groups {
		name := rewrite.SwapNodeName(f.p.Base.Swaps[g.Swap].Tensor, "swap_in_"+itoa(g.Index))
		for k, n := range g.Chain {
			if n.Name == trig[name] && k < f.stallBelow {
				d += time.Millisecond
			}
		}
	}
	return fakeSession{d}, nil
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+i))) }

func TestTune(t *testing.T) {
	p, pr := resnetProblem(t)
	latest, _, _ := predictAt(p, pr, p.Latest())
	earliestAll, _, _ := predictAt(p, pr, p.Clamp(fill(len(p.Groups), 1<<20)))
	budget := latest.Peak + (earliestAll.Peak-latest.Peak)/2
	fr := &fakeRunner{p: p, stallBelow: 3}
	var lines []string
	res, err := Tune(p, pr, fr, Options{Budget: budget, Report: func(r Round) { lines = append(lines, r.String()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rounds:\n%s", strings.Join(lines, "\n"))
	if !res.Converged || len(res.Rounds) < 2 || res.Rounds[0].Phase != "earliest" {
		t.Fatalf("converged %v, %d rounds", res.Converged, len(res.Rounds))
	}
	if res.Predicted.Peak > budget {
		t.Errorf("final peak %d over budget %d", res.Predicted.Peak, budget)
	}
	// No swap-in that did not stall at its earliest safe trigger stalls at the final one,
	// and the final triggers are later than the earliest safe ones.
	later := 0
	for i := range p.Groups {
		e, f := res.Earliest[i], res.Final[i]
		if f > e {
			t.Errorf("group %d: final position %d earlier than the earliest safe %d", i, f, e)
		}
		if want := min(e, fr.stallBelow); f != want {
			t.Errorf("group %d: final position %d, want %d (earliest safe %d; swap-ins stall below %d)", i, f, want, e, fr.stallBelow)
		}
		if f < e {
			later++
		}
	}
	if later == 0 {
		t.Errorf("no trigger moved later")
	}
	if res.Rewrite == nil || rewrite.Verify(p.Analysis.Graph, res.Rewrite, rewrite.GateHost) != nil {
		t.Errorf("final rewrite invalid")
	}
	if len(res.Rounds) > 1+DefaultRounds {
		t.Errorf("%d rounds, more than the bound", len(res.Rounds))
	}

	// With the predicted-time check, plans the simulated GPU predicts slower are rejected
	// unmeasured, even though the runtime (here: no stalls at all) would accept them.
	lines = nil
	res, err = Tune(p, pr, &fakeRunner{p: p}, Options{Budget: budget, PredictedTime: true, Rounds: 16, Report: func(r Round) { lines = append(lines, r.String()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rounds with the predicted-time check:\n%s", strings.Join(lines, "\n"))
	ref := res.Rounds[0].Predicted.StepTime
	if !res.Converged || float64(res.Predicted.StepTime) > float64(ref)*(1+DefaultTolerance) || res.Final.Equal(p.Latest()) {
		t.Errorf("predicted-time check: converged %v, predicted step %d against %d, final %v", res.Converged, res.Predicted.StepTime, ref, res.Final)
	}

	// Without stalls the latest triggers are accepted at once.
	res, err = Tune(p, pr, &fakeRunner{p: p}, Options{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || len(res.Rounds) != 2 || !res.Final.Equal(p.Latest()) {
		t.Errorf("no stalls: converged %v, %d rounds, final %v", res.Converged, len(res.Rounds), res.Final)
	}
}

func TestPairedRatioAndCapped(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x*1e6))
		}
		return d
	}
	// Load drifts from 10 to 40 ms; the candidate is 10% slower at every step.
	ref := ms(10, 20, 30, 40)
	cand := ms(11, 22, 33, 44)
	if r, noise := PairedRatio(ref, cand); r < 1.0999 || r > 1.1001 || noise > 1e-9 {
		t.Errorf("ratio %v, noise %v", r, noise)
	}
	if r, noise := PairedRatio(ms(10, 10, 10, 10, 10), ms(9, 10, 11, 12, 10)); r != 1.0 || noise < 0.049 || noise > 0.051 {
		t.Errorf("ratio %v, noise %v", r, noise)
	}
	if got := Capped(Positions{0, 3, 7}, 2); !got.Equal(Positions{0, 2, 2}) {
		t.Errorf("Capped: %v", got)
	}
	if Median(ms(3, 1, 2)) != 2*time.Millisecond || Median(nil) != 0 {
		t.Errorf("Median")
	}
}

func TestSlower(t *testing.T) {
	if p := SignTestP(9, 10); p < 0.0107 || p > 0.0108 {
		t.Errorf("P(X>=9 of 10) = %v, want 11/1024", p)
	}
	if SignTestP(0, 10) != 1 || SignTestP(11, 10) != 0 {
		t.Errorf("SignTestP edges")
	}
	ms := func(v ...float64) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x*1e6))
		}
		return d
	}
	ref := ms(10, 10, 10, 10, 10, 10, 10, 10, 10, 10)
	// A stall: every step 20% slower.
	if slow, r, k, _ := Slower(ref, ms(12, 12, 12, 12, 12, 12, 12, 12, 12, 12), 0.03); !slow || k != 10 || r < 1.19 {
		t.Errorf("stall: %v %v %v", slow, r, k)
	}
	// Load spikes in half of the candidate's steps: not significant.
	if slow, _, k, _ := Slower(ref, ms(15, 9, 15, 9, 15, 9, 15, 9, 15, 9.5), 0.03); slow || k != 5 {
		t.Errorf("spikes: %v %v", slow, k)
	}
	// Consistently but negligibly slower: within the tolerance.
	if slow, _, _, _ := Slower(ref, ms(10.1, 10.1, 10.1, 10.1, 10.1, 10.1, 10.1, 10.1, 10.1, 10.1), 0.03); slow {
		t.Errorf("1%% slower counted as slower")
	}
}

// orderSession records the order of steps across sessions.
type orderSession struct {
	name string
	log  *[]string
}

func (s orderSession) Step() (time.Duration, error) {
	*s.log = append(*s.log, s.name)
	return time.Millisecond, nil
}
func (s orderSession) Close() error { return nil }

func TestCompareAlternates(t *testing.T) {
	var log []string
	ta, tb, err := Compare(orderSession{"a", &log}, orderSession{"b", &log}, 4)
	if err != nil || len(ta) != 4 || len(tb) != 4 || strings.Join(log, "") != "abbaabba" {
		t.Errorf("order %v, %d %d, %v", log, len(ta), len(tb), err)
	}
}

// TestPredictPlaced checks that a model placed on the emulated GPU (/device:CPU:1, the
// compute device) is predicted as the unplaced model is: the simulator sees the nodes on the
// compute device, gates included, on its GPU.
func TestPredictPlaced(t *testing.T) {
	p, pr := resnetProblem(t)
	res, err := p.Apply(p.Latest())
	if err != nil {
		t.Fatal(err)
	}
	want, err := pr.Predict(res.Model)
	if err != nil {
		t.Fatal(err)
	}
	placed := Place(p.Model, "/device:CPU:1")
	g, err := graphdef.NewGraph(placed.Graph, "placed")
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, rewrite.Options{SwapoutThreshold: 10, SwapinAhead: 2, SwapinGroupBy: 5, MinTensorBytes: 64 << 10, ComputeDevice: "/device:CPU:1"})
	plan, _ := plan.PlanLMS(a)
	pp, err := NewProblem(placed, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(pp.Groups) != len(p.Groups) {
		t.Fatalf("%d swap-ins placed, %d unplaced", len(pp.Groups), len(p.Groups))
	}
	pres, err := pp.Apply(pp.Latest())
	if err != nil {
		t.Fatal(err)
	}
	ppr := &Predictor{Profile: pr.Profile, Analysis: a, Sim: pr.Sim}
	got, err := ppr.Predict(pres.Model)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("placed: %+v, unplaced: %+v", got, want)
	}
}
