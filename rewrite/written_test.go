package rewrite

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// writtenGraph is testdata/written.pbtxt: a tf.gradients-style tuple of m1 and m2 whose
// Identities sum reads; bn (a batch norm, six outputs of known size) reads m1 and triggers
// the swap-in of m1 that id1 reads in the plan writtenPlan builds, and id2 is also read by a
// Merge, so it stays.
const writtenGraph = "testdata/written.pbtxt"

// loadWritten returns the model and graph of writtenGraph and the options (GateReduce)
// its tests rewrite it with.
func loadWritten(t *testing.T) (*graphdef.Model, *graphdef.Graph, Options) {
	t.Helper()
	text, err := os.ReadFile(writtenGraph)
	if err != nil {
		t.Fatal(err)
	}
	m, g := testgraph.Parse(t, string(text), writtenGraph)
	opts, err := Options{GateKind: GateReduce}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return m, g, opts
}

// writtenPlan returns the graph of writtenGraph, the Identities TupleIdentities finds there
// (id1 alone) and its rewrite with GateReduce by a plan that swaps m1 out and back in, for
// id1, triggered by bn.
func writtenPlan(t *testing.T) (*graphdef.Graph, []string, *Result, Options) {
	t.Helper()
	m, g, opts := loadWritten(t)
	a := Analyze(g, opts)
	var names []string
	for _, n := range TupleIdentities(g, a, nil) {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"id1"}) {
		t.Fatalf("TupleIdentities = %v, want [id1]", names)
	}
	plan := &Plan{Swaps: []PlannedSwap{{Tensor: graphdef.Tensor{Node: g.Node("m1")}, Bytes: 128,
		Groups: []SwapInGroup{{Uses: []graphdef.Use{{Node: g.Node("id1"), Input: 0}}, Trigger: g.Node("bn")}}}}}
	res, err := Apply(m, a, plan)
	if err != nil {
		t.Fatal(err)
	}
	return g, names, res, opts
}

// TestBypassWritten bypasses the tuple Identity of a written plan whose input is a swap-in
// on the host: sum reads the swap-in and waits for id1's NoOp, the swap-in's recorded
// reader becomes sum, and Verify accepts it. Verify refuses a reader that reads past the
// bypassed Identity without waiting for it, and an Identity made a NoOp that the rewrite
// does not record as bypassed.
func TestBypassWritten(t *testing.T) {
	g, names, res, opts := writtenPlan(t)
	done, err := BypassWritten(res, append(names, "id2", "gone"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, []string{"id1"}) || !slices.Equal(res.Bypassed, done) {
		t.Fatalf("bypassed %v (recorded %v), want [id1]", done, res.Bypassed)
	}
	var got []string
	for _, nd := range res.Model.Graph.GetNode() {
		if n := nd.GetName(); n == "id1" || n == "sum" {
			got = append(got, n+"="+nd.GetOp()+"["+strings.Join(nd.GetInput(), " ")+"]")
		}
	}
	si := res.Swaps[0].SwapIns[0]
	want := []string{"id1=NoOp[^group]", "sum=AddV2[" + si.Node + " id2 ^bn ^id1]"}
	if !slices.Equal(got, want) {
		t.Errorf("bypassed graph %v, want %v", got, want)
	}
	if !slices.Equal(si.Consumers, []string{"sum"}) {
		t.Errorf("swap-in consumers %v, want [sum]", si.Consumers)
	}
	if err := Verify(g, res, opts.Gate); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// sum without the wait on id1's NoOp.
	bad := *res
	bad.Model = res.Model.Clone()
	at := g.Node("sum").Index
	sum := proto.Clone(bad.Model.Graph.Node[at]).(*npb.NodeDef)
	sum.Input = slices.DeleteFunc(sum.Input, func(s string) bool { return s == "^id1" })
	bad.Model.Graph.Node[at] = sum
	if err := Verify(g, &bad, opts.Gate); err == nil || !strings.Contains(err.Error(), "without waiting") {
		t.Errorf("Verify of a reader that does not wait for the bypassed Identity: %v", err)
	}
	// The same graph, not recorded as bypassed.
	bad = *res
	bad.Bypassed = nil
	if err := Verify(g, &bad, opts.Gate); err == nil || !strings.Contains(err.Error(), "id1") {
		t.Errorf("Verify of an unrecorded bypass: %v, want an error naming id1", err)
	}
	// A bypassed Identity that lost its control input on the group.
	bad = *res
	bad.Model = res.Model.Clone()
	at = g.Node("id1").Index
	id1 := proto.Clone(bad.Model.Graph.Node[at]).(*npb.NodeDef)
	id1.Input = nil
	bad.Model.Graph.Node[at] = id1
	if err := Verify(g, &bad, opts.Gate); err == nil || !strings.Contains(err.Error(), `"id1" lost control inputs`) {
		t.Errorf("Verify of a bypassed Identity without its control input: %v", err)
	}
}

// TestWidenGates widens bn's gate, an L2Loss of bn's smallest output (a [4] scale output),
// to bn's largest output (y, [8, 4]), checks that Verify accepts it, and that a trigger
// without a gate is an error that leaves the result unchanged.
func TestWidenGates(t *testing.T) {
	g, _, res, opts := writtenPlan(t)
	gate := func() *npb.NodeDef {
		for _, nd := range res.Model.Graph.GetNode() {
			if nd.GetName() == GateNodeName(g.Node("bn")) {
				return nd
			}
		}
		t.Fatal("no gate of bn")
		return nil
	}
	if in := gate().GetInput(); gate().GetOp() != "L2Loss" || !slices.Equal(in, []string{"bn:1"}) {
		t.Fatalf("gate %s reads %v, want an L2Loss of bn:1", gate().GetOp(), in)
	}
	if err := WidenGates(res, []string{"bn"}); err != nil {
		t.Fatal(err)
	}
	if in := gate().GetInput(); !slices.Equal(in, []string{"bn"}) || !slices.Equal(res.WideGates, []string{"bn"}) {
		t.Errorf("widened gate reads %v (recorded %v), want bn", in, res.WideGates)
	}
	if err := Verify(g, res, opts.Gate); err != nil {
		t.Errorf("Verify: %v", err)
	}
	before := res.Model
	if err := WidenGates(res, []string{"m2"}); err == nil || !strings.Contains(err.Error(), `"m2" has no L2Loss gate`) || res.Model != before {
		t.Errorf("widening a trigger without a gate: %v", err)
	}
}

// TestVerifyBypassedRefuses checks that Verify refuses each way a written bypass of
// writtenGraph's id1 can go wrong that TestBypassWritten does not try: the NoOp moved to
// another device, given a data input, waiting for an op the Identity did not wait for, or
// keeping an attr of the Identity's (a NoOp has none, and TensorFlow refuses a NodeDef that
// names one); and a node that never read id1 gaining a wait on its NoOp (an ordering edge
// that is in no plan).
func TestVerifyBypassedRefuses(t *testing.T) {
	g, names, res, opts := writtenPlan(t)
	if _, err := BypassWritten(res, names); err != nil {
		t.Fatal(err)
	}
	if err := Verify(g, res, opts.Gate); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// edited returns res with the node named name changed by edit.
	edited := func(name string, edit func(*npb.NodeDef)) *Result {
		bad := *res
		bad.Model = res.Model.Clone()
		at := g.Node(name).Index
		nd := proto.Clone(bad.Model.Graph.Node[at]).(*npb.NodeDef)
		edit(nd)
		bad.Model.Graph.Node[at] = nd
		return &bad
	}
	for _, c := range []struct {
		what, node string
		edit       func(*npb.NodeDef)
		want       string
	}{
		{"the NoOp on another device", "id1", func(nd *npb.NodeDef) { nd.Device = "/device:CPU:0" }, `"id1" is not a NoOp on its device`},
		{"the NoOp with a data input", "id1", func(nd *npb.NodeDef) { nd.Input = append([]string{"m1"}, nd.Input...) }, `"id1" is not a NoOp on its device without data inputs`},
		{"the NoOp waiting for an op the Identity did not", "id1", func(nd *npb.NodeDef) { nd.Input = append(nd.Input, "^late") }, `added control input "late"`},
		{"the NoOp keeping the Identity's T", "id1", func(nd *npb.NodeDef) { nd.Attr = g.Node("id1").Def.GetAttr() }, `"id1": attrs changed`},
		{"a node that never read id1 waiting for it", "late", func(nd *npb.NodeDef) { nd.Input = append(nd.Input, "^id1") }, `"late": added control input "id1"`},
	} {
		if err := Verify(g, edited(c.node, c.edit), opts.Gate); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Verify of %s: %v, want an error containing %s", c.what, err, c.want)
		}
	}
}

// TestVerifySpacedRecompute recomputes writtenGraph's m1 for id1 (triggered by bn), spaces
// the recomputed copy and late (AddSpacers), and checks that Verify accepts a recomputed copy
// that waits for its own spacer, and refuses one that also waits for another node's spacer
// (late's): a wait that is in no plan.
func TestVerifySpacedRecompute(t *testing.T) {
	m, g, opts := loadWritten(t)
	rcs := []*PlannedRecompute{{Tensor: graphdef.Tensor{Node: g.Node("m1")}, Bytes: 128, Chain: []*graphdef.Node{g.Node("m1")},
		Uses: []graphdef.Use{{Node: g.Node("id1"), Input: 0}}, Trigger: g.Node("bn")}}
	rm, descs, err := ApplyRecomputes(m, Analyze(g, opts), rcs)
	if err != nil {
		t.Fatal(err)
	}
	res := &Result{Model: rm, Recomputes: descs}
	copyName := descs[0].Copies[0]
	if err := AddSpacers(res, []Spacer{{Node: copyName, Reads: "p"}, {Node: "late", Reads: "bn"}}); err != nil {
		t.Fatal(err)
	}
	if err := Verify(g, res, opts.Gate); err != nil {
		t.Fatalf("Verify of the spaced recomputation: %v", err)
	}
	bad := *res
	bad.Model = res.Model.Clone()
	for i, nd := range bad.Model.Graph.GetNode() {
		if nd.GetName() == copyName {
			c := proto.Clone(nd).(*npb.NodeDef)
			c.Input = append(c.Input, "^"+SpacerName("late"))
			bad.Model.Graph.Node[i] = c
		}
	}
	if err := Verify(g, &bad, opts.Gate); err == nil || !strings.Contains(err.Error(), "at most its spacer") {
		t.Errorf("Verify of a recomputed copy waiting for late's spacer too: %v, want it refused", err)
	}
}
