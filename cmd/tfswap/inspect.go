package main

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite/plan"
	"io"
	"sort"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "inspect",
		Usage:     "print a graph's size, devices, largest tensors and swap candidates",
		UsageText: "tfswap inspect [options] MODEL",
		Flags: append(append(modelFlags(),
			&cli.IntFlag{Name: "top", Value: 10, Usage: "how many of the largest tensors and candidates to list"},
		), lmsFlags()...),
		Action: inspectAction,
	})
}

func inspectAction(c *cli.Context) error {
	opts, err := lmsRewriteOptions(c)
	if err != nil {
		return err
	}
	m, in, err := loadModel(c, c.App.Reader)
	if err != nil {
		return err
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		return err
	}
	top := c.Int("top")
	if top < 0 {
		return usagef("--top must not be negative")
	}
	w := c.App.Writer
	printGraphSummary(w, in, m, g, top)
	if err := rewrite.CheckNotRewritten(g); err != nil {
		fmt.Fprintf(w, "\nThe graph was already rewritten by tfswap: no swap candidates.\n")
	} else {
		plan, err := plan.PlanFor(g, opts)
		if err != nil {
			return usagef("%v", err)
		}
		printCandidates(w, plan, top)
	}
	printVariables(w, g, opts, top)
	for _, hook := range inspectHooks {
		if err := hook(c, w, g); err != nil {
			return err
		}
	}
	return nil
}

// inspectHooks add sections to inspect's output (the cost model's predicted peak, ...).
var inspectHooks []func(c *cli.Context, w io.Writer, g *graphdef.Graph) error

func printGraphSummary(w io.Writer, in string, m *graphdef.Model, g *graphdef.Graph, top int) {
	maxLevel := 0
	ops := map[string]int{}
	devices := map[string]int{}
	for _, n := range g.Nodes {
		if n.Level > maxLevel {
			maxLevel = n.Level
		}
		ops[n.Op]++
		dev := n.Def.GetDevice()
		if dev == "" {
			dev = "(unplaced)"
		}
		devices[dev]++
	}
	fmt.Fprintf(w, "%s (%s)\n", in, m.Format)
	fmt.Fprintf(w, "  nodes: %d, op types: %d, topological levels: %d\n", len(g.Nodes), len(ops), maxLevel+1)
	if lib := m.Graph.GetLibrary(); len(lib.GetFunction()) > 0 {
		fmt.Fprintf(w, "  functions in library: %d\n", len(lib.GetFunction()))
	}
	fmt.Fprintf(w, "  devices:\n")
	for _, d := range sortedKeys(devices) {
		fmt.Fprintf(w, "    %-40s %d nodes\n", d, devices[d])
	}
	type sized struct {
		t     graphdef.Tensor
		bytes int64
	}
	var tensors []sized
	var total int64
	unknown := 0
	for _, n := range g.Nodes {
		for port := range n.OutputTypes {
			t := graphdef.Tensor{Node: n, Port: port}
			b, ok, _ := t.Bytes()
			if !ok {
				if dt, _ := t.DataType(); !graphdef.IsHandle(dt) {
					unknown++
				}
				continue
			}
			total += b
			tensors = append(tensors, sized{t, b})
		}
	}
	sort.SliceStable(tensors, func(i, j int) bool { return tensors[i].bytes > tensors[j].bytes })
	fmt.Fprintf(w, "  tensors: %d of known size (%s in all), %d of unknown size\n", len(tensors), units.FormatBytes(total), unknown)
	if top > 0 && len(tensors) > 0 {
		fmt.Fprintf(w, "  largest tensors:\n")
		for i, s := range tensors {
			if i >= top {
				break
			}
			dt, _ := s.t.DataType()
			fmt.Fprintf(w, "    %-48s %-14s %s %-9s %s\n", s.t, s.t.Node.Op, units.FormatBytes(s.bytes), graphdef.DataTypeName(dt), graphdef.FormatShape(s.t.Shape()))
		}
	}
}

func printCandidates(w io.Writer, plan *rewrite.Plan, top int) {
	var bytes int64
	for _, s := range plan.Swaps {
		bytes += s.Bytes
	}
	fmt.Fprintf(w, "\nSwap candidates (LMS thresholds): %d tensors, %s\n", len(plan.Swaps), units.FormatBytes(bytes))
	swaps := append([]rewrite.PlannedSwap(nil), plan.Swaps...)
	sort.SliceStable(swaps, func(i, j int) bool { return swaps[i].Bytes > swaps[j].Bytes })
	for i, s := range swaps {
		if i >= top {
			fmt.Fprintf(w, "  ... %d more\n", len(swaps)-i)
			break
		}
		first := s.Groups[0].Uses[0].Node
		fmt.Fprintf(w, "  %-48s %10s  producer level %d, first far consumer %s at level %d, %d swap-in(s)\n",
			s.Tensor, units.FormatBytes(s.Bytes), s.Tensor.Node.Level, first.Name, first.Level, len(s.Groups))
	}
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// printVariables lists the variable groups --offload would move (a variable with its
// optimizer slots), largest first, and the variables and weight copies an offload already
// placed on the host.
func printVariables(w io.Writer, g *graphdef.Graph, opts rewrite.Options, top int) {
	a := rewrite.Analyze(g, opts)
	groups := rewrite.VariableGroups(a)
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].Bytes > groups[j].Bytes })
	var total int64
	nv := 0
	for _, vg := range groups {
		total += vg.Bytes
		nv += len(vg.Variables)
	}
	onHost, copies := 0, 0
	for _, n := range g.Nodes {
		switch {
		case n.Op == "VarHandleOp" || n.Op == "VariableV2" || n.Op == "Variable":
			if !a.OnCompute(n) {
				onHost++
			}
		case string(n.Def.GetAttr()[rewrite.RoleAttr].GetS()) == rewrite.WeightInRole:
			copies++
		}
	}
	if onHost > 0 || copies > 0 {
		fmt.Fprintf(w, "\nVariables on the host: %d (an offload placed them there, or the graph did), %d gated weight copies to the device\n", onHost, copies)
	}
	if len(groups) == 0 {
		return
	}
	fmt.Fprintf(w, "\nVariables on compute devices (--offload moves a group: the variable, its optimizer slots and the ops on them): %d groups, %d variables, %s\n",
		len(groups), nv, units.FormatBytes(total))
	for i, vg := range groups {
		if i >= top {
			fmt.Fprintf(w, "  ... %d more\n", len(groups)-i)
			break
		}
		fmt.Fprintf(w, "  %-48s %10s  %d variables, %d nodes\n", vg.Name, units.FormatBytes(vg.Bytes), len(vg.Variables), len(vg.Nodes))
	}
}
