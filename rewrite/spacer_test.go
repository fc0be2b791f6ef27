package rewrite

import (
	"slices"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// spacerGraph is a residual add: bn reads conv, add reads bn and the block's input x.
const spacerGraph = `
node { name: "x" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "conv" op: "Relu" input: "x" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "bn" op: "Tanh" input: "conv" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "n" op: "Shape" input: "x" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "out_type" value { type: DT_INT32 } } }
node { name: "add" op: "AddV2" input: "bn" input: "x" input: "^n" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
`

// TestAddSpacers adds a spacer before the add and checks the graph it writes (an L2Loss of
// bn waiting for x, and the add waiting for it), that Verify accepts it, and that Verify
// and AddSpacers refuse what is not a spacer: one holding back another node than the one it
// is named after, one waiting for a node that makes none of the add's inputs (conv), one
// whose tensor is not a float, and a node that is not in the graph.
func TestAddSpacers(t *testing.T) {
	m, g := testgraph.Parse(t, spacerGraph, "spacer.pbtxt")
	res, opts := unplanned(t, m, g)
	before := res.Model
	if err := AddSpacers(res, []Spacer{{Node: "add", Reads: "bn", After: []string{"x"}}}); err != nil {
		t.Fatal(err)
	}
	if res.Model == before || len(before.Graph.GetNode()) != 5 {
		t.Error("AddSpacers changed the model it was given")
	}
	var got []string
	for _, nd := range res.Model.Graph.GetNode() {
		got = append(got, nd.GetName()+"="+nd.GetOp()+"["+strings.Join(nd.GetInput(), " ")+"]")
	}
	want := []string{"x=Placeholder[]", "conv=Relu[x]", "bn=Tanh[conv]", "n=Shape[x]", "add=AddV2[bn x ^n ^tfswap/spacer/add]", "tfswap/spacer/add=L2Loss[bn ^x]"}
	if !slices.Equal(got, want) {
		t.Errorf("spaced graph %v, want %v", got, want)
	}
	sp := res.Model.Graph.GetNode()[5]
	if !sp.GetAttr()[DoNotRemoveAttr].GetB() || string(sp.GetAttr()[RoleAttr].GetS()) != SpacerRole || sp.GetDevice() != "/device:GPU:0" {
		t.Errorf("spacer attrs %v on %q", sp.GetAttr(), sp.GetDevice())
	}
	if len(res.Spacers) != 1 {
		t.Errorf("Result.Spacers = %v", res.Spacers)
	}
	if err := Verify(g, res, opts.Gate); err != nil {
		t.Errorf("Verify: %v", err)
	}
	// A spacer that holds back a node it is not named after is refused.
	bad := *res
	bad.Model = res.Model.Clone()
	conv := proto.Clone(bad.Model.Graph.Node[1]).(*npb.NodeDef)
	conv.Input = append(conv.Input, "^tfswap/spacer/add")
	bad.Model.Graph.Node[1] = conv
	if err := Verify(g, &bad, opts.Gate); err == nil || !strings.Contains(err.Error(), "spacer") {
		t.Errorf("Verify of a spacer holding back conv: %v, want an error naming the spacer", err)
	}
	// A spacer waiting for a node that makes none of the add's inputs is refused.
	far, _ := unplanned(t, m, g)
	if err := AddSpacers(far, []Spacer{{Node: "add", Reads: "bn", After: []string{"conv"}}}); err != nil {
		t.Fatal(err)
	}
	if err := Verify(g, far, opts.Gate); err == nil || !strings.Contains(err.Error(), `waits for "conv"`) {
		t.Errorf("Verify of a spacer waiting for conv: %v, want an error naming conv", err)
	}
	for _, c := range []struct {
		s    Spacer
		want string
	}{
		{Spacer{Node: "add", Reads: "n"}, `"add": n is not a half`},
		{Spacer{Node: "gone", Reads: "bn"}, `"gone" is not in the graph`},
		{Spacer{Node: "add", Reads: "bn", After: []string{"gone"}}, `"gone" is not in the graph`},
	} {
		r, _ := unplanned(t, m, g)
		n := len(r.Model.Graph.GetNode())
		if err := AddSpacers(r, []Spacer{c.s}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddSpacers(%v): %v, want an error with %q", c.s, err, c.want)
		}
		if len(r.Model.Graph.GetNode()) != n || len(r.Spacers) != 0 {
			t.Errorf("AddSpacers(%v) failed but changed the result", c.s)
		}
	}
}

// TestVerifySpacerOnMerge checks that Verify refuses a spacer before a loop's Merge
// (testgraph.GPULoop), which reads the Enter and waits for the NextIteration that runs after
// that Merge: a cycle, and a step that never ends.
func TestVerifySpacerOnMerge(t *testing.T) {
	m, g := testgraph.Parse(t, testgraph.GPULoop, "loop.pbtxt")
	res, opts := unplanned(t, m, g)
	if err := AddSpacers(res, []Spacer{{Node: "merge", Reads: "enter", After: []string{"next"}}}); err != nil {
		t.Fatal(err)
	}
	if err := Verify(g, res, opts.Gate); err == nil || !strings.Contains(err.Error(), "spacer") {
		t.Errorf("Verify of a spacer before a Merge: %v, want an error naming the spacer", err)
	}
}

// unplanned returns the rewrite of m (whose graph is g) with no swaps, and the options.
func unplanned(t *testing.T, m *graphdef.Model, g *graphdef.Graph) (*Result, Options) {
	t.Helper()
	opts, err := Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(m, Analyze(g, opts), &Plan{})
	if err != nil {
		t.Fatal(err)
	}
	return res, opts
}
