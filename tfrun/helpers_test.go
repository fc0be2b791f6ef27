//go:build tensorflow

package tfrun

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	"google.golang.org/protobuf/proto"
)

// TestMain makes the test process run with TensorFlow's oneDNN optimizations off (it
// re-executes itself with TF_ENABLE_ONEDNN_OPTS=0 when the variable is unset), so that the
// bit-exact comparisons compare like with like.
func TestMain(m *testing.M) {
	if err := ReexecWithOneDNNOff(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// Device names of the two-device emulation.
const (
	hostDevice    = "/device:CPU:0"
	computeDevice = "/device:CPU:1"
)

// fixtureDir is where testmodels/gen.py writes the fixtures, relative to this package.
var fixtureDir = filepath.Join("..", "testmodels", "fixtures")

// fixtureNames are the fixtures the runtime tests train.
var fixtureNames = []string{"mlp", "cnn", "resnet", "lstm"}

// loadFixture loads a fixture and its GraphDef, failing the test when it is missing.
func loadFixture(t testing.TB, name string) (*Fixture, []byte) {
	t.Helper()
	fx, err := LoadFixture(filepath.Join(fixtureDir, name+".json"))
	if err != nil {
		t.Fatalf("%v (regenerate with .venv/bin/python testmodels/gen.py)", err)
	}
	gd, err := fx.GraphDef()
	if err != nil {
		t.Fatal(err)
	}
	return fx, gd
}

// variableNames returns the names of a fixture's variables, for messages.
func variableNames(fx *Fixture) []string {
	names := make([]string, len(fx.Variables))
	for i, v := range fx.Variables {
		names[i] = v.Name
	}
	return names
}

// checkFinite fails the test unless every loss is a finite number.
func checkFinite(t testing.TB, r *TrainResult) {
	t.Helper()
	if len(r.LossValues) == 0 {
		t.Fatal("no losses")
	}
	for i, v := range r.LossValues {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("loss at step %d is %v", i+1, v)
		}
	}
}

// attrMap is a NodeDef's attributes.
type attrMap = map[string]*apb.AttrValue

// node builds a NodeDef.
func node(name, op, device string, inputs []string, attrs attrMap) *npb.NodeDef {
	return &npb.NodeDef{Name: name, Op: op, Device: device, Input: inputs, Attr: attrs}
}

// typeAttr is an AttrValue holding a dtype.
func typeAttr(dt tpb.DataType) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_Type{Type: dt}}
}

// shapeAttr is an AttrValue holding a fully known shape.
func shapeAttr(dims ...int64) *apb.AttrValue {
	s := &tspb.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &tspb.TensorShapeProto_Dim{Size: d})
	}
	return &apb.AttrValue{Value: &apb.AttrValue_Shape{Shape: s}}
}

// marshalGraph serializes a GraphDef of the given nodes.
func marshalGraph(t testing.TB, nodes ...*npb.NodeDef) []byte {
	t.Helper()
	b, err := proto.Marshal(&gpb.GraphDef{Node: nodes})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newSession creates a session and closes it when the test ends.
func newSession(t testing.TB, graphDef, config []byte) *Session {
	t.Helper()
	s, err := NewSession(graphDef, config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// trainAgainst trains rewritten (with every variable's read added, as withAllVariableReads does
// for fx) for steps steps under cfg and reports, as test errors, every loss and variable of
// fxAll in which it differs from want, the original's training. It returns the training and the
// number of differences.
func trainAgainst(t testing.TB, want *TrainResult, rewritten *graphdef.Model, fx, fxAll *Fixture, steps int, cfg []byte) (*TrainResult, int) {
	t.Helper()
	rw, _ := withAllVariableReads(t, rewritten, fx)
	got, err := Train(marshalModel(t, rw), fxAll, steps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkFinite(t, got)
	diffs := want.Diff(got, variableNames(fxAll))
	for _, d := range diffs {
		t.Error(d)
	}
	return got, len(diffs)
}

// checkTrainsLike trains the placed original and its rewrite for steps steps in the
// two-device emulation and requires the loss at every step and every variable (trainable or
// not) to be bit-identical. It returns the rewrite's training and the fixture with every
// variable's read (the variables compared).
func checkTrainsLike(t testing.TB, placed, rewritten *graphdef.Model, fx *Fixture, steps int) (*TrainResult, *Fixture) {
	t.Helper()
	cfg := TwoDeviceConfigBytes()
	origModel, fxAll := withAllVariableReads(t, placed, fx)
	want, err := Train(marshalModel(t, origModel), fxAll, steps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := trainAgainst(t, want, rewritten, fx, fxAll, steps, cfg)
	return got, fxAll
}

// computePeak returns the simulated peak of the compute device in res, or 0 when res has no
// such device.
func computePeak(res *cost.Result) int64 {
	for _, d := range res.Devices {
		if SameDevice(d.Name, computeDevice) {
			return d.PeakBytes
		}
	}
	return 0
}
