// Package radix sorts lists by a non-negative integer key with a stable least-significant-digit
// radix sort, in time linear in the list for keys of a few tens of bits: the fast model's sweep
// events and the simulator's microsecond-peak events share it.
package radix

// bits is the width of a digit: a pass counts into 2^bits buckets.
const bits = 11

// Sort returns xs ordered by key, items of equal keys in their order in xs (stable). Every key
// must be in [0, hi]. The result is xs or a list of the same length that Sort allocates; the
// other's contents are unspecified.
func Sort[T any](xs []T, hi int64, key func(T) int64) []T {
	if hi <= 0 || len(xs) < 2 {
		return xs
	}
	var count [1 << bits]int
	buf := make([]T, len(xs))
	for shift := uint(0); shift < 64 && hi>>shift > 0; shift += bits {
		clear(count[:])
		for _, x := range xs {
			count[(key(x)>>shift)&(1<<bits-1)]++
		}
		for k, sum := 0, 0; k < len(count); k++ {
			count[k], sum = sum, sum+count[k]
		}
		for _, x := range xs {
			d := (key(x) >> shift) & (1<<bits - 1)
			buf[count[d]] = x
			count[d]++
		}
		xs, buf = buf, xs
	}
	return xs
}
