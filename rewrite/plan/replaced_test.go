package plan

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestWrittenTriesReplacedLevel: where planRecomputeLevel planned two levels and kept one,
// the written bypass tries the other level's plan right after the kept one (at ResNet-50 8x
// B0 on v100-16gb the link's level's plan is the faster by tfswap's accounting, but the
// written bypass finds no spacing of it, and does of the byte level's: +164.6% by every
// accounting instead of +820.3%), before the other plans of the kept level's problem; not
// when that plan is no faster than the plan to beat. keepReplanned carries the other level
// to the replanned graph's stage, its overhead and strategy rebased as the kept plan's.
func TestWrittenTriesReplacedLevel(t *testing.T) {
	nodes := make([]*graphdef.Node, 4)
	for i := range nodes {
		nodes[i] = &graphdef.Node{Name: string(rune('a' + i)), Index: i}
	}
	planOf := func(i int) *rewrite.Plan {
		return &rewrite.Plan{Swaps: []rewrite.PlannedSwap{{Tensor: graphdef.Tensor{Node: nodes[i]},
			Groups: []rewrite.SwapInGroup{{Trigger: nodes[3], Uses: []graphdef.Use{{Node: nodes[3]}}}}}}}
	}
	ev := func(i int, step int64) *Evaluation {
		return &Evaluation{Plan: planOf(i), Fits: true, StepTime: step, Strategy: "auto"}
	}
	kept := ev(0, 100)
	other := ev(1, 110)
	slower := ev(2, 120)
	pr := &planRun{cache: map[string]*Evaluation{planKey(kept.Plan): kept, planKey(slower.Plan): slower}}
	rpr := &planRun{cache: map[string]*Evaluation{planKey(other.Plan): other}}
	r := &stage{pr: rpr, ev: other}
	f := &stage{pr: pr, ev: kept, replaced: r}

	got := writtenCandidates(f, nil)
	if len(got) != 3 || got[0].ev != kept || got[1] != r || got[1].pr != rpr || got[2].ev != slower || got[2].pr != pr {
		t.Errorf("candidates %v; want the kept plan, the replaced level's (with its own run), then the kept level's other plan", evsOf(got))
	}
	if got := writtenCandidates(f, ev(3, 115)); len(got) != 2 || got[1] != r {
		t.Errorf("to beat a 115 step: candidates %v; want the kept plan and the replaced level's", evsOf(got))
	}
	if got := writtenCandidates(f, ev(3, 105)); len(got) != 1 || got[0].ev != kept {
		t.Errorf("to beat a 105 step: candidates %v; want the kept plan alone", evsOf(got))
	}

	// keepReplanned: the replanned graph's stage keeps the other level, rebased.
	base := &planRun{Problem: &Problem{Base: &Evaluation{StepTime: 50}}}
	st := &planState{pr: base, final: &stage{ev: &Evaluation{StepTime: 1000, Fits: true}}}
	sub := &planState{final: f}
	st.keepReplanned(sub, nil, "+order")
	rr := st.final.replaced
	if rr == nil || rr.pr != rpr || rr.ev.Plan != other.Plan || rr.ev.Strategy != "auto+order" || rr.ev.Overhead != 1.2 {
		t.Fatalf("kept stage's replaced level %+v; want the other level's plan as auto+order at +120%%", rr)
	}
	if other.Strategy != "auto" || r.ev != other {
		t.Errorf("keepReplanned changed the replaced level's own evaluation (%q)", other.Strategy)
	}
}

// evsOf returns the step times of the candidates' plans, for messages.
func evsOf(cs []*stage) []int64 {
	var out []int64
	for _, c := range cs {
		out = append(out, c.ev.StepTime)
	}
	return out
}
