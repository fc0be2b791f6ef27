package profiling

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
)

// DefaultInitOp is the node run to initialise variables when none is named: the name
// tf.compat.v1.global_variables_initializer() gives its op.
const DefaultInitOp = "init"

// DefaultTargetOp is the target of a step when neither targets nor fetches are named: the
// name the testmodels fixtures (and many tf.compat.v1 scripts) give the training op.
const DefaultTargetOp = "train"

// InitOp returns the initialisation op to run: name when given (it must exist), otherwise
// DefaultInitOp when the graph has such a node, otherwise "" (none).
func InitOp(g *graphdef.Graph, name string) (string, error) {
	if name != "" {
		if g.Node(name) == nil {
			return "", fmt.Errorf("init op %q: no such node in the graph", name)
		}
		return name, nil
	}
	if g.Node(DefaultInitOp) != nil {
		return DefaultInitOp, nil
	}
	return "", nil
}

// StepTargets checks the targets (node names) and fetches (tensor names) of a step; when
// both are empty it returns DefaultTargetOp if the graph has it, and otherwise an error
// that lists the graph's sinks (nodes nothing reads) as candidates.
func StepTargets(g *graphdef.Graph, targets, fetches []string) ([]string, []string, error) {
	for _, t := range targets {
		if g.Node(t) == nil {
			return nil, nil, fmt.Errorf("target %q: no such node in the graph", t)
		}
	}
	for _, f := range fetches {
		node, port, _, err := graphdef.ParseInput(f)
		if err != nil {
			return nil, nil, fmt.Errorf("fetch %q: %v", f, err)
		}
		n := g.Node(node)
		if n == nil {
			return nil, nil, fmt.Errorf("fetch %q: no node %q in the graph", f, node)
		}
		if n.OutputTypes != nil && port >= len(n.OutputTypes) {
			return nil, nil, fmt.Errorf("fetch %q: node %q has %d output(s)", f, node, len(n.OutputTypes))
		}
	}
	if len(targets) > 0 || len(fetches) > 0 {
		return targets, fetches, nil
	}
	if g.Node(DefaultTargetOp) != nil {
		return []string{DefaultTargetOp}, nil, nil
	}
	var sinks []string
	for _, n := range g.Nodes {
		used := len(n.ControlOutputs) > 0
		for _, c := range n.Consumers {
			used = used || len(c) > 0
		}
		if !used && n.Name != DefaultInitOp {
			sinks = append(sinks, n.Name)
		}
	}
	sort.Strings(sinks)
	if len(sinks) > 8 {
		sinks = append(sinks[:8], "...")
	}
	return nil, nil, fmt.Errorf("the graph has no node %q: name the training op with --target (nodes nothing reads: %s)", DefaultTargetOp, strings.Join(sinks, ", "))
}
