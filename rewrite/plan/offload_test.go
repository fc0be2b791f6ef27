package plan

import (
	"bytes"
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/triggers"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

var offloadFixtures = []string{"mlp", "cnn", "resnet", "lstm"}

func loadFixtureModel(t *testing.T, name string) *graphdef.Model {
	t.Helper()
	m, err := graphdef.Load("../../testmodels/fixtures/"+name+".pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOffloadAllFixtures offloads every variable of each fixture and checks that every
// variable and every node taking a variable's handle moved to the host, that the optimizer's
// slots went with their variable, that reads are copied through gates, that the input is
// unchanged and that the output is deterministic.
func TestOffloadAllFixtures(t *testing.T) {
	for _, name := range offloadFixtures {
		t.Run(name, func(t *testing.T) {
			m := loadFixtureModel(t, name)
			before, _ := m.Marshal()
			res, err := rewrite.OffloadVariables(m, rewrite.Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := m.Marshal()
			if !bytes.Equal(before, after) {
				t.Fatal("OffloadVariables changed its input")
			}
			res2, err := rewrite.OffloadVariables(m, rewrite.Options{}, nil)
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
				if !rewrite.VariableOps[n.Op] {
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
	m := loadFixtureModel(t, "resnet")
	res, err := rewrite.OffloadVariables(m, rewrite.Options{}, func(vg *rewrite.VariableGroup) bool { return vg.Name == "block2/a/conv/weights" })
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
	m := loadFixtureModel(t, "cnn")
	g, err := graphdef.NewGraph(m.Graph, "cnn")
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *rewrite.OffloadResult {
		res, err := rewrite.OffloadVariables(m, rewrite.Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	nodeOf := func(res *rewrite.OffloadResult, name string) *npb.NodeDef {
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
		break_ func(*rewrite.OffloadResult)
		want   string
	}{
		{"ungated copy", func(r *rewrite.OffloadResult) { c := nodeOf(r, r.Copies[0].Node); c.Input = c.Input[:1] }, "one control input"},
		{"copy on the device", func(r *rewrite.OffloadResult) { nodeOf(r, r.Copies[0].Node).Device = "/device:GPU:0" }, "not on the host"},
		{"handle split from its variable", func(r *rewrite.OffloadResult) {
			for _, nd := range r.Model.Graph.Node {
				if nd.GetOp() == "ReadVariableOp" {
					nodeOf(r, nd.GetName()).Device = ""
					return
				}
			}
		}, "takes the handle"},
		{"copy miscounted", func(r *rewrite.OffloadResult) { r.Copies = r.Copies[1:] }, "weight copies"},
	}
	if err := rewrite.VerifyOffload(g, fresh()); err != nil {
		t.Fatalf("intact offload: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fresh()
			c.break_(r)
			err := rewrite.VerifyOffload(g, r)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestParseOffloadMode(t *testing.T) {
	for _, s := range []string{"", "none", "all", "auto"} {
		if _, err := rewrite.ParseOffloadMode(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := rewrite.ParseOffloadMode("some"); err == nil {
		t.Error("mode some accepted")
	}
}

// TestPlanOffload plans the resnet fixture's training step with variables offloaded: "all"
// moves every group and the prediction's baseline is the original graph; "auto" moves
// nothing when the graph fits, and at a budget swapping alone cannot reach (no plan of
// "none" fits) it offloads and fits.
func TestPlanOffload(t *testing.T) {
	m := loadFixtureModel(t, "resnet")
	fetch := cost.Options{Fetch: []string{"train"}}
	all, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: 1 << 40, Offload: rewrite.OffloadAll, Sim: fetch})
	if err != nil {
		t.Fatal(err)
	}
	if all.Offload == nil || len(all.Offload.Variables) != 57 || all.Unchanged() {
		t.Fatalf("offload all: %+v", all.Offload)
	}
	if all.Base.Devices[0].Peak <= all.Eval.Devices[0].Peak {
		t.Errorf("offloading every variable did not lower the peak: %d, original %d", all.Eval.Devices[0].Peak, all.Base.Devices[0].Peak)
	}
	none, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: 1 << 40, Offload: rewrite.OffloadAuto, Sim: fetch})
	if err != nil {
		t.Fatal(err)
	}
	if none.Offload != nil || !none.Unchanged() {
		t.Errorf("auto offloaded a graph that fits: %+v", none.Offload)
	}
	// Since gradient tuple Identities read swap-ins (rewrite.tupleReader, RelayRole),
	// swapping alone fits 3150 KiB (it did not fit 3200 KiB before) and auto with offload
	// still fits 3100 KiB, not 3050 KiB.
	const tight = 3100 << 10
	if _, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: tight, Sim: fetch}); err == nil {
		t.Fatal("swapping alone fits 3100 KiB: the budget no longer tests the offload")
	}
	auto, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Budget: tight, Offload: rewrite.OffloadAuto, Sim: fetch})
	if err != nil {
		t.Fatal(err)
	}
	if auto.Offload == nil || len(auto.Offload.Variables) == 0 || !auto.Eval.Fits {
		t.Fatalf("auto at 3100 KiB: offload %+v, fits %v", auto.Offload, auto.Eval.Fits)
	}
	t.Logf("auto: %d groups offloaded (%s), peak %d, step %d ns (original %d ns)", len(auto.Offload.Variables), auto.Offload.Variables[0].Reason,
		auto.Eval.Devices[0].Peak, auto.Eval.StepTime, auto.Base.StepTime)
}

// TestTimedTrigger checks the time-based choice of a weight copy's trigger on a chain
// x -> c1 -> ... -> c8 whose node i runs in [10i, 10i+10): a copy that must start by 45 for
// its consumer c8 is triggered by c3 (ends at 40), the latest op on c8's path that ends in
// time; one that must start before anything ends gets the earliest eligible op.
func TestTimedTrigger(t *testing.T) {
	g, tm := timedChain(t)
	eligible := func(n *graphdef.Node) bool { return n.Op == "Relu" }
	c8 := []*graphdef.Node{g.Node("c8")}
	if got := rewrite.TimedTrigger(c8, 45, tm, eligible); got == nil || got.Name != "c3" {
		t.Errorf("deadline 45: trigger %v, want c3", got)
	}
	if got := rewrite.TimedTrigger(c8, 5, tm, eligible); got == nil || got.Name != "c1" {
		t.Errorf("deadline 5: trigger %v, want c1 (the earliest eligible op)", got)
	}
	if got := rewrite.WeightTrigger(c8, 2, eligible); got == nil || got.Name != "c6" {
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
	got := rewrite.WindowStarts(due, last, size, 8)
	want := []int64{0, 0, 15, 25, 45, -1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("starts %v, want %v", got, want)
		}
	}
	// Out of graph order: copies are scheduled in order of their due times.
	got = rewrite.WindowStarts([]int64{20, 0, 10}, []int64{35, 15, 25}, []int64{4, 4, 4}, 8)
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
		if got := rewrite.WindowTrigger(c8, c.start, tm, eligible); got == nil || got.Name != c.want {
			t.Errorf("from %d: trigger %v, want %s", c.start, got, c.want)
		}
	}
}

// TestOffloadWindowBeatsBackwardSchedule plans gpt-tiny's training step with every variable
// offloaded at a 2 MiB budget on a V100 whose host-to-device link is 10 times slower: the
// copies scheduled backwards from their consumers (the only timed schedule before the byte
// windows) stall the step on copies that start too late; scheduled forwards under a byte
// window each copy starts as early as the window allows, and the simulated step is at least
// 5% shorter (1.80 ms against 1.93 ms when written). It fails when planOffloaded stops trying
// the window schedules.
func TestOffloadWindowBeatsBackwardSchedule(t *testing.T) {
	m, err := graphdef.Load("../../testmodels/fixtures/large/gpt-tiny.pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prof, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	slow := *prof
	slow.H2D /= 10
	po := PlanOptions{Budget: 2 << 20, Offload: rewrite.OffloadAll, Profile: &slow, Sim: cost.Options{Fetch: []string{"train"}}}
	saved := copyWindowDivisors
	copyWindowDivisors = nil
	before, err := RewriteWithPlanner(m, rewrite.Options{}, po)
	copyWindowDivisors = saved
	if err != nil {
		t.Fatal(err)
	}
	after, err := RewriteWithPlanner(m, rewrite.Options{}, po)
	if err != nil {
		t.Fatal(err)
	}
	if after.Offload == nil || len(after.Offload.Copies) == 0 || !after.Eval.Fits {
		t.Fatalf("no fitting plan with copies: fits %v, offload %+v", after.Eval.Fits, after.Offload)
	}
	t.Logf("step %d ns with the window schedules (%s), %d ns backwards (in-core %d ns)", after.Eval.StepTime, after.Offload.Schedule, before.Eval.StepTime, after.Base.StepTime)
	if !strings.HasPrefix(after.Offload.Schedule, "forwards") || !strings.HasPrefix(before.Offload.Schedule, "backwards") {
		t.Errorf("schedules %q and %q, want forwards and backwards", after.Offload.Schedule, before.Offload.Schedule)
	}
	if after.Eval.StepTime >= before.Eval.StepTime*95/100 {
		t.Errorf("step %d ns with the window schedules, not 5%% below the backward schedule's %d ns", after.Eval.StepTime, before.Eval.StepTime)
	}
}
