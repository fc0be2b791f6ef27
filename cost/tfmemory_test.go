package cost

import (
	"strings"
	"testing"
)

// TestMinSystemMemory checks the reserve of TensorFlow 2.18's MinSystemMemory
// (tensorflow/core/common_runtime/gpu/gpu_device.cc) at the edges of its tiers.
func TestMinSystemMemory(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		avail int64
		cc    int
		want  int64
	}{
		{2<<30 - 1, 9, 225 * mib}, // below 2 GiB: 225 MiB whatever the GPU
		{2 << 30, 5, 500 * mib},
		{16 << 30, 6, 500 * mib},
		{16 << 30, 7, 1050 * mib},
		{40 << 30, 8, 1536 * mib},
		{80 << 30, 9, 1800 * mib},
		{80 << 30, 10, 1800 * mib}, // the last tier has no upper bound
	} {
		if got := MinSystemMemory(tc.avail, tc.cc); got != tc.want {
			t.Errorf("MinSystemMemory(%d, %d) = %d, want %d", tc.avail, tc.cc, got, tc.want)
		}
	}
}

// TestTFMemoryLimit checks the allocator limit of every built-in profile against its compute
// capability, and the two special cases: a profile file without a compute capability gets
// the largest reserve, and a GPU smaller than the reserve keeps all its memory.
func TestTFMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	want := map[string]int64{"5": 500 * mib, "6": 500 * mib, "7": 1050 * mib, "8": 1536 * mib, "9": 1800 * mib}
	for _, p := range Profiles() {
		maj, ok := p.CCMajor()
		if !ok {
			t.Errorf("%s: built-in profile without a compute capability", p.Name)
			continue
		}
		r, ok := want[string(rune('0'+maj))]
		if !ok {
			t.Errorf("%s: compute capability %s not covered by the test", p.Name, p.ComputeCapability)
			continue
		}
		if got := TFMemoryLimit(p); got != p.MemoryBytes-r {
			t.Errorf("%s: TFMemoryLimit = %d, want %d - %d", p.Name, got, p.MemoryBytes, r)
		}
	}
	v, _ := LookupProfile("v100-16gb")
	if got := TFMemoryLimit(v); got != 16<<30-1050*mib {
		t.Errorf("v100-16gb: %d", got)
	}
	v.ComputeCapability = ""
	if got := TFMemoryLimit(v); got != 16<<30-1800*mib {
		t.Errorf("no compute capability: %d, want the 1800 MiB reserve", got)
	}
	v.MemoryBytes = 200 * mib
	if got := TFMemoryLimit(v); got != 200*mib {
		t.Errorf("200 MiB GPU: limit %d, want all of it", got)
	}
}

// TestTFMemoryLimitByRelease: a profile names the TensorFlow release the graph runs on, and
// the reserve follows that release's rule: max(300 MiB, 6%) before 2.5 (TensorFlow 1.x's
// rule), by compute capability from 2.5 on; a release tfswap does not know is refused with
// the field named.
func TestTFMemoryLimitByRelease(t *testing.T) {
	const mib = 1 << 20
	mem := int64(16 << 30)
	sixPct := int64(float64(mem) * 0.06) // 983 MiB: 6% of 16 GiB
	v, _ := LookupProfile("v100-16gb")
	for _, tc := range []struct {
		tf      string
		reserve int64
	}{
		{"", 1050 * mib},
		{"2.18", 1050 * mib},
		{"2.5", 1050 * mib},
		{"2.4", sixPct},
		{"1.15", sixPct},
	} {
		v.TensorFlow = tc.tf
		if got := TFMemoryLimit(v); got != 16<<30-tc.reserve {
			t.Errorf("TensorFlow %q: limit %d, want %d", tc.tf, got, 16<<30-tc.reserve)
		}
	}
	// A 4 GiB GPU under the old rule: 6% is less than 300 MiB.
	small := *v
	small.MemoryBytes, small.TensorFlow = 4<<30, "1.15"
	if got := TFMemoryLimit(&small); got != 4<<30-300*mib {
		t.Errorf("4 GiB, TensorFlow 1.15: %d, want the 300 MiB floor", got)
	}
	// The release round-trips through a profile file, and a bad one is refused.
	v.TensorFlow = "2.4"
	data, err := MarshalProfile(v)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProfile(data, "v.json")
	if err != nil || p.TensorFlow != "2.4" || TFMemoryLimit(p) != TFMemoryLimit(v) {
		t.Fatalf("round trip: %v, %+v", err, p)
	}
	for _, bad := range []string{"3.0", "two", "2"} {
		v.TensorFlow = bad
		data, _ := MarshalProfile(v)
		if _, err := ParseProfile(data, "v.json"); err == nil || !strings.Contains(err.Error(), `"tensorflow"`) {
			t.Errorf("tensorflow %q: error %v, want one naming the field", bad, err)
		}
	}
}
