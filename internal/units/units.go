// Package units parses and formats byte sizes and durations as tfswap's users write them.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30,
	"ti": 1 << 40, "tib": 1 << 40,
}

// ParseBytes parses a size such as "65536", "64KiB", "1.5GB" or "15GiB" (SI and binary
// units, case-insensitive); a fractional size with a unit is rounded down to whole bytes. It
// fails on negative, non-finite or unitless fractional sizes.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := byteUnits[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("bad size %q (want e.g. 65536, 64KiB, 1.5GB, 15GiB)", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("bad size %q (want e.g. 65536, 64KiB, 1.5GB, 15GiB)", s)
	}
	b := v * mult
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if b != math.Trunc(b) && mult == 1 {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return int64(math.Floor(b)), nil // "7.4MiB" is 7759462 bytes
}

// FormatBytes formats n bytes with a binary unit: "512 B", "64.0 KiB", "1.50 GiB".
func FormatBytes(n int64) string {
	neg := n < 0
	m := uint64(n)
	if neg {
		m = -m // also right for math.MinInt64, whose magnitude int64 cannot hold
	}
	var s string
	switch {
	case m < 1<<10:
		s = fmt.Sprintf("%d B", m)
	case m < 1<<20:
		s = fmt.Sprintf("%.1f KiB", float64(m)/(1<<10))
	case m < 1<<30:
		s = fmt.Sprintf("%.1f MiB", float64(m)/(1<<20))
	default:
		s = fmt.Sprintf("%.2f GiB", float64(m)/(1<<30))
	}
	if neg {
		return "-" + s
	}
	return s
}
