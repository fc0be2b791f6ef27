package rewrite

import (
	"slices"
	"testing"

	"github.com/tfswap/tfswap/internal/testgraph"
)

// guardsGraph is a graph whose Identities BypassWritten is asked to bypass, each but ok
// kept by one of its guards: dev reads a tensor made on the host (not a swap-in); relay
// reads a swap relay; byRole is read by a node with a tfswap role, byScope by a node in
// tfswap's scope without one; chained reads ok, which is bypassed first. TupleIdentities of
// the graph planned never names such an Identity today (tfswap's nodes carry both a role
// and its scope, and the rewrite adds no node between an Identity and its input on its
// device), but BypassWritten is exported and its doc promises to leave them.
const guardsGraph = `
node { name: "p" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "h" op: "Placeholder" device: "/device:CPU:0" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "r" op: "Identity" input: "p" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "_tfswap_role" value { s: "swap_relay" } } }
node { name: "group" op: "NoOp" input: "^p" device: "/device:GPU:0" }
node { name: "ok" op: "Identity" input: "p" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "dev" op: "Identity" input: "h" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "relay" op: "Identity" input: "r" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "byRole" op: "Identity" input: "p" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "byScope" op: "Identity" input: "p" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "chained" op: "Identity" input: "ok" input: "^group" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "out" op: "Neg" input: "dev" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "out2" op: "Neg" input: "relay" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "swapout" op: "Identity" input: "byRole" device: "/device:CPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "_tfswap_role" value { s: "swap_out" } } }
node { name: "tfswap/spacer/x" op: "L2Loss" input: "byScope" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "out3" op: "Neg" input: "chained" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
`

// TestBypassWrittenGuards asks BypassWritten to bypass every Identity of guardsGraph: only
// ok may be (out3's chain through chained stays: chained's input is ok, bypassed in the same
// call). Each of the four guards (the Identity's device, the relay role, a reader's role or
// scope, the chain) was checked by removing it from BypassWritten: the test then fails,
// naming the Identity bypassed wrongly.
func TestBypassWrittenGuards(t *testing.T) {
	m, _ := testgraph.Parse(t, guardsGraph, "guards")
	res := &Result{Model: m.Clone()}
	names := []string{"ok", "dev", "relay", "byRole", "byScope", "chained"}
	done, err := BypassWritten(res, names)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, []string{"ok"}) || !slices.Equal(res.Bypassed, done) {
		t.Fatalf("bypassed %v (recorded %v), want [ok]", done, res.Bypassed)
	}
	ops := map[string]string{}
	for _, nd := range res.Model.Graph.GetNode() {
		ops[nd.GetName()] = nd.GetOp()
	}
	for _, n := range names[1:] {
		if ops[n] != "Identity" {
			t.Errorf("%s became a %s, want it left an Identity", n, ops[n])
		}
	}
	if ops["ok"] != "NoOp" {
		t.Errorf("ok is a %s, want a NoOp (the case no longer bypasses anything)", ops["ok"])
	}
}
