//go:build tensorflow

package graphdef_test

import (
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/tfrun"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// TestValidNodeNameAgreesWithTensorFlow imports a one-node graph per name into TensorFlow and
// checks that TensorFlow refuses exactly the names ValidNodeName refuses.
func TestValidNodeNameAgreesWithTensorFlow(t *testing.T) {
	names := []string{"a", "A9", ".x", "0", "dense/MatMul", "a-b_c.d/e", "tfswap/x_0/swap_out", "a>b", "a>.b/c",
		"_a", "-a", "/a", "a b", "a\nb", "a:0", "^a", ">a", "a>", "a>>b", "a>_b", "é", "a\tb", "a,b", "a@b"}
	refused := 0
	for _, name := range names {
		data, err := proto.Marshal(&gpb.GraphDef{Node: []*npb.NodeDef{{Name: name, Op: "NoOp"}}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := tfrun.NewSession(data, nil)
		if s != nil {
			s.Close()
		}
		if tfOK := err == nil; tfOK != graphdef.ValidNodeName(name) {
			t.Errorf("%q: TensorFlow accepts it %v (%v), ValidNodeName %v", name, tfOK, err, !tfOK)
		}
		if err != nil {
			refused++
		}
	}
	if refused == 0 || refused == len(names) {
		t.Fatalf("TensorFlow refused %d of %d names: the test checks nothing", refused, len(names))
	}
}
