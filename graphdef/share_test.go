package graphdef

import (
	"bytes"
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
