package plan

import (
	"strings"
	"testing"
)

// TestLookupStrategy: every registered name looks up its own strategy, "" is auto, and an
// unknown name is an error that lists every strategy.
func TestLookupStrategy(t *testing.T) {
	for _, n := range StrategyNames() {
		s, err := LookupStrategy(n)
		if err != nil || s.Name != n {
			t.Errorf("%s: %v %v", n, s, err)
		}
	}
	if s, err := LookupStrategy(""); err != nil || s != autoStrategy {
		t.Errorf("default strategy: %v %v", s, err)
	}
	_, err := LookupStrategy("magic")
	if err == nil {
		t.Fatal("unknown strategy accepted")
	}
	for _, n := range StrategyNames() {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("the error for an unknown strategy does not list %s: %v", n, err)
		}
	}
}

// TestStrategyRegistry: the registry's strategies have distinct names, a doc line and a Run;
// every required strategy is registered, none requires itself through a cycle, and none
// requires lms-fixed (which does not plan for the budget).
func TestStrategyRegistry(t *testing.T) {
	registered := map[*Strategy]bool{}
	names := map[string]bool{}
	for _, s := range Strategies() {
		if names[s.Name] || s.Name == "" {
			t.Errorf("strategy name %q empty or registered twice", s.Name)
		}
		names[s.Name] = true
		registered[s] = true
		if s.Doc == "" || strings.Contains(s.Doc, "\n") || s.Run == nil {
			t.Errorf("%s: want a one-line Doc and a Run", s.Name)
		}
	}
	if Strategies()[0] != autoStrategy {
		t.Errorf("the default, auto, is not listed first")
	}
	// state: 1 while visiting, 2 done.
	state := map[*Strategy]int{}
	var visit func(s *Strategy, path []string)
	visit = func(s *Strategy, path []string) {
		path = append(path, s.Name)
		switch state[s] {
		case 1:
			t.Errorf("requirement cycle: %s", strings.Join(path, " -> "))
			return
		case 2:
			return
		}
		state[s] = 1
		for _, r := range s.Requires {
			if !registered[r] {
				t.Errorf("%s requires %q, which is not registered", s.Name, r.Name)
			}
			if r == lmsFixedStrategy {
				t.Errorf("%s requires lms-fixed, which does not plan for the budget", s.Name)
			}
			visit(r, path)
		}
		state[s] = 2
	}
	for _, s := range Strategies() {
		visit(s, nil)
	}
	if len(autoStrategy.Requires) == 0 {
		t.Error("auto requires no strategy: it starts from every other planner's plan")
	}
}
