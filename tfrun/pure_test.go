package tfrun

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/internal/npy"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	sspb "github.com/wamuir/graft/tensorflow/core/framework/step_stats_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// These tests need no TensorFlow runtime and run with and without the build tag.

func TestTensorValidateAndNpy(t *testing.T) {
	f := Float32Tensor([]int64{2}, 1.5, -2)
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := f.Npy()
	if err != nil || a.DType != npy.Float32 || !reflect.DeepEqual(a.Shape, []int64{2}) {
		t.Fatalf("Npy: %v %v", a, err)
	}
	back, err := TensorFromNpy(a)
	if err != nil || !back.Equal(f) {
		t.Fatalf("TensorFromNpy: %v %v", back, err)
	}
	v, err := f.Float64s()
	if err != nil || !reflect.DeepEqual(v, []float64{1.5, -2}) {
		t.Fatalf("Float64s: %v %v", v, err)
	}
	if s, err := Int32Tensor(nil, 7).Scalar(); err != nil || s != 7 {
		t.Fatalf("Scalar: %v %v", s, err)
	}
	if _, err := f.Scalar(); err == nil {
		t.Error("Scalar of a 2-element tensor succeeded")
	}
	if f.String() != "float32(2)" {
		t.Errorf("String %q", f.String())
	}

	bad := []struct {
		t    *Tensor
		want string
	}{
		{&Tensor{DType: tpb.DataType_DT_FLOAT, Shape: []int64{3}, Data: make([]byte, 8)}, "needs 12 bytes, has 8"},
		{&Tensor{DType: tpb.DataType_DT_STRING, Shape: []int64{1}}, "no fixed element size"},
		{&Tensor{DType: tpb.DataType_DT_FLOAT_REF, Shape: []int64{1}, Data: make([]byte, 4)}, "no fixed element size"},
		{&Tensor{DType: tpb.DataType_DT_INT8, Shape: []int64{-1}}, "negative dimension"},
	}
	for _, tc := range bad {
		if err := tc.t.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%v): %v, want %q", tc.t.DType, err, tc.want)
		}
	}
	if _, err := (&Tensor{DType: tpb.DataType_DT_HALF, Shape: []int64{1}, Data: make([]byte, 2)}).Npy(); err == nil {
		t.Error("Npy of a float16 tensor succeeded")
	}
	neg0 := Float32Tensor([]int64{1}, float32(negZero()))
	if neg0.Equal(Float32Tensor([]int64{1}, 0)) {
		t.Error("Equal treats -0 and +0 as the same bits")
	}
}

func negZero() float64 { z := 0.0; return -z }

func TestParseDataType(t *testing.T) {
	for name, want := range map[string]tpb.DataType{"float32": tpb.DataType_DT_FLOAT, "int32": tpb.DataType_DT_INT32, "bool": tpb.DataType_DT_BOOL} {
		if got, err := ParseDataType(name); err != nil || got != want {
			t.Errorf("ParseDataType(%q) = %v, %v", name, got, err)
		}
	}
	if _, err := ParseDataType("float"); err == nil {
		t.Error("ParseDataType accepted \"float\"")
	}
}

func TestErrorNode(t *testing.T) {
	tests := []struct{ msg, node string }{
		{"You must feed a value for placeholder tensor 'x' with dtype float\n\t [[{{node x}}]]", "x"},
		{"Cannot assign a device for operation far: {{node far}} was explicitly assigned", "far"},
		{"Cannot assign a device for operation a/b_1: Could not satisfy", "a/b_1"},
		{"Node 'gradients/x' has an input that is not there", "gradients/x"},
		{"something else", ""},
	}
	for _, tc := range tests {
		e := newError("run", 3, tc.msg)
		if e.Node != tc.node {
			t.Errorf("node of %q = %q, want %q", tc.msg, e.Node, tc.node)
		}
		if !strings.Contains(e.Error(), tc.msg) || !strings.Contains(e.Error(), "INVALID_ARGUMENT") {
			t.Errorf("Error() = %q lost the message or code", e.Error())
		}
	}
	var target *Error
	if !errors.As(error(newError("run", 5, "x")), &target) || CodeName(target.Code) != "NOT_FOUND" || CodeName(99) != "CODE_99" {
		t.Error("CodeName")
	}
}

func TestLoadFixture(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, _ := npy.Encode(npy.FromFloat32s([]int64{2, 3}, make([]float32, 6)))
	lab, _ := npy.Encode(npy.FromInt32s([]int64{2}, []int32{1, 0}))
	write("m.input.npy", in)
	write("m.labels.npy", lab)
	write("m.pb", []byte("graph"))
	side := `{"name": "m", "seed": 1, "batch": 2,
	  "feeds": [{"name": "input:0", "file": "m.input.npy", "dtype": "float32", "shape": [2, 3]},
	            {"name": "labels:0", "file": "m.labels.npy", "dtype": "int32", "shape": [2]}],
	  "loss": "loss:0", "train_op": "train", "init_op": "init",
	  "variables": [{"name": "w", "fetch": "fetch_var/0:0", "dtype": "float32", "shape": [3]}],
	  "node_count": 9, "extra": {"ignored": true}}`
	write("m.json", []byte(side))
	fx, err := LoadFixture(filepath.Join(dir, "m.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fx.GraphPath() != filepath.Join(dir, "m.pb") || len(fx.FeedTensors) != 2 || fx.FeedTensors["labels:0"].DType != tpb.DataType_DT_INT32 {
		t.Fatalf("fixture %+v", fx)
	}
	if got := fx.VariableFetches(); !reflect.DeepEqual(got, []string{"fetch_var/0:0"}) {
		t.Errorf("VariableFetches %v", got)
	}
	if gd, err := fx.GraphDef(); err != nil || string(gd) != "graph" {
		t.Errorf("GraphDef %q %v", gd, err)
	}

	write("bad.json", []byte(strings.Replace(side, `"shape": [2, 3]`, `"shape": [3, 2]`, 1)))
	if _, err := LoadFixture(filepath.Join(dir, "bad.json")); err == nil || !strings.Contains(err.Error(), "m.input.npy holds float32(2, 3)") {
		t.Errorf("shape mismatch: %v", err)
	}
	write("missing.json", []byte(strings.Replace(side, "m.labels.npy", "nope.npy", 1)))
	if _, err := LoadFixture(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "nope.npy") {
		t.Errorf("missing feed file: %v", err)
	}
	write("noloss.json", []byte(strings.Replace(side, `"loss": "loss:0",`, "", 1)))
	if _, err := LoadFixture(filepath.Join(dir, "noloss.json")); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("no loss: %v", err)
	}
}

func TestTwoDeviceConfig(t *testing.T) {
	var c cpb.ConfigProto
	if err := proto.Unmarshal(TwoDeviceConfigBytes(), &c); err != nil {
		t.Fatal(err)
	}
	if c.DeviceCount["CPU"] != 2 || c.InterOpParallelismThreads != InterOpThreads || c.IntraOpParallelismThreads != IntraOpThreads || c.AllowSoftPlacement || !c.UsePerSessionThreads {
		t.Fatalf("config %v", &c)
	}
	o := TraceOptions()
	if o.TraceLevel != cpb.RunOptions_FULL_TRACE || !o.OutputPartitionGraphs {
		t.Fatalf("trace options %v", o)
	}
}

func TestDevices(t *testing.T) {
	full := "/job:localhost/replica:0/task:0/device:CPU:1"
	for _, same := range []string{"/device:CPU:1", "/cpu:1", full, "/job:localhost/device:CPU:1"} {
		if !SameDevice(full, same) {
			t.Errorf("SameDevice(%s, %s) = false", full, same)
		}
	}
	for _, other := range []string{"/device:CPU:0", "/device:GPU:1", "/job:worker/device:CPU:1", "", "/device:CPU:*"} {
		if SameDevice(full, other) {
			t.Errorf("SameDevice(%s, %q) = true", full, other)
		}
	}
	if ShortDevice(full) != "/device:CPU:1" || ShortDevice("weird") != "weird" {
		t.Errorf("ShortDevice: %q", ShortDevice(full))
	}
}

// syntheticMetadata is a RunMetadata like TensorFlow's for a -> (CPU:1 to CPU:0) -> b,
// with a control edge from b back to c on CPU:1.
func syntheticMetadata() *cpb.RunMetadata {
	dev0, dev1 := "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"
	s := func(v string) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(v)}} }
	xfer := func(tensor, from, to string) map[string]*apb.AttrValue {
		return map[string]*apb.AttrValue{"tensor_name": s(tensor), "send_device": s(from), "recv_device": s(to)}
	}
	p1 := &gpb.GraphDef{Node: []*npb.NodeDef{
		{Name: "a", Op: "Square", Device: dev1},
		{Name: "a/_0", Op: "_Send", Input: []string{"a"}, Device: dev1, Attr: xfer("edge_1_a", dev1, dev0)},
		{Name: "b/_2", Op: "_Recv", Device: dev1, Attr: xfer("edge_3_b", dev0, dev1)},
		{Name: "c", Op: "NoOp", Input: []string{"^b/_2"}, Device: dev1},
	}}
	p0 := &gpb.GraphDef{Node: []*npb.NodeDef{
		{Name: "a/_1", Op: "_Recv", Device: dev0, Attr: xfer("edge_1_a", dev1, dev0)},
		{Name: "b", Op: "Identity", Input: []string{"a/_1"}, Device: dev0},
		{Name: "b/_c", Op: "Const", Input: []string{"^b"}, Device: dev0},
		{Name: "b/_1", Op: "_Send", Input: []string{"b/_c"}, Device: dev0, Attr: xfer("edge_3_b", dev0, dev1)},
	}}
	return &cpb.RunMetadata{
		PartitionGraphs: []*gpb.GraphDef{p1, p0},
		StepStats: &sspb.StepStats{DevStats: []*sspb.DeviceStepStats{
			{Device: dev1, NodeStats: []*sspb.NodeExecStats{
				{NodeName: "a", AllStartNanos: 1000, OpStartRelNanos: 10, OpEndRelNanos: 500, AllEndRelNanos: 600},
				{NodeName: "c", AllStartMicros: 5, OpStartRelMicros: 0, OpEndRelMicros: 1, AllEndRelMicros: 2},
			}},
			{Device: dev0, NodeStats: []*sspb.NodeExecStats{
				{NodeName: "b", AllStartNanos: 1700, OpEndRelNanos: 100, AllEndRelNanos: 150},
			}},
		}},
	}
}

func TestTrace(t *testing.T) {
	tr := NewTrace(syntheticMetadata())
	if got := tr.Devices(); len(got) != 2 || ShortDevice(got[0]) != "/device:CPU:0" {
		t.Fatalf("Devices %v", got)
	}
	a, ok := tr.Timing("a", "/device:CPU:1")
	if !ok || a.Start != 1000 || a.OpStart != 1010 || a.OpEnd != 1500 || a.End != 1600 {
		t.Fatalf("timing of a: %+v %v", a, ok)
	}
	if _, ok := tr.Timing("a", "/device:CPU:0"); ok {
		t.Error("a found on CPU:0")
	}
	c, _ := tr.Timing("c", "")
	if c.Start != 5000 || c.OpEnd != 6000 || c.End != 7000 {
		t.Errorf("micros fallback: %+v", c)
	}
	if tl := tr.Timeline("/cpu:1"); len(tl) != 2 || tl[0].Node != "a" || tl[1].Node != "c" {
		t.Errorf("timeline of CPU:1: %+v", tl)
	}
	if tr.Origin() != 1000 {
		t.Errorf("origin %d", tr.Origin())
	}

	sends := tr.SendOf("a")
	if len(sends) != 1 || sends[0].Send.Name != "a/_0" || sends[0].Recv == nil || sends[0].Recv.Name != "a/_1" || sends[0].Recv.Partition != 1 {
		t.Fatalf("SendOf(a) = %+v", sends)
	}
	if len(tr.SendOf("a:0")) != 1 || len(tr.SendOf("a:1")) != 0 {
		t.Error("SendOf with ports")
	}
	ctl := tr.ControlSendOf("b")
	if len(ctl) != 1 || ctl[0].Send.Name != "b/_1" || ctl[0].Recv == nil || ctl[0].Recv.Name != "b/_2" {
		t.Fatalf("ControlSendOf(b) = %+v", ctl)
	}
	if got := tr.ConsumersOf("a/_1"); len(got) != 1 || got[0].Name != "b" {
		t.Errorf("ConsumersOf(a/_1) = %+v", got)
	}
	if len(tr.Transfers()) != 2 {
		t.Errorf("Transfers %d", len(tr.Transfers()))
	}
	if pn, ok := tr.Node("b"); !ok || pn.Partition != 1 || pn.Op != "Identity" {
		t.Errorf("Node(b) = %+v", pn)
	}
}

func TestTrainResultDiff(t *testing.T) {
	mk := func(loss float32, w ...float32) *TrainResult {
		return &TrainResult{
			Initial: []*Tensor{Float32Tensor([]int64{2}, 0, 0)},
			Losses:  []*Tensor{Float32Tensor(nil, loss)},
			Final:   []*Tensor{Float32Tensor([]int64{2}, w...)},
		}
	}
	a := mk(1, 1, 2)
	if d := a.Diff(mk(1, 1, 2), []string{"w"}); d != nil {
		t.Fatalf("identical runs differ: %v", d)
	}
	d := a.Diff(mk(1.5, 1, 2.5), []string{"w"})
	if len(d) != 2 || !strings.Contains(d[0], "loss at step 1") || !strings.Contains(d[1], "final w differs: 1 of 2 elements, max |diff| 0.5") {
		t.Fatalf("diff %q", d)
	}
}
