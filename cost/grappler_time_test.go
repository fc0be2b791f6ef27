package cost

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

var int32T = tpb.DataType_DT_INT32

// TestGrapplerOpTimes works out Grappler's times by hand for a few ops on the unit profile's
// GPU (1.024 GOP/s, 1 GB/s: see TestSimulateChainGrapplerConventions).
func TestGrapplerOpTimes(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", []int64{8, 4, 4, 2})
	b.op("w", "Placeholder", "", []int64{3, 3, 2, 16})
	b.node("conv", "Conv2D", "", [][]int64{{8, 2, 2, 16}}, map[string]*apb.AttrValue{
		"strides": intsAttr(1, 2, 2, 1), "padding": sAttr("SAME")}, "x", "w")
	b.op("a", "Placeholder", "", []int64{32, 64})
	b.op("bm", "Placeholder", "", []int64{128, 64})
	b.node("mm", "MatMul", "", [][]int64{{32, 128}}, map[string]*apb.AttrValue{"transpose_b": bAttr(true)}, "a", "bm")
	b.node("pool", "MaxPool", "", [][]int64{{8, 2, 2, 2}}, map[string]*apb.AttrValue{
		"ksize": intsAttr(1, 3, 3, 1), "strides": intsAttr(1, 2, 2, 1), "padding": sAttr("SAME")}, "x")
	b.op("exp", "Exp", "", []int64{32, 64}, "a")
	b.op("unknown", "L2Loss", "", []int64{}, "a")
	b.op("id", "Identity", "", []int64{32, 64}, "a")
	b.op("train", "NoOp", "", nil, "^conv", "^mm", "^pool", "^exp", "^unknown", "^id")
	g := b.graph(t)
	p := unitProfile()
	s, err := NewShapes(g, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node string
		want int64
	}{
		// Conv2D: 8 x 2 x 2 (output) x 3 x 3 (kernel) x 2 x 16 (channels) x 2 = 18432
		// operations (18000 ns) + (1024 + 1152 + 2048 bytes) (4224 ns).
		{"conv", 18000 + 4224},
		// MatMul 32 x 128 x 64 x 2 = 524288 operations (512000 ns) + 8192 + 32768 + 16384 bytes.
		{"mm", 512000 + 57344},
		// MaxPool: 8 x 2 x 2 x 2 outputs x (9 - 1) comparisons = 512 (500 ns) + 1024 + 256 bytes.
		{"pool", 500 + 1280},
		// Exp: 2048 elements x 34 (Eigen's cost) = 69632 operations (68000 ns) + 16384 bytes.
		{"exp", 68000 + 16384},
		// No rule: its bytes alone (a scalar output counts one element).
		{"unknown", 8192 + 4},
		{"id", 1},
		{"train", 0},
	} {
		got, unmodelled := GrapplerOpTime(g.Node(c.node), s, p, true)
		if got != c.want || unmodelled {
			t.Errorf("%s: %d ns (unmodelled %v), want %d", c.node, got, unmodelled, c.want)
		}
	}
	// On the host (1 GOP/s, 1 GB/s) Exp takes 69632 + 16384 ns.
	if got, _ := GrapplerOpTime(g.Node("exp"), s, p, false); got != 69632+16384 {
		t.Errorf("Exp on the host: %d ns, want %d", got, 69632+16384)
	}
}

// TestGrapplerShapesTranspose: a Transpose whose permutation is computed gets unknown
// dimensions in Grappler's view; with a constant permutation it keeps them.
func TestGrapplerShapesTranspose(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", []int64{2, 3, 4})
	b.node("perm", "Const", "", [][]int64{{3}}, map[string]*apb.AttrValue{"dtype": tAttr(int32T)})
	b.node("inv", "InvertPermutation", "", [][]int64{{3}}, map[string]*apb.AttrValue{"T": tAttr(int32T)}, "perm")
	b.node("t1", "Transpose", "", [][]int64{{4, 2, 3}}, nil, "x", "inv")
	b.op("y", "Neg", "", []int64{4, 2, 3}, "t1")
	b.node("mm", "BatchMatMulV2", "", [][]int64{{4, 2, 2}}, map[string]*apb.AttrValue{"adj_y": bAttr(true)}, "y", "y")
	g, s := grapplerShapesWant(t, b, []nodeShape{
		// Every dimension of t1 is unknown, and so are those of y, which keeps t1's; the matrix
		// product's output is made of y's dimensions, merged with one another but known nowhere.
		{"t1", []int64{-1, -1, -1}}, {"y", []int64{-1, -1, -1}}, {"mm", []int64{-1, -1, -1}}, {"x", []int64{2, 3, 4}},
	})
	if got := s.Out(g.Node("t1"), 0); !equalInts(got, []int64{4, 2, 3}) {
		t.Errorf("the recorded shapes changed: %v", got)
	}
}

// TestGrapplerShapesZeroGradientOfVariable: the zero gradient a v1 conditional builds for a
// resource variable, Fill(VariableShape(v)), gets a dimension Grappler calls unknown (it
// knows the value of a Shape, not of a VariableShape), and so does the gradient Merge of that
// zero gradient and the other side's, whose dimensions differ in value; a Merge of two
// inputs of the same known shape keeps it, as does a Fill of a Shape. A gradient Merge that
// ResourceApplyGradientDescent applies to the variable gets the variable's shape back (its
// shape function merges the two).
func TestGrapplerShapesZeroGradientOfVariable(t *testing.T) {
	b := newBuilder()
	b.variable("v", "", []int64{16})
	b.node("vs", "VariableShape", "", [][]int64{{1}}, map[string]*apb.AttrValue{"out_type": tAttr(int32T)}, "v")
	b.node("zero", "Const", "", [][]int64{{}}, nil)
	b.op("zeros", "Fill", "", []int64{16}, "vs", "zero")
	b.op("grad", "Neg", "", []int64{16}, "v/read")
	b.node("merge", "Merge", "", [][]int64{{16}, {}}, map[string]*apb.AttrValue{"N": iAttr(2)}, "zeros", "grad")
	b.op("x", "Placeholder", "", []int64{4, 8})
	b.node("xs", "Shape", "", [][]int64{{2}}, map[string]*apb.AttrValue{"out_type": tAttr(int32T)}, "x")
	b.op("xzeros", "Fill", "", []int64{4, 8}, "xs", "zero")
	b.op("xgrad", "Neg", "", []int64{4, 8}, "x")
	b.node("xmerge", "Merge", "", [][]int64{{4, 8}, {}}, map[string]*apb.AttrValue{"N": iAttr(2)}, "xzeros", "xgrad")
	b.op("zeros2", "Fill", "", []int64{16}, "vs", "zero")
	b.node("merge2", "Merge", "", [][]int64{{16}, {}}, map[string]*apb.AttrValue{"N": iAttr(2)}, "zeros2", "grad")
	b.op("lr", "Const", "", []int64{})
	b.op("apply", "ResourceApplyGradientDescent", "", nil, "v", "lr", "merge2")
	grapplerShapesWant(t, b, []nodeShape{
		{"zeros", []int64{-1}}, {"merge", []int64{-1}}, {"grad", []int64{16}}, {"xzeros", []int64{4, 8}}, {"xmerge", []int64{4, 8}},
		{"zeros2", []int64{-1}}, {"merge2", []int64{16}},
	})
}

// nodeShape is the shape a test wants for a node's first output.
type nodeShape struct {
	node string
	want []int64
}

// grapplerShapesWant builds b's graph, requires GrapplerShapes to give each node of want its
// shape (-1 for a dimension Grappler calls unknown), and returns the graph and its recorded
// shapes.
func grapplerShapesWant(t *testing.T, b *builder, want []nodeShape) (*graphdef.Graph, *Shapes) {
	t.Helper()
	g := b.graph(t)
	s, err := NewShapes(g, 1)
	if err != nil {
		t.Fatal(err)
	}
	gs := GrapplerShapes(g, s)
	for _, c := range want {
		if got := gs.Out(g.Node(c.node), 0); !equalInts(got, c.want) {
			t.Errorf("%s: %v, want %v", c.node, got, c.want)
		}
	}
	return g, s
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGrapplerEigenCosts checks grapplerEigenCost, and the costs the op-specific rules use,
// against the VirtualCluster of the project's TensorFlow (tools/vcluster/cwise_costs.py).
func TestGrapplerEigenCosts(t *testing.T) {
	py := os.Getenv("TFSWAP_PYTHON")
	if py == "" {
		py, _ = filepath.Abs("../.venv/bin/python")
	}
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the project venv (.venv/bin/python, or $TFSWAP_PYTHON) is missing; run scripts/setup.sh")
		}
		t.Skip("no project venv: run scripts/setup.sh to check Grappler's elementwise costs")
	}
	cmd := exec.Command(py, "../tools/vcluster/cwise_costs.py")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cwise_costs.py: %v\n%s", err, stderr.String())
	}
	var res struct {
		Costs map[string]int64 `json:"costs"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Costs) == 0 {
		t.Fatalf("cwise_costs.py output: %v\n%s", err, out)
	}
	m := res.Costs
	// Ops the script cannot build (quantized types) are the sums of measured costs that
	// op_level_cost_estimator.cc composes them of.
	derived := map[string]int64{
		"Dequantize": m["Mul"], "QuantizeV2": m["Mul"] + m["Maximum"] + m["Minimum"] + m["Round"],
		"QuantizeAndDequantizeV2": m["Mul"] + m["Maximum"] + m["Minimum"] + m["Round"] + m["Mul"],
		"QuantizeAndDequantizeV4": m["Mul"] + m["Maximum"] + m["Minimum"] + m["Round"] + m["Mul"],
		"QuantizedSigmoid":        m["Sigmoid"], "QuantizedBiasAdd": m["Add"], "QuantizedAdd": m["Add"],
		"QuantizedMul": m["Mul"],
	}
	for op, want := range m {
		derived[op] = want
	}
	for op, got := range grapplerEigenCost {
		want, ok := derived[op]
		if !ok {
			t.Errorf("%s: no measurement", op)
			continue
		}
		if got != want {
			t.Errorf("%s: cost %d, the VirtualCluster's %d", op, got, want)
		}
	}
	for op := range m {
		if _, ok := grapplerEigenCost[op]; !ok {
			t.Errorf("%s: measured but missing from grapplerEigenCost", op)
		}
	}
	if eigenExp != m["Exp"] || eigenInverse != m["Inv"] || eigenRsqrt != m["Rsqrt"] {
		t.Errorf("eigenExp %d, eigenInverse %d, eigenRsqrt %d; measured %d, %d, %d", eigenExp, eigenInverse, eigenRsqrt, m["Exp"], m["Inv"], m["Rsqrt"])
	}
}

// TestGrapplerShapeKinds checks that grapplerShapeKinds gives each op the kinds of the maps it
// is in, and none to ops in no map.
func TestGrapplerShapeKinds(t *testing.T) {
	maps := grapplerShapeKindMaps
	if len(maps) != 4 {
		t.Fatalf("%d maps of shape-function kinds, want 4", len(maps))
	}
	ops := []string{"Conv2D", "MatMul", "IdentityN", "", "NoOp", "Relu", "AddV2", "Sum", "ReluGrad"}
	for _, m := range maps {
		for op := range m.ops {
			ops = append(ops, op)
		}
	}
	for _, op := range ops {
		var want uint8
		for _, m := range maps {
			if m.ops[op] {
				want |= m.kind
			}
		}
		if got := grapplerShapeKinds[op]; got != want {
			t.Errorf("grapplerShapeKinds[%q] = %b, want %b", op, got, want)
		}
	}
}

// TestGrapplerHandleLists: the handle and output lists cut from the shape model's arenas are
// zeroed, of the length asked, and apart: filling or appending to one leaves the others as
// they were, also across a new arena.
func TestGrapplerHandleLists(t *testing.T) {
	m := &grapplerShapeModel{}
	var lists [][]int32
	for i := 0; i < 3000; i++ {
		n := i % 7
		l := m.handleList(n)
		if len(l) != n || cap(l) != n {
			t.Fatalf("list %d: length %d, capacity %d, want %d", i, len(l), cap(l), n)
		}
		for j := range l {
			if l[j] != 0 {
				t.Fatalf("list %d not zeroed", i)
			}
			l[j] = int32(i)
		}
		lists = append(lists, l)
		if n > 0 {
			_ = append(l, -1) // copies: the next list is not written
		}
	}
	for i, l := range lists {
		for _, v := range l {
			if v != int32(i) {
				t.Fatalf("list %d was overwritten: %v", i, l)
			}
		}
	}
	outs := m.outputLists(2000)
	more := m.outputLists(3)
	if len(outs) != 2000 || cap(more) != 3 || &outs[len(outs)-1] == &more[0] {
		t.Fatal("output lists overlap or are not of the length asked")
	}
}
