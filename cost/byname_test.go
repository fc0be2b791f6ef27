package cost

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestByNameMergeMatchesSort checks that a simulation with a set-up cache orders names as a
// stable sort of them all does: the original nodes in the cache's order, the rest placed
// among them, equal names in the order of the list (an original node before an added one of
// the same name, added ones in their order), and the rest empty, first or last.
func TestByNameMergeMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 200; trial++ {
		n0 := 1 + rng.Intn(60)
		name := func() string { return fmt.Sprintf("n%02d", rng.Intn(40)) }
		g := &graphdef.Graph{}
		all := make([]named, 0, n0+10)
		for i := 0; i < n0; i++ {
			n := &graphdef.Node{Index: i, Name: name()}
			g.Nodes = append(g.Nodes, n)
			all = append(all, named{name: n.Name, node: int32(i)})
		}
		extra := rng.Intn(10)
		for j := 0; j < extra; j++ {
			x := name()
			switch trial % 4 {
			case 1:
				x = "a" + x // before every original name
			case 2:
				x = "z" + x // after every original name
			}
			if j%2 == 0 {
				all = append(all, named{name: x, node: int32(n0 + j)})
			} else {
				all = append(all, named{name: x, node: -1})
			}
		}
		s := &sim{cache: NewSetupCache(g, nil)}
		got, want := s.byName(all), byName(all)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: %v, want %v (names %v)", trial, got, want, all)
		}
	}
}

// TestSortUsEvents checks microsecondPeak's sort against a comparison sort on random lists,
// short and long, with ties in time: the times in order and the same events.
func TestSortUsEvents(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 40; trial++ {
		n := rng.Intn(4000)
		span := int64(1) << uint(rng.Intn(40)+1)
		evs := make([]usEvent, n)
		for i := range evs {
			evs[i] = usEvent{t: rng.Int63n(span), delta: int64(i)}
		}
		if trial%10 == 9 && n > 0 {
			evs[rng.Intn(n)].t = -1
		}
		want := slices.Clone(evs)
		slices.SortStableFunc(want, func(a, b usEvent) int { return cmp.Compare(a.t, b.t) })
		got := sortUsEvents(evs)
		if !slices.IsSortedFunc(got, func(a, b usEvent) int { return cmp.Compare(a.t, b.t) }) {
			t.Fatalf("trial %d (%d events, span %d): not in order by time", trial, n, span)
		}
		// The same events: sorted by time and then by their tag, they are the stable sort's.
		slices.SortStableFunc(got, func(a, b usEvent) int {
			if c := cmp.Compare(a.t, b.t); c != 0 {
				return c
			}
			return cmp.Compare(a.delta, b.delta)
		})
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d events): not the same events", trial, n)
		}
	}
}
