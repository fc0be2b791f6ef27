//go:build unix

package rewrite

import (
	"fmt"
	"syscall"
	"testing"
)

// BenchmarkVerifyOrders times Verify's checks of chainOrdersResult: k-1 swap-ins whose
// triggers the original graph does not reach from the swapped tensor's producer, reached
// through one ordering edge each (orders) or waiting for the swap-out beside one unrelated
// ordering edge (waits). Besides the wall time, it reports the process's CPU time (user and
// system) per check, cpu-ns/op: run it with GOMAXPROCS=1 on a shared machine.
func BenchmarkVerifyOrders(b *testing.B) {
	for _, k := range []int{1000, 4000} {
		for _, ordered := range []bool{true, false} {
			name := fmt.Sprintf("k=%d/waits", k)
			if ordered {
				name = fmt.Sprintf("k=%d/orders", k)
			}
			b.Run(name, func(b *testing.B) {
				orig, res, gate := chainOrdersResult(b, k, ordered, 0)
				b.ResetTimer()
				start := cpuTime(b)
				for range b.N {
					if err := verify(orig, res, gate); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime returns the CPU time (user and system) the process has used, in nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
