package cost

import "github.com/tfswap/tfswap/graphdef"

// nodeByName returns g's node called name. Graphs that were not built by graphdef.NewGraph
// (planners build the graphs of candidate plans directly, without a name index) are
// searched node by node.
func nodeByName(g *graphdef.Graph, name string) *graphdef.Node {
	if n := g.Node(name); n != nil && n.Index < len(g.Nodes) && g.Nodes[n.Index] == n {
		return n
	}
	for _, n := range g.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
