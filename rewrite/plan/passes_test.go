package plan

import (
	"bytes"
	"github.com/tfswap/tfswap/rewrite"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestPlanPassOrder: the planning passes and auto's passes keep their ordering constraints,
// and checkPassOrder finds a pass moved before one it must follow, a constraint naming no
// pass, and a pass listed twice.
func TestPlanPassOrder(t *testing.T) {
	var autoNames []string
	for _, p := range autoPasses {
		autoNames = append(autoNames, p.name)
	}
	for _, l := range []struct {
		names []string
		order []passConstraint
	}{{PlanPassNames(), passOrder}, {autoNames, autoPassOrder}} {
		if err := checkPassOrder(l.names, l.order); err != nil {
			t.Fatal(err)
		}
		for _, c := range l.order {
			if c.reason == "" {
				t.Errorf("constraint %s before %s gives no reason", c.before, c.after)
			}
			// The constraint broken: its two passes swapped.
			ns := slices.Clone(l.names)
			i, j := slices.Index(ns, c.before), slices.Index(ns, c.after)
			ns[i], ns[j] = ns[j], ns[i]
			if err := checkPassOrder(ns, l.order); err == nil || !strings.Contains(err.Error(), "must run before") {
				t.Errorf("%s moved after %s: got %v", c.before, c.after, err)
			}
		}
		bad := append(slices.Clone(l.order), passConstraint{l.names[0], "no-such-pass", "none"})
		if err := checkPassOrder(l.names, bad); err == nil {
			t.Error("a constraint naming no pass was accepted")
		}
		if err := checkPassOrder(append(slices.Clone(l.names), l.names[0]), l.order); err == nil {
			t.Error("a pass listed twice was accepted")
		}
	}
	if names := PlanPassNames(); len(names) != len(planPasses) || names[0] != "analyze" {
		t.Errorf("PlanPassNames: %v", names)
	}
	if names := DebugPassNames(); !slices.Contains(names, "auto.greedy") || !slices.Contains(names, "tighter") {
		t.Errorf("DebugPassNames: %v", names)
	}
}

// TestPassDebugLeavesThePlan: on the resnet fixture (auto, 60% of its unswapped peak: the
// plan swaps) timing and dumping every pass gives the same plan as planning without them, a
// timing line per pass (auto's own passes included), and a dump after each pass that names
// the plan's swaps once there is a plan.
func TestPassDebugLeavesThePlan(t *testing.T) {
	m := loadFixtureModel(t, "resnet")
	g, err := graphdef.NewGraph(m.Graph, "resnet.pb")
	if err != nil {
		t.Fatal(err)
	}
	sim := cost.Options{Fetch: []string{"train"}}
	_, base := simulateDefault(t, g, sim)
	po := PlanOptions{Budget: base.Compute().PeakBytes * 60 / 100, Sim: sim}
	want, err := RewriteWithPlanner(m, rewrite.Options{}, po)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Swaps) == 0 {
		t.Fatal("the plan swaps nothing: the test checks nothing")
	}
	opts, g2, err := rewrite.Prepare(m, rewrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mode, _ := recomputeMode("")
	st := &planState{model: m, g: g2, opts: opts, po: po, planner: autoStrategy, mode: mode}
	var out bytes.Buffer
	defer func(w io.Writer) { passDebugOut = w }(passDebugOut)
	passDebugOut = &out
	t.Setenv("TFSWAP_PASSTIME", "1")
	t.Setenv("TFSWAP_DEBUG_PASS", "all")
	dbg, err := passDebugFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := runPlanPasses(st, dbg); err != nil {
		t.Fatal(err)
	}
	got := st.out
	if describePlan(got) != describePlan(want) || got.Simulations != want.Simulations || got.Eval.StepTime != want.Eval.StepTime {
		t.Errorf("with pass debugging the plan differs:\n%s\nwithout:\n%s", describePlan(got), describePlan(want))
	}
	text := out.String()
	for _, n := range DebugPassNames() {
		if !strings.Contains(text, "tfswap: pass "+n+" ") {
			t.Errorf("no timing line for pass %s", n)
		}
		if !strings.Contains(text, "tfswap: after pass "+n+":") {
			t.Errorf("no dump after pass %s", n)
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
