package rewrite

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata")

// TestSurgery performs the hand-written plans of testdata/surgery on their small graphs, in
// the style of golang.org/x/tools/go/analysis/analysistest: each NAME.txt holds sections
// "-- graph --" (a GraphDef in text form), "-- plan --" (the plan, one line per swap-in
// group, wait or recomputation; see parsePlan), optionally "-- options --" ("gate device", "gate reduce")
// and "-- break --" (edits of the written graph Verify must reject; see breakResult). The
// outcome is compared with NAME.golden (go test -update rewrites it): the nodes the rewrite
// added or changed, with their device, inputs and tfswap's attrs; the Result's swaps, waits
// and recomputations; and Verify's verdict on the rewrite and on each broken copy of it.
// Every case also checks that the graph DeriveGraph hands the simulator is the graph Apply
// writes, parsed again, and that the input model is left unchanged.
func TestSurgery(t *testing.T) {
	files, err := filepath.Glob("testdata/surgery/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test cases in testdata/surgery (%v)", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(name, func(t *testing.T) {
			got := runSurgery(t, file)
			testgraph.Golden(t, strings.TrimSuffix(file, ".txt")+".golden", got, *update)
		})
	}
}

// activation is the shape of the tests' activations built with testgraph.Builder: 64 KiB
// of float32.
var activation = []int64{64, 256}

// runSurgery runs the case in file and returns its report.
func runSurgery(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sec := sections(t, string(data))
	m, err := graphdef.Parse([]byte(sec["graph"]), graphdef.FormatPBTXT, file)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{MinTensorBytes: -1}
	for _, line := range lines(sec["options"]) {
		switch line {
		case "gate device":
			opts.Gate = GateDevice
		case "gate reduce":
			opts.GateKind = GateReduce
		default:
			t.Fatalf("unknown option %q", line)
		}
	}
	opts, g, err := Prepare(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	before, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(g, opts)
	plan, rcs := parsePlan(t, g, sec["plan"])
	var out strings.Builder
	model := m
	if len(rcs) > 0 {
		rm, descs, err := ApplyRecomputes(m, a, rcs)
		if err != nil {
			fmt.Fprintf(&out, "ApplyRecomputes: error: %v\n", err)
			return out.String()
		}
		for _, d := range descs {
			fmt.Fprintf(&out, "recompute %s (%d bytes): ops %s, copies %s, trigger %s, gate %s, consumers %s\n",
				d.Tensor, d.Bytes, strings.Join(d.Ops, ","), strings.Join(d.Copies, ","), d.Trigger, d.Gate, strings.Join(d.Consumers, ","))
		}
		dumpChanged(&out, m.Graph, rm.Graph)
		verdict(&out, "Verify", Verify(g, &Result{Model: rm, Recomputes: descs}, opts.Gate))
		if len(plan.Swaps) == 0 && len(plan.Waits) == 0 {
			for _, line := range lines(sec["break"]) {
				broken := breakResult(t, func() *Result {
					rm, descs, err := ApplyRecomputes(m, a, rcs)
					if err != nil {
						t.Fatal(err)
					}
					return &Result{Model: rm, Recomputes: descs}
				}, line)
				verdict(&out, "Verify after "+line, Verify(g, broken, opts.Gate))
			}
		}
		model = rm
		if g, err = graphdef.NewGraph(rm.Graph, file); err != nil {
			t.Fatalf("the graph with its recomputations: %v", err)
		}
		a = Analyze(g, opts)
		if len(plan.Swaps) > 0 || len(plan.Waits) > 0 {
			plan, _ = parsePlan(t, g, sec["plan"])
		}
	}
	if len(plan.Swaps) > 0 || len(plan.Waits) > 0 {
		res, err := Apply(model, a, plan)
		if err != nil {
			fmt.Fprintf(&out, "Apply: error: %v\n", err)
			if _, derr := DeriveGraph(a, plan); derr == nil || derr.Error() != err.Error() {
				t.Errorf("Apply fails with %q, DeriveGraph with %v", err, derr)
			}
			return out.String()
		}
		derived, err := DeriveGraph(a, plan)
		if err != nil {
			t.Fatalf("DeriveGraph: %v", err)
		}
		written, err := graphdef.NewGraph(res.Model.Graph, "written")
		if err != nil {
			t.Fatalf("the written graph does not parse: %v", err)
		}
		if msg := testgraph.Same(derived, written); msg != "" {
			t.Errorf("DeriveGraph's graph is not the graph Apply writes: %s", msg)
		}
		dumpChanged(&out, model.Graph, res.Model.Graph)
		dumpResult(&out, res)
		verdict(&out, "Verify", Verify(g, res, opts.Gate))
		for _, line := range lines(sec["break"]) {
			broken := breakResult(t, func() *Result {
				res, err := Apply(model, a, plan)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}, line)
			verdict(&out, "Verify after "+line, Verify(g, broken, opts.Gate))
		}
	} else if sec["break"] != "" && len(rcs) == 0 {
		t.Fatal("a break section needs a plan")
	}
	after, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("the rewrite changed its input model")
	}
	return out.String()
}

// sections splits a case file into its "-- NAME --" sections.
func sections(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	cur := ""
	for _, line := range strings.SplitAfter(s, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") {
			cur = strings.TrimSpace(trimmed[3 : len(trimmed)-3])
			if _, dup := out[cur]; dup {
				t.Fatalf("section %q twice", cur)
			}
			out[cur] = ""
			continue
		}
		if cur == "" {
			continue // the case's description
		}
		out[cur] += line
	}
	if out["graph"] == "" || out["plan"] == "" {
		t.Fatal("a case needs a graph and a plan section")
	}
	return out
}

// lines returns the non-empty lines of s without comments (from "#").
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// parsePlan reads a plan written one line per decision:
//
//	swap TENSOR uses NODE:INPUT[,NODE:INPUT...] trigger NODE [trigger-waits]
//	wait NODE after TENSOR
//	recompute TENSOR chain OP[,OP...] uses NODE:INPUT[,...] trigger NODE
//
// Each swap line is one swap-in group; lines naming the same tensor are the groups of one
// swap, in order.
func parsePlan(t *testing.T, g *graphdef.Graph, s string) (*Plan, []*PlannedRecompute) {
	t.Helper()
	node := func(name string) *graphdef.Node {
		n := g.Node(name)
		if n == nil {
			t.Fatalf("plan: no node %q", name)
		}
		return n
	}
	tensor := func(s string) graphdef.Tensor {
		name, port, _ := strings.Cut(s, ":")
		p, err := strconv.Atoi(port)
		if err != nil {
			t.Fatalf("plan: tensor %q is not NODE:PORT", s)
		}
		return graphdef.Tensor{Node: node(name), Port: p}
	}
	uses := func(s string) []graphdef.Use {
		var out []graphdef.Use
		for _, u := range strings.Split(s, ",") {
			x := tensor(u) // NODE:INPUT has the form of a tensor
			out = append(out, graphdef.Use{Node: x.Node, Input: x.Port})
		}
		return out
	}
	bytes := func(x graphdef.Tensor) int64 {
		b, _, _ := x.Bytes()
		return b
	}
	plan := &Plan{}
	var rcs []*PlannedRecompute
	for _, line := range lines(s) {
		f := strings.Fields(line)
		switch {
		case f[0] == "swap" && (len(f) == 6 || len(f) == 7 && f[6] == "trigger-waits") && f[2] == "uses" && f[4] == "trigger":
			x := tensor(f[1])
			grp := SwapInGroup{Uses: uses(f[3]), Trigger: node(f[5]), TriggerWaits: len(f) == 7}
			i := slices.IndexFunc(plan.Swaps, func(ps PlannedSwap) bool { return ps.Tensor == x })
			if i < 0 {
				plan.Swaps = append(plan.Swaps, PlannedSwap{Tensor: x, Bytes: bytes(x)})
				i = len(plan.Swaps) - 1
			}
			plan.Swaps[i].Groups = append(plan.Swaps[i].Groups, grp)
		case f[0] == "wait" && len(f) == 4 && f[2] == "after":
			plan.Waits = append(plan.Waits, Wait{Node: node(f[1]), After: tensor(f[3])})
		case f[0] == "recompute" && len(f) == 8 && f[2] == "chain" && f[4] == "uses" && f[6] == "trigger":
			x := tensor(f[1])
			var chain []*graphdef.Node
			for _, op := range strings.Split(f[3], ",") {
				chain = append(chain, node(op))
			}
			rcs = append(rcs, &PlannedRecompute{Tensor: x, Bytes: bytes(x), Chain: chain, Uses: uses(f[5]), Trigger: node(f[7])})
		default:
			t.Fatalf("plan: cannot read %q", line)
		}
	}
	return plan, rcs
}

// breakResult makes the rewrite again (fresh) and breaks the written graph as line says:
//
//	device NODE DEVICE     place NODE on DEVICE
//	drop-control NODE      remove NODE's control inputs
//	drop-attr NODE ATTR    remove NODE's attr ATTR
//	input NODE I NAME      make NODE's input I read NAME
//	remove NODE            delete NODE (and the inputs that name it)
func breakResult(t *testing.T, fresh func() *Result, line string) *Result {
	t.Helper()
	res := fresh()
	gd := proto.Clone(res.Model.Graph).(*gpb.GraphDef)
	res.Model = res.Model.Clone()
	res.Model.Graph = gd
	res.built = nil
	f := strings.Fields(line)
	find := func(name string) *npb.NodeDef {
		for _, nd := range gd.Node {
			if nd.GetName() == name {
				return nd
			}
		}
		t.Fatalf("break %q: no node %q", line, name)
		return nil
	}
	switch {
	case f[0] == "device" && len(f) == 3:
		find(f[1]).Device = f[2]
	case f[0] == "drop-control" && len(f) == 2:
		nd := find(f[1])
		nd.Input = slices.DeleteFunc(nd.Input, func(in string) bool { return strings.HasPrefix(in, "^") })
	case f[0] == "drop-attr" && len(f) == 3:
		delete(find(f[1]).Attr, f[2])
	case f[0] == "input" && len(f) == 4:
		i, err := strconv.Atoi(f[2])
		nd := find(f[1])
		if err != nil || i >= len(nd.Input) {
			t.Fatalf("break %q: no input %s", line, f[2])
		}
		nd.Input[i] = f[3]
	case f[0] == "remove" && len(f) == 2:
		find(f[1])
		gd.Node = slices.DeleteFunc(gd.Node, func(nd *npb.NodeDef) bool { return nd.GetName() == f[1] })
		for _, nd := range gd.Node {
			nd.Input = slices.DeleteFunc(nd.Input, func(in string) bool { return in == "^"+f[1] })
		}
	default:
		t.Fatalf("cannot read break %q", line)
	}
	return res
}

// dumpChanged writes the nodes of after that are not in before or differ from their
// NodeDef there, in after's order.
func dumpChanged(out *strings.Builder, before, after *gpb.GraphDef) {
	old := map[string]*npb.NodeDef{}
	for _, nd := range before.GetNode() {
		old[nd.GetName()] = nd
	}
	for _, nd := range after.GetNode() {
		o, ok := old[nd.GetName()]
		if ok && proto.Equal(o, nd) {
			continue
		}
		mark := "+"
		if ok {
			mark = "~"
		}
		fmt.Fprintf(out, "%s %s = %s(%s) on %s%s\n", mark, nd.GetName(), nd.GetOp(), strings.Join(nd.GetInput(), ", "), nd.GetDevice(), attrs(nd))
	}
}

// attrs returns the attrs of nd that tfswap sets, but for the shapes and the id (the
// node's own name): " [key=value ...]", or "".
func attrs(nd *npb.NodeDef) string {
	var kv []string
	for k, v := range nd.GetAttr() {
		if k == "_output_shapes" || k == idAttr || !strings.HasPrefix(k, "_") {
			continue
		}
		var s string
		switch x := v.GetValue().(type) {
		case *apb.AttrValue_B:
			s = strconv.FormatBool(x.B)
		case *apb.AttrValue_S:
			s = string(x.S)
		default:
			s = fmt.Sprintf("%T", x) // no attr tfswap sets has another kind today
		}
		kv = append(kv, k+"="+s)
	}
	if len(kv) == 0 {
		return ""
	}
	slices.Sort(kv)
	return " [" + strings.Join(kv, " ") + "]"
}

// dumpResult writes what res says was done.
func dumpResult(out *strings.Builder, res *Result) {
	for _, s := range res.Swaps {
		fmt.Fprintf(out, "swap %s (%s, %d bytes) to %s through %s\n", s.Tensor, s.DType, s.Bytes, s.Host, s.SwapOut)
		for _, in := range s.SwapIns {
			fmt.Fprintf(out, "  in %s on %s, trigger %s, gate %s, consumers %s, distance %d\n", in.Node, in.Device, in.Trigger, in.Gate, strings.Join(in.Consumers, ","), in.Distance)
		}
	}
	for _, w := range res.Waits {
		fmt.Fprintf(out, "wait %s after %s\n", w.Node, w.SwapOut)
	}
	fmt.Fprintf(out, "bytes out %d, in %d\n", res.BytesOut(), res.BytesIn())
}

// verdict writes what Verify said.
func verdict(out *strings.Builder, what string, err error) {
	if err != nil {
		fmt.Fprintf(out, "%s: error: %v\n", what, err)
		return
	}
	fmt.Fprintf(out, "%s: ok\n", what)
}
