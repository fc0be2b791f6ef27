package radix

import (
	"cmp"
	"math/rand"
	"slices"
	"testing"
)

// TestSortIsStable checks Sort against a stable comparison sort on random lists, short and
// long, with many equal keys and keys up to 2^50.
func TestSortIsStable(t *testing.T) {
	type item struct{ key, tag int64 }
	rng := rand.New(rand.NewSource(9))
	for trial := 0; trial < 60; trial++ {
		n := rng.Intn(3000)
		span := int64(1) << uint(rng.Intn(50)+1)
		xs := make([]item, n)
		var hi int64
		for i := range xs {
			xs[i] = item{rng.Int63n(span), int64(i)}
			hi = max(hi, xs[i].key)
		}
		want := slices.Clone(xs)
		slices.SortStableFunc(want, func(a, b item) int { return cmp.Compare(a.key, b.key) })
		if got := Sort(xs, hi, func(x item) int64 { return x.key }); !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d items, keys below %d): not the stable order", trial, n, span)
		}
	}
}
