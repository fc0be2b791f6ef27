package cost_test

import (
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// loadTestGraph loads testmodels/DIR/NAME.pb.
func loadTestGraph(t testing.TB, dir, name string) *graphdef.Graph {
	t.Helper()
	path := filepath.Join("..", "testmodels", dir, name+".pb")
	_, g := testgraph.Load(t, path)
	return g
}

// sequenceLength is the time steps of an rnn graph's input placeholder ([batch, time,
// features], as dynamic_rnn reads it batch-major).
func sequenceLength(t *testing.T, g *graphdef.Graph) int64 {
	t.Helper()
	in := g.Node("input")
	if in == nil || len(in.OutputShapes) == 0 || len(in.OutputShapes[0]) != 3 || in.OutputShapes[0][1] <= 0 {
		t.Fatal("no input placeholder of shape [batch, time, features]")
	}
	return in.OutputShapes[0][1]
}

// pushedBytes sums the bytes of the tensors the pushes among nodes push (input 1 of a
// StackPushV2 or TensorListPushBack), from their recorded shapes.
func pushedBytes(t *testing.T, nodes []*graphdef.Node) (int64, int) {
	t.Helper()
	var sum int64
	n := 0
	for _, p := range nodes {
		if p.Op != "StackPushV2" && p.Op != "TensorListPushBack" {
			continue
		}
		b, ok, _ := p.Inputs[1].Bytes()
		if !ok {
			t.Fatalf("%s pushes a tensor of unknown size", p.Name)
		}
		sum += b
		n++
	}
	return sum, n
}

// TestAccumulatorsHoldEveryIteration checks that a v1 loop's stack accumulators and a
// lowered v2 loop's TensorList accumulators hold one element per iteration of the forward
// loop (the sequence length, found by the simulator from the graph's static loop bound or the
// list's capacity), that every pop of an accumulator runs after its pushes, and that the
// accumulators are live together where the forward loop ends: the device then holds at
// least their bytes. With Conventions.NoAccumulators nothing is counted.
func TestAccumulatorsHoldEveryIteration(t *testing.T) {
	for _, c := range []struct{ dir, name string }{
		{"zoo", "rnn_v1"}, {"controlflow", "rnn_v1"}, {"controlflow", "rnn_v2_lowered"},
	} {
		t.Run(c.dir+"/"+c.name, func(t *testing.T) {
			g := loadTestGraph(t, c.dir, c.name)
			r := cfSim(t, g, cost.Conventions{})
			elem, pushes := pushedBytes(t, g.Nodes)
			if pushes == 0 {
				t.Fatal("the graph has no accumulator pushes")
			}
			if r.Accumulators != pushes || r.UnboundedAccumulators != 0 {
				t.Errorf("%d accumulator pushes (%d unbounded), want %d, all bounded", r.Accumulators, r.UnboundedAccumulators, pushes)
			}
			if want := elem * sequenceLength(t, g); r.AccumulatorBytes != want {
				t.Errorf("accumulators hold %d B, want %d B (%d B pushed per iteration)", r.AccumulatorBytes, want, elem)
			}
			end := map[string]int64{} // the accumulator's last push's end, by the push's stack or list
			source := func(n *graphdef.Node) string {
				for range 64 {
					switch n.Op {
					case "StackV2", "EmptyTensorList", "TensorListReserve":
						return n.Name
					}
					in := n.Inputs[0]
					if n.Op == "Merge" && (in.Node.Op == "NextIteration") {
						in = n.Inputs[1]
					}
					n = in.Node
				}
				t.Fatalf("no accumulator source above %s", n.Name)
				return ""
			}
			var lastPush int64
			var pushDev int
			for _, op := range r.Timeline.Ops {
				if op.Node.Op == "StackPushV2" || op.Node.Op == "TensorListPushBack" {
					k := source(op.Node.Inputs[0].Node)
					end[k] = max(end[k], op.End)
					if op.End > lastPush {
						lastPush, pushDev = op.End, op.Device
					}
				}
			}
			for _, op := range r.Timeline.Ops {
				if op.Node.Op == "StackPopV2" || op.Node.Op == "TensorListPopBack" {
					if k := source(op.Node.Inputs[0].Node); op.Start < end[k] {
						t.Errorf("%s starts at %d ns, before its accumulator's push ends (%d ns)", op.Node.Name, op.Start, end[k])
					}
				}
			}
			var at int64
			for _, p := range r.Timeline.Memory[pushDev] {
				if p.T <= lastPush {
					at = p.Bytes
				}
			}
			if at < r.AccumulatorBytes {
				t.Errorf("%d B allocated when the last push ends, less than the accumulators' %d B", at, r.AccumulatorBytes)
			}
			if none := cfSim(t, g, cost.Conventions{NoAccumulators: true}); none.Accumulators != 0 || none.AccumulatorBytes != 0 {
				t.Errorf("no-accumulators: %d pushes, %d B counted", none.Accumulators, none.AccumulatorBytes)
			}
		})
	}
}

// TestWhileAccumulators checks that an unlowered v2 While whose body pushes onto loop
// variables entering as empty lists (while_v2's gradient accumulators) outputs them holding
// the pushed elements' bytes times the lists' capacity, the sequence length; the step's
// peak then exceeds the one of the same simulation holding one element.
func TestWhileAccumulators(t *testing.T) {
	for _, c := range []struct{ dir, name string }{{"zoo", "rnn_v2"}, {"controlflow", "rnn_v2"}} {
		t.Run(c.dir+"/"+c.name, func(t *testing.T) {
			g := loadTestGraph(t, c.dir, c.name)
			var elem int64
			pushes := 0
			for _, lp := range testgraph.WhilePushes(t, g) {
				b, n := pushedBytes(t, lp.Pushes)
				elem += b
				pushes += n
			}
			if pushes == 0 {
				t.Fatal("no While body pushes onto a loop variable")
			}
			r := cfSim(t, g, cost.Conventions{})
			if r.Accumulators != pushes || r.UnboundedAccumulators != 0 {
				t.Errorf("%d accumulator pushes (%d unbounded), want %d, all bounded", r.Accumulators, r.UnboundedAccumulators, pushes)
			}
			if want := elem * sequenceLength(t, g); r.AccumulatorBytes != want {
				t.Errorf("accumulators hold %d B, want %d B (%d B pushed per iteration)", r.AccumulatorBytes, want, elem)
			}
			none := cfSim(t, g, cost.Conventions{NoAccumulators: true})
			if r.Compute().PeakBytes <= none.Compute().PeakBytes {
				t.Errorf("peak %d B with the accumulators, not above %d B without", r.Compute().PeakBytes, none.Compute().PeakBytes)
			}
		})
	}
}
