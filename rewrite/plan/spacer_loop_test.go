package plan

import (
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// loopSpacedGraph is a while loop on the GPU: its Merge reads the loop's Enter and, by the
// back edge, its NextIteration.
const loopSpacedGraph = `
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

// TestNextSpacerNotOnMerge checks that nextSpacer does not hold back a loop's Merge: its
// spacer would read the Enter and wait for the NextIteration, which runs after the Merge
// it would hold back (a cycle, a step that never ends). The body's Relu is spaced instead.
func TestNextSpacerNotOnMerge(t *testing.T) {
	_, g := testgraph.Parse(t, loopSpacedGraph, "loopspaced.pbtxt")
	live := []cost.LiveTensor{{Name: "body:0", Since: 10}, {Name: "merge:0", Since: 20}}
	s, ok := nextSpacer(g, live, nil)
	if !ok || s.Node != "body" {
		t.Errorf("nextSpacer = %+v, %v, want a spacer before body", s, ok)
	}
}
