package cost

import (
	"math"
	"strings"
	"testing"
)

// TestSimulateMeasuredScaled checks the scaling rule for nodes measured on another kind of
// device: one factor, the ratio of their summed estimates to their summed measurements.
func TestSimulateMeasuredScaled(t *testing.T) {
	m, err := ParseMeasured([]byte(`{"format": "tfswap-op-profile", "version": 1,
		"device": {"name": "/device:CPU:1"},
		"iterations": 3,
		"machine": {"hostname": "h", "os": "linux", "arch": "amd64", "cpu": "x", "cpus": 2, "onednn": false},
		"nodes": [{"name": "a", "device": "/job:localhost/replica:0/task:0/device:GPU:0", "compute_ns": 500},
		          {"name": "b", "device": "/device:CPU:1", "compute_ns": 1000},
		          {"name": "c", "device": "/device:CPU:1", "compute_ns": 3000}]}`), "m.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.Machine == nil || m.Machine.CPUs != 2 || m.Machine.OneDNN == nil || *m.Machine.OneDNN {
		t.Errorf("machine %+v", m.Machine)
	}
	// Unscaled: b and c keep their estimates (2048 and 3072 ns).
	r, err := Simulate(chainGraph(t), unitProfile(), Options{Measured: m, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	got := spans(r)
	if got["b"][1]-got["b"][0] != 2048 || got["c"][1]-got["c"][0] != 3072 || r.MeasuredNodes != 1 || r.MeasuredScale != 0 {
		t.Errorf("unscaled: spans %v, measured %d, scale %v", got, r.MeasuredNodes, r.MeasuredScale)
	}
	// Scaled: f = (2048 + 3072) / (1000 + 3000) = 1.28.
	r, err = Simulate(chainGraph(t), unitProfile(), Options{Measured: m, ScaleMeasured: true, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	got = spans(r)
	if got["a"][1]-got["a"][0] != 500 || got["b"][1]-got["b"][0] != 1280 || got["c"][1]-got["c"][0] != 3840 {
		t.Errorf("scaled: spans %v", got)
	}
	if r.MeasuredNodes != 3 || r.MeasuredScaled != 2 || math.Abs(r.MeasuredScale-1.28) > 1e-12 {
		t.Errorf("scaled: measured %d, scaled %d, scale %v", r.MeasuredNodes, r.MeasuredScaled, r.MeasuredScale)
	}
}

// TestSimulateMeasuredOtherGPU checks that a GPU measurement taken with another device
// profile counts as another device when scaling, and is used as it is otherwise.
func TestSimulateMeasuredOtherGPU(t *testing.T) {
	m, err := ParseMeasured([]byte(`{"format": "tfswap-op-profile", "version": 1,
		"device": {"name": "/device:GPU:0", "profile": "t4"}, "iterations": 1,
		"nodes": [{"name": "a", "compute_ns": 1000}, {"name": "b", "compute_ns": 3096}]}`), "m.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(chainGraph(t), unitProfile(), Options{Measured: m, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := spans(r); got["a"][1]-got["a"][0] != 1000 || r.MeasuredScale != 0 {
		t.Errorf("unscaled: spans %v", got)
	}
	r, err = Simulate(chainGraph(t), unitProfile(), Options{Measured: m, ScaleMeasured: true, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// f = (2048 + 2048) / (1000 + 3096) = 1.
	if got := spans(r); got["a"][1]-got["a"][0] != 1000 || got["b"][1]-got["b"][0] != 3096 || r.MeasuredScaled != 2 || r.MeasuredScale != 1 {
		t.Errorf("scaled: spans %v, scaled %d, scale %v", got, r.MeasuredScaled, r.MeasuredScale)
	}
	if _, err := ParseMeasured([]byte(`{"format": "tfswap-op-profile", "version": 1, "device": {"name": "/device:GPU:0"},
		"iterations": 1, "machine": {"ram": 1}, "nodes": []}`), "m.json"); err == nil || !strings.Contains(err.Error(), "ram") {
		t.Errorf("unknown machine field: %v", err)
	}
}
