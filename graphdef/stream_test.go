package graphdef

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	vpb "github.com/wamuir/graft/tensorflow/core/framework/versions_go_proto"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// interleavedGraph returns a binary GraphDef whose versions field sits between its node
// fields, one node with its fields out of the order Go's protobuf writes them (so that only
// its original bytes reproduce it), and the bytes of that node's field.
func interleavedGraph(t *testing.T) (data, odd []byte) {
	t.Helper()
	node := func(name string) []byte {
		b, err := proto.Marshal(&npb.NodeDef{Name: name, Op: "NoOp"})
		if err != nil {
			t.Fatal(err)
		}
		f := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(f, b)
	}
	// Op (field 2) before name (field 1): valid, but not how Marshal orders it.
	var msg []byte
	msg = protowire.AppendTag(msg, 2, protowire.BytesType)
	msg = protowire.AppendString(msg, "NoOp")
	msg = protowire.AppendTag(msg, 1, protowire.BytesType)
	msg = protowire.AppendString(msg, "b")
	odd = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), msg)
	versions, err := proto.Marshal(&gpb.GraphDef{Versions: &vpb.VersionDef{Producer: 1882}})
	if err != nil {
		t.Fatal(err)
	}
	data = append(append(append(node("a"), versions...), odd...), node("c")...)
	return data, odd
}

// TestMarshalKeepsBytesOfInterleavedAndMovedNodes checks that a node is written with the
// bytes it was read from when the GraphDef's node fields are not contiguous and when the node
// moved in the node list, and that Save streams the same bytes Marshal returns.
func TestMarshalKeepsBytesOfInterleavedAndMovedNodes(t *testing.T) {
	data, odd := interleavedGraph(t)
	m, err := Parse(data, FormatPB, "x.pb")
	if err != nil {
		t.Fatal(err)
	}
	if m.raw == nil {
		t.Fatal("no raw index for a graph of plain node fields")
	}
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, odd) {
		t.Errorf("node b's original bytes are not in the output")
	}
	// Move node b to the end and add a new node before it.
	c := m.Clone()
	b := c.Graph.Node[1]
	c.Graph.Node = append([]*npb.NodeDef{c.Graph.Node[0], c.Graph.Node[2], {Name: "d", Op: "NoOp"}}, b)
	out2, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(out2[:len(out2)-len(m.rawRest)], odd) {
		t.Errorf("moved node b is not written with its original bytes last")
	}
	back, err := Parse(out2, FormatPB, "y.pb")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range back.Graph.Node {
		names = append(names, n.GetName())
	}
	if got := names; len(got) != 4 || got[0] != "a" || got[1] != "c" || got[2] != "d" || got[3] != "b" || back.Graph.GetVersions().GetProducer() != 1882 {
		t.Errorf("read back nodes %v, producer %d", got, back.Graph.GetVersions().GetProducer())
	}
	path := filepath.Join(t.TempDir(), "out.pb")
	if err := c.Save(path, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved, out2) {
		t.Errorf("Save wrote %d bytes that differ from Marshal's %d", len(saved), len(out2))
	}
}

// TestSaveTooLargeLeavesNoFile checks that a graph over the size limit is refused before
// anything is written.
func TestSaveTooLargeLeavesNoFile(t *testing.T) {
	data, _ := interleavedGraph(t)
	m, err := Parse(data, FormatPB, "x.pb")
	if err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	c.Graph.Node = append(c.Graph.Node, &npb.NodeDef{Name: "big", Op: "NoOp"})
	defer func(n int) { maxProtoBytes = n }(maxProtoBytes)
	maxProtoBytes = len(data) + 5
	dir := t.TempDir()
	if err := c.Save(filepath.Join(dir, "out.pb"), SaveOptions{}); err == nil {
		t.Fatal("a graph over the limit was saved")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %d files behind", len(ents))
	}
}

// TestConcurrentMarshalOfClones checks that clones sharing a model's raw index can be written
// at once (run with -race): the index's lookup by message is built on first need.
func TestConcurrentMarshalOfClones(t *testing.T) {
	data, odd := interleavedGraph(t)
	m, err := Parse(data, FormatPB, "x.pb")
	if err != nil {
		t.Fatal(err)
	}
	outs := make([][]byte, 4)
	errs := make([]error, 4)
	done := make(chan int)
	for k := range outs {
		c := m.Clone()
		c.Graph.Node[0], c.Graph.Node[1] = c.Graph.Node[1], c.Graph.Node[0]
		go func(k int) {
			outs[k], errs[k] = c.Marshal()
			done <- k
		}(k)
	}
	for range outs {
		<-done
	}
	for k := range outs {
		if errs[k] != nil || !bytes.HasPrefix(outs[k], odd) {
			t.Errorf("clone %d: %v, or node b not first with its original bytes", k, errs[k])
		}
	}
}
