package cost

import (
	"math/rand"
	"slices"
	"testing"
)

// TestThrottleHoldTakesTheOldestCandidates checks hold's walk of a device's drains heap
// against a full scan (hold before d3f5382): the tensors on their way to the host that
// are candidates, sorted by the drains' order (the end of their swap-out, then their
// arrival), are taken oldest first until the op's load is under the target; the wait is for
// the last one taken and the stall is its swap-out's end plus the latency. Each trial has
// up to 60 tensors in the drains, about half of them not candidates (their last read before
// the gap is still to come, their last read is over, or they have ended), in random
// arrival order with tied ends, so the tensors to take lie in both subtrees of the heap and
// behind non-candidates.
func TestThrottleHoldTakesTheOldestCandidates(t *testing.T) {
	rng := rand.New(rand.NewSource(32))
	const t0, load = 100, 1000
	deep, waits := 0, 0
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.Intn(60)
		spec := &SwapStepSpec{Latency: int64(rng.Intn(3)),
			Devices: []SwapDevice{{Compute: true, Curve: NewLoadTree([]MemPoint{{T: 0, Bytes: load, Max: load}})}, {}},
			Ops:     []StepOp{{Device: 0, Hold: true, Next: t0 + 10}},
		}
		for i := 0; i < n; i++ {
			tn := SwappedTensor{Device: 0, Bytes: int64(1 + rng.Intn(100)), LastNear: t0 - 10, LastEnd: t0 + 50}
			switch rng.Intn(6) {
			case 0:
				tn.LastNear = t0 + 5 // its last read before the gap is still to come
			case 1:
				tn.LastEnd = t0 // its last read is over
			}
			spec.Tensors = append(spec.Tensors, tn)
			spec.Outs = append(spec.Outs, SwapOut{Tensor: int32(i)})
		}
		target := load - int64(rng.Intn(30*n+1))
		spec.Throttle = []int64{target, 0}
		s := NewSwapStep(spec, make([]bool, n))
		th := newThrottling(s)
		// The tensors reach the drains in a random order, their swap-outs ending at times
		// with ties; some end before the op.
		ended := make([]bool, n)
		type drain struct {
			tensor int32
			done   int64
			seq    int
		}
		var ds []drain
		for k, i := range rng.Perm(n) {
			done := int64(rng.Intn(2 * n))
			th.swappedOut(int32(i), done)
			ds = append(ds, drain{int32(i), done, k})
			if rng.Intn(6) == 0 {
				th.ended[i], ended[i] = true, true
			}
		}
		// The full scan: the candidates in the drains' order, taken until the load is
		// under the target.
		slices.SortFunc(ds, func(a, b drain) int {
			if a.done != b.done {
				return int(a.done - b.done)
			}
			return a.seq - b.seq
		})
		var acc int64
		want, wantAt, rank, taken := int32(-1), int64(0), 0, 0
		if load > target {
			for k, x := range ds {
				tn := spec.Tensors[x.tensor]
				if tn.LastNear > t0 || ended[x.tensor] || tn.LastEnd <= t0 {
					continue
				}
				acc += tn.Bytes
				want, wantAt, rank = x.tensor, x.done, k
				taken++
				if load-acc <= target {
					break
				}
			}
		}
		got := th.hold(0, t0)
		if want < 0 {
			if got != 0 || len(s.waits) != 0 {
				t.Fatalf("trial %d: no tensor to wait for, but hold returned stall %d and waits %v", trial, got, s.waits)
			}
			continue
		}
		if len(s.waits) != 1 || s.waits[0] != (StepWait{Op: 0, Out: want}) {
			t.Fatalf("trial %d: hold's waits %v, want op 0 waiting for swap-out %d (the %d-th candidate taken, %d-th in the drains' order)", trial, s.waits, want, taken, rank)
		}
		if w := wantAt + spec.Latency - t0; got != w {
			t.Fatalf("trial %d: hold's stall %d, want %d", trial, got, w)
		}
		waits++
		if rank >= 3 && taken >= 2 {
			deep++
		}
	}
	// The trials must wait for tensors past the heap's first levels after taking several,
	// or the walk's order is hardly checked.
	if deep < 200 {
		t.Fatalf("only %d of %d waits took several tensors past the drains' third", deep, waits)
	}
	t.Logf("%d waits, %d of them taking several tensors past the drains' third", waits, deep)
}
