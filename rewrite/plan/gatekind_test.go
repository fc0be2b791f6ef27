package plan

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
	"github.com/tfswap/tfswap/rewrite"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// floatType reports whether dt is one of L2Loss's dtypes.
func floatType(dt graphdef.DataType) bool {
	return dt == tpb.DataType_DT_HALF || dt == tpb.DataType_DT_BFLOAT16 || dt == tpb.DataType_DT_FLOAT || dt == tpb.DataType_DT_DOUBLE
}

// TestReduceGates checks GateReduce on the residual-network fixture with the fixed LMS
// thresholds (no planning, so the swaps are the same whatever the gates): every gate whose
// trigger has a floating-point output is an L2Loss of the smallest such output of known size,
// with that output's T and a scalar shape, every other gate an Identity of GatePort's output,
// and every node but the gates is the node the Identity-gated rewrite has. It fails when the
// rewrite has no L2Loss gate or no gate on a trigger with several float outputs.
func TestReduceGates(t *testing.T) {
	m, g := testgraph.Load(t, "../../testmodels/fixtures/resnet.pb")
	sim := cost.Options{Fetch: []string{"train"}}
	po := PlanOptions{Strategy: "lms-fixed", Sim: sim, FitAccounting: "tfswap"}
	id, err := RewriteWithPlanner(m, rewrite.Options{}, po)
	if err != nil {
		t.Fatal(err)
	}
	red, err := RewriteWithPlanner(m, rewrite.Options{GateKind: rewrite.GateReduce}, po)
	if err != nil {
		t.Fatal(err)
	}
	idNodes := map[string]*npb.NodeDef{}
	for _, nd := range id.Model.Graph.GetNode() {
		idNodes[nd.GetName()] = nd
	}
	if len(idNodes) != len(red.Model.Graph.GetNode()) {
		t.Fatalf("the reduce-gated rewrite has %d nodes, the Identity-gated one %d", len(red.Model.Graph.GetNode()), len(idNodes))
	}
	reduced, several := 0, 0
	for _, nd := range red.Model.Graph.GetNode() {
		other := idNodes[nd.GetName()]
		if other == nil {
			t.Fatalf("node %s is not in the Identity-gated rewrite", nd.GetName())
		}
		if string(nd.GetAttr()[rewrite.RoleAttr].GetS()) != "gate" {
			if !proto.Equal(nd, other) {
				t.Errorf("node %s differs between the two rewrites", nd.GetName())
			}
			continue
		}
		name, port, _, err := graphdef.ParseInput(nd.GetInput()[0])
		if err != nil {
			t.Fatal(err)
		}
		trig := g.Node(name)
		floats, best := 0, int64(-1)
		for p, dt := range trig.OutputTypes {
			if floatType(dt) {
				floats++
				if b, known, _ := (graphdef.Tensor{Node: trig, Port: p}).Bytes(); known && b > 0 && (best < 0 || b < best) {
					best = b
				}
			}
		}
		if floats == 0 {
			want, _, _ := rewrite.GatePort(trig)
			if nd.GetOp() != "Identity" || port != want {
				t.Errorf("gate %s on %s (no float output) is %s of output %d, want an Identity of output %d", nd.GetName(), name, nd.GetOp(), port, want)
			}
			continue
		}
		reduced++
		if floats > 1 {
			several++
		}
		b, _, _ := graphdef.Tensor{Node: trig, Port: port}.Bytes()
		if nd.GetOp() != "L2Loss" || !floatType(trig.OutputTypes[port]) || best >= 0 && b != best {
			t.Errorf("gate %s on %s (%s) is %s of output %d (%d bytes), want an L2Loss of its smallest float output (%d bytes)", nd.GetName(), name, trig.Op, nd.GetOp(), port, b, best)
		}
		if nd.GetAttr()["T"].GetType() != trig.OutputTypes[port] {
			t.Errorf("gate %s: T %v, the output it reads is %v", nd.GetName(), nd.GetAttr()["T"].GetType(), trig.OutputTypes[port])
		}
		if s := nd.GetAttr()["_output_shapes"].GetList().GetShape(); len(s) != 1 || len(s[0].GetDim()) != 0 || s[0].GetUnknownRank() {
			t.Errorf("gate %s: _output_shapes %v, want one scalar", nd.GetName(), s)
		}
		if !nd.GetAttr()[rewrite.DoNotRemoveAttr].GetB() || nd.GetDevice() != trig.Def.GetDevice() {
			t.Errorf("gate %s is not preserved on its trigger's device", nd.GetName())
		}
	}
	if reduced == 0 || several == 0 {
		t.Fatalf("%d L2Loss gates, %d on a trigger with several float outputs: nothing checked", reduced, several)
	}
}

// TestVerifyGateOps checks that Verify accepts a rewrite with L2Loss gates and rejects a gate
// of another op (Shape, which Grappler's constant folding replaces by a constant) or an
// L2Loss whose T is not its input's dtype.
func TestVerifyGateOps(t *testing.T) {
	m, g := testgraph.Load(t, "../../testmodels/fixtures/resnet.pb")
	po := PlanOptions{Strategy: "lms-fixed", Sim: cost.Options{Fetch: []string{"train"}}, FitAccounting: "tfswap"}
	red, err := RewriteWithPlanner(m, rewrite.Options{GateKind: rewrite.GateReduce}, po)
	if err != nil {
		t.Fatal(err)
	}
	res := &rewrite.Result{Model: red.Model}
	if err := rewrite.Verify(g, res, rewrite.GateHost); err != nil {
		t.Fatalf("the reduce-gated rewrite does not verify: %v", err)
	}
	at := -1
	for i, nd := range red.Model.Graph.GetNode() {
		if nd.GetOp() == "L2Loss" && string(nd.GetAttr()[rewrite.RoleAttr].GetS()) == "gate" {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatal("the rewrite has no L2Loss gate")
	}
	for _, tc := range []struct {
		name string
		edit func(nd *npb.NodeDef)
		want string
	}{
		{"shape", func(nd *npb.NodeDef) { nd.Op = "Shape" }, "is not a preserved Identity or L2Loss"},
		{"dtype", func(nd *npb.NodeDef) {
			nd.Attr["T"] = &apb.AttrValue{Value: &apb.AttrValue_Type{Type: tpb.DataType_DT_DOUBLE}}
		}, "is an L2Loss of"},
	} {
		bad := red.Model.Clone()
		nd := proto.Clone(bad.Graph.Node[at]).(*npb.NodeDef)
		tc.edit(nd)
		bad.Graph.Node[at] = nd
		err := rewrite.Verify(g, &rewrite.Result{Model: bad}, rewrite.GateHost)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify says %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
