package cost

// event is a simulator event: an op or a transfer finishing at time t.
type event struct {
	t    int64
	seq  int64
	kind uint8
	id   int32
}

const (
	evOpDone uint8 = iota
	evXferDone
	evXferQueued // a transfer's fixed latency has passed: it joins its copy engine's queue
	evSendDone   // RecvOps: a _Send finished on its channel
	evRecvDone   // RecvOps: a _Recv finished on the receiving device
)

// eventHeap is a min-heap of events by (t, seq).
type eventHeap struct{ a []event }

func (h *eventHeap) len() int { return len(h.a) }

func (h *eventHeap) less(i, j int) bool {
	if h.a[i].t != h.a[j].t {
		return h.a[i].t < h.a[j].t
	}
	return h.a[i].seq < h.a[j].seq
}

func (h *eventHeap) push(e event) {
	h.a = append(h.a, e)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *eventHeap) peek() event { return h.a[0] }

func (h *eventHeap) pop() event {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.a) && h.less(l, m) {
			m = l
		}
		if r < len(h.a) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.a[m], h.a[i] = h.a[i], h.a[m]
		i = m
	}
	return top
}

// readyItem is a node waiting for its device's compute stream.
type readyItem struct {
	ready int64
	tie   int32
	node  int32
}

// readyHeap orders ready nodes by (ready time, tie-break rank).
type readyHeap struct{ a []readyItem }

func (h *readyHeap) len() int { return len(h.a) }

func (h *readyHeap) less(i, j int) bool {
	if h.a[i].ready != h.a[j].ready {
		return h.a[i].ready < h.a[j].ready
	}
	return h.a[i].tie < h.a[j].tie
}

func (h *readyHeap) push(x readyItem) {
	h.a = append(h.a, x)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *readyHeap) pop() readyItem {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.a) && h.less(l, m) {
			m = l
		}
		if r < len(h.a) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.a[m], h.a[i] = h.a[i], h.a[m]
		i = m
	}
	return top
}
