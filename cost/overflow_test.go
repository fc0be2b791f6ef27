package cost

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
)

func loadFixtureGraph(t *testing.T, name string) *graphdef.Graph {
	t.Helper()
	m, err := graphdef.Load("../testmodels/fixtures/"+name+".pb", graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestBatchScaleOverflow: a batch scale whose scaled sizes pass what int64 counts is refused
// with the tensor named (issue 11, item 5). --batch-scale 4611686018427387904 used to wrap
// the sizes around and report a peak below the unscaled one; 10000000000 made the planner
// panic on negative sizes.
func TestBatchScaleOverflow(t *testing.T) {
	g := loadFixtureGraph(t, "resnet")
	p, err := LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	base, err := Simulate(g, p, Options{Fetch: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, scale := range []int{1 << 62, 10000000000, math.MaxInt} {
		_, err := NewShapes(g, scale)
		if err == nil || !strings.Contains(err.Error(), "batch scale") || !strings.Contains(err.Error(), "tensor ") || !strings.Contains(err.Error(), "1 PiB") {
			t.Errorf("NewShapes(%d): %v", scale, err)
		}
		if _, err := Simulate(g, p, Options{Fetch: []string{"train"}, BatchScale: scale}); err == nil {
			t.Errorf("Simulate with batch scale %d did not fail", scale)
		}
	}
	// A large scale that fits is simulated with exact sizes: the peak grows with the scale.
	res, err := Simulate(g, p, Options{Fetch: []string{"train"}, BatchScale: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	gpu, b := res.Device("/device:GPU:0"), base.Device("/device:GPU:0")
	if gpu.PeakBytes <= b.PeakBytes || gpu.PeakBytes < (b.PeakBytes-b.ResidentBytes)*(1<<19) {
		t.Errorf("peak at batch x2^20: %d, unscaled %d", gpu.PeakBytes, b.PeakBytes)
	}
	if res.StepTime <= base.StepTime {
		t.Errorf("step at batch x2^20: %d, unscaled %d", res.StepTime, base.StepTime)
	}
}

// TestDurationsSaturate: a duration beyond what int64 nanoseconds hold saturates at
// MaxDuration instead of wrapping around to a negative time.
func TestDurationsSaturate(t *testing.T) {
	for _, s := range []float64{1e12, 1e30, math.Inf(1), math.NaN()} {
		if got := ceilNS(s); got != MaxDuration {
			t.Errorf("ceilNS(%g) = %d, want %d", s, got, MaxDuration)
		}
	}
	if got := ceilNS(1.5e-9); got != 2 {
		t.Errorf("ceilNS(1.5 ns) = %d", got)
	}
	e := OpEstimate{FLOPs: 1e40, Bytes: 1e40, Kind: KindKernel}
	if got := OpTime(e, unitProfile(), false, true); got != MaxDuration {
		t.Errorf("OpTime of 1e40 FLOPs = %d", got)
	}
}

// TestMeasuredSizesBounded: a measured profile's sizes and times are bounded like the
// graph's.
func TestMeasuredSizesBounded(t *testing.T) {
	for _, c := range []struct{ node, want string }{
		{`{"name":"a","compute_ns":1,"output_bytes":[4611686018427387904]}`, "output_bytes"},
		{`{"name":"a","compute_ns":9223372036854775807}`, "compute_ns"},
	} {
		doc := `{"format":"` + MeasuredFormat + `","version":1,"device":{"name":"/device:GPU:0"},"iterations":1,"nodes":[` + c.node + `]}`
		if _, err := ParseMeasured([]byte(doc), "m.json"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `node "a"`) {
			t.Errorf("%s: %v", c.node, err)
		}
	}
}

// TestCheckTotalCountsVariables: the check of the graph's total tensor bytes counts each
// variable op's buffer by its dtype and shape attrs, and names the variable at which the total
// passes the most tfswap accepts; another op's dtype and shape attrs (a Placeholder's) are not
// a buffer of that size and are not counted.
func TestCheckTotalCountsVariables(t *testing.T) {
	big := []int64{1 << 24, 1 << 24} // float32: 2^50 bytes, the largest tensor tfswap accepts
	variables := func(b *builder, n int) {
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("v%d", i)
			b.node(name, "VarHandleOp", "", [][]int64{{}}, map[string]*apb.AttrValue{"shape": shapeAttr(big), "shared_name": sAttr(name)})
		}
	}
	// 64 of them hold 2^56 bytes, the most accepted; the 65th passes it.
	b := newBuilder()
	variables(b, 64)
	if _, err := NewShapes(b.graph(t), 1); err != nil {
		t.Errorf("64 variables of 2^50 bytes: %v", err)
	}
	b = newBuilder()
	variables(b, 65)
	if _, err := NewShapes(b.graph(t), 1); err == nil || !strings.Contains(err.Error(), "passed at variable v64") {
		t.Errorf("65 variables of 2^50 bytes: %v, want the total refused at v64", err)
	}
	// A placeholder's 4 bytes fit beside 63 of them; its shape attr's 2^50 would not.
	b = newBuilder()
	variables(b, 63)
	b.node("p", "Placeholder", "", [][]int64{{1}}, map[string]*apb.AttrValue{"shape": shapeAttr(big)})
	if _, err := NewShapes(b.graph(t), 1); err != nil {
		t.Errorf("63 variables of 2^50 bytes and a placeholder with the same shape attr: %v", err)
	}
}

// TestSetupScratchReused: simulations of graphs of different sizes one after another with one
// set-up cache, which hands each the lists of the one before (simScratch), give the results,
// timelines included, of simulations without a cache, by both accountings.
func TestSetupScratchReused(t *testing.T) {
	p, err := LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	var graphs []*graphdef.Graph
	for _, name := range []string{"resnet", "mlp", "cnn", "resnet", "lstm", "mlp"} {
		graphs = append(graphs, loadFixtureGraph(t, name))
	}
	c := NewSetupCache(graphs[0], p)
	for i, g := range graphs {
		for _, conv := range []Conventions{{}, GrapplerConventions()} {
			opts := Options{Fetch: []string{"train"}, Timeline: true, TopLive: 5, Conventions: conv}
			want, err := Simulate(g, p, opts)
			if err != nil {
				t.Fatal(err)
			}
			opts.Setup = c
			got, err := Simulate(g, p, opts)
			if err != nil {
				t.Fatal(err)
			}
			got.Options.Setup = nil
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("graph %d (%s), conventions %s: the simulation with the reused lists differs from a fresh one", i, g.Source, ConventionsName(conv))
			}
		}
	}
	if c.scratch == nil || len(c.scratch.dev) == 0 {
		t.Fatal("the cache kept no lists")
	}
}
