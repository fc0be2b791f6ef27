package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// gcPercent is the collector's GOGC setting tfswap uses when GOGC is unset: planning
// allocates many short-lived simulation results in a process that lives for seconds, and
// collecting half as often as Go's default saves about a tenth of its CPU time for a few
// percent more peak memory (ResNet-50 at 4x its batch: 1.47 s instead of 1.59 s of user time,
// 428 instead of 407 MB; measured on CPU, one core).
const gcPercent = 200

// gcHeadroom is the most the heap may grow above the live heap between two collections
// under boundGC: a million-node graph's live heap is a few GB, which gcPercent would let the
// heap triple.
const gcHeadroom = 1 << 30

// gcMinHeadroom is the least the heap may grow above the live heap between two collections
// under boundGC: planning a graph of a few thousand nodes keeps a live heap of 25 to 60 MB
// while it allocates about 2 GB of short-lived simulation results and built graphs, so
// gcPercent alone collected 31 times (ResNet-50 at 4x its batch, GODEBUG=gctrace).
const gcMinHeadroom = 256 << 20

// gcMinPercent is the lowest setting boundGC makes, so that a live heap of many times
// gcHeadroom is not collected after every small growth.
const gcMinPercent = 25

// boundGC sets the collector's percent to gcPercent and, after every collection, to what
// keeps the next goal within gcHeadroom of the live heap the collection found (but at least
// gcMinPercent) and at least gcMinHeadroom above it: heaps of a few hundred megabytes are
// collected as with gcPercent alone, small ones when they have grown by gcMinHeadroom, large
// ones before they have grown by more than a gigabyte. The live heap is read from runtime/metrics in a
// finalizer, which the runtime runs after each collection that finds its sentinel garbage.
func boundGC() {
	debug.SetGCPercent(gcPercent)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := gcPercent
	var arm func()
	arm = func() {
		// The sentinel holds a pointer so that it is not a tiny allocation, whose finalizer
		// the runtime may never run.
		s := &struct{ p *int }{}
		runtime.SetFinalizer(s, func(*struct{ p *int }) {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				if p := boundedPercent(sample[0].Value.Uint64()); p != current {
					current = p
					debug.SetGCPercent(p)
				}
			}
			arm()
		})
	}
	arm()
}

// boundedPercent is the collector's percent for a live heap of live bytes: gcPercent, or
// more so that the goal is at least gcMinHeadroom above live, or less so that it is at most
// gcHeadroom above live, but at least gcMinPercent.
func boundedPercent(live uint64) int {
	if live == 0 {
		return gcPercent
	}
	if live*gcPercent < 100*gcMinHeadroom {
		return int((100*gcMinHeadroom + live - 1) / live)
	}
	if live*gcPercent <= 100*gcHeadroom {
		return gcPercent
	}
	return max(int(100*gcHeadroom/live), gcMinPercent)
}
