package cost

import (
	"reflect"
	"strings"
	"testing"
)

func TestBuiltinProfiles(t *testing.T) {
	want := []string{"a100-40gb", "a100-80gb", "gh200", "gtx1080ti", "h100", "titanx",
		"v100-16gb", "v100-16gb-nvlink", "v100-32gb", "v100-32gb-nvlink"}
	if got := ProfileNames(); !reflect.DeepEqual(got, want) {
		t.Fatalf("profiles %v", got)
	}
	for _, p := range Profiles() {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if len(p.Sources) < 2 || p.SMs == 0 || p.ComputeCapability == "" || p.Link == "" {
			t.Errorf("%s: sources, SMs, compute capability and link must be given", p.Name)
		}
	}
	// Spot checks against the datasheets.
	v100, _ := LookupProfile("v100")
	if v100.Name != "v100-16gb" || v100.MemoryBytes != 16<<30 || v100.FP32 != 14e12 || v100.MemBandwidth != 900e9 {
		t.Errorf("v100: %+v", v100)
	}
	// PCIe 3.0 x16 at vDNN's measured efficiency: 12.8 GB/s each way.
	if d := v100.H2D - 12.8e9; d > 1e6 || d < -1e6 {
		t.Errorf("v100 H2D %v", v100.H2D)
	}
	ti, _ := LookupProfile("GTX-1080-Ti")
	if ti.Name != "gtx1080ti" || ti.FP32 < 11.33e12 || ti.FP32 > 11.35e12 {
		t.Errorf("1080 Ti: %v", ti.FP32)
	}
	if _, err := LookupProfile("k80"); err == nil || !strings.Contains(err.Error(), "v100-16gb") {
		t.Errorf("unknown profile error %v", err)
	}
	// Lookup returns copies.
	a, _ := LookupProfile("h100")
	a.FP32 = 1
	if b, _ := LookupProfile("h100"); b.FP32 == 1 {
		t.Error("LookupProfile returned the built-in itself")
	}
}

func TestProfileFileRoundTrip(t *testing.T) {
	for _, p := range Profiles() {
		data, err := MarshalProfile(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParseProfile(data, p.Name+".json")
		if err != nil {
			t.Fatalf("%s: %v\n%s", p.Name, err, data)
		}
		if !reflect.DeepEqual(p, q) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", p.Name, q, p)
		}
	}
}

func TestParseProfile(t *testing.T) {
	minimal := `{"format": "tfswap-device-profile", "version": 1, "name": "mine", "memory_bytes": 8589934592,
		"fp32_flops": 1e13, "mem_bytes_per_s": 5e11, "d2h_bytes_per_s": 1e10, "h2d_bytes_per_s": 1.2e10}`
	p, err := ParseProfile([]byte(minimal), "mine.json")
	if err != nil {
		t.Fatal(err)
	}
	// Defaults: FP16 = FP32, no TF32, two copy engines, the default latencies.
	if p.FP16 != 1e13 || p.TF32 != 0 || !p.Duplex || p.LaunchLatency != defaultLaunchLatency || p.H2D != 1.2e10 {
		t.Errorf("defaults: %+v", p)
	}
	bad := []struct{ name, json, want string }{
		{"not json", `{`, "not a device profile"},
		{"unknown field", strings.Replace(minimal, `"name"`, `"nmae": "x", "name"`, 1), `unknown field "nmae"`},
		{"wrong format", strings.Replace(minimal, "tfswap-device-profile", "x", 1), `"format" must be`},
		{"wrong version", strings.Replace(minimal, `"version": 1`, `"version": 2`, 1), "unsupported profile version 2"},
		{"missing", strings.Replace(minimal, `"fp32_flops": 1e13, `, "", 1), "missing required field(s): fp32_flops"},
		{"negative", strings.Replace(minimal, `"d2h_bytes_per_s": 1e10`, `"d2h_bytes_per_s": -1`, 1), "d2h_bytes_per_s must be a positive number"},
		{"wrong type", strings.Replace(minimal, `"memory_bytes": 8589934592`, `"memory_bytes": "8GiB"`, 1), `field "memory_bytes"`},
		{"bad capability", strings.Replace(minimal, `"name": "mine"`, `"name": "mine", "compute_capability": "volta"`, 1), "compute_capability"},
		{"trailing", minimal + `{}`, "trailing data"},
	}
	for _, tc := range bad {
		_, err := ParseProfile([]byte(tc.json), "p.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "p.json: ") {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestParseMeasured(t *testing.T) {
	ok := `{"format": "tfswap-op-profile", "version": 1, "device": {"name": "/device:GPU:0"}, "iterations": 2,
		"nodes": [{"name": "a", "compute_ns": 10, "output_bytes": [4, -1]}]}`
	m, err := ParseMeasured([]byte(ok), "m.json")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := m.Marshal(); err != nil || !strings.Contains(string(data), `"compute_ns": 10`) {
		t.Errorf("marshal: %v %s", err, data)
	}
	bad := []struct{ name, json, want string }{
		{"format", strings.Replace(ok, "tfswap-op-profile", "x", 1), `"format" must be`},
		{"version", strings.Replace(ok, `"version": 1`, `"version": 9`, 1), "unsupported measured profile version 9"},
		{"no device", strings.Replace(ok, `"name": "/device:GPU:0"`, `"model": "x"`, 1), "missing device.name"},
		{"iterations", strings.Replace(ok, `"iterations": 2`, `"iterations": 0`, 1), "iterations must be at least 1"},
		{"no time", strings.Replace(ok, `"compute_ns": 10, `, "", 1), `node "a": missing compute_ns`},
		{"negative", strings.Replace(ok, `"compute_ns": 10`, `"compute_ns": -5`, 1), "must not be negative"},
		{"duplicate", strings.Replace(ok, `"nodes": [`, `"nodes": [{"name": "a", "compute_ns": 1}, `, 1), `node "a" is listed twice`},
		{"unknown field", strings.Replace(ok, `"iterations"`, `"iters": 1, "iterations"`, 1), `unknown field "iters"`},
		{"bad device", strings.Replace(ok, `"compute_ns": 10`, `"compute_ns": 10, "device": "gpu0"`, 1), "device"},
	}
	for _, tc := range bad {
		_, err := ParseMeasured([]byte(tc.json), "m.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
