//go:build tensorflow

package tfrun

import (
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestSpacersInRuntime puts a spacer (rewrite.AddSpacers) before every AddV2 and AddN of the
// training step in auto's rewrite of the residual-network fixture within 3 MiB (tfswap's
// accounting, so that the graph planned is the fixture's and Verify checks the spaced rewrite
// against it). In the two-device emulation the spaced rewrite trains bit-identically to the
// original for 5 steps, every variable compared, and each spacer runs as an L2Loss on the
// compute device (Grappler keeps it) and ends before the op it holds back starts.
func TestSpacersInRuntime(t *testing.T) {
	fx, placed, opts, p := planResNet3MiB(t, "tfswap")
	g, err := graphdef.NewGraph(p.Model.Graph, "rewritten")
	if err != nil {
		t.Fatal(err)
	}
	var spacers []rewrite.Spacer
	for _, n := range g.Nodes {
		// The initializers' adds do not run in the training step.
		if (n.Op != "AddV2" && n.Op != "AddN") || n.Def.GetAttr()[rewrite.RoleAttr] != nil || strings.Contains(n.Name, "/Initializer/") {
			continue
		}
		s := rewrite.Spacer{Node: n.Name}
		for _, in := range n.Inputs {
			if in.Node.Def.GetDevice() != n.Def.GetDevice() {
				continue
			}
			if dt, ok := in.DataType(); ok && rewrite.SpacerType(dt) && s.Reads == "" {
				s.Reads = in.InputString()
			} else if in.Node.Name != s.Reads {
				s.After = append(s.After, in.Node.Name)
			}
		}
		if s.Reads != "" {
			spacers = append(spacers, s)
		}
	}
	if len(spacers) < 5 {
		t.Fatalf("%d ops to space: too few to check", len(spacers))
	}
	if err := rewrite.AddSpacers(p.Result, spacers); err != nil {
		t.Fatal(err)
	}
	orig, err := graphdef.NewGraph(placed.Graph, "placed")
	if err != nil {
		t.Fatal(err)
	}
	if err := rewrite.Verify(orig, p.Result, opts.Gate); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	t.Logf("%d spacers on the plan from %s", len(spacers), p.Eval.Strategy)
	checkTrainsLike(t, placed, p.Model, fx, 5)

	tr, err := TraceStep(marshalModel(t, p.Model), fx, TwoDeviceConfigBytes(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spacers {
		name := rewrite.SpacerName(s.Node)
		n, ok := tr.Node(name)
		if !ok || n.Op != "L2Loss" || !strings.HasSuffix(n.Device, strings.TrimPrefix(computeDevice, "/")) {
			t.Errorf("spacer %s ran as %+v, want an L2Loss on %s", name, n, computeDevice)
			continue
		}
		st, ok1 := tr.Timing(name, n.Device)
		ht, ok2 := tr.Timing(s.Node, n.Device)
		if ok1 && ok2 && ht.Start < st.End {
			t.Errorf("%s started at %d, before its spacer ended at %d", s.Node, ht.Start, st.End)
		}
	}
}
