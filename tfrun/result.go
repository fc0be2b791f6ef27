package tfrun

import (
	"fmt"
	"math"
)

// TrainResult is what a short training run produced, as raw tensors for bit-exact
// comparison: the variables after init_op, the loss of every step, and the variables after
// the last step. Variables are in the fixture's order.
type TrainResult struct {
	Initial []*Tensor
	Losses  []*Tensor
	// LossValues are Losses as numbers, for reporting.
	LossValues []float64
	Final      []*Tensor
}

// Diff lists every difference between r and o, bit for bit: initial variables, the loss at
// each step, and the final variables. names are the variables' names for the messages (the
// fixture's Variables). It returns nil when the runs are bit-identical.
func (r *TrainResult) Diff(o *TrainResult, names []string) []string {
	var diffs []string
	name := func(i int) string {
		if i < len(names) {
			return names[i]
		}
		return fmt.Sprintf("variable %d", i)
	}
	cmp := func(what string, a, b []*Tensor, label func(int) string) {
		if len(a) != len(b) {
			diffs = append(diffs, fmt.Sprintf("%s: %d vs %d tensors", what, len(a), len(b)))
			return
		}
		for i := range a {
			if !a[i].Equal(b[i]) {
				diffs = append(diffs, fmt.Sprintf("%s %s differs: %s", what, label(i), describeDiff(a[i], b[i])))
			}
		}
	}
	cmp("initial", r.Initial, o.Initial, name)
	cmp("loss", r.Losses, o.Losses, func(i int) string { return fmt.Sprintf("at step %d", i+1) })
	cmp("final", r.Final, o.Final, name)
	return diffs
}

// describeDiff says how two tensors differ: dtype or shape, or the number of differing
// elements and the largest absolute difference.
func describeDiff(a, b *Tensor) string {
	if a.DType != b.DType || !sameShape(a.Shape, b.Shape) {
		return fmt.Sprintf("%s vs %s", a, b)
	}
	va, err1 := a.Float64s()
	vb, err2 := b.Float64s()
	if err1 != nil || err2 != nil {
		return "bytes differ"
	}
	n, maxDiff, first := 0, 0.0, -1
	for i := range va {
		if math.Float64bits(va[i]) != math.Float64bits(vb[i]) {
			n++
			if first < 0 {
				first = i
			}
			if d := math.Abs(va[i] - vb[i]); d > maxDiff || math.IsNaN(d) {
				maxDiff = d
			}
		}
	}
	if first < 0 {
		return "bytes differ"
	}
	return fmt.Sprintf("%d of %d elements, max |diff| %g (element %d: %v vs %v)", n, len(va), maxDiff, first, va[first], vb[first])
}
