package plan

import (
	"bytes"
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
)

// randomGraph builds a DAG from fuzz bytes: each byte adds a node whose op, device and inputs
// (among the earlier nodes) the byte and its successors choose.
func randomGraph(data []byte) *gpb.GraphDef {
	b := newBuilder()
	b.op("n0", "Placeholder", "", act)
	next := func(i int) int {
		if len(data) == 0 {
			return 0
		}
		return int(data[i%len(data)])
	}
	count := 2 + len(data)%60
	for i := 1; i < count; i++ {
		x, y, z := next(3*i), next(3*i+1), next(3*i+2)
		dev := ""
		switch x % 7 {
		case 0:
			dev = "/device:CPU:0"
		case 1:
			dev = "/device:GPU:1"
		}
		a := fmt.Sprintf("n%d", y%i)
		c := fmt.Sprintf("n%d", z%i)
		name := fmt.Sprintf("n%d", i)
		switch x % 5 {
		case 0:
			b.op(name, "Relu", dev, act, a)
		case 1:
			b.op(name, "AddV2", dev, act, a, c)
		case 2:
			b.op(name, "AddN", dev, act, a, c, "^"+fmt.Sprintf("n%d", (y+z)%i))
		case 3:
			b.op(name, "ReluGrad", dev, act, c, a)
		default:
			b.op(name, "Tanh", dev, []int64{int64(1 + z%128), 128}, a)
		}
	}
	return b.g
}

// FuzzRewrite checks the rewrite's invariants (see Verify) and determinism on random graphs
// and options.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte("tfswap"), uint8(2), uint8(1), int8(0), false)
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30}, uint8(3), uint8(2), int8(-1), true)
	f.Fuzz(func(t *testing.T, data []byte, threshold, ahead uint8, groupBy int8, deviceGate bool) {
		g := randomGraph(data)
		opts := rewrite.Options{
			SwapoutThreshold: 1 + int(threshold%8),
			SwapinAhead:      1 + int(ahead%6),
			SwapinGroupBy:    int(groupBy%6) - 1,
			MinTensorBytes:   -1,
		}
		if opts.SwapinGroupBy < -1 {
			opts.SwapinGroupBy = -1
		}
		if deviceGate {
			opts.Gate = rewrite.GateDevice
		}
		m := graphdef.NewModel(g)
		orig, err := graphdef.NewGraph(g, "fuzz")
		if err != nil {
			t.Fatalf("random graph is invalid: %v", err)
		}
		res, err := Rewrite(m, opts)
		if err != nil {
			t.Fatalf("Rewrite: %v", err)
		}
		if err := rewrite.Verify(orig, res, opts.Gate); err != nil {
			t.Fatal(err)
		}
		a, _ := res.Model.Marshal()
		res2, err := Rewrite(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := res2.Model.Marshal()
		if !bytes.Equal(a, b) {
			t.Fatal("rewrite is not deterministic")
		}
	})
}
