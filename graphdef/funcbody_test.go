package graphdef

import (
	"strings"
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// TestFunctionGraph: a function whose body reads an argument and the second output of a
// multi-output op ("split:output:1", FunctionDef's form) becomes a Graph with an _Arg per
// argument, the input rewritten to "split:1", and a result node; a call of it names it; a
// missing function and a reference to a missing node are errors naming them.
func TestFunctionGraph(t *testing.T) {
	f32 := tpb.DataType_DT_FLOAT
	typ := &apb.AttrValue{Value: &apb.AttrValue_Type{Type: f32}}
	fn := &fpb.FunctionDef{
		Signature: &opb.OpDef{Name: "body",
			InputArg:  []*opb.OpDef_ArgDef{{Name: "x", Type: f32}},
			OutputArg: []*opb.OpDef_ArgDef{{Name: "y", Type: f32}}},
		NodeDef: []*npb.NodeDef{
			{Name: "dim", Op: "Const", Attr: map[string]*apb.AttrValue{"dtype": {Value: &apb.AttrValue_Type{Type: tpb.DataType_DT_INT32}}}},
			{Name: "split", Op: "Split", Input: []string{"dim:output:0", "x"}, Attr: map[string]*apb.AttrValue{"T": typ, "num_split": {Value: &apb.AttrValue_I{I: 2}}}},
			{Name: "relu", Op: "Relu", Input: []string{"split:output:1"}, Attr: map[string]*apb.AttrValue{"T": typ}},
		},
		Ret: map[string]string{"y": "relu:activations:0"},
	}
	lib := &fpb.FunctionDefLibrary{Function: []*fpb.FunctionDef{fn}}
	g, err := FunctionGraph(lib, "body")
	if err != nil {
		t.Fatal(err)
	}
	if n := g.Node("x"); n == nil || n.Op != "_Arg" {
		t.Fatalf("argument x: %v", n)
	}
	if in := g.Node("relu").Inputs[0].String(); in != "split:1" {
		t.Errorf("relu reads %s, want split:1", in)
	}
	if in := g.Node(RetvalPrefix + "y").Inputs[0].String(); in != "relu:0" {
		t.Errorf("the result reads %s, want relu:0", in)
	}
	call := &npb.NodeDef{Name: "c", Op: "PartitionedCall", Attr: map[string]*apb.AttrValue{"f": {Value: &apb.AttrValue_Func{Func: &apb.NameAttrList{Name: "body"}}}}}
	if got := CalledFunctions(call, lib)["f"]; len(got) != 1 || got[0] != "body" {
		t.Errorf("the call calls %v", got)
	}
	if got := CalledFunctions(&npb.NodeDef{Name: "d", Op: "body"}, lib)[""]; len(got) != 1 {
		t.Errorf("the direct call calls %v", got)
	}
	if _, err := FunctionGraph(lib, "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing function: %v", err)
	}
	fn.NodeDef[2].Input = []string{"gone:output:0"}
	if _, err := FunctionGraph(lib, "body"); err == nil || !strings.Contains(err.Error(), "gone") || !strings.Contains(err.Error(), "relu") {
		t.Errorf("missing node: %v", err)
	}
}
