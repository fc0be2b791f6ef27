package plan

import (
	"slices"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/internal/testgraph"
	"github.com/tfswap/tfswap/rewrite"
)

// spacedGraph is a residual add whose block input x comes back from the host (a swap-in on
// the host, as tfswap writes it), and a tfswap gate.
const spacedGraph = `
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "conv" op: "Relu" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "n" op: "Shape" input: "x" attr { key: "T" value { type: DT_FLOAT } } attr { key: "out_type" value { type: DT_INT32 } } }
node { name: "bn" op: "Mul" input: "n" input: "conv" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "tfswap/x_0/swap_in_0" op: "Identity" input: "x" device: "/device:CPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "_tfswap_role" value { s: "swap_in" } } }
node { name: "add" op: "AddV2" input: "tfswap/x_0/swap_in_0" input: "bn" input: "n" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "tfswap/add/gate" op: "L2Loss" input: "add" attr { key: "T" value { type: DT_FLOAT } } attr { key: "_tfswap_role" value { s: "gate" } } }
`

// TestNextSpacer checks which op nextSpacer holds back given the buffers live at a Grappler
// peak: the producer of the buffer allocated last, passing over tfswap's nodes and ops
// already spaced; it reads the first float input made on the op's device (not the swap-in,
// made on the host, nor the int32 shape) and waits for the producers of the others there.
func TestNextSpacer(t *testing.T) {
	_, g := testgraph.Parse(t, spacedGraph, "spaced.pbtxt")
	live := []cost.LiveTensor{
		{Name: "conv:0", Since: 10},
		{Name: "tfswap/add/gate:0", Since: 40},
		{Name: "add:0", Since: 30},
		{Name: "bn:0", Since: 20},
	}
	s, ok := nextSpacer(g, live, nil)
	want := rewrite.Spacer{Node: "add", Reads: "bn", After: []string{"n"}}
	if !ok || s.Node != want.Node || s.Reads != want.Reads || !slices.Equal(s.After, want.After) {
		t.Errorf("nextSpacer = %+v, %v, want %+v", s, ok, want)
	}
	// With add spaced, bn is next: it reads conv and waits for n.
	s, ok = nextSpacer(g, live, []rewrite.Spacer{want})
	want = rewrite.Spacer{Node: "bn", Reads: "conv", After: []string{"n"}}
	if !ok || s.Node != want.Node || s.Reads != want.Reads || !slices.Equal(s.After, want.After) {
		t.Errorf("nextSpacer after add = %+v, %v, want %+v", s, ok, want)
	}
	// The placeholder reads nothing, so nothing is left once add, bn and conv are spaced.
	done := []rewrite.Spacer{{Node: "add"}, {Node: "bn"}, {Node: "conv"}}
	if s, ok := nextSpacer(g, live, done); ok {
		t.Errorf("nextSpacer with every op spaced = %+v, want none", s)
	}
}

// smallFirstGraph is a cross-entropy gradient's Mul whose first input is small (a [4, 1]
// ExpandDims) and whose second is the large backprop ([4, 1000]).
const smallFirstGraph = `
node { name: "g" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { shape { dim { size: 4 } dim { size: 1 } } } } } }
node { name: "bp" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { shape { dim { size: 4 } dim { size: 1000 } } } } } }
node { name: "mul" op: "Mul" input: "g" input: "bp" attr { key: "T" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { shape { dim { size: 4 } dim { size: 1000 } } } } } }
`

// TestNextSpacerReadsLargestInput: the spacer reads the op's largest float input, so that it
// takes long enough in Grappler's cost model to part the op from the one before it (an L2Loss
// of a [batch, 1] tensor takes about a microsecond, and the VirtualCluster read the two ops
// in one microsecond where tfswap's model did not: LSTM LM batch 2638 on gtx1080ti).
func TestNextSpacerReadsLargestInput(t *testing.T) {
	_, g := testgraph.Parse(t, smallFirstGraph, "small_first.pbtxt")
	s, ok := nextSpacer(g, []cost.LiveTensor{{Name: "mul:0", Since: 10}}, nil)
	want := rewrite.Spacer{Node: "mul", Reads: "bp", After: []string{"g"}}
	if !ok || s.Node != want.Node || s.Reads != want.Reads || !slices.Equal(s.After, want.After) {
		t.Errorf("nextSpacer = %+v, %v, want %+v", s, ok, want)
	}
}
