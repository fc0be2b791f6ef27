package graphdef

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzParsePB checks that any bytes either fail to parse or validate with an *Error, or give a
// graph whose serialisation reads back as the same graph.
func FuzzParsePB(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParsed(t, data, FormatPB)
	})
}

// FuzzParsePBTXT is FuzzParsePB for the text format.
func FuzzParsePBTXT(f *testing.F) {
	files, _ := filepath.Glob("testdata/invalid/*.pbtxt")
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { shape { dim { size: 2 } } } } } }
node { name: "b" op: "Relu" input: "a" attr { key: "T" value { type: DT_FLOAT } } }`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParsed(t, data, FormatPBTXT)
	})
}

func checkParsed(t *testing.T, data []byte, format Format) {
	m, err := Parse(data, format, "fuzz")
	if err != nil {
		if _, ok := err.(*Error); !ok {
			t.Fatalf("Parse error %T is not an *Error: %v", err, err)
		}
		return
	}
	g, err := NewGraph(m.Graph, "fuzz")
	if err != nil {
		if _, ok := err.(*Error); !ok {
			t.Fatalf("NewGraph error %T is not an *Error: %v", err, err)
		}
		return
	}
	if len(g.Topo) != len(g.Nodes) {
		t.Fatalf("topological order has %d of %d nodes", len(g.Topo), len(g.Nodes))
	}
	for _, n := range g.Nodes {
		for port := range n.OutputTypes {
			Tensor{n, port}.Bytes()
		}
	}
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out, FormatPB, "fuzz-out")
	if err != nil {
		t.Fatalf("serialised graph does not parse: %v", err)
	}
	if !proto.Equal(back.Graph, m.Graph) {
		t.Fatalf("serialised graph reads back differently")
	}
}
