package units

import (
	"math"
	"testing"
)

func TestParseBytes(t *testing.T) {
	good := map[string]int64{
		"0": 0, "65536": 65536, "64KiB": 65536, "64 kib": 65536, "1MiB": 1 << 20, "1.5GB": 1500000000,
		"15GiB": 15 << 30, "2k": 2000, "0.5KiB": 512, "3b": 3, "7.4MiB": 7759462,
	}
	for in, want := range good {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "KiB", "-1", "1.5", "12XB", "1e400", "abc", "0.5", "0.3B"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 65536: "64.0 KiB", 3 << 29: "1.50 GiB", -2048: "-2.0 KiB",
		math.MinInt64: "-8589934592.00 GiB", math.MaxInt64: "8589934592.00 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
