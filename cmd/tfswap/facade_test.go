package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/tfrun"
)

// TestCLISaysWhatTheFacadeSays: on every fixture, tfswap rewrite with a set of options
// writes the graph, the --report and the summary that the tfswap package's Plan, given the
// Options fields of the same names, returns: the report's JSON (but for the input and
// output paths, and "device_source", which the command spells "flag" where the package says
// "given"), Report.WriteText, the graph's bytes, and for a budget no plan fits, the
// NoFitError's message.
func TestCLISaysWhatTheFacadeSays(t *testing.T) {
	withGPUs(t, nil)
	const noRuntime = "neither built in nor a tfswap-runtime binary beside tfswap"
	cases := []struct {
		args []string
		opts tfswap.Options
	}{
		{nil, tfswap.Options{}},
		{[]string{"--budget", "3MiB", "--fetch", "train", "--explain"}, tfswap.Options{Budget: 3 << 20, Fetch: []string{"train"}, Explain: true}},
		{[]string{"--budget", "1MiB", "--fetch", "train"}, tfswap.Options{Budget: 1 << 20, Fetch: []string{"train"}}},
		{[]string{"--strategy", "lms-fixed", "--min-bytes", "0", "-v"}, tfswap.Options{Strategy: "lms-fixed", NoMinTensorBytes: true}},
		{[]string{"--swapout-threshold", "3", "--swapin-groupby", "0", "--min-bytes", "1KiB"}, tfswap.Options{SwapoutThreshold: 3, OneSwapInPerConsumer: true, MinTensorBytes: 1 << 10}},
		{[]string{"--device", "a100-40gb", "--strategy", "vdnn-all"}, tfswap.Options{Device: "a100-40gb", Strategy: "vdnn-all"}},
		{[]string{"--budget", "4MiB", "--fetch", "train", "--strategy", "window", "--recompute", "max"}, tfswap.Options{Budget: 4 << 20, Fetch: []string{"train"}, Strategy: "window", Recompute: "max"}},
		{[]string{"--budget", "5MiB", "--fetch", "train", "--strategy", "autoswap", "--fit-accounting", "tfswap", "--bo-iterations", "-1"},
			tfswap.Options{Budget: 5 << 20, Fetch: []string{"train"}, Strategy: "autoswap", FitAccounting: "tfswap", NoBayesianOptimisation: true}},
		{[]string{"--budget", "5MiB", "--fetch", "train", "--fit-accounting", "tfswap,grappler-ns"}, tfswap.Options{Budget: 5 << 20, Fetch: []string{"train"}, FitAccounting: "tfswap,grappler-ns"}},
		{[]string{"--budget", "20MiB", "--fetch", "train", "--batch-scale", "4", "--exclude-op", "Relu"}, tfswap.Options{Budget: 20 << 20, Fetch: []string{"train"}, BatchScale: 4, ExcludeOps: []string{"Relu"}}},
	}
	tmp := t.TempDir()
	compared, noFits, swapped := 0, 0, 0
	for _, name := range []string{"mlp", "cnn", "resnet", "lstm"} {
		in := filepath.Join("../../testmodels/fixtures", name+".pb")
		m, err := tfswap.Load(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			out, rep := filepath.Join(tmp, "out.pb"), filepath.Join(tmp, "rep.json")
			os.Remove(out)
			os.Remove(rep)
			code, stdout, stderr := runSimCLI(t, append([]string{"rewrite", in, "-o", out, "--report", rep}, tc.args...)...)
			opts := tc.opts
			opts.VisibleGPUs = facadeGPUs(nil, noRuntime)
			res, perr := tfswap.Plan(m, opts)
			if perr != nil {
				if code != exitBadInput || !strings.Contains(stderr, "tfswap: "+perr.Error()+"\n") {
					t.Errorf("%s %v: the facade fails with %v; the command exits %d: %s", name, tc.args, perr, code, stderr)
				}
				noFits++
				continue
			}
			if code != 0 {
				t.Errorf("%s %v: the facade plans; the command exits %d: %s", name, tc.args, code, stderr)
				continue
			}
			var text bytes.Buffer
			if err := res.Report.WriteText(&text, tfswap.TextOptions{Input: in, Output: out, Verbose: strings.Contains(strings.Join(tc.args, " "), "-v")}); err != nil {
				t.Fatal(err)
			}
			if stdout != text.String() {
				t.Errorf("%s %v: the command prints\n%s\nthe facade\n%s", name, tc.args, stdout, text.String())
			}
			var warned strings.Builder
			for _, w := range res.Report.Prediction.Warnings {
				warned.WriteString("tfswap: warning: " + w + "\n")
			}
			if stderr != warned.String() {
				t.Errorf("%s %v: the command warns %q, the facade %q", name, tc.args, stderr, warned.String())
			}
			data, err := os.ReadFile(rep)
			if err != nil {
				t.Fatal(err)
			}
			var cli map[string]any
			if err := json.Unmarshal(data, &cli); err != nil {
				t.Fatal(err)
			}
			if cli["input"] != in || cli["output"] != out {
				t.Errorf("%s %v: report names %v -> %v", name, tc.args, cli["input"], cli["output"])
			}
			delete(cli, "input")
			delete(cli, "output")
			if plan, ok := cli["plan"].(map[string]any); ok && plan["device_source"] == "flag" {
				plan["device_source"] = tfswap.DeviceGiven
			}
			js, err := json.Marshal(res.Report)
			if err != nil {
				t.Fatal(err)
			}
			var facade map[string]any
			if err := json.Unmarshal(js, &facade); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cli, facade) {
				t.Errorf("%s %v: the reports differ:\ncommand %s\nfacade  %s", name, tc.args, data, js)
			}
			written, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			want, err := res.Model.Marshal(tfswap.FormatPB)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(written, want) {
				t.Errorf("%s %v: the command wrote other bytes than the facade's model", name, tc.args)
			}
			if len(res.Report.Swaps) > 0 {
				swapped++
			}
			compared++
		}
	}
	// The comparison is worth something only if it covered plans that swap and plans that
	// do not fit.
	if compared < 20 || swapped < 10 || noFits < 3 {
		t.Errorf("compared %d reports (%d with swaps) and %d failures", compared, swapped, noFits)
	}
}

// TestPanicInPlanning: a panic inside planning, which the tfswap package recovers, is an
// internal error in one line (exit 3), and -v prints its stack, as a panic anywhere else is.
func TestPanicInPlanning(t *testing.T) {
	withGPUs(t, func() ([]tfrun.GPU, error) { panic(testPanicValue) })
	in := filepath.Join("../../testmodels/fixtures", "mlp.pb")
	out := filepath.Join(t.TempDir(), "out.pb")
	code, stdout, stderr := runSimCLI(t, "rewrite", in, "-o", out)
	want := "tfswap: internal error: " + testPanicValue + " (please report; -v for the stack)\n"
	if code != exitInternal || stderr != want || stdout != "" {
		t.Errorf("exit %d, stderr %q, stdout %q; want exit 3 and %q", code, stderr, stdout, want)
	}
	code, _, stderr = runSimCLI(t, "rewrite", "-v", in, "-o", out)
	if code != exitInternal || !strings.Contains(stderr, "internal error: "+testPanicValue+" (please report it, with this stack)") || !strings.Contains(stderr, "facade_test.go") {
		t.Errorf("-v: exit %d, stderr %q; want exit 3 with the stack", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an output was written")
	}
}
