package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// touched returns the nodes a rewrite involved: the producers of swapped and recomputed
// tensors, the ops recomputed, the readers of swapped-in or recomputed copies, the triggers
// of swap-ins and recomputations, and the nodes made to wait for a swap-out.
func touched(res *rewrite.Result, rcs []rewrite.Recompute) []string {
	var out []string
	for _, s := range res.Swaps {
		out = append(out, s.Producer)
		for _, si := range s.SwapIns {
			out = append(out, si.Trigger)
			out = append(out, si.Consumers...)
		}
	}
	for _, w := range res.Waits {
		out = append(out, w.Node)
	}
	for _, rc := range rcs {
		out = append(out, rc.Ops...)
		out = append(out, rc.Trigger)
		out = append(out, rc.Consumers...)
	}
	return out
}

// checkPreserved fails unless every preserved node of in is in out unchanged (inputs, device,
// attrs), no node tfswap added copies it or reads it for a swap-out, and the rewrite
// involved none of them.
func checkPreserved(t *testing.T, in, out *gpb.GraphDef, res *rewrite.Result, rcs []rewrite.Recompute, preserved []string) {
	t.Helper()
	keep := map[string]bool{}
	for _, p := range preserved {
		keep[p] = true
	}
	byName := map[string]*npb.NodeDef{}
	for _, n := range out.Node {
		byName[n.Name] = n
	}
	for _, n := range in.Node {
		if keep[n.Name] && !proto.Equal(n, byName[n.Name]) {
			t.Errorf("preserved node %s changed: %v -> %v", n.Name, n, byName[n.Name])
		}
	}
	for _, n := range touched(res, rcs) {
		if keep[n] {
			t.Errorf("the rewrite involves preserved node %s", n)
		}
	}
	for _, n := range out.Node {
		role := string(n.GetAttr()[rewrite.RoleAttr].GetS())
		if role == "" {
			continue
		}
		for _, i := range n.Input {
			if role == "swap_out" && keep[strings.Split(i, ":")[0]] {
				t.Errorf("swap-out %s reads preserved %s", n.Name, i)
			}
		}
	}
}

// TestPreserveLMS: nodes that LMS swaps, reads a swapped-in copy or triggers a swap-in with
// are left alone when preserved, and the rest of the graph is still rewritten.
func TestPreserveLMS(t *testing.T) {
	opts := rewrite.Options{SwapoutThreshold: 4, SwapinAhead: 1}
	free, err := Rewrite(graphdef.NewModel(chainGraph(6, "")), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(free.Swaps) < 2 {
		t.Fatalf("the chain needs at least two swaps to test with, got %d", len(free.Swaps))
	}
	first, last := free.Swaps[0], free.Swaps[len(free.Swaps)-1]
	// The first swap's producer, the last swap's reader and its trigger: three roles.
	preserve := []string{first.Producer, "^" + last.SwapIns[0].Consumers[0], last.SwapIns[0].Trigger + ":0"}
	names := []string{first.Producer, last.SwapIns[0].Consumers[0], last.SwapIns[0].Trigger}
	in := chainGraph(6, "")
	opts.Preserve = preserve
	res, err := Rewrite(graphdef.NewModel(in), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Swaps) == 0 {
		t.Fatalf("nothing swapped with %v preserved; without: %d swaps", preserve, len(free.Swaps))
	}
	checkPreserved(t, in, res.Model.Graph, res, nil, names)
}

// TestPreservePlanner: the planner, recomputing as much as it can, neither swaps nor
// recomputes a preserved tensor, nor redirects a preserved reader.
func TestPreservePlanner(t *testing.T) {
	const n = 8
	prof := slowLinkProfile()
	peak := chainBase(t, planChain(n, "")).Compute().PeakBytes
	plan := func(preserve []string) (*gpb.GraphDef, *Planned) {
		t.Helper()
		g := planChain(n, "")
		m := graphdef.NewModel(g)
		m.Source = "chain"
		p, err := RewriteWithPlanner(m, rewrite.Options{Preserve: preserve}, PlanOptions{Strategy: "window", Profile: prof, Budget: peak, Recompute: "max", FitAccounting: "tfswap"})
		if err != nil {
			t.Fatal(err)
		}
		return g, p
	}
	_, free := plan(nil)
	if len(free.Recomputes) == 0 {
		t.Fatal("nothing recomputed without preserve: the test checks nothing")
	}
	// Preserve the producer of the first recomputed tensor and the readers of its copy.
	rc := free.Recomputes[0]
	preserve := append([]string{strings.Split(rc.Tensor, ":")[0]}, rc.Consumers...)
	t.Logf("without preserve: %d swaps, recomputed %v; preserving %v", len(free.Swaps), recomputedNames(free), preserve)
	in, p := plan(preserve)
	if len(p.Recomputes)+len(p.Swaps) == 0 {
		t.Fatalf("nothing planned with %v preserved", preserve)
	}
	checkPreserved(t, in, p.Model.Graph, p.Result, p.Recomputes, preserve)
}

// TestPreserveUnknownNode: a preserved name that is no node of the graph is an error naming
// it.
func TestPreserveUnknownNode(t *testing.T) {
	_, err := Rewrite(graphdef.NewModel(chainGraph(3, "")), rewrite.Options{Preserve: []string{"f1", "nosuch:1"}})
	if err == nil || !strings.Contains(err.Error(), `"nosuch:1"`) {
		t.Fatalf("got %v, want an error naming nosuch:1", err)
	}
}
