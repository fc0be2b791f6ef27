package synth

import (
	"bytes"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// TestGenerate checks a synthetic graph's size, that it is a valid graph the simulator runs
// with every activation sized, and that generation is deterministic.
func TestGenerate(t *testing.T) {
	c := Config{Nodes: 1000}
	def := Generate(c)
	if want := c.Blocks()*NodesPerBlock + Fixed; len(def.Node) != want || want > c.Nodes {
		t.Fatalf("%d nodes, want %d (at most %d)", len(def.Node), want, c.Nodes)
	}
	g, err := graphdef.NewGraph(def, "synth")
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range g.Topo {
		if n.Index != i {
			t.Fatalf("node %s at %d is not in topological order (%d)", n.Name, n.Index, i)
		}
	}
	relu := g.Node("block3/relu")
	if n, ok, _ := (graphdef.Tensor{Node: relu}).Bytes(); !ok || n != 8*32*32*16*4 {
		t.Fatalf("block3/relu:0 is %d bytes (known %v)", n, ok)
	}
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	res, err := cost.Simulate(g, p, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Every block keeps its input and its Relu output for the backward pass: the peak holds
	// at least those of all blocks.
	if peak, min := res.Devices[0].PeakBytes, int64(2*c.Blocks())*8*32*32*16*4; peak < min {
		t.Fatalf("peak %d, want at least %d", peak, min)
	}
	a, _ := graphdef.NewModel(def).Marshal()
	b, _ := graphdef.NewModel(Generate(c)).Marshal()
	if !bytes.Equal(a, b) {
		t.Fatal("two generations differ")
	}
}
