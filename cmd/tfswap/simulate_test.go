package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runSimCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"tfswap"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

const simResnetFixture = "../../testmodels/fixtures/resnet.pb"

func TestSimulateCommand(t *testing.T) {
	tmp := t.TempDir()
	swapped := filepath.Join(tmp, "resnet.swap.pb")
	if code, _, errs := runSimCLI(t, "rewrite", simResnetFixture, "-o", swapped, "--strategy", "lms-fixed"); code != 0 {
		t.Fatalf("rewrite: %d %s", code, errs)
	}
	trace, plot, js := filepath.Join(tmp, "step.json"), filepath.Join(tmp, "memory.svg"), filepath.Join(tmp, "out.json")
	code, out, errs := runSimCLI(t, "simulate", swapped, "--device", "v100-16gb", "--baseline", simResnetFixture, "--fetch", "train",
		"--trace", trace, "--plot", plot, "--json", js, "--top", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"resnet.pb (baseline)", "resnet.swap.pb", "/device:GPU:0 peak", "/device:CPU:0 peak",
		"step time", "step-time overhead", "compute stalled on swap-ins", "live at the /device:GPU:0 peak"} {
		if !strings.Contains(out, want) {
			t.Errorf("output has no %q:\n%s", want, out)
		}
	}
	var rep struct {
		Result struct {
			StepTimeNS int64 `json:"step_time_ns"`
			Devices    []struct {
				Name      string `json:"name"`
				PeakBytes int64  `json:"peak_bytes"`
			} `json:"devices"`
		} `json:"result"`
		Baseline struct {
			Devices []struct {
				PeakBytes int64 `json:"peak_bytes"`
			} `json:"devices"`
		} `json:"baseline"`
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Result.Devices) != 2 || rep.Result.Devices[0].Name != "/device:GPU:0" ||
		rep.Result.Devices[0].PeakBytes >= rep.Baseline.Devices[0].PeakBytes {
		t.Errorf("swapping should lower the GPU peak: %+v vs %+v", rep.Result.Devices, rep.Baseline.Devices)
	}
	for _, f := range []string{trace, plot} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSimulateCommandErrors(t *testing.T) {
	tmp := t.TempDir()
	badProfile := filepath.Join(tmp, "bad.json")
	os.WriteFile(badProfile, []byte(`{"format": "tfswap-device-profile", "version": 1, "name": "x"}`), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"simulate", simResnetFixture}, 2, "give the GPU to simulate with --device"},
		{[]string{"simulate", simResnetFixture, "--device", "k80"}, 2, `unknown device profile "k80"`},
		{[]string{"simulate", simResnetFixture, "--device", "v100", "--device-file", badProfile}, 2, "not both"},
		{[]string{"simulate", simResnetFixture, "--device-file", badProfile}, 1, "missing required field(s)"},
		{[]string{"simulate", simResnetFixture, "--device", "v100", "--batch-scale", "0"}, 2, "--batch-scale must be at least 1"},
		{[]string{"simulate", simResnetFixture, "--device", "v100", "--plot", "m.pdf"}, 2, "--plot writes SVG or PNG"},
		{[]string{"simulate", simResnetFixture, "--device", "v100", "--fetch", "nope"}, 1, `fetch "nope": no such node`},
		{[]string{"simulate", simResnetFixture, "--device", "v100", "--conventions", "bogus"}, 2, `unknown rule "bogus"`},
		{[]string{"simulate", filepath.Join(tmp, "missing.pb"), "--device", "v100"}, 1, "no such file"},
		{[]string{"simulate", simResnetFixture, "--device", "v100", "--measured", badProfile}, 1, "not a measured op profile"},
	}
	for _, tc := range cases {
		code, _, errs := runSimCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

func TestSimulateListAndDump(t *testing.T) {
	code, out, errs := runSimCLI(t, "simulate", "--list-devices")
	if code != 0 || !strings.Contains(out, "gtx1080ti") || !strings.Contains(out, "gh200") {
		t.Fatalf("list: %d %s %s", code, out, errs)
	}
	// Each profile's default budget: TensorFlow 2.18's reserve for its compute capability.
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 6 {
			rows[f[0]] = strings.Join(f[1:6], " ")
		}
	}
	for name, want := range map[string]string{"v100-16gb": "16.00 GiB 7.0 14.97 GiB", "h100": "80.00 GiB 9.0 78.24 GiB", "gtx1080ti": "11.00 GiB 6.1 10.51 GiB"} {
		if rows[name] != want {
			t.Errorf("%s: memory, cc and budget %q, want %q", name, rows[name], want)
		}
	}
	path := filepath.Join(t.TempDir(), "p.json")
	if code, _, errs := runSimCLI(t, "simulate", "--device", "titanx", "--dump-profile", path); code != 0 {
		t.Fatalf("dump: %d %s", code, errs)
	}
	code, out, errs = runSimCLI(t, "simulate", simResnetFixture, "--device-file", path, "--fetch", "train", "--top", "0", "--batch-scale", "4")
	if code != 0 || !strings.Contains(out, "on titanx") || !strings.Contains(out, "batch x4") {
		t.Errorf("simulate with the dumped profile: %d\n%s%s", code, out, errs)
	}
}

func TestInspectPredictsPeak(t *testing.T) {
	code, out, errs := runSimCLI(t, "inspect", simResnetFixture, "--fetch", "train", "--device", "a100-40gb", "--top", "2")
	if code != 0 || !strings.Contains(out, "Predicted peak memory on a100-40gb") || !strings.Contains(out, "live at the peak") {
		t.Errorf("inspect: %d\n%s%s", code, out, errs)
	}
}
