package graphdef

// CondBranch is one side of the v1 conditionals (Switch/Merge) that share a predicate: the
// nodes that run only when the predicate has the value Taken, every other node of the
// graph being unaffected by it. The forward conditionals tf.cond builds and their gradients
// use the same predicate, so one CondBranch holds a branch and its gradient.
type CondBranch struct {
	// Pred is the predicate, traced back through Identity ops (tf.cond's pred_id).
	Pred Tensor
	// Taken is the predicate's value for which the branch runs (Switch output port 1 is the
	// true side).
	Taken bool
	// Nodes are the branch's nodes in topological order. The Switches and Merges that
	// delimit it are not among them: they run whichever side is taken.
	Nodes []*Node
}

// Cond is a v1 conditional: the two branches of one predicate, False first.
type Cond struct {
	Pred     Tensor
	Branches [2]CondBranch
}

// isSwitch reports whether op is a v1 Switch.
func isSwitch(op string) bool { return op == "Switch" || op == "RefSwitch" }

// isMerge reports whether op is a v1 Merge.
func isMerge(op string) bool { return op == "Merge" || op == "RefMerge" }

// CondPred returns the predicate of a v1 conditional's Switch traced back through Identity
// ops, and false when n is no Switch or is a while loop's (its predicate is a LoopCond).
func CondPred(n *Node) (Tensor, bool) {
	if !isSwitch(n.Op) || len(n.Inputs) < 2 {
		return Tensor{}, false
	}
	p := n.Inputs[1]
	for (p.Node.Op == "Identity" || p.Node.Op == "RefIdentity") && len(p.Node.Inputs) == 1 {
		p = p.Node.Inputs[0]
	}
	if p.Node.Op == "LoopCond" {
		return Tensor{}, false
	}
	return p, true
}

// Conds finds the graph's v1 conditionals, grouped by predicate, in the graph order of
// their first Switch. A node is in a branch when TensorFlow's executor would mark it dead
// whenever the predicate has the other value: a Switch output of the other side, or a node
// with a dead data or control input, except a Merge, which is dead only when all its data
// inputs are (while loops' back edges ignored). Nested conditionals fall inside their outer
// branch. Conditionals inside while loops are found too; Switches of the loops themselves
// are not conditionals.
func (g *Graph) Conds() []Cond {
	var preds []Tensor
	seen := map[Tensor]bool{}
	for _, n := range g.Nodes {
		if p, ok := CondPred(n); ok && !seen[p] {
			seen[p] = true
			preds = append(preds, p)
		}
	}
	var out []Cond
	for _, p := range preds {
		c := Cond{Pred: p}
		for v := 0; v < 2; v++ {
			// Nodes dead when the predicate is v make the branch taken when it is !v.
			dead := g.deadWhen(p, v == 1)
			br := CondBranch{Pred: p, Taken: v == 0}
			for _, n := range g.Topo {
				if dead[n.Index] {
					br.Nodes = append(br.Nodes, n)
				}
			}
			c.Branches[1-v] = br
		}
		out = append(out, c)
	}
	return out
}

// deadWhen marks the nodes dead when predicate p has value v.
func (g *Graph) deadWhen(p Tensor, v bool) []bool {
	dead := make([]bool, len(g.Nodes))
	tensorDead := func(t Tensor) bool {
		if dead[t.Node.Index] {
			return true
		}
		if q, ok := CondPred(t.Node); ok && q == p {
			return (t.Port == 1) != v
		}
		return false
	}
	for _, n := range g.Topo {
		if isMerge(n.Op) {
			all, any := true, false
			for _, in := range n.Inputs {
				if isLoopBackEdge(in.Node.Op) {
					continue
				}
				any = true
				if !tensorDead(in) {
					all = false
				}
			}
			dead[n.Index] = any && all
			continue
		}
		d := false
		for _, in := range n.Inputs {
			if !isLoopBackEdge(in.Node.Op) && tensorDead(in) {
				d = true
				break
			}
		}
		for _, c := range n.ControlInputs {
			if !d && !isLoopBackEdge(c.Op) && dead[c.Index] {
				d = true
			}
		}
		dead[n.Index] = d
	}
	return dead
}

// InCondBranch marks, by node index, the nodes inside a branch of any v1 conditional of g.
func (g *Graph) InCondBranch() []bool {
	mark := make([]bool, len(g.Nodes))
	for _, c := range g.Conds() {
		for _, b := range c.Branches {
			for _, n := range b.Nodes {
				mark[n.Index] = true
			}
		}
	}
	return mark
}
