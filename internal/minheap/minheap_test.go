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

func TestInitSorts(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for n := 0; n < 50; n++ {
		var a []Int
		var want []int
		for i := 0; i < n; i++ {
			x := r.Intn(20)
			a = append(a, Int(x))
			want = append(want, x)
		}
		var h Heap[Int]
		h.Init(a)
		sort.Ints(want)
		for i, w := range want {
			if got := h.Pop(); int(got) != w {
				t.Fatalf("n=%d: pop %d = %d, want %d", n, i, got, w)
			}
			if i == n/2 {
				h.Push(Int(w)) // a push after Init keeps the order
				if got := h.Pop(); int(got) != w {
					t.Fatalf("n=%d: pop after push = %d, want %d", n, got, w)
				}
			}
		}
		if h.Len() != 0 {
			t.Fatalf("n=%d: %d items left", n, h.Len())
		}
	}
}
