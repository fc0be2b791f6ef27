//go:build !tensorflow

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/tfrun"
)

// TestGPUsOfRuntime: the pure binary reads the runtime binary's GPU list, and says which
// binary failed when it cannot.
func TestGPUsOfRuntime(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	script := "#!/bin/sh\n[ \"$1\" = gpus ] && [ \"$TFSWAP_DELEGATED\" = 1 ] || exit 9\n" +
		`echo '[{"device":"/job:localhost/replica:0/task:0/device:GPU:0","index":0,"model":"Tesla V100-SXM2-16GB","compute_capability":"7.0","memory_bytes":15000000000}]'` + "\n"
	if err := os.WriteFile(ok, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	gpus, err := gpusOfRuntime(ok)
	if err != nil || len(gpus) != 1 || gpus[0].MemoryBytes != 15000000000 || gpus[0].ComputeCapability != "7.0" {
		t.Fatalf("got %+v, %v", gpus, err)
	}
	m, err := tfswap.Load("../../testmodels/fixtures/cnn.pb")
	if err != nil {
		t.Fatal(err)
	}
	res, err := tfswap.Plan(m, tfswap.Options{VisibleGPUs: facadeGPUs(func() ([]tfrun.GPU, error) { return gpusOfRuntime(ok) }, "")})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Report.Prediction; p.DeviceSource != tfswap.DeviceRuntime || p.Budget != 15000000000 || p.Device != "v100-16gb" {
		t.Errorf("planned for %s (%s) at %d", p.Device, p.DeviceSource, p.Budget)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho 'F tensorflow: no CUDA' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := gpusOfRuntime(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "no CUDA") {
		t.Errorf("failing runtime binary: %v", err)
	}
}
