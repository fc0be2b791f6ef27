package minheap

import (
	"math/rand"
	"sort"
	"testing"
)

func TestHeapSorts(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for n := 0; n < 50; n++ {
		var h Heap[Int]
		var want []int
		for i := 0; i < n; i++ {
			x := r.Intn(20)
			h.Push(Int(x))
			want = append(want, x)
		}
		sort.Ints(want)
		for i, w := range want {
			if int(h.Peek()) != w {
				t.Fatalf("n=%d: peek %d = %d, want %d", n, i, h.Peek(), w)
			}
			if got := h.Pop(); int(got) != w {
				t.Fatalf("n=%d: pop %d = %d, want %d", n, i, got, w)
			}
		}
		if h.Len() != 0 {
			t.Fatalf("n=%d: %d items left", n, h.Len())
		}
	}
}
