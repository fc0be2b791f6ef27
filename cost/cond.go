package cost

import (
	"sort"

	"github.com/tfswap/tfswap/graphdef"
)

// untakenBranches marks, by node index, the nodes of the v1 conditionals' branches a step
// does not run: of the two branches of each predicate (graphdef.Graph.Conds, which puts a
// branch and its gradient together, since both follow the same predicate), the one whose
// simulated nodes have fewer output bytes (fewer nodes on a tie; the false side if both are
// equal) is left out, so that a conditional costs what its larger branch costs, and the
// paired zero-gradient tensors of the branch not taken are not counted. Conditionals are
// decided innermost first (the smaller region first), so an outer branch is weighed without
// the inner branches already left out. incl marks the nodes the step runs; size gives a
// node's output bytes. It returns nil when the graph has no conditional.
func untakenBranches(g *graphdef.Graph, incl []bool, size func(*graphdef.Node) int64) []bool {
	conds := g.Conds()
	if len(conds) == 0 {
		return nil
	}
	sort.SliceStable(conds, func(a, b int) bool {
		return len(conds[a].Branches[0].Nodes)+len(conds[a].Branches[1].Nodes) <
			len(conds[b].Branches[0].Nodes)+len(conds[b].Branches[1].Nodes)
	})
	out := make([]bool, len(g.Nodes))
	for _, c := range conds {
		var bytes [2]int64
		var count [2]int
		for side, b := range c.Branches {
			for _, n := range b.Nodes {
				if incl[n.Index] && !out[n.Index] {
					bytes[side] += size(n)
					count[side]++
				}
			}
		}
		drop := 0 // the false side, unless it is the larger
		if bytes[0] > bytes[1] || bytes[0] == bytes[1] && count[0] > count[1] {
			drop = 1
		}
		for _, n := range c.Branches[drop].Nodes {
			out[n.Index] = true
		}
	}
	return out
}
