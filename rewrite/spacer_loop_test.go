package rewrite

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/internal/testgraph"
)

// loopSpacerGraph is a while loop on the GPU: its Merge reads the loop's Enter and, by the
// back edge, its NextIteration.
const loopSpacerGraph = `
node { name: "x" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "pred" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_BOOL } } }
node { name: "enter" op: "Enter" input: "x" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "frame_name" value { s: "f" } } }
node { name: "enter_p" op: "Enter" input: "pred" device: "/device:GPU:0" attr { key: "T" value { type: DT_BOOL } } attr { key: "frame_name" value { s: "f" } } attr { key: "is_constant" value { b: true } } }
node { name: "merge" op: "Merge" input: "enter" input: "next" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
node { name: "cond" op: "LoopCond" input: "enter_p" device: "/device:GPU:0" }
node { name: "switch" op: "Switch" input: "merge" input: "cond" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "body" op: "Relu" input: "switch:1" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "next" op: "NextIteration" input: "body" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "exit" op: "Exit" input: "switch" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
`

// TestVerifySpacerOnMerge checks that Verify refuses a spacer before a loop's Merge, which
// reads the Enter and waits for the NextIteration that runs after that Merge: a cycle, and
// a step that never ends.
func TestVerifySpacerOnMerge(t *testing.T) {
	m, g := testgraph.Parse(t, loopSpacerGraph, "loopspacer.pbtxt")
	opts, err := Options{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(m, Analyze(g, opts), &Plan{})
	if err != nil {
		t.Fatal(err)
	}
	if err := AddSpacers(res, []Spacer{{Node: "merge", Reads: "enter", After: []string{"next"}}}); err != nil {
		t.Fatal(err)
	}
	if err := Verify(g, res, opts.Gate); err == nil || !strings.Contains(err.Error(), "spacer") {
		t.Errorf("Verify of a spacer before a Merge: %v, want an error naming the spacer", err)
	}
}
