package triggers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// siblingGraph builds a producer p whose consumer c also reads the end of a longer sibling
// branch: x -> p -> d1 -> d2 -> d3 -> c and x -> s1 -> ... -> s6 -> c, with c reading p too.
// c's critical path runs through the siblings (s6 has the highest level), none of which
// descends from p. The nodes are listed so that a node's index is its rank in the step
// (x, p, s1..s6, d1..d3, c): the siblings run before the producer's descendants.
func siblingGraph(t *testing.T) *graphdef.Graph {
	t.Helper()
	var b strings.Builder
	node := func(name, op string, inputs ...string) {
		fmt.Fprintf(&b, "node { name: %q op: %q", name, op)
		for _, in := range inputs {
			fmt.Fprintf(&b, " input: %q", in)
		}
		b.WriteString(` attr { key: "T" value { type: DT_FLOAT } } attr { key: "dtype" value { type: DT_FLOAT } } }` + "\n")
	}
	node("x", "Placeholder")
	node("p", "Relu", "x")
	prev := "x"
	for i := 1; i <= 6; i++ {
		node(fmt.Sprintf("s%d", i), "Relu", prev)
		prev = fmt.Sprintf("s%d", i)
	}
	node("d1", "Relu", "p")
	node("d2", "Relu", "d1")
	node("d3", "Relu", "d2")
	node("c", "AddN", "p", "d3", "s6")
	return parsedGraph(t, b.String(), "siblings")
}

// TestTriggersDescendFromTheProducer: every way of choosing a trigger returns an op that
// descends from the swapped tensor's producer, even where the consumer's critical path runs
// through a sibling branch, which used to supply the trigger (issue 11, item 8).
func TestTriggersDescendFromTheProducer(t *testing.T) {
	g := siblingGraph(t)
	n := g.Node
	p, cons := n("p"), []*graphdef.Node{n("c")}
	desc := g.Descendants(p)
	check := func(what string, trig *graphdef.Node, want string) {
		t.Helper()
		if trig == nil {
			t.Errorf("%s: no trigger", what)
			return
		}
		if !desc[trig.Index] || trig.Name != want {
			t.Errorf("%s: trigger %s (descends from p: %v), want %s", what, trig.Name, desc[trig.Index], want)
		}
	}
	for ahead, want := range map[int]string{1: "d3", 2: "d3", 3: "d3", 4: "d2", 5: "d1", 9: "d1"} {
		trig, err := ByDistance(p, cons, ahead, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("ByDistance ahead %d", ahead), trig, want)
	}
	if _, err := ByDistance(p, cons, 2, func(x *graphdef.Node) bool { return !strings.HasPrefix(x.Name, "d") }); err == nil {
		t.Error("ByDistance found a trigger where only siblings are eligible")
	}
	trig, err := ByLayer(p, cons, func(x *graphdef.Node) bool { return x.Name == "d2" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("ByLayer", trig, "d1")
	// Times by graph order: the siblings end before d1 starts.
	tm := chainTimes(g)
	for deadline, want := range map[int64]string{1000: "d3", 105: "d2", 95: "d1", 70: "d1"} {
		trig, late, err := ByTime(p, cons, deadline, tm, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("ByTime by %d (late %v)", deadline, late), trig, want)
	}
	chs, err := ByCost([]Transfer{{Producer: p, Consumers: cons, Duration: 25, Latency: 5}}, tm, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("ByCost", chs[0].Trigger, "d1")
	seq := &Sequence{Pos: make([]int, len(g.Nodes)), Cum: make([]int64, len(g.Nodes)+1)}
	for i := range g.Nodes {
		seq.Pos[i] = i
		seq.Cum[i+1] = int64(10 * (i + 1))
	}
	for window, want := range map[int64]string{5: "d3", 15: "d2", 25: "d1", 1000: "d1"} {
		trig, _, err := ByWindow(p, cons, window, seq, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("ByWindow %d", window), trig, want)
	}
	var names []string
	for _, a := range Ancestry(p, cons) {
		names = append(names, a.Name)
	}
	if strings.Join(names, " ") != "d3 d2 d1" {
		t.Errorf("Ancestry = %v", names)
	}
}
