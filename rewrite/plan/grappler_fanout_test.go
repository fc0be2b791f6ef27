package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestProductTreeCandidates is issue 12's BERT-base regression (cf7d69a): the fan-out rules
// once refused every product of a tree of products as a swap candidate, and every product
// reading one, or feeding a sum, as a swap-in reader, where Grappler's rules turn on one
// reader more only for products with a single reader, and hoist a factor only from a sum
// whose terms are all products sharing one. On a GELU-like forward pass (p = c*x read by the
// product q = p*x and late by the gradient product gp, whose sum has a Relu term), p must be
// a candidate and gp may read its swap-in, and LMS swaps p; the rules still hold where
// Grappler's decision would change: a product whose only reader is a product (single), a
// product read by one product that a constant push-down may rotate (rot, reading p2, whose
// swap-in on the host would stop the rotation) and a product in a sum of products sharing a
// factor (hoist_a).
func TestProductTreeCandidates(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", act)
	b.op("c", "Const", "", []int64{})
	b.op("p", "Mul", "", act, "c", "x")
	b.op("q", "Mul", "", act, "p", "x")
	b.op("q_read", "Relu", "", act, "q")
	b.op("single", "Mul", "", act, "c", "x")
	b.op("single_read", "Mul", "", act, "single", "q")
	prev := "single_read"
	for i := 0; i < 6; i++ {
		prev = b.op("f"+string(rune('0'+i)), "Relu", "", act, prev).Name
	}
	b.op("gp", "Mul", "", act, prev, "p")
	b.op("other", "Relu", "", act, prev)
	b.op("sum", "AddV2", "", act, "gp", "other")
	b.op("p2", "Mul", "", act, "c", "x")
	b.op("q2", "Mul", "", act, "p2", "x", "^q")
	b.op("rot", "Mul", "", act, "sum", "p2")
	b.op("rot_parent", "Mul", "", act, "rot", "c")
	b.op("hoist_a", "Mul", "", act, "rot_parent", "p2")
	b.op("hoist_b", "Mul", "", act, "rot_parent", "q2")
	b.op("hoist_sum", "AddV2", "", act, "hoist_a", "hoist_b")
	b.op("train", "NoOp", "", nil, "^hoist_sum", "^q_read")
	m := graphdef.NewModel(b.g)
	opts, g, err := rewrite.Prepare(m, rewrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	if ex, why := a.Excluded(g.Node("p")); ex {
		t.Errorf("p (a product with two readers in a product tree) is excluded: %s", why)
	}
	if ex, why := a.Excluded(g.Node("single")); !ex || why != rewrite.ReasonFanoutProduct {
		t.Errorf("single (a product read only by a product) excluded %v (%s), want %q", ex, why, rewrite.ReasonFanoutProduct)
	}
	want := map[string]string{"gp": "", "q": "", "rot": rewrite.ReasonProduct, "hoist_a": rewrite.ReasonFactor}
	var uses []graphdef.Use
	uses = append(uses, (graphdef.Tensor{Node: g.Node("p")}).Consumers()...)
	uses = append(uses, (graphdef.Tensor{Node: g.Node("p2")}).Consumers()...)
	for _, u := range uses {
		w, ok := want[u.Node.Name]
		if !ok {
			continue
		}
		delete(want, u.Node.Name)
		if got := rewrite.ConsumerExclusion(u); got != w {
			t.Errorf("%s reading %s: exclusion %q, want %q", u.Node.Name, u.Node.Inputs[u.Input], got, w)
		}
		if a.ConsumerEligible(u) != (w == "") {
			t.Errorf("%s reading %s: eligible %v, want %v", u.Node.Name, u.Node.Inputs[u.Input], a.ConsumerEligible(u), w == "")
		}
	}
	if len(want) > 0 {
		t.Errorf("no read of p or p2 by %v", want)
	}
	res, err := Rewrite(m, rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
	if err != nil {
		t.Fatal(err)
	}
	swapped := false
	for _, s := range res.Swaps {
		if s.Tensor == "p:0" {
			swapped = true
			for _, in := range s.SwapIns {
				for _, c := range in.Consumers {
					if c != "gp" {
						t.Errorf("p's swap-in %s is read by %s, want gp alone", in.Node, c)
					}
				}
			}
		}
	}
	if !swapped {
		t.Errorf("LMS did not swap p:0 (swaps %v)", res.Swaps)
	}
}

// TestTupleIdentityReadsSwapIn is issue 12's gradient tuple case: an Identity with a control
// input (tf.tuple's) forwarding y to a late reader kept y on the device, since neither the
// Identity nor a read of it could be swapped without changing what Grappler's dependency
// optimizer does with it. With one reader on its device, the Identity bypassed in the
// original is bypassed in the rewrite too, so it may read y's swap-in: LMS swaps y for it,
// and the swap-in's trigger lies on its reader's ancestry, not the Identity's (which holds
// only y and the tuple, both early). An Identity with two readers reads y2's swap-in through
// a relay on its own device (a host swap-in would add a crossing after the bypass), which
// Verify accepts; one read by a shape op keeps reading the original.
func TestTupleIdentityReadsSwapIn(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", act)
	b.op("y", "Relu", "", act, "x")
	b.op("z", "Relu", "", act, "x")
	b.op("y2", "Relu", "", act, "x")
	b.op("y3", "Relu", "", act, "x")
	b.op("group_deps", "NoOp", "", nil, "^y", "^z", "^y2", "^y3")
	b.op("tuple_y", "Identity", "", act, "y", "^group_deps")
	b.op("tuple_z", "Identity", "", act, "z", "^group_deps")
	b.op("tuple_y2", "Identity", "", act, "y2", "^group_deps")
	b.op("tuple_y3", "Identity", "", act, "y3", "^group_deps")
	prev := "tuple_z"
	for i := 0; i < 6; i++ {
		prev = b.op("f"+string(rune('0'+i)), "Relu", "", act, prev).Name
	}
	b.op("late", "AddV2", "", act, prev, "tuple_y")
	b.op("late2a", "AddV2", "", act, prev, "tuple_y2")
	b.op("late2b", "AddV2", "", act, prev, "tuple_y2")
	b.op("late3", "Shape", "", []int64{2}, "tuple_y3")
	b.op("train", "NoOp", "", nil, "^late", "^late2a", "^late2b", "^late3")
	m := graphdef.NewModel(b.g)
	opts, g, err := rewrite.Prepare(m, rewrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	if ex, why := a.Excluded(g.Node("tuple_y")); !ex || why != rewrite.ReasonFanoutIdentity {
		t.Errorf("tuple_y excluded %v (%s), want %q: the swap-out reads y", ex, why, rewrite.ReasonFanoutIdentity)
	}
	want := map[string]string{"y": "", "y2": "", "y3": rewrite.ReasonIdentityReader}
	for src, w := range want {
		for _, u := range (graphdef.Tensor{Node: g.Node(src)}).Consumers() {
			if got := rewrite.ConsumerExclusion(u); got != w {
				t.Errorf("%s reading %s: exclusion %q, want %q", u.Node.Name, src, got, w)
			}
			if a.ConsumerEligible(u) != (w == "") {
				t.Errorf("%s reading %s: eligible %v, want %v", u.Node.Name, src, a.ConsumerEligible(u), w == "")
			}
		}
	}
	res, err := Rewrite(m, rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
	if err != nil {
		t.Fatal(err)
	}
	swapped, relayed := false, false
	for _, n := range res.Model.Graph.GetNode() {
		if n.GetName() == "tuple_y2" {
			relayed = n.GetInput()[0] == rewrite.SwapNodeName(graphdef.Tensor{Node: g.Node("y2")}, "swap_in_0_relay_0")
		}
	}
	if !relayed {
		t.Errorf("tuple_y2 does not read y2's swap-in through a relay (swaps %v, skipped %v)", res.Swaps, res.Skipped)
	}
	if err := rewrite.Verify(g, res, rewrite.GateHost); err != nil {
		t.Errorf("Verify: %v", err)
	}
	for _, s := range res.Swaps {
		switch s.Tensor {
		case "y:0":
			swapped = true
			for _, in := range s.SwapIns {
				for _, c := range in.Consumers {
					if c != "tuple_y" {
						t.Errorf("y's swap-in %s is read by %s, want tuple_y alone", in.Node, c)
					}
				}
				if in.Trigger != "f5" {
					t.Errorf("y's swap-in %s is triggered by %s, want f5 (one level before late)", in.Node, in.Trigger)
				}
			}
		case "y3:0":
			t.Errorf("%s swapped (%v): its tuple Identity must keep reading it", s.Tensor, s.SwapIns)
		}
	}
	if !swapped {
		t.Errorf("LMS did not swap y:0 (swaps %v)", res.Swaps)
	}
}

// TestPushDownChildReadsRelay is issue 12's BERT-base case (GELU gradient): a late product c
// reading a forward activation, whose one live reader is a product with a constant input, is
// a child Grappler's constant push-down rotates (Mul(C, Mul(X, Y)) -> Mul(X, Mul(C, Y))).
// The rotation needs both of c's inputs on the parent's device, and pairs the constant with
// c's input that sorts last by name, so such a c once kept reading the original. It may now
// read the swap-in through a relay on its device when the swap-in's name sorts where the
// original did (grad_z reading z_fwd, before tfswap/ either way) and must not when it would
// not (grad_a reading a_fwd: a_fwd sorts before f5, tfswap/a_fwd_0/ after). A product whose
// reader has no constant input is no push-down child and reads the swap-in directly
// (grad_m), and one whose product reader also reads a value-dead product (the gradient of a
// constant, which Grappler prunes) still counts one reader (grad_z's dead_z). The rotations
// cascade: a product whose one reader is a product without a constant input, itself read by a
// division by a constant, is a child too once the constant is pushed into its reader (the zoo
// GPT's GELU gradient, Mul_1 -> Erf_grad/mul_1 -> truediv_grad/RealDiv, which broke the bridge
// when only one level was looked at): grad_c reading c_fwd is refused and grad_y reading y_fwd
// reads a relay, as grad_a and grad_z.
func TestPushDownChildReadsRelay(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", act)
	b.op("c", "Const", "", []int64{})
	b.op("z_fwd", "Relu", "", act, "x")
	b.op("a_fwd", "Relu", "", act, "x")
	b.op("m_fwd", "Relu", "", act, "x")
	b.op("c_fwd", "Relu", "", act, "x")
	b.op("y_fwd", "Relu", "", act, "x")
	b.op("early", "AddN", "", act, "z_fwd", "a_fwd", "m_fwd", "c_fwd", "y_fwd")
	prev := "early"
	for i := 0; i < 6; i++ {
		prev = b.op("f"+string(rune('0'+i)), "Relu", "", act, prev).Name
	}
	b.op("grad_z", "Mul", "", act, prev, "z_fwd")
	b.op("parent_z", "Mul", "", act, "c", "grad_z")
	b.op("dead_z", "Mul", "", act, "grad_z", "x")
	b.op("dead_z_sum", "Sum", "", []int64{}, "dead_z", "c")
	b.op("dead_z_tuple", "Identity", "", []int64{}, "dead_z_sum", "^f5")
	b.op("grad_a", "Mul", "", act, prev, "a_fwd")
	b.op("parent_a", "Mul", "", act, "c", "grad_a")
	b.op("grad_m", "Mul", "", act, prev, "m_fwd")
	b.op("parent_m", "Mul", "", act, "x", "grad_m")
	for _, v := range []string{"c", "y"} {
		b.op("grad_"+v, "Mul", "", act, prev, v+"_fwd")
		b.op("mid_"+v, "Mul", "", act, "grad_"+v, "x")
		b.op("top_"+v, "RealDiv", "", act, "mid_"+v, "c")
	}
	b.op("train", "NoOp", "", nil, "^parent_z", "^parent_a", "^parent_m", "^top_c", "^top_y")
	m := graphdef.NewModel(b.g)
	opts, g, err := rewrite.Prepare(m, rewrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	want := map[string]string{"grad_z": "", "grad_a": rewrite.ReasonProduct, "grad_m": "", "grad_c": rewrite.ReasonProduct, "grad_y": ""}
	relay := map[string]bool{"grad_z": true, "grad_a": true, "grad_m": false, "grad_c": true, "grad_y": true}
	for src, reader := range map[string]string{"z_fwd": "grad_z", "a_fwd": "grad_a", "m_fwd": "grad_m", "c_fwd": "grad_c", "y_fwd": "grad_y"} {
		for _, u := range (graphdef.Tensor{Node: g.Node(src)}).Consumers() {
			if u.Node.Name != reader {
				continue
			}
			if got := rewrite.ConsumerExclusionWith(u, a.ValueDead); got != want[reader] {
				t.Errorf("%s reading %s: exclusion %q, want %q", reader, src, got, want[reader])
			}
			if a.ConsumerEligible(u) != (want[reader] == "") {
				t.Errorf("%s reading %s: eligible %v, want %v", reader, src, a.ConsumerEligible(u), want[reader] == "")
			}
			if got := rewrite.NeedsRelay(u.Node, a.ValueDead); got != relay[reader] {
				t.Errorf("%s: needsRelay %v, want %v", reader, got, relay[reader])
			}
		}
	}
	res, err := Rewrite(m, rewrite.Options{MinTensorBytes: -1, SwapoutThreshold: 4, SwapinAhead: 1})
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]string{}
	for _, n := range res.Model.Graph.GetNode() {
		if strings.HasPrefix(n.GetName(), "grad_") {
			reads[n.GetName()] = n.GetInput()[1]
		}
	}
	for reader, w := range map[string]string{
		"grad_z": rewrite.SwapNodeName(graphdef.Tensor{Node: g.Node("z_fwd")}, "swap_in_0_relay_0"),
		"grad_a": "a_fwd",
		"grad_m": rewrite.SwapNodeName(graphdef.Tensor{Node: g.Node("m_fwd")}, "swap_in_0"),
		"grad_c": "c_fwd",
		"grad_y": rewrite.SwapNodeName(graphdef.Tensor{Node: g.Node("y_fwd")}, "swap_in_0_relay_0"),
	} {
		if reads[reader] != w {
			t.Errorf("%s reads %q, want %q (swaps %v)", reader, reads[reader], w, res.Swaps)
		}
	}
	if err := rewrite.Verify(g, res, rewrite.GateHost); err != nil {
		t.Errorf("Verify: %v", err)
	}
}
