package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// TestSmallestGatePort checks that a gate on a trigger with several data outputs reads, with
// GateSmallestOutput, the smallest one of known, non-zero size (a batch normalisation's
// per-channel statistics or scale gradient, not its block-sized first output), and without it
// the first data output; and that on a trigger with one data output both read the first.
func TestSmallestGatePort(t *testing.T) {
	_, g := testgraph.Load(t, "../../testmodels/fixtures/resnet.pb")
	checked := map[string]int{}
	for _, n := range g.Nodes {
		first, _, ok := rewrite.Options{}.GatePort(n)
		port, dt, ok2 := rewrite.Options{GateSmallestOutput: true}.GatePort(n)
		if ok != ok2 {
			t.Fatalf("%s: GatePort finds a data output: %v, SmallestGatePort: %v", n.Name, ok, ok2)
		}
		if !ok {
			continue
		}
		if dt != n.OutputTypes[port] {
			t.Fatalf("%s: SmallestGatePort's dtype %v is not output %d's %v", n.Name, dt, port, n.OutputTypes[port])
		}
		gate, _, _ := graphdef.Tensor{Node: n, Port: port}.Bytes()
		for p, ty := range n.OutputTypes {
			if graphdef.IsRef(ty) || graphdef.IsHandle(ty) {
				continue
			}
			b, known, _ := graphdef.Tensor{Node: n, Port: p}.Bytes()
			if known && b > 0 && (b < gate || (b == gate && p < port)) {
				t.Errorf("%s (%s): the gate reads output %d (%d bytes), output %d has %d", n.Name, n.Op, port, gate, p, b)
			}
		}
		switch n.Op {
		case "FusedBatchNormV3", "FusedBatchNormGradV3":
			x, _, _ := graphdef.Tensor{Node: n, Port: 0}.Bytes()
			if first != 0 || port == 0 || gate <= 0 || gate >= x {
				t.Errorf("%s (%s): the gates read output %d and %d (%d bytes), not 0 and a smaller one than output 0 (%d bytes)", n.Name, n.Op, first, port, gate, x)
			}
			checked[n.Op]++
		case "Conv2D", "Relu", "ReluGrad":
			if port != first || first != 0 {
				t.Errorf("%s (%s): one data output, but the gates read outputs %d and %d", n.Name, n.Op, first, port)
			}
			checked[n.Op]++
		}
	}
	for _, op := range []string{"FusedBatchNormV3", "FusedBatchNormGradV3", "Conv2D"} {
		if checked[op] == 0 {
			t.Errorf("the fixture has no %s node to check", op)
		}
	}
}

// TestPlannedGatesReadSmallestOutput checks that a planned rewrite's gates read their
// trigger's smallest output (RewriteWithPlanner sets GateSmallestOutput) and the lms-fixed
// strategy's the first data output, on the residual-network fixture at a budget where the
// plan gates on batch normalisations. It fails if no gate of the planned rewrite has a
// trigger with a smaller output than its first.
func TestPlannedGatesReadSmallestOutput(t *testing.T) {
	m, g := testgraph.Load(t, "../../testmodels/fixtures/resnet.pb")
	sim := cost.Options{Fetch: []string{"train"}}
	for _, strategy := range []string{"vdnn-all", "lms-fixed"} {
		p, err := RewriteWithPlanner(m, rewrite.Options{}, PlanOptions{Strategy: strategy, Budget: 5 << 20, Sim: sim, FitAccounting: "tfswap"})
		if err != nil {
			t.Fatalf("%s: %v", strategy, err)
		}
		smaller := 0
		for _, nd := range p.Model.Graph.GetNode() {
			if string(nd.GetAttr()[rewrite.RoleAttr].GetS()) != "gate" {
				continue
			}
			name, port, _, err := graphdef.ParseInput(nd.GetInput()[0])
			if err != nil {
				t.Fatal(err)
			}
			trig := g.Node(name)
			want, _, _ := rewrite.GatePort(trig)
			if strategy != "lms-fixed" {
				want, _, _ = rewrite.SmallestGatePort(trig)
			}
			if first, _, _ := rewrite.GatePort(trig); want != first {
				smaller++
			}
			if port != want {
				t.Errorf("%s: gate %s reads output %d of %s (%s), want %d", strategy, nd.GetName(), port, name, trig.Op, want)
			}
		}
		if strategy != "lms-fixed" && smaller == 0 {
			t.Errorf("%s: no gate of the plan has a trigger with a smaller output than its first: nothing checked", strategy)
		}
	}
}
