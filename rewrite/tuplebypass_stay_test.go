package rewrite

import (
	"slices"
	"testing"

	"github.com/tfswap/tfswap/internal/testgraph"
)

// stayingTupleGraph is a tuple of a reference variable v (VariableV2), two gradients m and
// k and a gradient c read in a conditional branch. The Identity idv reads v before the
// Assign that waits for it, which may give v a new buffer (validate_shape false), and r
// reads idv after that Assign. idk2 is the outer Identity of two chained tuples (group2
// waits for idk), and idc is read by an op of the branch (it reads the Switch's output).
const stayingTupleGraph = `
node { name: "v" op: "VariableV2" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { unknown_rank: true } } } }
node { name: "p" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "pred" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_BOOL } } }
node { name: "m" op: "Relu" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "k" op: "Tanh" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "c" op: "Exp" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "group" op: "NoOp" input: "^v" input: "^m" input: "^k" input: "^c" device: "/device:GPU:0" }
node { name: "idv" op: "Identity" input: "v" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "idm" op: "Identity" input: "m" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "idk" op: "Identity" input: "k" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "idc" op: "Identity" input: "c" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "group2" op: "NoOp" input: "^idk" device: "/device:GPU:0" }
node { name: "idk2" op: "Identity" input: "idk" input: "^group2" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "assign" op: "Assign" input: "v" input: "m" input: "^idv" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "validate_shape" value { b: false } } }
node { name: "r" op: "Mul" input: "idv" input: "idm" input: "^assign" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "rk" op: "Relu" input: "idk2" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "sw" op: "Switch" input: "p" input: "pred" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "rc" op: "AddV2" input: "sw:1" input: "idc" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "merge" op: "Merge" input: "sw:0" input: "rc" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
`

// TestTupleIdentitiesThatStay checks Identities TupleIdentities must leave: the Identity of
// a reference (its readers would read the variable itself, after the Assign, and see its
// new buffer), the outer of two chained tuple Identities (bypassing both would leave rk
// reading a NoOp), and one read by an op of a conditional branch. The gradient's Identity
// idm and the inner chained one idk go.
func TestTupleIdentitiesThatStay(t *testing.T) {
	_, g := testgraph.Parse(t, stayingTupleGraph, "staying.pbtxt")
	opts, err := Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(g, opts)
	if !a.Conditional(g.Node("rc")) || a.Conditional(g.Node("idc")) {
		t.Fatal("rc is not conditional, or idc is: the branch reader is not checked")
	}
	var names []string
	for _, n := range TupleIdentities(g, a, []string{"r", "rk", "merge"}) {
		names = append(names, n.Name)
	}
	if want := []string{"idm", "idk"}; !slices.Equal(names, want) {
		t.Errorf("TupleIdentities = %v, want %v", names, want)
	}
}

// TestTupleIdentitiesPreserved checks that a preserved tuple Identity (Options.Preserve, as
// the Grappler bridge passes a session's fed nodes and Grappler's nodes to preserve) stays,
// and so does one read by a preserved node, whose inputs tfswap never redirects; without
// either preserved, both go.
func TestTupleIdentitiesPreserved(t *testing.T) {
	_, g := testgraph.Parse(t, tupleGraph, "tuple.pbtxt")
	found := func(preserve ...string) []string {
		opts, err := Options{Preserve: preserve}.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range TupleIdentities(g, Analyze(g, opts), []string{"r7", "id3"}) {
			names = append(names, n.Name)
		}
		return names
	}
	if got, want := found(), []string{"id1", "id2"}; !slices.Equal(got, want) {
		t.Fatalf("nothing preserved: TupleIdentities = %v, want %v", got, want)
	}
	if got, want := found("id1"), []string{"id2"}; !slices.Equal(got, want) {
		t.Errorf("id1 preserved: TupleIdentities = %v, want %v", got, want)
	}
	if got, want := found("twice"), []string{"id1"}; !slices.Equal(got, want) {
		t.Errorf("twice (a reader of id2) preserved: TupleIdentities = %v, want %v", got, want)
	}
}
