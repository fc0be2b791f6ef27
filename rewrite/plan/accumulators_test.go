package plan

import (
	"bytes"
	"github.com/tfswap/tfswap/rewrite"
	"maps"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// TestLMSPlacesStackAccumulatorsOnHost checks the LMS rewrite of the v1 dynamic_rnn graph
// (testmodels/zoo/rnn_v1.pb, tf.compat.v1 while_loop gradients): every stack accumulator
// whose pushed tensor is of known size moves to the host with the Enter nodes carrying its
// handle and its push and pop, each push reads its tensor through a StackOutRole Identity
// on the host, the pop's readers read a StackInRole Identity on the compute device, nothing
// else changes device, and the output is deterministic. Above the pushed tensors' size
// (the default 64 KiB minimum) nothing moves.
func TestLMSPlacesStackAccumulatorsOnHost(t *testing.T) {
	m, g := loadTestModel(t, "zoo", "rnn_v1", "regenerate with .venv/bin/python testmodels/zoo.py")
	opts := rewrite.Options{MinTensorBytes: -1, ComputeDevice: "/device:CPU:1", HostDevice: "/device:CPU:0"}
	res, err := Rewrite(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	stacks := 0
	for _, n := range g.Nodes {
		if n.Op == "StackV2" {
			stacks++
		}
	}
	if stacks == 0 || len(res.Accumulators) != stacks {
		t.Fatalf("%d of the graph's %d stacks placed on the host, want all", len(res.Accumulators), stacks)
	}
	out := map[string]*npb.NodeDef{}
	for _, nd := range res.Model.Graph.Node {
		out[nd.Name] = nd
	}
	moved := map[string]bool{}
	for _, acc := range res.Accumulators {
		if acc.Host != "/device:CPU:0" || acc.Bytes <= 0 || len(acc.Pushed) == 0 {
			t.Errorf("accumulator %+v", acc)
		}
		for _, name := range acc.Moved {
			moved[name] = true
			nd := out[name]
			if nd.Device != acc.Host {
				t.Errorf("%s (%s) is on %q, want the host", name, nd.Op, nd.Device)
			}
			if _, ok := nd.Attr["_class"]; ok {
				t.Errorf("%s kept its colocation attr", name)
			}
		}
	}
	for _, n := range g.Nodes {
		nd := out[n.Name]
		switch n.Op {
		case "StackV2", "StackPushV2", "StackPopV2":
			if !moved[n.Name] {
				t.Errorf("%s (%s) not moved", n.Name, n.Op)
			}
		}
		if !moved[n.Name] && nd.Device != n.Def.Device {
			t.Errorf("%s (%s) moved to %q, not being a stack's", n.Name, n.Op, nd.Device)
		}
		if n.Op == "StackPushV2" {
			in := out[nd.Input[1]]
			if in == nil || string(in.Attr[rewrite.RoleAttr].GetS()) != rewrite.StackOutRole || in.Device != "/device:CPU:0" || in.Input[0] != n.Def.Input[1] {
				t.Errorf("push %s reads %s, want a %s Identity on the host of %s", n.Name, nd.Input[1], rewrite.StackOutRole, n.Def.Input[1])
			}
		}
		for j, s := range n.Def.Input {
			if p := g.Node(strings.TrimPrefix(s, "^")); p != nil && p.Op == "StackPopV2" && !strings.HasPrefix(s, "^") {
				in := out[nd.Input[j]]
				if in == nil || string(in.Attr[rewrite.RoleAttr].GetS()) != rewrite.StackInRole || in.Device != "/device:CPU:1" || in.Input[0] != p.Name {
					t.Errorf("%s reads %s for the pop %s, want a %s Identity on the compute device", n.Name, nd.Input[j], p.Name, rewrite.StackInRole)
				}
			}
		}
	}
	checkAccumulatorsVerifiedAndMinimum(t, g, m, res, opts, "stacks")
}

// TestStackWithOtherHandleReaderStays checks that a stack whose handle another op reads (an
// Identity on it read by a NoOp-like op not among the stack ops) is left on the device.
func TestStackWithOtherHandleReaderStays(t *testing.T) {
	m, _ := loadTestModel(t, "zoo", "rnn_v1", "regenerate with .venv/bin/python testmodels/zoo.py")
	m = m.Clone()
	var stack string
	for _, nd := range m.Graph.Node {
		if nd.Op == "StackV2" {
			stack = nd.Name
			break
		}
	}
	m.Graph.Node = append(m.Graph.Node, &npb.NodeDef{Name: "reads_handle", Op: "ZerosLike", Input: []string{stack}})
	res, err := Rewrite(m, rewrite.Options{MinTensorBytes: -1, ComputeDevice: "/device:CPU:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, acc := range res.Accumulators {
		if acc.Stack == stack {
			t.Fatalf("%s placed on the host though %s reads its handle", stack, "reads_handle")
		}
	}
	if len(res.Accumulators) == 0 {
		t.Fatal("no other stack placed on the host")
	}
}

// TestLMSPlacesListAccumulatorsOnHost checks the LMS rewrite of the zoo's rnn_v2 training
// step as the Grappler bridge gets it, its v2 While lowered by the session
// (testmodels/controlflow/rnn_v2_lowered.pb, testmodels/lowered.py): every TensorList
// accumulator (an Enter reading an EmptyTensorList) moves to the host with the nodes
// carrying that loop variable through the forward and the gradient loop and its pushes and
// pops, and no node of another loop variable (the dynamic_rnn's TensorArrays, DT_VARIANT
// loop variables too, stay: TensorListStack and TensorListGetItem read them); each push reads its tensor through a
// StackOutRole Identity on the host, each pop's element readers read a StackInRole Identity
// of the pop's output 1 on the compute device; the EmptyTensorLists move with them; the
// output is deterministic and Verify accepts it. At the default 64 KiB minimum (the pushed
// tensors are a few KiB) nothing moves.
func TestLMSPlacesListAccumulatorsOnHost(t *testing.T) {
	m, g := loadTestModel(t, "controlflow", "rnn_v2_lowered", "regenerate with .venv/bin/python testmodels/lowered.py")
	opts := rewrite.Options{MinTensorBytes: -1, ComputeDevice: "/device:CPU:1", HostDevice: "/device:CPU:0"}
	res, err := Rewrite(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, n := range g.Nodes {
		if n.Op == "Enter" && n.Inputs[0].Node.Op == "EmptyTensorList" {
			lists++
		}
	}
	if lists == 0 || len(res.Accumulators) != lists {
		t.Fatalf("%d of the graph's %d TensorList accumulators placed on the host, want all", len(res.Accumulators), lists)
	}
	out := map[string]*npb.NodeDef{}
	for _, nd := range res.Model.Graph.Node {
		out[nd.Name] = nd
	}
	moved := map[string]bool{}
	for _, acc := range res.Accumulators {
		if !acc.List || acc.Host != "/device:CPU:0" || acc.Bytes <= 0 || len(acc.Pushed) == 0 {
			t.Errorf("accumulator %+v", acc)
		}
		for _, name := range acc.Moved {
			if moved[name] {
				t.Errorf("%s moved by two accumulators", name)
			}
			moved[name] = true
			if nd := out[name]; nd.Device != acc.Host {
				t.Errorf("%s (%s) is on %q, want the host", name, nd.Op, nd.Device)
			} else if _, ok := nd.Attr["_class"]; ok {
				t.Errorf("%s kept its colocation attr", name)
			}
		}
	}
	for _, n := range g.Nodes {
		nd := out[n.Name]
		switch n.Op {
		case "EmptyTensorList", "TensorListPushBack", "TensorListPopBack":
			if !moved[n.Name] {
				t.Errorf("%s (%s) not moved", n.Name, n.Op)
			}
		case "Enter", "Merge", "Switch", "NextIteration", "Exit":
			dt := n.Def.Attr["T"].GetType().String()
			if moved[n.Name] && dt != "DT_VARIANT" {
				t.Errorf("%s (%s of %s) moved: not a list's", n.Name, n.Op, dt)
			}
		}
		if !moved[n.Name] && nd.Device != n.Def.Device {
			t.Errorf("%s (%s) moved to %q, not being a list's", n.Name, n.Op, nd.Device)
		}
		if n.Op == "TensorListPushBack" {
			in := out[nd.Input[1]]
			if in == nil || string(in.Attr[rewrite.RoleAttr].GetS()) != rewrite.StackOutRole || in.Device != "/device:CPU:0" || in.Input[0] != n.Def.Input[1] {
				t.Errorf("push %s reads %s, want a %s Identity on the host of %s", n.Name, nd.Input[1], rewrite.StackOutRole, n.Def.Input[1])
			}
		}
		for j, s := range n.Def.Input {
			if p := g.Node(strings.TrimPrefix(s, "^")); p != nil && p.Op == "TensorListPopBack" && s == p.Name+":1" {
				in := out[nd.Input[j]]
				if in == nil || string(in.Attr[rewrite.RoleAttr].GetS()) != rewrite.StackInRole || in.Device != "/job:localhost/replica:0/task:0/device:CPU:1" || in.Input[0] != s {
					t.Errorf("%s reads %s for the pop %s, want a %s Identity on the compute device", n.Name, nd.Input[j], p.Name, rewrite.StackInRole)
				}
			}
		}
	}
	checkAccumulatorsVerifiedAndMinimum(t, g, m, res, opts, "lists")
}

// TestListWithOtherReaderStays checks that a TensorList accumulator read by an op other than
// its loop plumbing, pushes and pops (a TensorListLength on its forward Exit) is left on the
// device, the others still move, and its EmptyTensorList, shared with lists that moved,
// stays on the device too.
func TestListWithOtherReaderStays(t *testing.T) {
	m, g := loadTestModel(t, "controlflow", "rnn_v2_lowered", "regenerate with .venv/bin/python testmodels/lowered.py")
	m = m.Clone()
	var enter, exit string
	for _, n := range g.Nodes {
		if n.Op == "Enter" && n.Inputs[0].Node.Op == "EmptyTensorList" && len(n.Inputs[0].Node.Consumers[0]) > 1 {
			enter = n.Name
			// The list's Exit: Enter -> Merge -> Switch -> Exit.
			for _, u := range n.Consumers[0][0].Node.Consumers[0] {
				if u.Node.Op == "Switch" {
					for _, x := range u.Node.Consumers[0] {
						if x.Node.Op == "Exit" {
							exit = x.Node.Name
						}
					}
				}
			}
			break
		}
	}
	if enter == "" || exit == "" {
		t.Fatal("no list with an Exit from a shared EmptyTensorList in the fixture")
	}
	list := g.Node(enter).Inputs[0].Node.Name
	m.Graph.Node = append(m.Graph.Node, &npb.NodeDef{Name: "reads_list", Op: "TensorListLength", Input: []string{exit},
		Device: g.Node(exit).Def.Device})
	res, err := Rewrite(m, rewrite.Options{MinTensorBytes: -1, ComputeDevice: "/device:CPU:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, acc := range res.Accumulators {
		if acc.Stack == enter {
			t.Fatalf("%s placed on the host though %s reads its list", enter, "reads_list")
		}
		for _, name := range acc.Moved {
			if name == list {
				t.Errorf("%s moved though the list of %s, which stays, reads it", list, enter)
			}
		}
	}
	if len(res.Accumulators) == 0 {
		t.Fatal("no other list placed on the host")
	}
}

// checkAccumulatorsVerifiedAndMinimum checks that res, the rewrite of m (graph g) with opts
// that placed accumulators (what: "stacks" or "lists") on the host, passes Verify, that
// rewriting again gives the same bytes, and that the default 64 KiB minimum places none of
// m's small accumulators.
func checkAccumulatorsVerifiedAndMinimum(t *testing.T, g *graphdef.Graph, m *graphdef.Model, res *rewrite.Result, opts rewrite.Options, what string) {
	t.Helper()
	if err := rewrite.Verify(g, res, rewrite.GateHost); err != nil {
		t.Errorf("Verify: %v", err)
	}
	again, err := Rewrite(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := proto.MarshalOptions{Deterministic: true}.Marshal(res.Model.Graph)
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(again.Model.Graph)
	if !bytes.Equal(a, b) {
		t.Error("two rewrites differ")
	}
	def, err := Rewrite(m, rewrite.Options{ComputeDevice: "/device:CPU:1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(def.Accumulators) != 0 {
		t.Errorf("the default 64 KiB minimum placed %d %s of small tensors on the host", len(def.Accumulators), what)
	}
}

// TestLMSNamesFunctionalLoopsLeft checks that the LMS rewrite names the functional While
// loops whose accumulators it leaves on the device, with their pushes (the body's
// TensorListPushBacks onto a loop variable that enters as an EmptyTensorList, counted here
// from the function library), on the zoo's rnn_v2 and the controlflow rnn_v2; the graphs
// whose loops are lowered (rnn_v1, rnn_v2 as the bridge sees it) have none.
func TestLMSNamesFunctionalLoopsLeft(t *testing.T) {
	for _, c := range []struct {
		dir, name  string
		functional bool
	}{{"zoo", "rnn_v2", true}, {"controlflow", "rnn_v2", true}, {"zoo", "rnn_v1", false}, {"controlflow", "rnn_v2_lowered", false}} {
		t.Run(c.dir+"/"+c.name, func(t *testing.T) {
			m, g := loadTestModel(t, c.dir, c.name, "")
			res, err := Rewrite(m, rewrite.Options{MinTensorBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{}
			for _, lp := range testgraph.WhilePushes(t, g) {
				for _, p := range lp.Pushes {
					k := p.Inputs[0].Node.Def.GetAttr()["index"].GetI()
					if lp.While.Inputs[k].Node.Op == "EmptyTensorList" {
						want[lp.While.Name]++
					}
				}
			}
			if c.functional != (len(want) > 0) {
				t.Fatalf("the graph's functional loops with accumulators: %v", want)
			}
			got := map[string]int{}
			for _, l := range res.FunctionalLoops {
				got[l.While] = l.Pushes
			}
			if !maps.Equal(got, want) {
				t.Errorf("functional loops named %v, want %v", got, want)
			}
		})
	}
}

// TestLMSPredictsPlacedAccumulators checks that the lms-fixed rewrite's prediction simulates
// the graph it writes, the accumulators it places on the host included: on the control-flow
// rnn_v1 (v1 stacks) and on the zoo's rnn_v2 as the bridge gets it (lowered TensorLists, its
// compute device made a GPU), with every pushed tensor above the minimum, the predicted peak and step of each compute
// device are the simulation of the written GraphDef, indexed afresh, and not above the
// unswapped peak (below it on rnn_v1, whose stacks are live at that peak).
func TestLMSPredictsPlacedAccumulators(t *testing.T) {
	p, err := cost.LookupProfile(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, name string }{{"controlflow", "rnn_v1"}, {"controlflow", "rnn_v2_lowered"}} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := loadTestModel(t, tc.dir, tc.name, "regenerate with .venv/bin/python testmodels/controlflow.py and testmodels/lowered.py")
			m = m.Clone()
			for i, nd := range m.Graph.Node {
				// The lowered graph runs on the two-device emulation: its compute device
				// becomes the GPU, as the simulation shows it.
				if strings.HasSuffix(nd.Device, "/device:CPU:1") {
					nd = proto.Clone(nd).(*npb.NodeDef)
					nd.Device = strings.TrimSuffix(nd.Device, "CPU:1") + "GPU:0"
					m.Graph.Node[i] = nd
				}
			}
			out, err := RewriteWithPlanner(m, rewrite.Options{MinTensorBytes: 1}, PlanOptions{Strategy: "lms-fixed", Profile: p})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Result.Accumulators) == 0 {
				t.Fatal("no accumulator placed on the host")
			}
			g, err := graphdef.NewGraph(out.Result.Model.Graph, tc.name+" rewritten")
			if err != nil {
				t.Fatal(err)
			}
			sim, err := cost.Simulate(g, p, cost.Options{Fetch: out.Eval.Result.Options.Fetch})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range out.Eval.Devices {
				w := sim.Device(d.simName)
				if w == nil || w.PeakBytes != d.Peak {
					t.Errorf("%s: predicted peak %d B, the written graph simulates to %+v", d.Name, d.Peak, w)
				}
			}
			if sim.StepTime != out.Eval.StepTime {
				t.Errorf("predicted step %d ns, the written graph simulates to %d ns", out.Eval.StepTime, sim.StepTime)
			}
			for i, d := range out.Eval.Devices {
				base := out.Base.Devices[i].Peak
				if d.Peak > base || tc.name == "rnn_v1" && d.Peak >= base {
					t.Errorf("%s: predicted peak %d B, unswapped %d B", d.Name, d.Peak, base)
				}
			}
		})
	}
}

// TestBudgetPlansPlaceAccumulators checks that planned strategies place while loop
// accumulators on the host where that is what fits the budget (passAccumulators): on the
// control-flow rnn_v1, whose stacks hold most of the unswapped peak by tfswap's accounting,
// auto and lms at 70% of that peak fit by it with the stacks on the host (pushed tensors
// far under the default minimum size), their prediction is the written graph's simulation,
// and the report's unswapped step is the graph as given.
func TestBudgetPlansPlaceAccumulators(t *testing.T) {
	m, g := loadTestModel(t, "controlflow", "rnn_v1", "regenerate with .venv/bin/python testmodels/controlflow.py")
	sim := cost.Options{Fetch: []string{"train"}}
	p, base := simulateDefault(t, g, sim)
	gpu := base.Devices[0]
	if base.AccumulatorBytes <= 0 {
		t.Fatal("the graph holds no accumulators")
	}
	budget := gpu.PeakBytes * 7 / 10
	for _, s := range []string{"auto", "lms"} {
		t.Run(s, func(t *testing.T) {
			out, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: s, Budget: budget, Profile: p, Sim: sim, FitAccounting: "tfswap"})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Result.Accumulators) == 0 || !out.Eval.Fits {
				t.Fatalf("%d accumulators on the host, fits %v", len(out.Result.Accumulators), out.Eval.Fits)
			}
			if out.Base.Devices[0].Peak != gpu.PeakBytes {
				t.Errorf("unswapped peak reported %d B, the graph's is %d B", out.Base.Devices[0].Peak, gpu.PeakBytes)
			}
			wg, err := graphdef.NewGraph(out.Result.Model.Graph, "rnn_v1 rewritten")
			if err != nil {
				t.Fatal(err)
			}
			w, err := cost.Simulate(wg, p, sim)
			if err != nil {
				t.Fatal(err)
			}
			if d := w.Device(gpu.Name); d == nil || d.PeakBytes != out.Eval.Devices[0].Peak || d.PeakBytes > budget {
				t.Errorf("predicted peak %d B of %d B, the written graph simulates to %+v", out.Eval.Devices[0].Peak, budget, d)
			}
		})
	}
}

// simulateDefault returns the default device's profile and g's simulation on it with sim.
func simulateDefault(t *testing.T, g *graphdef.Graph, sim cost.Options) (*cost.Profile, *cost.Result) {
	t.Helper()
	p, err := cost.LookupProfile(DefaultDevice)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cost.Simulate(g, p, sim)
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}
