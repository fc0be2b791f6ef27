package graphdef

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

const fixtures = "../testmodels/fixtures"

var fixtureNames = []string{"mlp", "cnn", "resnet", "lstm"}

func loadGraph(t *testing.T, path string) (*Model, *Graph) {
	t.Helper()
	m, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

// TestInvalidGraphs checks each graph in testdata/invalid fails with the error its first
// line ("# want: ...") names, prefixed by the file.
func TestInvalidGraphs(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.pbtxt")
	if len(files) == 0 {
		t.Fatal("no test graphs")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want := strings.TrimPrefix(first, "# want: ")
			m, err := Load(f, LoadOptions{})
			if err == nil {
				_, err = NewGraph(m.Graph, m.Source)
			}
			if err == nil {
				t.Fatalf("no error; want %q", want)
			}
			if _, ok := err.(*Error); !ok {
				t.Errorf("error %T is not a *graphdef.Error", err)
			}
			if !strings.HasPrefix(err.Error(), f+": ") || !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\nwant it to start with %q and contain %q", err, f+": ", want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load("testdata/does-not-exist.pb", LoadOptions{}); err == nil || !strings.Contains(err.Error(), "testdata/does-not-exist.pb: cannot read") {
		t.Errorf("missing file: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(fixtures, "resnet.pb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{1, 100, len(data) / 2, len(data) - 1} {
		_, err := Parse(data[:cut], FormatPB, "trunc.pb")
		if err == nil {
			// A cut may fall on a field boundary: then the graph must still be checked.
			m, _ := Parse(data[:cut], FormatPB, "trunc.pb")
			if _, err2 := NewGraph(m.Graph, m.Source); err2 == nil && cut != len(data) {
				t.Logf("cut at %d parses and validates (a node boundary)", cut)
			}
			continue
		}
		if !strings.HasPrefix(err.Error(), "trunc.pb: not a binary GraphDef") {
			t.Errorf("cut %d: %v", cut, err)
		}
	}
	if _, err := Load("testdata", LoadOptions{}); err == nil || !strings.Contains(err.Error(), "not a SavedModel directory") {
		t.Errorf("directory without saved_model.pb: %v", err)
	}
}

func TestFixturesRoundTripByteForByte(t *testing.T) {
	for _, name := range fixtureNames {
		path := filepath.Join(fixtures, name+".pb")
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, g := loadGraph(t, path)
		out, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, orig) {
			t.Errorf("%s: Marshal of an unchanged graph differs from the file", name)
		}
		// Replacing one node keeps every other node's bytes.
		c := m.Clone()
		nd := proto.Clone(c.Graph.Node[3]).(*npb.NodeDef)
		nd.Device = "/device:CPU:0"
		c.Graph.Node[3] = nd
		out2, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range g.Nodes {
			if i == 3 {
				continue
			}
			if raw := m.raw.bytesOf(i, n.Def); raw == nil || !bytes.Contains(out2, raw) {
				t.Fatalf("%s: node %q's bytes are not in the output", name, n.Name)
			}
		}
		back, err := Parse(out2, FormatPB, "x")
		if err != nil || back.Graph.Node[3].GetDevice() != "/device:CPU:0" || !proto.Equal(back.Graph.Node[4], m.Graph.Node[4]) {
			t.Errorf("%s: changed graph does not read back: %v", name, err)
		}
		// Text round trip.
		txt, err := m.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		tm, err := Parse(txt, FormatPBTXT, "x.pbtxt")
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(tm.Graph, m.Graph) {
			t.Errorf("%s: text round trip changed the graph", name)
		}
	}
}

func TestGraphIndex(t *testing.T) {
	_, g := loadGraph(t, filepath.Join(fixtures, "resnet.pb"))
	if len(g.Topo) != len(g.Nodes) {
		t.Fatalf("topo has %d of %d nodes", len(g.Topo), len(g.Nodes))
	}
	for i, n := range g.Topo {
		if n.TopoIndex != i {
			t.Fatalf("TopoIndex of %s is %d, want %d", n.Name, n.TopoIndex, i)
		}
		for _, in := range n.Inputs {
			if in.Node.TopoIndex >= i || in.Node.Level >= n.Level {
				t.Fatalf("%s comes before or at the level of its input %s", n.Name, in.Node.Name)
			}
			found := false
			for _, u := range in.Node.Consumers[in.Port] {
				if u.Node == n {
					found = true
				}
			}
			if !found {
				t.Fatalf("%s is not among the consumers of %s", n.Name, in)
			}
		}
		for _, c := range n.ControlInputs {
			if c.TopoIndex >= i || c.Level >= n.Level {
				t.Fatalf("%s comes before its control input %s", n.Name, c.Name)
			}
		}
	}
	conv := g.Node("stem/conv/Conv2D")
	if conv == nil {
		t.Fatal("no stem/conv/Conv2D")
	}
	b, ok, reason := Tensor{conv, 0}.Bytes()
	if !ok || b != 8*32*32*16*4 {
		t.Errorf("stem/conv/Conv2D:0 is %d bytes (%v %s), want %d", b, ok, reason, 8*32*32*16*4)
	}
	bn := g.Node("stem/bn/FusedBatchNormV3")
	if len(bn.OutputTypes) != 6 {
		t.Errorf("FusedBatchNormV3 has %d output types, want 6", len(bn.OutputTypes))
	}
	if _, ok, reason := (Tensor{bn, 5}).Bytes(); ok || reason == "" {
		t.Errorf("reserve_space_3 of FusedBatchNormV3 should be of unknown size with a reason")
	}
}

func TestDevices(t *testing.T) {
	cases := map[string]string{
		"":              "",
		"/gpu:1":        "/device:GPU:1",
		"/device:CPU:0": "/device:CPU:0",
		"/job:worker/replica:0/task:3/device:GPU:2": "/job:worker/replica:0/task:3/device:GPU:2",
		"/job:ps/task:1/cpu:0":                      "/job:ps/task:1/device:CPU:0",
		"/device:gpu:*":                             "/device:GPU:*",
	}
	for in, want := range cases {
		d, err := ParseDevice(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseDevice(%q) = %q, %v; want %q", in, d, err, want)
		}
	}
	for _, bad := range []string{"gpu:0", "/job", "/replica:x", "/device:GPU:-1", "/foo:1"} {
		if _, err := ParseDevice(bad); err == nil {
			t.Errorf("ParseDevice(%q) did not fail", bad)
		}
	}
	w, _ := ParseDevice("/job:worker/replica:0/task:3/device:GPU:2")
	if h := w.WithDevice("cpu", 0); h.String() != "/job:worker/replica:0/task:3/device:CPU:0" || !h.SameTask(w) {
		t.Errorf("host of %s is %s", w, h)
	}
}

func TestSavedModel(t *testing.T) {
	src := "testdata/tiny_savedmodel"
	if _, err := Load(src, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "choose one with --tags") {
		t.Errorf("two MetaGraphDefs without tags: %v", err)
	}
	if _, err := Load(src, LoadOptions{Tags: []string{"gpu"}}); err == nil || !strings.Contains(err.Error(), "no MetaGraphDef has tags [gpu]") {
		t.Errorf("missing tag: %v", err)
	}
	m, err := Load(src, LoadOptions{Tags: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewGraph(m.Graph, m.Source); err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	nd := proto.Clone(c.Graph.Node[0]).(*npb.NodeDef)
	nd.Device = "/device:CPU:0"
	c.Graph.Node[0] = nd
	out := filepath.Join(t.TempDir(), "out")
	if err := c.Save(out, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"variables/variables.index", "variables/variables.data-00000-of-00001"} {
		a, _ := os.ReadFile(filepath.Join(src, f))
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s not copied intact: %v", f, err)
		}
	}
	origData, _ := os.ReadFile(filepath.Join(src, "saved_model.pb"))
	newData, _ := os.ReadFile(filepath.Join(out, "saved_model.pb"))
	var orig, got cpb.SavedModel
	if err := proto.Unmarshal(origData, &orig); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(newData, &got); err != nil {
		t.Fatal(err)
	}
	// Everything but the train MetaGraphDef's first node is unchanged.
	got.MetaGraphs[0].GraphDef.Node[0].Device = orig.MetaGraphs[0].GraphDef.Node[0].Device
	if !proto.Equal(&orig, &got) {
		t.Errorf("the SavedModel changed beyond the rewritten node")
	}
	// Writing it again is refused: the directory is not empty, and tfswap deletes nothing it
	// finds there. The input and the first output are untouched.
	var oe *OutputError
	if err := c.Save(out, SaveOptions{}); !errors.As(err, &oe) {
		t.Errorf("saving over a non-empty directory: %v, want an *OutputError", err)
	}
	again, _ := os.ReadFile(filepath.Join(src, "saved_model.pb"))
	if !bytes.Equal(again, origData) {
		t.Errorf("the input SavedModel was modified")
	}
	if kept, _ := os.ReadFile(filepath.Join(out, "saved_model.pb")); !bytes.Equal(kept, newData) {
		t.Errorf("the refused save changed the existing output")
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestWriteFileAtomicLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x.pb"), []byte("x"), 0o644); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
	path := filepath.Join(dir, "x.pb")
	if err := WriteFileAtomic(path, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want 1", len(entries))
	}
}
