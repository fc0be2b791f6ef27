package main

import "testing"

func TestBoundedPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, gcPercent},
		{1 << 20, 25600},               // 1 MiB live: 257 MiB goal
		{64 << 20, 400},                // 64 MiB live: 320 MiB goal
		{100 << 20, 256},               // 100 MiB live: 356 MiB goal
		{gcMinHeadroom / 2, gcPercent}, // goal live + 256 MiB exactly
		{gcMinHeadroom/2 - 1<<20, 202}, // just below: the goal is held at live + 256 MiB
		{300 << 20, gcPercent},
		{gcHeadroom / 2, gcPercent},      // goal live + 1 GiB exactly
		{gcHeadroom/2 + 1<<20, 199},      // just above: the goal is held at live + 1 GiB
		{gcHeadroom, 100},                // 1 GiB live: 2 GiB goal
		{2 * gcHeadroom, 50},             // 2 GiB live: 3 GiB goal
		{100 * gcHeadroom, gcMinPercent}, // the floor
	} {
		if got := boundedPercent(c.live); got != c.want {
			t.Errorf("boundedPercent(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}
