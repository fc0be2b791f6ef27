//go:build tensorflow

package tfrun

import (
	"path/filepath"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestPushDownRelaysBitIdenticalUnderGrappler trains the BERT-style transformer-tiny fixture
// (testmodels/large.py) and its LMS rewrite for 3 steps in the two-device emulation under
// TensorFlow's default configuration, and requires every variable to be bit-identical. The
// rewrite must make a product that Grappler's constant push-down rotates (the GELU gradient's
// products, Mul(C, Mul(dy, x)) -> Mul(dy, Mul(C, x))) read a swap-in through a relay on its
// device, directly or once a gradient tuple Identity is bypassed (issue 12: such products
// once kept their forward inputs on the device for BERT-base's whole backward pass). The
// rotation needs the swapped input on the parent's device and sorted after the other input,
// so the test fails if the relay were left out or the name order changed the pairing.
func TestPushDownRelaysBitIdenticalUnderGrappler(t *testing.T) {
	fx, err := LoadFixture(filepath.Join(fixtureDir, "large", "transformer-tiny.json"))
	if err != nil {
		t.Fatalf("%v (regenerate with testmodels/large.py --feeds)", err)
	}
	m, err := graphdef.Load(fx.GraphPath(), graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	placed := PlaceAll(m, computeDevice)
	g, err := graphdef.NewGraph(placed.Graph, placed.Source)
	if err != nil {
		t.Fatal(err)
	}
	lms := rewriteModel(t, placed, rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
	relays := map[string]bool{}
	for _, n := range lms.Model.Graph.GetNode() {
		if string(n.GetAttr()[rewrite.RoleAttr].GetS()) == rewrite.RelayRole {
			relays[n.GetName()] = true
		}
	}
	var reads []string
	for _, n := range lms.Model.Graph.GetNode() {
		for _, in := range n.GetInput() {
			if !relays[in] {
				continue
			}
			o := g.Node(n.GetName())
			switch {
			case o == nil:
			case productOps[o.Op]:
				reads = append(reads, in+" -> "+o.Name)
			case o.Op == "Identity" && len(o.Consumers) == 1 && len(o.Consumers[0]) == 1 && productOps[o.Consumers[0][0].Node.Op]:
				reads = append(reads, in+" -> "+o.Name+" -> "+o.Consumers[0][0].Node.Name)
			}
		}
	}
	if len(reads) == 0 {
		t.Fatalf("LMS makes no product read a swap-in through a relay (%d swaps, %d relays): the case the test guards is gone", len(lms.Swaps), len(relays))
	}
	t.Logf("%d swaps; products reading swap-ins through relays: %d, e.g. %v", len(lms.Swaps), len(reads), reads[:min(3, len(reads))])
	got, fxAll := checkTrainsLike(t, placed, lms.Model, fx, 3)
	t.Logf("losses %v; %d variables compared", got.LossValues, len(fxAll.Variables))
}
