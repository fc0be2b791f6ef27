package plan

import (
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestLinkLevelStopsAtConvolutions: on ResNet-50 at 8x B0 (batch 2 scaled by 740) on
// v100-16gb (PCIe 3.0), the greedy recomputation order takes the batch normalisations and
// ReLUs first and the convolutions last; the link's level (linkLevel at the profile's time to
// the host and back per byte) keeps the targets cheaper to make again than to move, and stops
// at the first convolution whose chain costs more than that, leaving out at least one target.
// auto's screening then prefers that level to every candidate's: its estimated step is
// shorter, as LinkLevel off shows; the byte level chosen without it is kept beside it (alt),
// for planRecomputeLevel to plan both and keep the better.
func TestLinkLevelStopsAtConvolutions(t *testing.T) {
	m := loadResNet50B2(t)
	g, err := graphdef.NewGraph(m.Graph, "resnet50")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := newProblemRun(m, rewrite.Analyze(g, rewrite.Options{}), PlanOptions{Profile: prof,
		Sim: cost.Options{Fetch: []string{"train"}, BatchScale: 740}, FitAccounting: "tfswap"})
	if err != nil {
		t.Fatal(err)
	}
	rp := pr.newRCPlanner(false)
	nsPerByte := 1e9/prof.D2H + 1e9/prof.H2D
	k := rp.linkLevel(nsPerByte)
	if k == 0 || k >= len(rp.order) {
		t.Fatalf("link level %d of %d targets; the test needs one that keeps some and leaves some", k, len(rp.order))
	}
	for i, rt := range rp.order[:k] {
		if float64(rp.deltas[i]) > nsPerByte*float64(rt.bytes) {
			t.Errorf("target %d (%s) costs %d ns for %d bytes, more than the link, but is inside the level", i, rt.t.Node.Name, rp.deltas[i], rt.bytes)
		}
	}
	next := rp.order[k]
	if float64(rp.deltas[k]) <= nsPerByte*float64(next.bytes) {
		t.Errorf("the level stops at target %d (%s), %d ns for %d bytes, which the link does not beat", k, next.t.Node.Name, rp.deltas[k], next.bytes)
	}
	if op := next.t.Node.Op; op != "Conv2D" {
		t.Errorf("the level stops at %s (%s); want the first convolution", next.t.Node.Name, op)
	}
	t.Logf("link level: %d of %d targets, stopping at %s (%d ns for %d bytes; the link %.3f ns a byte)", k, len(rp.order), next.t.Node.Name, rp.deltas[k], next.bytes, nsPerByte)
	screen := func() *rcLevel {
		lv, err := pr.screenRecomputes("auto", false, false)
		if err != nil || lv == nil {
			t.Fatalf("screening: %v, level %v", err, lv)
		}
		return lv
	}
	with := screen()
	saved := LinkLevel
	LinkLevel = false
	without := screen()
	LinkLevel = saved
	if with.est >= without.est {
		t.Errorf("the screening's level with the link's level estimates %d ns, without it %d ns; want it shorter", with.est, without.est)
	}
	if with.alt == nil || len(with.alt.sel) != len(without.sel) || with.alt.est != without.est {
		t.Errorf("the byte level the screening chose without the link's level is not planned beside it (alt %v)", with.alt)
	}
	t.Logf("screened estimate: %d ns with the link's level, %d ns without", with.est, without.est)
}
