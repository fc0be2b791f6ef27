package plan

import (
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// TestNextSpacerNotOnMerge checks that nextSpacer does not hold back a loop's Merge: its
// spacer would read the Enter and wait for the NextIteration, which runs after the Merge
// it would hold back (a cycle, a step that never ends). The body's Relu is spaced instead.
func TestNextSpacerNotOnMerge(t *testing.T) {
	_, g := testgraph.Parse(t, testgraph.GPULoop, "loop.pbtxt")
	live := []cost.LiveTensor{{Name: "body:0", Since: 10}, {Name: "merge:0", Since: 20}}
	s, ok := nextSpacer(g, live, nil)
	if !ok || s.Node != "body" {
		t.Errorf("nextSpacer = %+v, %v, want a spacer before body", s, ok)
	}
}
