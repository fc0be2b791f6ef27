package triggers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// parsedGraph parses text as a GraphDef in text format named name and indexes it.
func parsedGraph(t *testing.T, text, name string) *graphdef.Graph {
	t.Helper()
	_, g := testgraph.Parse(t, text, name)
	return g
}

// chain builds x -> c1 -> ... -> cn as a graph; ops named in convs are Conv2D (for ByLayer).
func chain(t *testing.T, n int, convs ...string) *graphdef.Graph {
	t.Helper()
	var b strings.Builder
	b.WriteString(`node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }` + "\n")
	prev := "x"
	isConv := map[string]bool{}
	for _, c := range convs {
		isConv[c] = true
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("c%d", i)
		op := "Relu"
		if isConv[name] {
			op = "Conv2D"
		}
		fmt.Fprintf(&b, `node { name: %q op: %q input: %q attr { key: "T" value { type: DT_FLOAT } } }`+"\n", name, op, prev)
		prev = name
	}
	return parsedGraph(t, b.String(), "chain")
}

// chainTimes gives node i of the chain (x = 0, c1 = 1, ...) the span [10i, 10i+10).
func chainTimes(g *graphdef.Graph) *Times {
	tm := &Times{Start: make([]int64, len(g.Nodes)), End: make([]int64, len(g.Nodes))}
	for _, n := range g.Nodes {
		tm.Start[n.Index] = int64(10 * n.Index)
		tm.End[n.Index] = int64(10*n.Index + 10)
	}
	return tm
}

func TestByCostSchedulesCopiesBackwardsOnOneEngine(t *testing.T) {
	g := chain(t, 10)
	tm := chainTimes(g)
	n := g.Node
	ts := []Transfer{
		{Producer: n("c1"), Consumers: []*graphdef.Node{n("c9")}, Duration: 25, Latency: 5},
		{Producer: n("c1"), Consumers: []*graphdef.Node{n("c8")}, Duration: 25, Latency: 5},
		{Producer: n("c1"), Consumers: []*graphdef.Node{n("c8")}, Engine: 1, Duration: 25, Latency: 5},
	}
	chs, err := ByCost(ts, tm, nil)
	if err != nil {
		t.Fatal(err)
	}
	// c9 is due at 90: its copy runs 65-90 and must be released by 60 (c5 ends at 60). The
	// copy for c8 (due 80) must end before c9's starts: 40-65, released by 35 (c2 ends at 30).
	// On its own engine the same copy runs 55-80, released by 50 (c4 ends at 50).
	want := []struct {
		trig      string
		start, by int64
	}{{"c5", 65, 60}, {"c2", 40, 35}, {"c4", 55, 50}}
	for i, w := range want {
		if chs[i].Trigger.Name != w.trig || chs[i].Start != w.start || chs[i].By != w.by || chs[i].Late {
			t.Errorf("transfer %d: trigger %s start %d by %d late %v, want %s %d %d", i, chs[i].Trigger.Name, chs[i].Start, chs[i].By, chs[i].Late, w.trig, w.start, w.by)
		}
	}
}

func TestByTimeLateFallsBackToFirstOpAfterProducer(t *testing.T) {
	g := chain(t, 6)
	tm := chainTimes(g)
	trig, late, err := ByTime(g.Node("c3"), []*graphdef.Node{g.Node("c5")}, 15, tm, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing after the producer c3 (ends 40) ends by 15: the earliest op after it is c4.
	if trig.Name != "c4" || !late {
		t.Errorf("got %s late=%v, want c4 late", trig.Name, late)
	}
	// Eligibility is respected.
	trig, _, err = ByTime(g.Node("c1"), []*graphdef.Node{g.Node("c6")}, 45, tm, func(n *graphdef.Node) bool { return n.Name != "c3" })
	if err != nil || trig.Name != "c2" {
		t.Errorf("got %v %v, want c2 (c3 is not eligible)", trig, err)
	}
}

func TestMemoRemembers(t *testing.T) {
	g := chain(t, 6)
	m := NewMemo(chainTimes(g))
	calls := 0
	el := func(*graphdef.Node) bool { calls++; return true }
	a, _, _ := m.ByTime(g.Node("c1"), []*graphdef.Node{g.Node("c6")}, 45, el)
	before := calls
	b, _, _ := m.ByTime(g.Node("c1"), []*graphdef.Node{g.Node("c6")}, 45, el)
	if a != b || calls != before {
		t.Errorf("memo searched again (%d calls after %d) or changed its answer", calls, before)
	}
}

func TestByWindow(t *testing.T) {
	g := chain(t, 10)
	seq := &Sequence{Pos: make([]int, len(g.Nodes)), Cum: make([]int64, len(g.Nodes)+1)}
	for _, n := range g.Nodes {
		seq.Pos[n.Index] = n.Index
		seq.Cum[n.Index+1] = seq.Cum[n.Index] + 10
	}
	// c9 sits at position 9 (Cum 90): a window of 25 bytes reaches it from position 7
	// (Cum 70), so the swap-in is issued there and triggered by the op before, c6.
	trig, pos, err := ByWindow(g.Node("c1"), []*graphdef.Node{g.Node("c9")}, 25, seq, nil)
	if err != nil || trig.Name != "c6" || pos != 7 {
		t.Errorf("got %v at %d (%v), want c6 at 7", trig, pos, err)
	}
	// A window of 0 issues it at the consumer's own position: triggered by its input.
	if trig, _, _ := ByWindow(g.Node("c1"), []*graphdef.Node{g.Node("c9")}, 0, seq, nil); trig.Name != "c8" {
		t.Errorf("window 0: got %s, want c8", trig.Name)
	}
	// A window larger than the sequence falls back to the first op after the producer.
	if trig, _, _ := ByWindow(g.Node("c3"), []*graphdef.Node{g.Node("c9")}, 1000, seq, nil); trig.Name != "c4" {
		t.Errorf("huge window: got %s, want c4", trig.Name)
	}
}

func TestByLayer(t *testing.T) {
	g := chain(t, 10, "c6")
	isConv := func(n *graphdef.Node) bool { return n.Op == "Conv2D" }
	// Walking back from c9, the nearest convolution is c6: the copy overlaps it, so the
	// trigger is the op before it.
	trig, err := ByLayer(g.Node("c1"), []*graphdef.Node{g.Node("c9")}, isConv, nil)
	if err != nil || trig.Name != "c5" {
		t.Errorf("got %v (%v), want c5", trig, err)
	}
	// No convolution between producer and consumer: one level ahead.
	trig, err = ByLayer(g.Node("c7"), []*graphdef.Node{g.Node("c9")}, isConv, nil)
	if err != nil || trig.Name != "c8" {
		t.Errorf("got %v (%v), want c8", trig, err)
	}
}

func TestLatestNeverReturnsConsumersOrLaterNodes(t *testing.T) {
	g := chain(t, 6)
	tm := chainTimes(g)
	cons := []*graphdef.Node{g.Node("c5"), g.Node("c3")}
	// c5 is the later consumer; the search runs from the earliest (c3) and must return a
	// node before both.
	trig, _, err := ByTime(g.Node("c1"), cons, 1000, tm, nil)
	if err != nil || trig.Name != "c2" {
		t.Errorf("got %v (%v), want c2", trig, err)
	}
}
