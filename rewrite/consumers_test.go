package rewrite

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
)

// TestGrapplerSensitiveConsumers lists, in rewrite/testdata/consumers.golden, which reads of
// a tensor may take a swapped-in copy and why the others may not: shape readers keep the
// original (issue 12, item 6); sums of three or more terms whose order by name a swap-in
// would change, and products in the terms of a sum, keep their inputs so that Grappler's
// arithmetic optimizer computes the rewritten graph as the original (issue 12, item 2). The
// same golden counts the excluded reads of the committed training fixtures by reason.
func TestGrapplerSensitiveConsumers(t *testing.T) {
	b := testgraph.NewBuilder()
	b.Op("x", "Placeholder", "", activation)
	b.Op("a_first", "Relu", "", activation, "x")
	b.Op("z_last", "Relu", "", activation, "x")
	b.Op("y", "Relu", "", activation, "x")
	b.Op("b_second", "Relu", "", activation, "x")
	// Shape readers.
	b.Op("shape", "Shape", "", []int64{2}, "x")
	b.Op("shape_n", "ShapeN", "", []int64{2}, "x", "y")
	b.Op("size", "Size", "", []int64{}, "x")
	b.Op("rank", "Rank", "", []int64{}, "x")
	// Sums: two terms in any order; three terms whose order by name a swap-in could change
	// (renamed to "tfswap/a_first_0/...", a_first would sort after x); three terms whose
	// order stays whichever of them is renamed (a_first and b_second sort before x, and
	// before "tfswap/", whose x_0 sorts after a_first_0 and b_second_0).
	b.Op("sum2", "AddN", "", activation, "z_last", "x")
	b.Op("sum3_reordered", "AddN", "", activation, "a_first", "x", "z_last")
	b.Op("sum3_kept", "AddN", "", activation, "a_first", "b_second", "x")
	// A tree of additions Grappler collapses into one AddN: add_inner is read only by
	// add_outer, so x is a term of a three-term sum with a_first and y.
	b.Op("add_inner", "AddV2", "", activation, "x", "y")
	b.Op("add_outer", "AddV2", "", activation, "add_inner", "a_first")
	b.Op("add_two", "AddV2", "", activation, "x", "a_first")
	// Products: in the terms of a sum, or not.
	b.Op("mul_term", "Mul", "", activation, "x", "y")
	b.Op("mul_sum", "AddV2", "", activation, "mul_term", "y")
	b.Op("mul_alone", "Mul", "", activation, "x", "y")
	b.Op("mul_read", "Relu", "", activation, "mul_alone")
	b.Op("relu", "Relu", "", activation, "x")
	m := graphdef.NewModel(b.Graph)
	opts, g, err := Prepare(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(g, opts)
	var out strings.Builder
	fmt.Fprintln(&out, "reads of x:0 (one line per consumer input)")
	x := graphdef.Tensor{Node: g.Node("x")}
	excluded := 0
	for _, u := range x.Consumers() {
		why := ConsumerExclusion(u)
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
		m, err := graphdef.Load(filepath.Join("..", "testmodels", "fixtures", name+".pb"), graphdef.LoadOptions{})
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
					if why := ConsumerExclusion(u); why != "" {
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
	testgraph.Golden(t, filepath.Join("testdata", "consumers.golden"), out.String(), *update)
}
