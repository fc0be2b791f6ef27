// Package minheap is a binary min-heap over a slice. The simulator's event and ready queues
// and the topological sorts share it.
package minheap

// Ordered is an item that orders itself against another of its type.
type Ordered[T any] interface {
	Less(T) bool
}

// Heap is a min-heap of T. The zero value is an empty heap.
type Heap[T Ordered[T]] struct {
	a []T
}

// Len returns the number of items in the heap.
func (h *Heap[T]) Len() int { return len(h.a) }

// Push adds x.
func (h *Heap[T]) Push(x T) {
	h.a = append(h.a, x)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.a[i].Less(h.a[p]) {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

// Items returns the heap's items in no particular order; the caller must not change them.
func (h *Heap[T]) Items() []T { return h.a }

// Peek returns the least item without removing it. The heap must not be empty.
func (h *Heap[T]) Peek() T { return h.a[0] }

// Init makes the heap hold the items of a, which it takes over, in linear time.
func (h *Heap[T]) Init(a []T) {
	h.a = a
	for i := len(a)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// Pop removes and returns the least item. The heap must not be empty.
func (h *Heap[T]) Pop() T {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	h.down(0)
	return top
}

// down moves the item at i down until neither child is less.
func (h *Heap[T]) down(i int) {
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.a) && h.a[l].Less(h.a[m]) {
			m = l
		}
		if r < len(h.a) && h.a[r].Less(h.a[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.a[m], h.a[i] = h.a[i], h.a[m]
		i = m
	}
}

// Int is an int that orders itself, for heaps of indices.
type Int int

// Less reports whether i < j.
func (i Int) Less(j Int) bool { return i < j }
