package cost

import "github.com/tfswap/tfswap/internal/minheap"

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

// Less orders events by time, then by the order they were scheduled.
func (e event) Less(o event) bool {
	if e.t != o.t {
		return e.t < o.t
	}
	return e.seq < o.seq
}

// eventHeap is the simulator's event queue.
type eventHeap = minheap.Heap[event]

// readyItem is a node waiting for its device's compute stream.
type readyItem struct {
	ready int64
	tie   int32
	node  int32
}

// Less orders ready nodes by the time they became ready, then by tie-break rank.
func (x readyItem) Less(o readyItem) bool {
	if x.ready != o.ready {
		return x.ready < o.ready
	}
	return x.tie < o.tie
}

// readyHeap is a device's queue of ready nodes.
type readyHeap = minheap.Heap[readyItem]
