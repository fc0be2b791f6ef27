package triggers

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestVisitsForgetOnReset: marks made in one search are forgotten by the next, also when the
// generation counter wraps around (the marks of 2^32 searches ago must not count as seen), and
// marks reused from the pool start unseen.
func TestVisitsForgetOnReset(t *testing.T) {
	a, b := &graphdef.Node{Index: 3}, &graphdef.Node{Index: 70}
	v := &visits{}
	v.reset()
	if v.see(a) || !v.see(a) {
		t.Fatal("a node is not marked by its first visit")
	}
	v.reset()
	if v.see(a) {
		t.Fatal("a mark survived reset")
	}
	// Generation 2^32-1 marks b; after the wrap the stale stamps of generation 0 and of b's
	// generation must not match.
	v.gen = ^uint32(0)
	v.see(b)
	v.stamp[a.Index] = 1 // a mark of generation 1, 2^32 searches ago
	v.reset()
	if v.gen == 0 {
		t.Fatal("the generation wrapped to 0, the stamp of unmarked nodes")
	}
	if v.see(a) || v.see(b) {
		t.Fatal("a mark from before the wrap counts as seen")
	}
	p := pooledVisits()
	p.reset()
	if p.see(b) {
		t.Fatal("marks from the pool start seen")
	}
	visitsPool.Put(p)
}
