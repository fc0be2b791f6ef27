package rewrite

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestPlanPassOrder: the planning passes keep their ordering constraints, and checkPassOrder
// finds a pass moved before one it must follow (naming the reason), a constraint naming no
// pass, and a pass listed twice.
func TestPlanPassOrder(t *testing.T) {
	if err := checkPassOrder(planPasses, passOrder); err != nil {
		t.Fatal(err)
	}
	for _, c := range passOrder {
		if c.reason == "" {
			t.Errorf("constraint %s before %s gives no reason", c.before, c.after)
		}
	}
	// Every constraint broken in turn: swap its two passes.
	for _, c := range passOrder {
		ps := slices.Clone(planPasses)
		i := slices.IndexFunc(ps, func(p planPass) bool { return p.name == c.before })
		j := slices.IndexFunc(ps, func(p planPass) bool { return p.name == c.after })
		ps[i], ps[j] = ps[j], ps[i]
		err := checkPassOrder(ps, passOrder)
		if err == nil || !strings.Contains(err.Error(), "must run before") {
			t.Errorf("%s moved after %s: got %v", c.before, c.after, err)
		}
	}
	bad := append(slices.Clone(passOrder), struct{ before, after, reason string }{"strategy", "no-such-pass", "none"})
	if err := checkPassOrder(planPasses, bad); err == nil {
		t.Error("a constraint naming no pass was accepted")
	}
	if err := checkPassOrder(append(slices.Clone(planPasses), planPasses[0]), passOrder); err == nil {
		t.Error("a pass listed twice was accepted")
	}
	if names := PlanPassNames(); len(names) != len(planPasses) || names[0] != "analyze" {
		t.Errorf("PlanPassNames: %v", names)
	}
}

// TestPassDebugLeavesThePlan: on the resnet fixture (auto, 60% of its unswapped peak: the
// plan swaps and recomputes) timing and dumping every pass gives the same plan as planning
// without them, a timing line per pass, and a dump after each pass that names the plan's
// swaps once there is a plan.
func TestPassDebugLeavesThePlan(t *testing.T) {
	m := loadFixtureModel(t, "resnet")
	p, err := cost.LookupProfile(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, "resnet.pb")
	if err != nil {
		t.Fatal(err)
	}
	sim := cost.Options{Fetch: []string{"train"}}
	base, err := cost.Simulate(g, p, sim)
	if err != nil {
		t.Fatal(err)
	}
	po := PlanOptions{Budget: base.Compute().PeakBytes * 60 / 100, Sim: sim}
	want, err := RewriteWithPlanner(m, Options{}, po)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Swaps) == 0 {
		t.Fatal("the plan swaps nothing: the test checks nothing")
	}
	opts, g2, err := prepare(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mode, _ := recomputeMode("")
	st := &planState{model: m, g: g2, opts: opts, po: po, planner: autoStrategy, mode: mode}
	var out bytes.Buffer
	if err := runPlanPasses(st, passDebug{time: true, dump: map[string]bool{"all": true}, w: &out}); err != nil {
		t.Fatal(err)
	}
	got := st.out
	if describePlan(got) != describePlan(want) || got.Simulations != want.Simulations || got.Eval.StepTime != want.Eval.StepTime {
		t.Errorf("with pass debugging the plan differs:\n%s\nwithout:\n%s", describePlan(got), describePlan(want))
	}
	text := out.String()
	for _, p := range planPasses {
		if !strings.Contains(text, "tfswap: pass "+p.name+" ") {
			t.Errorf("no timing line for pass %s", p.name)
		}
		if !strings.Contains(text, "tfswap: after pass "+p.name+":") {
			t.Errorf("no dump after pass %s", p.name)
		}
	}
	if !strings.Contains(text, "swap "+want.Swaps[0].Tensor) {
		t.Errorf("the dumps do not name the swap of %s:\n%s", want.Swaps[0].Tensor, text)
	}
}

// TestPassDebugFromEnv: TFSWAP_PASSTIME and TFSWAP_DEBUG_PASS are read, and an unknown pass
// name is an error that lists the passes.
func TestPassDebugFromEnv(t *testing.T) {
	t.Setenv("TFSWAP_PASSTIME", "1")
	t.Setenv("TFSWAP_DEBUG_PASS", "tighter, apply")
	d, err := passDebugFromEnv()
	if err != nil || !d.time || !d.dump["tighter"] || !d.dump["apply"] || len(d.dump) != 2 {
		t.Errorf("got %+v, %v", d, err)
	}
	t.Setenv("TFSWAP_PASSTIME", "")
	t.Setenv("TFSWAP_DEBUG_PASS", "nope")
	_, err = passDebugFromEnv()
	if err == nil || !strings.Contains(err.Error(), "recompute-single") {
		t.Errorf("an unknown pass: got %v", err)
	}
}
