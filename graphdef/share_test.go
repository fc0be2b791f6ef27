package graphdef

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestParseSharesRepeatedAttrValues checks that Parse gives nodes read with the same attr
// value bytes one shared AttrValue, keeps distinct values apart, leaves a node whose attr
// map repeats a key as parsed (the last value wins, as in protobuf), and that the model
// still writes back the bytes it was read from.
func TestParseSharesRepeatedAttrValues(t *testing.T) {
	typ := func(d tpb.DataType) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_Type{Type: d}} }
	str := func(s string) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(s)}} }
	g := &gpb.GraphDef{Node: []*npb.NodeDef{
		{Name: "a", Op: "Relu", Attr: map[string]*apb.AttrValue{"T": typ(tpb.DataType_DT_FLOAT), "padding": str("SAME")}},
		{Name: "b", Op: "Relu", Attr: map[string]*apb.AttrValue{"T": typ(tpb.DataType_DT_FLOAT), "padding": str("VALID")}},
		{Name: "c", Op: "Relu", Attr: map[string]*apb.AttrValue{"T": typ(tpb.DataType_DT_HALF), "other": str("SAME")}},
	}}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	// Node d repeats the key T: DT_FLOAT first, DT_INT32 last.
	entry := func(key string, v *apb.AttrValue) []byte {
		vb, err := proto.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), key)
		e = protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), vb)
		return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), e)
	}
	var d []byte
	d = protowire.AppendString(protowire.AppendTag(d, 1, protowire.BytesType), "d")
	d = append(d, entry("T", typ(tpb.DataType_DT_FLOAT))...)
	d = append(d, entry("T", typ(tpb.DataType_DT_INT32))...)
	data = protowire.AppendBytes(protowire.AppendTag(data, 1, protowire.BytesType), d)

	m, err := Parse(data, FormatPB, "x.pb")
	if err != nil {
		t.Fatal(err)
	}
	n := m.Graph.Node
	if len(n) != 4 {
		t.Fatalf("%d nodes, want 4", len(n))
	}
	if n[0].Attr["T"] != n[1].Attr["T"] {
		t.Error("a and b do not share their equal T")
	}
	if n[0].Attr["padding"] != n[2].Attr["other"] {
		t.Error(`a's padding and c's other ("SAME" both) are not shared`)
	}
	if n[0].Attr["padding"] == n[1].Attr["padding"] || n[0].Attr["T"] == n[2].Attr["T"] {
		t.Error("different values share one message")
	}
	if got := string(n[1].Attr["padding"].GetS()); got != "VALID" {
		t.Errorf("b's padding is %q, want VALID", got)
	}
	if got := n[3].Attr["T"].GetType(); got != tpb.DataType_DT_INT32 {
		t.Errorf("d's repeated T is %v, want the last one, DT_INT32", got)
	}
	if n[3].Attr["T"] == n[0].Attr["T"] || n[3].Attr["T"] == n[2].Attr["T"] {
		t.Error("d's T, its key repeated, was replaced by a shared value")
	}
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, data) {
		t.Error("the model does not write back the bytes it was read from")
	}
}

// TestNewGraphSharesShapesAndCapsInputs checks, on a fixture whose equal _output_shapes
// values Load shared, that NewGraph gives the nodes of one value one parsed shape list with
// the right dims, and that each node's data inputs, slices of one array, are capped: an
// append to one node's inputs does not overwrite the next node's.
func TestNewGraphSharesShapesAndCapsInputs(t *testing.T) {
	_, g := loadGraph(t, filepath.Join(fixtures, "resnet.pb"))
	byValue := map[*apb.AttrValue]*Node{}
	shared := 0
	for _, n := range g.Nodes {
		v := n.Def.GetAttr()["_output_shapes"]
		if v == nil || len(n.OutputShapes) == 0 {
			continue
		}
		for port, s := range v.GetList().GetShape() {
			if s.GetUnknownRank() {
				continue
			}
			if got := n.OutputShapes[port]; len(got) != len(s.GetDim()) {
				t.Fatalf("%s:%d has shape %v, want %d dims", n.Name, port, got, len(s.GetDim()))
			}
			for j, d := range s.GetDim() {
				if n.OutputShapes[port][j] != d.GetSize() {
					t.Fatalf("%s:%d has shape %v, attr %v", n.Name, port, n.OutputShapes[port], s)
				}
			}
		}
		if first, ok := byValue[v]; ok {
			shared++
			if &first.OutputShapes[0] != &n.OutputShapes[0] {
				t.Errorf("%s and %s share their _output_shapes value but not its parsed shapes", first.Name, n.Name)
			}
		} else {
			byValue[v] = n
		}
	}
	if shared == 0 {
		t.Fatal("no two nodes share an _output_shapes value")
	}
	checked := 0
	for i := 0; i+1 < len(g.Nodes); i++ {
		a, b := g.Nodes[i], g.Nodes[i+1]
		if len(a.Inputs) == 0 || len(b.Inputs) == 0 {
			continue
		}
		before := b.Inputs[0]
		_ = append(a.Inputs, Tensor{Node: a, Port: 0})
		if b.Inputs[0] != before {
			t.Fatalf("appending to %s's inputs overwrote %s's", a.Name, b.Name)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no two neighbouring nodes with data inputs")
	}
}

// TestParseNodeByNodeEqualsWholeUnmarshal checks that Parse, which unmarshals a binary
// GraphDef node by node, reads every fixture and an interleaved graph as one proto.Unmarshal
// of the whole message does, and that a corrupt graph still fails.
func TestParseNodeByNodeEqualsWholeUnmarshal(t *testing.T) {
	inter, _ := interleavedGraph(t)
	inputs := map[string][]byte{"interleaved": inter}
	for _, name := range fixtureNames {
		data, err := os.ReadFile(filepath.Join(fixtures, name+".pb"))
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = data
	}
	for name, data := range inputs {
		m, err := Parse(data, FormatPB, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := new(gpb.GraphDef)
		if err := proto.Unmarshal(data, want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(m.Graph, want) {
			t.Errorf("%s: the graph read node by node differs from the whole message's", name)
		}
		if m.raw == nil || len(m.raw.defs) != len(want.Node) {
			t.Errorf("%s: no raw index of every node", name)
		}
		if _, err := Parse(data[:len(data)-3], FormatPB, name); err == nil {
			t.Errorf("%s: truncated data parsed without error", name)
		}
	}
}

// TestParseOddAttrEntriesAsWholeUnmarshal checks that nodes whose attr entries the parse
// cannot take from their bytes alone (a key not in UTF-8, an entry with a third field or
// without a value, an attr field of the wrong wire type, unknown fields between the attrs)
// read as protobuf reads the whole message or fail as it does, and that plain nodes after
// them still share their values.
func TestParseOddAttrEntriesAsWholeUnmarshal(t *testing.T) {
	typ := &apb.AttrValue{Value: &apb.AttrValue_Type{Type: tpb.DataType_DT_FLOAT}}
	vb, err := proto.Marshal(typ)
	if err != nil {
		t.Fatal(err)
	}
	field := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	entry := func(parts ...[]byte) []byte { return field(5, bytes.Join(parts, nil)) }
	key := func(k string) []byte { return field(1, []byte(k)) }
	val := field(2, vb)
	node := func(name string, rest ...[]byte) []byte {
		return field(1, append(field(1, []byte(name)), bytes.Join(rest, nil)...))
	}
	plain := node("p", entry(key("T"), val), entry(key("U"), val))
	cases := map[string]struct {
		node []byte
		ok   bool
	}{
		"plain":            {plain, true},
		"third field":      {node("a", entry(key("T"), val, field(3, []byte("x")))), true},
		"no value":         {node("b", entry(key("T"))), true},
		"wrong wire type":  {node("c", protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 7), entry(key("T"), val)), true},
		"unknown between":  {node("d", entry(key("T"), val), protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 3), entry(key("U"), val)), true},
		"value, then key":  {node("e", entry(val, key("T"))), true},
		"key not in UTF-8": {node("f", entry(key("\xff"), val)), false},
		"bad value":        {node("g", entry(key("T"), field(2, []byte{0xff}))), false},
	}
	for name, c := range cases {
		data := append(append([]byte(nil), c.node...), plain...)
		m, err := Parse(data, FormatPB, "x.pb")
		want := new(gpb.GraphDef)
		werr := proto.Unmarshal(data, want)
		if (err == nil) != c.ok || (werr == nil) != c.ok {
			t.Errorf("%s: Parse's error %v, protobuf's %v; want success %v from both", name, err, werr, c.ok)
			continue
		}
		if !c.ok {
			continue
		}
		if !proto.Equal(m.Graph, want) {
			t.Errorf("%s: the parsed graph differs from protobuf's whole unmarshal", name)
		}
		last := m.Graph.Node[len(m.Graph.Node)-1]
		if last.Attr["T"] == nil || last.Attr["T"] != last.Attr["U"] {
			t.Errorf("%s: the plain node's equal values T and U are not one message", name)
		}
	}
}
