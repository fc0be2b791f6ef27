package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"maps"
	"slices"
	"testing"
)

// TestRerunStrategiesNamesARequiredStrategy checks which strategies a pass planning a changed
// problem runs again: those of the two best fitting plans while one of them is a strategy
// auto requires, and every one (nil) when only auto's own fallback fits or nothing does (the
// ResNet-50 6x B0 cliff: a set naming auto alone skipped every required strategy), or when
// the best plan that fits costs more than +50% (ResNet-50 8x B0).
func TestRerunStrategiesNamesARequiredStrategy(t *testing.T) {
	swap := &rewrite.Plan{Swaps: []rewrite.PlannedSwap{{Bytes: 1}}}
	ev := func(strategy string, fits bool, step int64) *Evaluation {
		return &Evaluation{Plan: swap, Strategy: strategy, Fits: fits, StepTime: step, Overhead: float64(step-10) / 10}
	}
	cases := []struct {
		name  string
		cache map[string]*Evaluation
		want  []string // nil: every required strategy
	}{
		{"nothing fits", map[string]*Evaluation{"a": ev("window", false, 1), "b": ev("auto", false, 2)}, nil},
		{"only auto's fallback fits", map[string]*Evaluation{"a": ev("auto", true, 40), "b": ev("window", false, 13)}, nil},
		{"window and auto fit", map[string]*Evaluation{"a": ev("auto", true, 5), "b": ev("window", true, 10), "c": ev("lms", true, 20)},
			[]string{"auto", "window"}},
		{"two required strategies fit", map[string]*Evaluation{"a": ev("lms", true, 7), "b": ev("window", true, 3), "c": ev("vdnn-all", true, 9)},
			[]string{"lms", "window"}},
		{"the best plan that fits is costly", map[string]*Evaluation{"a": ev("window", true, 16), "b": ev("lms", true, 20)}, nil},
		{"the best plan that fits is within +50%", map[string]*Evaluation{"a": ev("window", true, 15), "b": ev("lms", true, 20)},
			[]string{"lms", "window"}},
	}
	for _, c := range cases {
		pr := &planRun{cache: c.cache}
		got := pr.rerunStrategies(autoStrategy)
		if c.want == nil {
			if got != nil {
				t.Errorf("%s: rerun %v, want every required strategy (nil)", c.name, slices.Sorted(maps.Keys(got)))
			}
			continue
		}
		if got == nil || !slices.Equal(slices.Sorted(maps.Keys(got)), c.want) {
			t.Errorf("%s: rerun %v, want %v", c.name, got, c.want)
		}
	}
}
