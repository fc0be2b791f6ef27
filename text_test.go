package tfswap

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/rewrite"
)

// TestNothingSwappedSaysWhy: a fixed-threshold rewrite that swaps nothing says why in its one
// "nothing swapped" line: no tensor met the thresholds, the consumer groups that did have no
// trigger because every op between lies inside a while loop, or have no trigger for other
// reasons, or the tensors have unknown sizes.
func TestNothingSwappedSaysWhy(t *testing.T) {
	loop := "no trigger for consumer \"g\": no eligible op (all 3 ops between them lie " + rewrite.NoTriggerInLoop + ")"
	for _, tc := range []struct {
		skipped []Skipped
		want    string
	}{
		{nil, "nothing swapped: no tensor meets the fixed thresholds; written unchanged"},
		{[]Skipped{{Tensor: "a:0", Reason: loop}, {Tensor: "b:0", Reason: loop}}, "nothing swapped: the 2 consumer group(s) that meet the fixed thresholds have no op that may trigger their swap-in: every op between producer and consumer lies inside a while loop"},
		{[]Skipped{{Tensor: "a:0", Reason: loop}, {Tensor: "b:0", Reason: "no trigger for consumer \"h\": no op lies between them"}}, "nothing swapped: the 2 consumer group(s) that meet the fixed thresholds have no op that may trigger their swap-in (-v lists them with the reasons)"},
		{[]Skipped{{Tensor: "a:0", Reason: "no _output_shapes"}}, "nothing swapped: no tensor of known size meets the fixed thresholds (1 tensors of unknown size"},
	} {
		r := &Report{Skipped: tc.skipped, Prediction: Prediction{Unchanged: true, Strategy: "lms-fixed"}}
		var b strings.Builder
		if err := r.WriteText(&b, TextOptions{Input: "in", Output: "out"}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("skipped %v: want %q in\n%s", tc.skipped, tc.want, b.String())
		}
	}
}
