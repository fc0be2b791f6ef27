package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const zooDir = "../../testmodels/zoo/"

// inspectGPUPeak runs inspect on args and returns the predicted GPU peak line's figure and
// the standard error.
func inspectGPUPeak(t *testing.T, args ...string) (string, string) {
	t.Helper()
	code, out, errs := runSimCLI(t, append([]string{"inspect"}, args...)...)
	if code != 0 {
		t.Fatalf("inspect %v: exit %d: %s", args, code, errs)
	}
	m := regexp.MustCompile(`(?m)^\s*/device:GPU:0\s+([0-9.]+ [KMG]iB) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("inspect %v: no predicted GPU peak in:\n%s", args, out)
	}
	return m[1], errs
}

// TestShapeInferenceCLI checks the unknown-size warning and --batch on the zoo's graphs:
// MobileNetV2 written without shapes predicts the same peak as with them, silently; with an
// unknown batch it warns, naming the share and the fixes, until --batch gives the batch,
// which restores the peak of the same model written at that batch.
func TestShapeInferenceCLI(t *testing.T) {
	want, errs := inspectGPUPeak(t, zooDir+"mobilenetv2.pb")
	if strings.Contains(errs, "warning") {
		t.Errorf("mobilenetv2 (with shapes) warns: %s", errs)
	}
	got, errs := inspectGPUPeak(t, zooDir+"noshapes.pb")
	if got != want || strings.Contains(errs, "warning") {
		t.Errorf("noshapes: peak %s (want %s, as mobilenetv2), stderr %q", got, want, errs)
	}
	got, errs = inspectGPUPeak(t, zooDir+"unknown_batch.pb")
	for _, w := range []string{"warning", "unknown_batch.pb", "tensors (13.2%) are unknown", "as_graph_def(add_shapes=True)", "--batch N"} {
		if !strings.Contains(errs, w) {
			t.Errorf("unknown_batch without --batch: stderr has no %q: %s", w, errs)
		}
	}
	if got == want {
		t.Errorf("unknown_batch without --batch predicts %s, as with the batch known", got)
	}
	got, errs = inspectGPUPeak(t, "--batch", "4", zooDir+"unknown_batch.pb")
	if got != want || strings.Contains(errs, "warning") {
		t.Errorf("unknown_batch --batch 4: peak %s (want %s, as mobilenetv2), stderr %q", got, want, errs)
	}
	for _, bad := range []string{"0", "-2"} {
		code, _, errs := runSimCLI(t, "inspect", "--batch", bad, zooDir+"unknown_batch.pb")
		if code == 0 || !strings.Contains(errs, "--batch") {
			t.Errorf("--batch %s: exit %d, stderr %q", bad, code, errs)
		}
	}
}

// TestShapeInferenceReport checks that rewrite --report records the shape statistics, and
// that the rewrite warns too.
func TestShapeInferenceReport(t *testing.T) {
	tmp := t.TempDir()
	for _, tc := range []struct {
		args    []string
		warn    bool
		batch   int64
		unknown bool
	}{
		{[]string{zooDir + "unknown_batch.pb"}, true, 0, true},
		{[]string{"--batch", "4", zooDir + "unknown_batch.pb"}, false, 4, false},
	} {
		rep, out := filepath.Join(tmp, "r.json"), filepath.Join(tmp, "out.pb")
		code, _, errs := runSimCLI(t, append([]string{"rewrite", "-o", out, "--report", rep, "--strategy", "lms-fixed"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("rewrite %v: exit %d: %s", tc.args, code, errs)
		}
		if got := strings.Contains(errs, "tensors (13.2%) are unknown"); got != tc.warn {
			t.Errorf("rewrite %v: warning %v, want %v: %s", tc.args, got, tc.warn, errs)
		}
		data, err := os.ReadFile(rep)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Shapes *struct {
				Engine   string `json:"engine"`
				Batch    int64  `json:"batch"`
				Outputs  int    `json:"outputs"`
				Unknown  int    `json:"unknown"`
				Inferred int    `json:"inferred"`
			} `json:"shapes"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		if r.Shapes == nil || r.Shapes.Outputs == 0 {
			t.Fatalf("rewrite %v: report has no shapes: %s", tc.args, data[:min(400, len(data))])
		}
		share := float64(r.Shapes.Unknown) / float64(r.Shapes.Outputs)
		if r.Shapes.Batch != tc.batch || (share > 0.05) != tc.unknown || (tc.batch > 0 && (r.Shapes.Inferred == 0 || r.Shapes.Engine == "")) {
			t.Errorf("rewrite %v: report shapes %+v", tc.args, *r.Shapes)
		}
	}
}
