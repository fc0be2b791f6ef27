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

// timed is an item of the simulator's queues ordered by time: a node ready for its device's
// compute stream (at the time it became ready, seq its tie-break rank, id the node, or -1
// minus the transfer of a _Recv), and in a throttled sweep (SwapStepSpec.Throttle) a tensor
// on its way to the host or a swap-in not yet allocated (at the end of its copy or its
// allocation, seq its order of arrival on the device, id the tensor or the swap-in).
type timed struct {
	at  int64
	seq int32
	id  int32
}

// Less orders items by time, then by seq.
func (x timed) Less(o timed) bool {
	if x.at != o.at {
		return x.at < o.at
	}
	return x.seq < o.seq
}

// timedHeap is a queue of timed items: a device's ready nodes, a throttled sweep's tensors
// draining to the host and swap-ins to allocate.
type timedHeap = minheap.Heap[timed]
