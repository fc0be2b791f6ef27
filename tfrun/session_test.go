//go:build tensorflow

package tfrun

import (
	"errors"
	"strings"
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// TestOneDNNOff checks that TestMain got TensorFlow to run without oneDNN.
func TestOneDNNOff(t *testing.T) {
	if OneDNNEnabled() {
		t.Fatalf("TensorFlow's oneDNN optimizations are on (%s=%q); results would not be comparable bit for bit", OneDNNEnv, "")
	}
}

// identityGraph is x (Placeholder) -> y (Identity) for dtype dt, on the default device.
func identityGraph(t *testing.T, dt tpb.DataType) []byte {
	return marshalGraph(t,
		node("x", "Placeholder", "", nil, attrMap{"dtype": typeAttr(dt)}),
		node("y", "Identity", "", []string{"x"}, attrMap{"T": typeAttr(dt)}),
	)
}

// TestTensorRoundTrip feeds tensors of every npy dtype, and of unusual shapes, through an
// Identity and requires the same bytes back.
func TestTensorRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   *Tensor
	}{
		{"float32 matrix", Float32Tensor([]int64{2, 3}, 1, -2, 3.5, 0, -0.0, 1e-30)},
		{"int32 scalar", Int32Tensor(nil, -7)},
		{"int64", &Tensor{DType: tpb.DataType_DT_INT64, Shape: []int64{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0x80, 2, 0, 0, 0, 0, 0, 0, 0}}},
		{"float64", &Tensor{DType: tpb.DataType_DT_DOUBLE, Shape: []int64{1}, Data: []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}}},
		{"bool", &Tensor{DType: tpb.DataType_DT_BOOL, Shape: []int64{3}, Data: []byte{1, 0, 1}}},
		{"uint8", &Tensor{DType: tpb.DataType_DT_UINT8, Shape: []int64{1, 2}, Data: []byte{255, 7}}},
		{"empty", Float32Tensor([]int64{0, 4})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, identityGraph(t, tc.in.DType), nil)
			out, md, err := s.Run(map[string]*Tensor{"x:0": tc.in}, []string{"y:0"}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if md != nil {
				t.Errorf("metadata %v without RunOptions", md)
			}
			if !out[0].Equal(tc.in) {
				t.Fatalf("got %v %v, want %v %v", out[0], out[0].Data, tc.in, tc.in.Data)
			}
		})
	}
}

// TestRunErrors checks that failures name the node at fault and keep TensorFlow's message.
func TestRunErrors(t *testing.T) {
	s := newSession(t, identityGraph(t, tpb.DataType_DT_FLOAT), nil)
	one := Float32Tensor([]int64{1}, 1)

	_, _, err := s.Run(nil, []string{"y:0"}, nil, nil)
	var tfErr *Error
	if !errors.As(err, &tfErr) {
		t.Fatalf("missing feed: got %v, want *Error", err)
	}
	if tfErr.Node != "x" || !strings.Contains(tfErr.Message, "placeholder tensor 'x'") || CodeName(tfErr.Code) != "INVALID_ARGUMENT" {
		t.Errorf("missing feed: node %q code %s message %q", tfErr.Node, CodeName(tfErr.Code), tfErr.Message)
	}
	t.Logf("missing feed: %v", err)

	for _, tc := range []struct {
		feeds            map[string]*Tensor
		fetches, targets []string
		want             string
	}{
		{map[string]*Tensor{"x:0": one}, []string{"nope:0"}, nil, `fetch "nope:0": no node "nope"`},
		{map[string]*Tensor{"x:0": one}, []string{"y:3"}, nil, `node "y" has 1 output(s)`},
		{map[string]*Tensor{"x:0": one}, nil, []string{"nope"}, `target "nope": no node`},
		{map[string]*Tensor{"x": one}, []string{"y:x"}, nil, `bad tensor name "y:x"`},
		{map[string]*Tensor{"x:0": {DType: tpb.DataType_DT_FLOAT, Shape: []int64{2}, Data: []byte{1}}}, []string{"y:0"}, nil, "needs 8 bytes, has 1"},
	} {
		if _, _, err := s.Run(tc.feeds, tc.fetches, tc.targets, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}

	// A node placed on a device that does not exist: TensorFlow names it when the graph is
	// first run.
	bad := marshalGraph(t,
		node("x", "Placeholder", "", nil, attrMap{"dtype": typeAttr(tpb.DataType_DT_FLOAT)}),
		node("far", "Identity", "/device:CPU:7", []string{"x"}, attrMap{"T": typeAttr(tpb.DataType_DT_FLOAT)}),
	)
	s2 := newSession(t, bad, TwoDeviceConfigBytes())
	_, _, err = s2.Run(map[string]*Tensor{"x:0": one}, []string{"far:0"}, nil, nil)
	if !errors.As(err, &tfErr) || tfErr.Node != "far" {
		t.Fatalf("bad device: got %v, want an *Error naming node far", err)
	}
	t.Logf("bad device: %v", err)

	if _, err := NewSession([]byte("not a graph"), nil); err == nil {
		t.Error("NewSession accepted a corrupt GraphDef")
	}
}

// TestTrainFixtures trains every fixture for five steps in the two-device configuration
// and checks that the losses are finite and that memorizing the fixed batch lowers the loss.
func TestTrainFixtures(t *testing.T) {
	t.Logf("TensorFlow %s, oneDNN on: %v", Version(), OneDNNEnabled())
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, gd := loadFixture(t, name)
			r, err := Train(gd, fx, 5, TwoDeviceConfigBytes())
			if err != nil {
				t.Fatal(err)
			}
			checkFinite(t, r)
			t.Logf("losses %v", r.LossValues)
			if r.LossValues[4] >= r.LossValues[0] {
				t.Errorf("loss did not go down in 5 steps: %v", r.LossValues)
			}
			if len(r.Final) != len(fx.Variables) || len(r.Initial) != len(fx.Variables) {
				t.Fatalf("got %d/%d variables, want %d", len(r.Initial), len(r.Final), len(fx.Variables))
			}
			changed := 0
			for i := range r.Final {
				if !r.Final[i].Equal(r.Initial[i]) {
					changed++
				}
			}
			if changed == 0 {
				t.Error("training changed no variable")
			}
		})
	}
}

// TestDeterminism trains each fixture twice, in two sessions, and requires bit-identical
// losses and variables: the baseline the rewrite-equivalence tests rely on.
func TestDeterminism(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, gd := loadFixture(t, name)
			a, err := Train(gd, fx, 5, TwoDeviceConfigBytes())
			if err != nil {
				t.Fatal(err)
			}
			b, err := Train(gd, fx, 5, TwoDeviceConfigBytes())
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range a.Diff(b, variableNames(fx)) {
				t.Error(d)
			}
		})
	}
}

// partitionTestGraph is x -> sq on /device:CPU:1, sq -> hop (Identity) on /device:CPU:0,
// hop * x -> y on /device:CPU:1. With doNotRemove, hop carries _grappler_do_not_remove.
func partitionTestGraph(t *testing.T, doNotRemove bool) []byte {
	f32 := attrMap{"T": typeAttr(tpb.DataType_DT_FLOAT)}
	hop := attrMap{"T": typeAttr(tpb.DataType_DT_FLOAT)}
	if doNotRemove {
		hop["_grappler_do_not_remove"] = &apb.AttrValue{Value: &apb.AttrValue_B{B: true}}
	}
	return marshalGraph(t,
		node("x", "Placeholder", computeDevice, nil, attrMap{"dtype": typeAttr(tpb.DataType_DT_FLOAT), "shape": shapeAttr(2, 2)}),
		node("sq", "Square", computeDevice, []string{"x"}, f32),
		node("hop", "Identity", hostDevice, []string{"sq"}, hop),
		node("y", "Mul", computeDevice, []string{"hop", "x"}, f32),
	)
}

// runPartitionTestGraph runs the graph once with TraceOptions and checks y.
func runPartitionTestGraph(t *testing.T, gd []byte, cfg *ConfigProto) *Trace {
	t.Helper()
	b, err := MarshalConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, gd, b)
	out, md, err := s.Run(map[string]*Tensor{"x:0": Float32Tensor([]int64{2, 2}, 1, 2, 3, 4)}, []string{"y:0"}, nil, TraceOptions())
	if err != nil {
		t.Fatal(err)
	}
	if want := Float32Tensor([]int64{2, 2}, 1, 8, 27, 64); !out[0].Equal(want) {
		t.Fatalf("y = %v, want %v", out[0].Data, want.Data)
	}
	return NewTrace(md)
}

// TestTwoDevicePartition places a small graph on /device:CPU:1 with one Identity on
// /device:CPU:0 (kept by _grappler_do_not_remove) and checks the partition graphs (a
// _Send/_Recv pair in each direction, paired by tensor_name and devices) and the step stats
// (nodes on both devices, each receive completing after its send started).
func TestTwoDevicePartition(t *testing.T) {
	tr := runPartitionTestGraph(t, partitionTestGraph(t, true), TwoDeviceConfig())
	if len(tr.PartitionGraphs) != 2 {
		t.Fatalf("%d partition graphs, want 2", len(tr.PartitionGraphs))
	}
	checkPair := func(producer, from, to, consumer string) {
		t.Helper()
		sends := tr.SendOf(producer)
		if len(sends) != 1 {
			t.Fatalf("%d _Send nodes fed by %s, want 1", len(sends), producer)
		}
		tx := sends[0]
		if !SameDevice(tx.Send.Device, from) || !SameDevice(tx.Send.SendDevice, from) || !SameDevice(tx.Send.RecvDevice, to) {
			t.Errorf("_Send %s: device %s, send_device %s, recv_device %s; want %s -> %s", tx.Send.Name, tx.Send.Device, tx.Send.SendDevice, tx.Send.RecvDevice, from, to)
		}
		if tx.Recv == nil {
			t.Fatalf("no _Recv matches _Send %s (tensor_name %s)", tx.Send.Name, tx.Send.TensorName)
		}
		if !SameDevice(tx.Recv.Device, to) || tx.Recv.Partition == tx.Send.Partition {
			t.Errorf("_Recv %s on %s in partition %d; want %s, not partition %d", tx.Recv.Name, tx.Recv.Device, tx.Recv.Partition, to, tx.Send.Partition)
		}
		consumers := tr.ConsumersOf(tx.Recv.Name)
		if len(consumers) != 1 || consumers[0].Name != consumer {
			t.Errorf("_Recv %s feeds %v, want %s", tx.Recv.Name, consumers, consumer)
		}
		// TensorFlow's StepStatsCollector records no stats for _Send and _Recv; order is
		// checked on the nodes around them instead.
		if _, ok := tr.Timing(tx.Send.Name, ""); ok {
			t.Errorf("step stats hold _Send %s; TensorFlow's behaviour changed", tx.Send.Name)
		}
		prod, ok1 := tr.Timing(producer, from)
		cons, ok2 := tr.Timing(consumer, to)
		if !ok1 || !ok2 {
			t.Fatalf("no step stats for %s on %s (%v) or %s on %s (%v)", producer, from, ok1, consumer, to, ok2)
		}
		if cons.Start < prod.OpEnd {
			t.Errorf("%s started at %d, before %s finished at %d", consumer, cons.Start, producer, prod.OpEnd)
		}
		t.Logf("%s -> %s via %s/%s: %s, %s", producer, consumer, tx.Send.Name, tx.Recv.Name, prod.Relative(tr.Origin()), cons.Relative(tr.Origin()))
	}
	checkPair("sq", computeDevice, hostDevice, "hop")
	checkPair("hop", hostDevice, computeDevice, "y")

	devices := tr.Devices()
	if len(devices) != 2 || !SameDevice(devices[0], hostDevice) || !SameDevice(devices[1], computeDevice) {
		t.Fatalf("step stats for devices %v, want CPU:0 and CPU:1", devices)
	}
	for _, want := range []struct{ node, device string }{{"sq", computeDevice}, {"hop", hostDevice}, {"y", computeDevice}} {
		if _, ok := tr.Timing(want.node, want.device); !ok {
			t.Errorf("no step stats for %s on %s", want.node, want.device)
		}
	}
	if pn, ok := tr.Node("hop"); !ok || !SameDevice(pn.Device, hostDevice) {
		t.Errorf("Identity hop is not in the partition graphs on %s: %+v", hostDevice, pn)
	}
}

// TestGrapplerRemovesCrossDeviceIdentity records a fact the rewrite depends on: without
// _grappler_do_not_remove, Grappler's dependency optimizer deletes an Identity even when it
// sits on another device than its input and consumer, so the tensor never visits that
// device. With dependency_optimization OFF the Identity stays.
func TestGrapplerRemovesCrossDeviceIdentity(t *testing.T) {
	gd := partitionTestGraph(t, false)
	tr := runPartitionTestGraph(t, gd, TwoDeviceConfig())
	if pn, ok := tr.Node("hop"); ok {
		t.Errorf("Grappler kept the plain Identity hop on %s; TensorFlow's behaviour changed", pn.Device)
	}
	if tx := tr.SendOf("sq"); len(tx) != 0 {
		t.Errorf("without hop, sq is still sent: %+v", tx)
	}
	cfg := TwoDeviceConfig()
	cfg.GraphOptions = &cpb.GraphOptions{RewriteOptions: &cpb.RewriterConfig{DependencyOptimization: cpb.RewriterConfig_OFF}}
	tr = runPartitionTestGraph(t, gd, cfg)
	if _, ok := tr.Node("hop"); !ok {
		t.Error("hop is missing even with dependency_optimization OFF")
	}
}
