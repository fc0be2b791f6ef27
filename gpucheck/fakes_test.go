package gpucheck

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling/fakegpu"
	"github.com/tfswap/tfswap/tfrun"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tspb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// mlpLayers and mlpWidth size the test's model: an MLP training graph (forward MatMul and
// Relu per layer, backward ReluGrad and two MatMuls, plain SGD updates).
const mlpLayers, mlpWidth = 8, 512

func shapeProto(s []int64) *tspb.TensorShapeProto {
	sp := &tspb.TensorShapeProto{}
	for _, d := range s {
		sp.Dim = append(sp.Dim, &tspb.TensorShapeProto_Dim{Size: d})
	}
	return sp
}

func typeAttr(t tpb.DataType) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_Type{Type: t}}
}
func boolAttr(b bool) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_B{B: b}} }

// mlpGraph builds the MLP's training graph at a batch size, with _output_shapes everywhere.
func mlpGraph(batch int64) *gpb.GraphDef {
	g := &gpb.GraphDef{}
	f32 := tpb.DataType_DT_FLOAT
	add := func(name, op string, shapes [][]int64, attrs map[string]*apb.AttrValue, inputs ...string) {
		nd := &npb.NodeDef{Name: name, Op: op, Input: inputs, Attr: map[string]*apb.AttrValue{}}
		for k, v := range attrs {
			nd.Attr[k] = v
		}
		l := &apb.AttrValue_ListValue{}
		for _, s := range shapes {
			l.Shape = append(l.Shape, shapeProto(s))
		}
		nd.Attr["_output_shapes"] = &apb.AttrValue{Value: &apb.AttrValue_List{List: l}}
		g.Node = append(g.Node, nd)
	}
	act := []int64{batch, mlpWidth}
	wsh := []int64{mlpWidth, mlpWidth}
	T := map[string]*apb.AttrValue{"T": typeAttr(f32)}
	add("input", "Placeholder", [][]int64{act}, map[string]*apb.AttrValue{"dtype": typeAttr(f32), "shape": {Value: &apb.AttrValue_Shape{Shape: shapeProto(act)}}})
	add("lr", "Const", [][]int64{{}}, map[string]*apb.AttrValue{"dtype": typeAttr(f32), "value": {Value: &apb.AttrValue_Tensor{}}})
	prev := "input"
	for i := 1; i <= mlpLayers; i++ {
		w := fmt.Sprintf("layer%d/w", i)
		add(w, "VarHandleOp", [][]int64{{}}, map[string]*apb.AttrValue{"dtype": typeAttr(f32), "shape": {Value: &apb.AttrValue_Shape{Shape: shapeProto(wsh)}}})
		add(w+"/read", "ReadVariableOp", [][]int64{wsh}, map[string]*apb.AttrValue{"dtype": typeAttr(f32)}, w)
		add(fmt.Sprintf("layer%d/MatMul", i), "MatMul", [][]int64{act}, T, prev, w+"/read")
		add(fmt.Sprintf("layer%d/Relu", i), "Relu", [][]int64{act}, T, fmt.Sprintf("layer%d/MatMul", i))
		prev = fmt.Sprintf("layer%d/Relu", i)
	}
	add("loss", "Relu", [][]int64{act}, T, prev)
	grad := "loss"
	var updates []string
	for i := mlpLayers; i >= 1; i-- {
		in := "input"
		if i > 1 {
			in = fmt.Sprintf("layer%d/Relu", i-1)
		}
		gr := fmt.Sprintf("grad%d/ReluGrad", i)
		add(gr, "ReluGrad", [][]int64{act}, T, grad, fmt.Sprintf("layer%d/Relu", i))
		add(fmt.Sprintf("grad%d/dw", i), "MatMul", [][]int64{wsh}, map[string]*apb.AttrValue{"T": typeAttr(f32), "transpose_a": boolAttr(true)}, in, gr)
		add(fmt.Sprintf("grad%d/dx", i), "MatMul", [][]int64{act}, map[string]*apb.AttrValue{"T": typeAttr(f32), "transpose_b": boolAttr(true)}, gr, fmt.Sprintf("layer%d/w/read", i))
		add(fmt.Sprintf("update%d", i), "ResourceApplyGradientDescent", nil, T, fmt.Sprintf("layer%d/w", i), "lr", fmt.Sprintf("grad%d/dw", i))
		updates = append(updates, "^"+fmt.Sprintf("update%d", i))
		grad = fmt.Sprintf("grad%d/dx", i)
	}
	add("train", "NoOp", nil, nil, updates...)
	add("init", "NoOp", nil, nil)
	return g
}

// mlpGenerator writes mlpGraph at each batch asked for, with its sidecar, into dir.
type mlpGenerator struct {
	dir       string
	generated []int
}

func (m *mlpGenerator) Generate(model string, batch int) (*Graph, error) {
	m.generated = append(m.generated, batch)
	path := filepath.Join(m.dir, fmt.Sprintf("%s_b%d.pb", model, batch))
	mod := &graphdef.Model{Graph: mlpGraph(int64(batch)), Source: path}
	if err := mod.Save(path, graphdef.SaveOptions{}); err != nil {
		return nil, err
	}
	side := Sidecar{Name: model, Batch: batch, Loss: "loss:0", TrainOp: "train", InitOp: "init"}
	for i := 1; i <= mlpLayers; i++ {
		side.Variables = append(side.Variables, Variable{Name: fmt.Sprintf("layer%d/w", i), Fetch: fmt.Sprintf("layer%d/w/read:0", i)})
	}
	data, _ := json.Marshal(side)
	if err := os.WriteFile(sidecarPath(path), data, 0o644); err != nil {
		return nil, err
	}
	return LoadGraph(path, model, batch)
}

// fakeGPURunner "runs" a graph on a fake GPU: the traced step is the one profiling/fakegpu
// constructs for it on the V100 profile (constructed step stats, not a measurement); a step
// whose constructed peak is over the GPU's memory fails as TensorFlow's BFC allocator fails
// (RESOURCE_EXHAUSTED, TensorFlow's message); step times are the simulated step, with a
// fixed 3% spread; deterministic runs report digests of the graph's math (the same for a
// graph and its rewrites, unless differ names a variable to perturb in rewritten graphs).
type fakeGPURunner struct {
	limit  int64
	specs  []RunSpec
	differ string
	// determinismError, when set, is what deterministic runs of rewritten graphs fail with.
	determinismError string
}

func (f *fakeGPURunner) Run(spec RunSpec) (*RunResult, error) {
	f.specs = append(f.specs, spec)
	m, err := graphdef.Load(spec.Graph, graphdef.LoadOptions{})
	if err != nil {
		return nil, err
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		return nil, err
	}
	p, _ := cost.LookupProfile("v100-16gb")
	st, err := fakegpu.Construct(g, p, fakegpu.Options{Fetch: []string{spec.Train}})
	if err != nil {
		return nil, err
	}
	res := &RunResult{Devices: []DeviceSummary{{Name: fakegpu.GPUDevice, Type: "GPU", MemoryBytes: f.limit}}}
	rewritten := strings.Contains(spec.Graph, ".auto.") || strings.Contains(spec.Graph, ".identity.")
	if st.Peak > f.limit {
		res.Status, res.Code = StatusOOM, "RESOURCE_EXHAUSTED"
		res.Error = "warm-up step 1: OOM when allocating tensor with shape[" + fmt.Sprint(g.Node("input").OutputShapes[0][0]) +
			",512] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n\t [[{{node layer1/MatMul}}]]"
		return res, nil
	}
	if spec.Deterministic && rewritten && f.determinismError != "" {
		res.Status, res.Code, res.Error = Classify("UNIMPLEMENTED", f.determinismError), "UNIMPLEMENTED", "step 1: "+f.determinismError
		return res, nil
	}
	res.Status = StatusRan
	for i := 0; i < spec.Steps; i++ {
		res.StepNS = append(res.StepNS, st.StepNS*int64(100+3*(i%3))/100)
		res.Losses = append(res.Losses, float64(i+1)/10)
		if spec.Deterministic {
			res.LossDigests = append(res.LossDigests, hash(fmt.Sprint(spec.Seed, g.Node("input").OutputShapes[0], i)))
		}
	}
	if spec.Deterministic {
		for _, v := range spec.Variables {
			d := hash(fmt.Sprint(spec.Seed, g.Node("input").OutputShapes[0], v))
			if rewritten && f.differ != "" && strings.HasPrefix(v, f.differ) {
				d = hash("perturbed " + d)
			}
			res.VariableDigests = append(res.VariableDigests, d)
		}
	}
	if spec.Trace {
		res.Measurement, _ = Measure(st.Metadata)
	}
	return res, nil
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// testGPU is the fake GPU: a V100 as TensorFlow describes one, with 64 MiB for TensorFlow so
// that the test's graphs stay small.
func testGPU() tfrun.GPU {
	return fakeGPU("Tesla V100-SXM2-16GB", "7.0", 64<<20)
}
