package graphdef

import (
	"fmt"
	"sort"
	"strings"
)

// Fetch is the step a command simulates or plans for: the nodes whose fan-in runs.
type Fetch struct {
	// Nodes are the fetched nodes; empty means every node of the graph.
	Nodes []string
	// Found is true when Nodes were found by DefaultFetch rather than given by the user.
	Found bool
	// Reason says in words how the fetch was chosen.
	Reason string
}

// String returns the fetch as the commands print it after "fetch: ".
func (f Fetch) String() string {
	what := "every node of the graph"
	if len(f.Nodes) > 0 {
		what = strings.Join(f.Nodes, ", ")
	}
	if f.Found {
		return what + " (found: " + f.Reason + ")"
	}
	return what + " (" + f.Reason + ")"
}

// UserFetch returns the fetch the user gave with --fetch, or DefaultFetch(g) when the user
// gave none.
func UserFetch(g *Graph, nodes []string) Fetch {
	if len(nodes) == 0 {
		return DefaultFetch(g)
	}
	return Fetch{Nodes: append([]string{}, nodes...), Reason: "--fetch"}
}

// IsVariableUpdate reports whether op writes a variable: the Assign family on reference or
// resource variables, the optimisers' Apply and ResourceApply kernels, and the scatter
// updates.
func IsVariableUpdate(op string) bool {
	switch op {
	case "Assign", "AssignAdd", "AssignSub", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp":
		return true
	}
	for _, p := range []string{"ResourceApply", "ResourceSparseApply", "Apply", "SparseApply", "ScatterUpdate", "ScatterAdd", "ScatterSub",
		"ScatterMul", "ScatterDiv", "ScatterMin", "ScatterMax", "ScatterNd", "ResourceScatter"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

// isVariable reports whether op is a variable or a resource variable's handle.
func isVariable(op string) bool {
	switch op {
	case "VariableV2", "Variable", "VarHandleOp", "TemporaryVariable", "_VarHandlesOp":
		return true
	}
	return false
}

// DefaultFetch finds the training step of g: the sinks (nodes nothing reads or waits for)
// whose fan-in holds the training step's variable updates. An update belongs to the
// training step when a value it writes is computed from a variable (a gradient, or an
// optimiser's slot), unlike an initialiser, which writes constants or random values; reads
// of variables outside the step (fetch_var reads, summaries) update nothing and are left
// out. When g updates no variable that way, the fetch is every node of the graph and Found
// is false with the reason.
func DefaultFetch(g *Graph) Fetch {
	// fromVar[i]: node i's outputs are computed from a variable's value.
	fromVar := make([]bool, len(g.Nodes))
	var steps []*Node
	for _, n := range g.Topo {
		if isVariable(n.Op) {
			fromVar[n.Index] = true
			continue
		}
		update := IsVariableUpdate(n.Op)
		for i, in := range n.Inputs {
			if update && i == 0 {
				// The variable written to, not a value read.
				continue
			}
			if update && isVariable(in.Node.Op) {
				// An optimiser's slot or the variable itself as a handle: ResourceApplyAdam
				// takes the variable and its slots as handles, which are not values computed
				// from them.
				continue
			}
			if fromVar[in.Node.Index] {
				fromVar[n.Index] = true
			}
		}
		if update && fromVar[n.Index] {
			steps = append(steps, n)
		}
	}
	if len(steps) == 0 {
		return Fetch{Reason: "no node updates a variable with a computed value, so there is no training step to find: give --fetch with the op a step runs"}
	}
	var sinks []*Node
	for _, n := range g.Nodes {
		if len(n.ControlOutputs) > 0 {
			continue
		}
		read := false
		for _, cs := range n.Consumers {
			if len(cs) > 0 {
				read = true
				break
			}
		}
		if !read {
			sinks = append(sinks, n)
		}
	}
	// Each sink's count of training updates in its fan-in; keep the sinks that together
	// cover every training update, the sink covering most first.
	type cover struct {
		n   *Node
		fan []bool
		has int
	}
	var covers []cover
	for _, s := range sinks {
		fan := g.FanIn([]*Node{s})
		k := 0
		for _, u := range steps {
			if fan[u.Index] {
				k++
			}
		}
		if k > 0 {
			covers = append(covers, cover{s, fan, k})
		}
	}
	sort.SliceStable(covers, func(i, j int) bool { return covers[i].has > covers[j].has })
	covered := make([]bool, len(g.Nodes))
	var chosen []*Node
	for _, c := range covers {
		adds := false
		for _, u := range steps {
			if c.fan[u.Index] && !covered[u.Index] {
				adds = true
				covered[u.Index] = true
			}
		}
		if adds {
			chosen = append(chosen, c.n)
		}
	}
	sort.Slice(chosen, func(i, j int) bool { return chosen[i].Index < chosen[j].Index })
	names := make([]string, len(chosen))
	for i, n := range chosen {
		names[i] = n.Name
	}
	ops := map[string]bool{}
	for _, u := range steps {
		ops[u.Op] = true
	}
	var opList []string
	for op := range ops {
		opList = append(opList, op)
	}
	sort.Strings(opList)
	sink := "the sink"
	if len(chosen) > 1 {
		sink = fmt.Sprintf("the %d sinks", len(chosen))
	}
	return Fetch{Nodes: names, Found: true, Reason: fmt.Sprintf("%s whose fan-in holds the %d variable updates of the training step (%s), not the initialisers",
		sink, len(steps), strings.Join(opList, ", "))}
}
