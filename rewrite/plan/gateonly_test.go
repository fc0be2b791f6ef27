package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
)

// TestEpisodesRejectGateOnlySwapIns: an offload's gate (rewrite.OffloadGroups) reads its
// trigger's output, which may be a swap candidate, and the graph surgery leaves a gate
// reading the original. On the resnet fixture with every variable offloaded, with Identity
// and with L2Loss gates, every buffer read by a gate alone at some time is given a choice
// whose swap-in serves that read: episodes must not give that swap-in (gatesOnly). An
// Identity gate's read cannot take a copy at all; an L2Loss gate's read can, and without
// gatesOnly episodes gave the swap-in, which Apply makes into a swap-in read by no node:
// with reduce gates the test also applies such a plan (triggered by the buffer's other
// reader) and checks that Verify rejects it.
func TestEpisodesRejectGateOnlySwapIns(t *testing.T) {
	for _, kind := range []rewrite.GateKind{rewrite.GateIdentity, rewrite.GateReduce} {
		t.Run(kind.String(), func(t *testing.T) { checkGateOnlySwapIns(t, kind) })
	}
}

// checkGateOnlySwapIns is TestEpisodesRejectGateOnlySwapIns with gates of kind.
func checkGateOnlySwapIns(t *testing.T, kind rewrite.GateKind) {
	m := loadFixtureModel(t, "resnet")
	fetch := cost.Options{Fetch: []string{"train"}}
	all, err := RewriteWithPlanner(m, rewrite.Options{GateKind: kind}, PlanOptions{Budget: 1 << 40, Offload: rewrite.OffloadAll, Sim: fetch})
	if err != nil {
		t.Fatal(err)
	}
	if all.Offload == nil || len(all.Offload.Copies) == 0 {
		t.Fatal("no gated copies")
	}
	off := all.Offload.Model
	opts, _, err := rewrite.PrepareGraph(m, nil, rewrite.Options{Fetch: fetch.Fetch, GateKind: kind})
	if err != nil {
		t.Fatal(err)
	}
	opts.GateSmallestOutput = true
	g, err := graphdef.NewGraph(off.Graph, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	pr, err := newProblem(off, a, PlanOptions{Budget: 1 << 30, Sim: fetch})
	if err != nil {
		t.Fatal(err)
	}
	isGate := func(n *graphdef.Node) bool { return string(n.Def.GetAttr()[rewrite.RoleAttr].GetS()) == "gate" }
	var roots []graphdef.Tensor
	for t, b := range pr.bufOf {
		if b.root == t {
			roots = append(roots, t)
		}
	}
	slices.SortFunc(roots, func(x, y graphdef.Tensor) int { return strings.Compare(x.String(), y.String()) })
	cases, redirectable := 0, 0
	for _, root := range roots {
		b := pr.bufOf[root]
		for k, x := range b.accesses {
			if !isGate(x.u.Node) || !slices.Contains(b.tree, x) {
				continue
			}
			splits := []int{k}
			if k+1 < len(b.accesses) {
				if b.accesses[k+1].start <= x.start {
					continue // another read starts with the gate's
				}
				splits = append(splits, k+1)
			}
			cases++
			if x.ok {
				redirectable++
			}
			if gs, ok := pr.episodes(&choice{b: b, splits: splits}); ok {
				for _, grp := range gs {
					if gatesOnly(grp.uses) {
						t.Errorf("%s: episodes gave a swap-in read by the gate %s alone", root, x.u.Node.Name)
					}
				}
			}
			if !x.ok {
				continue
			}
			// The plan such a swap-in makes, triggered by the buffer's first other reader.
			var trig *graphdef.Node
			for _, y := range b.accesses {
				if !isGate(y.u.Node) {
					trig = y.u.Node
					break
				}
			}
			if trig == nil {
				continue
			}
			plan := &rewrite.Plan{Swaps: []rewrite.PlannedSwap{{Tensor: root, Bytes: b.bytes, Groups: []rewrite.SwapInGroup{{Uses: []graphdef.Use{x.u}, Trigger: trig}}}}}
			res, err := rewrite.Apply(off, a, plan)
			if err != nil {
				t.Fatalf("%s: %v", root, err)
			}
			if err := rewrite.Verify(g, res, opts.Gate); err == nil || !strings.Contains(err.Error(), "is read by no node") {
				t.Errorf("%s: Verify of a swap-in serving the gate %s alone: %v, want it read by no node", root, x.u.Node.Name, err)
			}
		}
	}
	if cases == 0 {
		t.Fatal("no buffer is read by a gate alone at some time: the case is not exercised")
	}
	if kind == rewrite.GateReduce && redirectable == 0 {
		t.Error("no L2Loss gate's read may take a swapped-in copy: the case gatesOnly guards is not exercised")
	}
	t.Logf("%d gate reads given a swap-in of their own, %d of them redirectable", cases, redirectable)
}
