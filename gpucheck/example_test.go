package gpucheck

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the constructed example in docs/GPU_CHECK.md")

const (
	exampleDoc   = "../docs/GPU_CHECK.md"
	exampleBegin = "<!-- BEGIN constructed example: go test ./gpucheck -run TestConstructedExample -update -->\n"
	exampleEnd   = "<!-- END constructed example -->\n"
)

// TestConstructedExample produces the example report of docs/GPU_CHECK.md from the fake GPU
// of TestCheckWithFakeGPU (constructed steps, not measurements) and checks that the document
// holds it; -update writes it there.
func TestConstructedExample(t *testing.T) {
	dir := t.TempDir()
	rep, err := Check(Config{Models: []string{"mlp"}, Warmup: 1, Steps: 3, IdentitySteps: 2, Dir: dir, HostArch: "amd64"},
		Env{GPU: testGPU(), Generator: &mlpGenerator{dir: dir}, Runner: &fakeGPURunner{limit: 64 << 20}, TensorFlow: "2.18.0"})
	if err != nil {
		t.Fatal(err)
	}
	rep.Kind = KindConstructed
	rep.Note = "Constructed by `go test ./gpucheck -run TestConstructedExample`: a fake GPU (a V100 as TensorFlow lists one, with 64 MiB for TensorFlow) whose runs are steps constructed by `profiling/fakegpu`, and whose bit-identity verdict compares digests the fake derives from the graphs' shapes; no figure here was measured."
	var b bytes.Buffer
	rep.WriteMarkdown(&b)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n<details><summary>The same report as JSON</summary>\n\n```json\n")
	b.Write(js)
	b.WriteString("\n```\n\n</details>\n")
	doc, err := os.ReadFile(exampleDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, exampleBegin), strings.Index(s, exampleEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no example block (%q ... %q)", exampleDoc, exampleBegin, exampleEnd)
	}
	want := s[:i+len(exampleBegin)] + b.String() + s[j:]
	if *update {
		if err := os.WriteFile(exampleDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != s {
		t.Errorf("the example in %s is not what the check produces now (go test ./gpucheck -run TestConstructedExample -update rewrites it)", exampleDoc)
	}
}
