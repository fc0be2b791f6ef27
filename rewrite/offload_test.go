package rewrite

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	"github.com/tfswap/tfswap/triggers"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// Variable offload's surgery (OffloadVariables, VerifyOffload) and the choice of the weight
// copies' triggers, moved from rewrite/plan: none of them plans.

var offloadFixtures = []string{"mlp", "cnn", "resnet", "lstm"}

// TestOffloadAllFixtures offloads every variable of each fixture and checks that every
// variable and every node taking a variable's handle moved to the host, that the optimizer's
// slots went with their variable, that reads are copied through gates, that the input is
// unchanged and that the output is deterministic.
func TestOffloadAllFixtures(t *testing.T) {
	for _, name := range offloadFixtures {
		t.Run(name, func(t *testing.T) {
			m, _ := testgraph.Load(t, "../testmodels/fixtures/"+name+".pb")
			before, _ := m.Marshal()
			res, err := OffloadVariables(m, Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := m.Marshal()
			if !bytes.Equal(before, after) {
				t.Fatal("OffloadVariables changed its input")
			}
			res2, err := OffloadVariables(m, Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			b1, _ := res.Model.Marshal()
			b2, _ := res2.Model.Marshal()
			if !bytes.Equal(b1, b2) {
				t.Fatal("two offloads of the same model differ")
			}
			g, err := graphdef.NewGraph(res.Model.Graph, "out")
			if err != nil {
				t.Fatal(err)
			}
			vars := 0
			for _, n := range g.Nodes {
				if !variableOps[n.Op] {
					continue
				}
				vars++
				if n.Def.GetDevice() != "/device:CPU:0" {
					t.Errorf("variable %s is on %q", n.Name, n.Def.GetDevice())
				}
				for _, uses := range n.Consumers {
					for _, u := range uses {
						if u.Node.Def.GetDevice() != "/device:CPU:0" {
							t.Errorf("%s (%s) takes the handle of %s on %q", u.Node.Name, u.Node.Op, n.Name, u.Node.Def.GetDevice())
						}
					}
				}
			}
			var inGroups int
			slots := false
			for _, v := range res.Variables {
				inGroups += len(v.Variables)
				for _, s := range v.Variables {
					if s != v.Name && strings.HasPrefix(s, v.Name+"/") {
						slots = true
					}
				}
			}
			if inGroups != vars || vars == 0 {
				t.Errorf("%d variables in the groups, %d in the graph", inGroups, vars)
			}
			if !slots && name != "mlp" { // mlp trains with plain gradient descent: no slots
				t.Error("no variable was grouped with an optimizer slot")
			}
			if len(res.Copies) == 0 {
				t.Fatal("no gated weight copy")
			}
			for _, c := range res.Copies {
				if g.Node(c.Node) == nil || g.Node(c.Gate) == nil {
					t.Errorf("copy %s or its gate %s is missing", c.Node, c.Gate)
				}
			}
			t.Logf("%d groups (%d variables, %d bytes), %d copies, %d direct reads", len(res.Variables), vars, res.Bytes(), len(res.Copies), len(res.Direct))
		})
	}
}

// TestOffloadSelected offloads one group only: its nodes move, no other node does.
func TestOffloadSelected(t *testing.T) {
	m, _ := testgraph.Load(t, "../testmodels/fixtures/resnet.pb")
	res, err := OffloadVariables(m, Options{}, func(vg *VariableGroup) bool { return vg.Name == "block2/a/conv/weights" })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Variables) != 1 || len(res.Variables[0].Variables) != 2 {
		t.Fatalf("groups %+v, want block2/a/conv/weights with its momentum slot", res.Variables)
	}
	for i, nd := range res.Model.Graph.Node[:len(m.Graph.Node)] {
		if nd.GetDevice() == "" {
			continue
		}
		tied := strings.HasPrefix(nd.GetName(), "block2/a/conv/weights")
		for _, in := range nd.GetInput() {
			tied = tied || strings.HasPrefix(in, "block2/a/conv/weights")
		}
		if !tied {
			t.Errorf("node %d %s moved to %s", i, nd.GetName(), nd.GetDevice())
		}
	}
	if len(res.Copies) != 2 {
		t.Errorf("%d copies, want 2 (forward convolution; backward input gradient): %+v", len(res.Copies), res.Copies)
	}
}

// TestVerifyOffloadCatches breaks offload results in the ways VerifyOffload must notice.
func TestVerifyOffloadCatches(t *testing.T) {
	m, _ := testgraph.Load(t, "../testmodels/fixtures/cnn.pb")
	g, err := graphdef.NewGraph(m.Graph, "cnn")
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *OffloadResult {
		res, err := OffloadVariables(m, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	nodeOf := func(res *OffloadResult, name string) *npb.NodeDef {
		for i, nd := range res.Model.Graph.Node {
			if nd.GetName() == name {
				c := proto.Clone(nd).(*npb.NodeDef)
				res.Model.Graph.Node[i] = c
				return c
			}
		}
		t.Fatalf("no node %s", name)
		return nil
	}
	cases := []struct {
		name   string
		break_ func(*OffloadResult)
		want   string
	}{
		{"ungated copy", func(r *OffloadResult) { c := nodeOf(r, r.Copies[0].Node); c.Input = c.Input[:1] }, "one control input"},
		{"copy on the device", func(r *OffloadResult) { nodeOf(r, r.Copies[0].Node).Device = "/device:GPU:0" }, "not on the host"},
		{"handle split from its variable", func(r *OffloadResult) {
			for _, nd := range r.Model.Graph.Node {
				if nd.GetOp() == "ReadVariableOp" {
					nodeOf(r, nd.GetName()).Device = ""
					return
				}
			}
		}, "takes the handle"},
		{"copy miscounted", func(r *OffloadResult) { r.Copies = r.Copies[1:] }, "weight copies"},
	}
	if err := VerifyOffload(g, fresh()); err != nil {
		t.Fatalf("intact offload: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fresh()
			c.break_(r)
			err := VerifyOffload(g, r)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestParseOffloadMode(t *testing.T) {
	for _, s := range []string{"", "none", "all", "auto"} {
		if _, err := ParseOffloadMode(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParseOffloadMode("some"); err == nil {
		t.Error("mode some accepted")
	}
}

// TestTimedTrigger checks the time-based choice of a weight copy's trigger on a chain
// x -> c1 -> ... -> c8 whose node i runs in [10i, 10i+10): a copy that must start by 45 for
// its consumer c8 is triggered by c3 (ends at 40), the latest op on c8's path that ends in
// time; one that must start before anything ends gets the earliest eligible op.
func TestTimedTrigger(t *testing.T) {
	g, tm := timedChain(t)
	eligible := func(n *graphdef.Node) bool { return n.Op == "Relu" }
	c8 := []*graphdef.Node{g.Node("c8")}
	if got := timedTrigger(c8, 45, tm, eligible); got == nil || got.Name != "c3" {
		t.Errorf("deadline 45: trigger %v, want c3", got)
	}
	if got := timedTrigger(c8, 5, tm, eligible); got == nil || got.Name != "c1" {
		t.Errorf("deadline 5: trigger %v, want c1 (the earliest eligible op)", got)
	}
	if got := weightTrigger(c8, 2, eligible); got == nil || got.Name != "c6" {
		t.Errorf("ahead 2: trigger %v, want c6", got)
	}
}

// timedChain returns the chain x -> c1 -> ... -> c8 and times in which node i runs in
// [10i, 10i+10).
func timedChain(t *testing.T) (*graphdef.Graph, *triggers.Times) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }` + "\n")
	prev := "x"
	for i := 1; i <= 8; i++ {
		name := "c" + string(rune('0'+i))
		b.WriteString(`node { name: "` + name + `" op: "Relu" input: "` + prev + `" attr { key: "T" value { type: DT_FLOAT } } }` + "\n")
		prev = name
	}
	m, err := graphdef.Parse([]byte(b.String()), graphdef.FormatPBTXT, "chain")
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, "chain")
	if err != nil {
		t.Fatal(err)
	}
	tm := &triggers.Times{Start: make([]int64, len(g.Nodes)), End: make([]int64, len(g.Nodes))}
	for _, n := range g.Nodes {
		tm.Start[n.Index], tm.End[n.Index] = int64(10*n.Index), int64(10*n.Index+10)
	}
	return g, tm
}

// TestWindowStarts checks the forward schedule of copies under a byte window: copies of 4
// bytes each, due at 0, 10, 20, 30 and held until 15, 25, 35, 45, under a window of 8 bytes
// start at 0, 0 (two fit), 15 (when the first ends), 25; a copy larger than the window waits
// for every held copy; a copy with no predicted consumer is not scheduled.
func TestWindowStarts(t *testing.T) {
	due := []int64{0, 10, 20, 30, 40, -1}
	last := []int64{15, 25, 35, 45, 50, 60}
	size := []int64{4, 4, 4, 4, 9, 4}
	got := windowStarts(due, last, size, 8)
	want := []int64{0, 0, 15, 25, 45, -1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("starts %v, want %v", got, want)
		}
	}
	// Out of graph order: copies are scheduled in order of their due times.
	got = windowStarts([]int64{20, 0, 10}, []int64{35, 15, 25}, []int64{4, 4, 4}, 8)
	if want := []int64{15, 0, 0}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("reordered: starts %v, want %v", got, want)
	}
}

// TestWindowTrigger checks the trigger of a copy that may start no earlier than a time on
// the chain of TestTimedTrigger (node i runs in [10i, 10i+10)): from 45, c4 (the earliest op
// on c8's path still running at 45); from 0, c1; from after c7 ends, c7 (the nearest).
func TestWindowTrigger(t *testing.T) {
	g, tm := timedChain(t)
	eligible := func(n *graphdef.Node) bool { return n.Op == "Relu" }
	c8 := []*graphdef.Node{g.Node("c8")}
	for _, c := range []struct {
		start int64
		want  string
	}{{45, "c4"}, {0, "c1"}, {200, "c7"}} {
		if got := windowTrigger(c8, c.start, tm, eligible); got == nil || got.Name != c.want {
			t.Errorf("from %d: trigger %v, want %s", c.start, got, c.want)
		}
	}
}
