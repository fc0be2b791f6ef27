package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
)

// TestGrapplerSensitiveConsumers lists, in rewrite/testdata/consumers.golden, which reads of
// a tensor may take a swapped-in copy and why the others may not: shape readers keep the
// original (issue 12, item 6); sums of three or more terms whose order by name a swap-in
// would change, and products in the terms of a sum, keep their inputs so that Grappler's
// arithmetic optimizer computes the rewritten graph as the original (issue 12, item 2). The
// same golden counts the excluded reads of the committed training fixtures by reason.
func TestGrapplerSensitiveConsumers(t *testing.T) {
	b := newBuilder()
	b.op("x", "Placeholder", "", act)
	b.op("a_first", "Relu", "", act, "x")
	b.op("z_last", "Relu", "", act, "x")
	b.op("y", "Relu", "", act, "x")
	b.op("b_second", "Relu", "", act, "x")
	// Shape readers.
	b.op("shape", "Shape", "", []int64{2}, "x")
	b.op("shape_n", "ShapeN", "", []int64{2}, "x", "y")
	b.op("size", "Size", "", []int64{}, "x")
	b.op("rank", "Rank", "", []int64{}, "x")
	// Sums: two terms in any order; three terms whose order by name a swap-in could change
	// (renamed to "tfswap/a_first_0/...", a_first would sort after x); three terms whose
	// order stays whichever of them is renamed (a_first and b_second sort before x, and
	// before "tfswap/", whose x_0 sorts after a_first_0 and b_second_0).
	b.op("sum2", "AddN", "", act, "z_last", "x")
	b.op("sum3_reordered", "AddN", "", act, "a_first", "x", "z_last")
	b.op("sum3_kept", "AddN", "", act, "a_first", "b_second", "x")
	// A tree of additions Grappler collapses into one AddN: add_inner is read only by
	// add_outer, so x is a term of a three-term sum with a_first and y.
	b.op("add_inner", "AddV2", "", act, "x", "y")
	b.op("add_outer", "AddV2", "", act, "add_inner", "a_first")
	b.op("add_two", "AddV2", "", act, "x", "a_first")
	// Products: in the terms of a sum, or not.
	b.op("mul_term", "Mul", "", act, "x", "y")
	b.op("mul_sum", "AddV2", "", act, "mul_term", "y")
	b.op("mul_alone", "Mul", "", act, "x", "y")
	b.op("mul_read", "Relu", "", act, "mul_alone")
	b.op("relu", "Relu", "", act, "x")
	m := graphdef.NewModel(b.g)
	opts, g, err := rewrite.Prepare(m, rewrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := rewrite.Analyze(g, opts)
	var out strings.Builder
	fmt.Fprintln(&out, "reads of x:0 (one line per consumer input)")
	x := graphdef.Tensor{Node: g.Node("x")}
	excluded := 0
	for _, u := range x.Consumers() {
		why := rewrite.ConsumerExclusion(u)
		if why == "" {
			why = "may read a swapped-in copy"
			if !a.ConsumerEligible(u) {
				t.Errorf("%s: no exclusion, yet not eligible", u.Node.Name)
			}
		} else {
			excluded++
			if a.ConsumerEligible(u) {
				t.Errorf("%s: excluded (%s), yet eligible", u.Node.Name, why)
			}
		}
		fmt.Fprintf(&out, "  %s = %s input %d: %s\n", u.Node.Name, u.Node.Op, u.Input, why)
	}
	if excluded == 0 || excluded == len(x.Consumers()) {
		t.Errorf("%d of %d reads excluded: the graph does not test the rules", excluded, len(x.Consumers()))
	}
	for _, name := range []string{"resnet", "lstm", "large/gpt-tiny"} {
		m, err := graphdef.Load(filepath.Join("..", "..", "testmodels", "fixtures", name+".pb"), graphdef.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := graphdef.NewGraph(m.Graph, m.Source)
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		total := 0
		for _, n := range g.Nodes {
			for _, uses := range n.Consumers {
				for _, u := range uses {
					total++
					if why := rewrite.ConsumerExclusion(u); why != "" {
						count[fmt.Sprintf("%s (%s)", why, u.Node.Op)]++
					}
				}
			}
		}
		keys := make([]string, 0, len(count))
		for k := range count {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&out, "%s: %d data reads\n", name, total)
		for _, k := range keys {
			fmt.Fprintf(&out, "  %4d %s\n", count[k], k)
		}
	}
	compareGolden(t, filepath.Join("testdata", "consumers.golden"), out.String())
}
