package plan

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestTriggerDescends checks the guard of mergeSwapIns: on sharedReadsChain(4), a merged
// swap-in of f1 triggered by g3 (the ReLU gradient before h3) may also serve h3 and h2
// (read after g3), but not h4, which g3 descends from: the copy would wait for a trigger
// that runs after one of its reads. A trigger that is a read itself, or a node that is not
// the graph's, descends too.
func TestTriggerDescends(t *testing.T) {
	g, err := graphdef.NewGraph(sharedReadsChain(4), "chain")
	if err != nil {
		t.Fatal(err)
	}
	use := func(name string) graphdef.Use { return graphdef.Use{Node: g.Node(name), Input: 1} }
	g3 := g.Node("g3")
	for _, c := range []struct {
		uses []graphdef.Use
		want bool
	}{
		{[]graphdef.Use{use("h3"), use("h2")}, false},
		{[]graphdef.Use{use("h3"), use("h4")}, true},
		{[]graphdef.Use{{Node: g3, Input: 0}}, true},
	} {
		if got := triggerDescends(g, g3, c.uses); got != c.want {
			var names []string
			for _, u := range c.uses {
				names = append(names, u.Node.Name)
			}
			t.Errorf("triggerDescends(g3, reads by %v) = %v, want %v", names, got, c.want)
		}
	}
	other := &graphdef.Node{Name: "g3", Index: g3.Index}
	if !triggerDescends(g, other, []graphdef.Use{use("h2")}) {
		t.Error("a trigger that is not the graph's node does not descend")
	}
}
