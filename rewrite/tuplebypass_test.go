package rewrite

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// tupleGraph is a tf.gradients-style tuple (members m1..m4 of group, each with an Identity
// waiting for it) and the Identities that must stay: id3 is fetched, id4 is on another
// device than its input, id5 has no reader, id6 waits for no group of its input, id7
// reads id1 (the outer one of two), and id8 is read by a Merge (a control-flow op).
const tupleGraph = `
node { name: "p" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "m1" op: "Relu" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "m2" op: "Tanh" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "m3" op: "Exp" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "m4" op: "Neg" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "group" op: "NoOp" input: "^m1" input: "^m2" input: "^m3" input: "^m4" device: "/device:GPU:0" }
node { name: "id1" op: "Identity" input: "m1" input: "^group" device: "/device:GPU:0"
  attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_class" value { list { s: "loc:@m1" } } }
  attr { key: "_output_shapes" value { list { shape { unknown_rank: true } } } } }
node { name: "id2" op: "Identity" input: "m2" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "id3" op: "Identity" input: "m3" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "id4" op: "Identity" input: "m4" input: "^group" device: "/device:CPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "id5" op: "Identity" input: "m1" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "id6" op: "Identity" input: "m1" input: "^m2" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "id7" op: "Identity" input: "id1" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "id8" op: "Identity" input: "m4" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "merge" op: "Merge" input: "id8" input: "m4" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
node { name: "sum" op: "AddV2" input: "id1" input: "id2:0" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "twice" op: "AddV2" input: "id2" input: "id2" input: "^id2" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "r3" op: "Relu" input: "id3" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "r4" op: "Relu" input: "id4" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "r6" op: "Relu" input: "id6" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "r7" op: "Relu" input: "id7" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "after" op: "NoOp" input: "^id1" input: "^sum" device: "/device:GPU:0" }
`

// TestBypassTupleIdentities bypasses the tuple's Identities that may go and checks, node by
// node, the graph it writes: readers read the Identity's input and wait for the NoOp that
// keeps its name, device, control inputs and attrs beginning with "_" (but _output_shapes);
// the nodes that must stay are unchanged; the input model is unchanged.
func TestBypassTupleIdentities(t *testing.T) {
	m, g := testgraph.Parse(t, tupleGraph, "tuple.pbtxt")
	before, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(g, opts)
	ids := TupleIdentities(g, a, []string{"r7", "^id3:0"})
	var names []string
	for _, n := range ids {
		names = append(names, n.Name)
	}
	if want := []string{"id1", "id2"}; !slices.Equal(names, want) {
		t.Fatalf("TupleIdentities = %v, want %v", names, want)
	}
	out := BypassTupleIdentities(m, g, ids)
	if after, _ := m.Marshal(); string(after) != string(before) {
		t.Error("BypassTupleIdentities changed its input model")
	}
	g2, err := graphdef.NewGraph(out.Graph, "bypassed")
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.SortTopo(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"id1":   "NoOp /device:GPU:0 [^group] attrs [_class]",
		"id2":   "NoOp /device:GPU:0 [^group] attrs []",
		"sum":   "AddV2 /device:GPU:0 [m1 m2 ^id1 ^id2] attrs [T]",
		"twice": "AddV2 /device:GPU:0 [m2 m2 ^id2] attrs [T]",
		"id7":   "Identity /device:GPU:0 [m1 ^group ^id1] attrs [T]",
		"after": "NoOp /device:GPU:0 [^id1 ^sum] attrs []",
	}
	for i, nd := range out.Graph.GetNode() {
		var attrs []string
		for k := range nd.GetAttr() {
			attrs = append(attrs, k)
		}
		slices.Sort(attrs)
		got := nd.GetOp() + " " + nd.GetDevice() + " [" + strings.Join(nd.GetInput(), " ") + "] attrs [" + strings.Join(attrs, " ") + "]"
		if w, ok := want[nd.GetName()]; ok {
			if got != w {
				t.Errorf("%s: %s, want %s", nd.GetName(), got, w)
			}
		} else if nd != m.Graph.GetNode()[i] {
			t.Errorf("%s changed: %s", nd.GetName(), got)
		}
	}
	// A model with the graph's nodes and an added control input (an ordering edge) keeps it.
	ordered := m.Clone()
	sum := proto.Clone(m.Graph.Node[g.Node("sum").Index]).(*npb.NodeDef)
	sum.Input = append(sum.Input, "^m3")
	ordered.Graph.Node[g.Node("sum").Index] = sum
	got := BypassTupleIdentities(ordered, g, ids).Graph.Node[g.Node("sum").Index].GetInput()
	if want := []string{"m1", "m2", "^m3", "^id1", "^id2"}; !slices.Equal(got, want) {
		t.Errorf("sum with an ordering edge: inputs %v, want %v", got, want)
	}
}

// TestTupleIdentitiesStayInLoops checks that the tuple Identities of a v1 while loop's
// gradient (testmodels/controlflow/rnn_v1.pb) stay: the fixture has tuple Identities inside
// the loop, and TupleIdentities returns only Identities outside it.
func TestTupleIdentitiesStayInLoops(t *testing.T) {
	_, g := testgraph.Load(t, filepath.Join("..", "testmodels", "controlflow", "rnn_v1.pb"))
	opts, err := Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(g, opts)
	ids := TupleIdentities(g, a, []string{"train"})
	all := TupleIdentities(g, a, nil)
	if len(ids) != len(all) {
		t.Errorf("the fetch train (no Identity) changed the Identities found: %d, %d", len(ids), len(all))
	}
	inLoop := 0
	for _, n := range g.Nodes {
		if n.Op != "Identity" || len(n.Inputs) != 1 || !a.InLoop(n) || !strings.Contains(n.Name, "tuple/control_dependency") {
			continue
		}
		inLoop++
		if slices.Contains(ids, n) {
			t.Errorf("%s is in a loop and was found", n.Name)
		}
	}
	if inLoop == 0 {
		t.Fatal("the fixture has no tuple Identity in its loop: nothing checked")
	}
	t.Logf("%d tuple Identities outside the loop, %d inside", len(ids), inLoop)
}
