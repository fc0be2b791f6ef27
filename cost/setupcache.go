package cost

import (
	"slices"
	"weak"

	"github.com/tfswap/tfswap/graphdef"
)

// SetupCache keeps what a simulation works out per node of one graph (its op estimate, its
// time by Grappler's conventions, whether Grappler's dependency optimizer may turn it into a
// NoOp, and the order of the graph's node names) for simulations of graphs derived from it.
// A planner simulates many graphs made from one original: the builder copies the original
// nodes first, with the same NodeDefs, and adds swap and recomputation nodes after them. A
// node of such a graph at the index of an original node, with the same NodeDef, device and
// data inputs (the same producers' NodeDefs and ports) as that original, has the same
// estimates when the shapes of its inputs and outputs are the same too; the simulation then
// takes them from the cache instead of working them out again. Every other node is set up
// as without a cache, so a simulation's result is the same with or without one
// (TestSetupCacheMatchesFresh). Options.Setup hands a cache to Simulate; a SetupCache is
// not safe for concurrent use.
type SetupCache struct {
	g *graphdef.Graph
	p *Profile
	// est holds the cached estimates by the simulation's shapes: [0] by the graph's
	// recorded shapes, [1] by Grappler's shape inference (Conventions.GrapplerTimes).
	est [2][]nodeSetup
	// uses counts the simulations that asked for each table: the first cacheUsesBefore
	// simulations of a kind store nothing, so that a rewrite that simulates a graph once or
	// twice (no planning) holds no table as large as the graph.
	uses [2]int
	// convertible caches noOpConvertible per original node: 0 unknown, 1 no, 2 yes.
	convertible []int8
	// byName is the original nodes' indices in the order of their names (byName).
	byName []int32
	// hits counts the estimates taken from the cache.
	hits int
	// facts is what the last simulation with the cache found about its graph regardless of
	// the accounting rules.
	facts graphFacts
	// scratch is the set-up's lists, for the next simulation (simScratch).
	scratch *simScratch
	// spare is set by Spare: no estimate table is made.
	spare bool
}

// simScratch returns c's set-up lists for a simulation, made on first use.
func (c *SetupCache) simScratch() *simScratch {
	if c.scratch == nil {
		c.scratch = &simScratch{}
	}
	return c.scratch
}

// graphFacts is what a simulation works out about its graph, for its fetches, whatever the
// accounting rules: the fan-in of the fetches, the copies of the cache's original nodes
// (sameNodes) and the nodes run as NoOps (prunedNodes). A planner judges a plan by tfswap's
// accounting and then by Grappler's, two simulations of one derived graph; the second takes
// these from the first, and leaves out the check of the graph's total tensor bytes. The graph is held weakly: the cache does not keep a derived graph
// alive once its planner has let it go.
type graphFacts struct {
	g     weak.Pointer[graphdef.Graph]
	fetch []string
	// fanin is fanin(g, fetch), before the untaken branches are left out.
	fanin []bool
	// same is sameNodes(g) when sameSet.
	same    []bool
	sameSet bool
	// pruned is prunedNodes(g, prunedFor, fetch) when prunedSet: the nodes run as NoOps when
	// the simulated nodes are prunedFor (which depends on the accounting's shapes when a
	// conditional's smaller branch is left out).
	prunedFor []bool
	pruned    []bool
	prunedSet bool
	// checkedScale is the batch scale at which g's tensors were checked against the most
	// tfswap accepts (newShapes), 0 for none.
	checkedScale int
}

// factsFor returns c's facts about g simulated for fetch, emptied first when they are about
// another graph or other fetches; nil for a nil cache.
func (c *SetupCache) factsFor(g *graphdef.Graph, fetch []string) *graphFacts {
	if c == nil {
		return nil
	}
	if f := &c.facts; f.g.Value() != g || !slices.Equal(f.fetch, fetch) {
		*f = graphFacts{g: weak.Make(g), fetch: slices.Clone(fetch)}
	}
	return &c.facts
}

// lastLowered reports whether g is the graph c's facts are about: a simulation's graph after
// its Grappler swap kernels were lowered (Simulate), which holds none. False for a nil cache.
func (c *SetupCache) lastLowered(g *graphdef.Graph) bool {
	return c != nil && c.facts.g.Value() == g
}

// Release empties c's tables (the estimates, the NoOp answers, the name order, the facts
// about the last graph and the set-up's lists), so that a cache that results still refer to
// (Options.Setup) holds no memory the size of the graph once planning is done. A later
// simulation with c works them out again, with the same results.
func (c *SetupCache) Release() {
	if c == nil {
		return
	}
	c.est = [2][]nodeSetup{}
	c.convertible, c.byName = nil, nil
	c.facts = graphFacts{}
	c.scratch = nil
}

// Hits returns how many node estimates simulations took from c (0 for a nil cache).
func (c *SetupCache) Hits() int {
	if c == nil {
		return 0
	}
	return c.hits
}

// nodeSetup is one node's cached estimates and the shapes they were made with.
type nodeSetup struct {
	set        bool
	gpu        bool // the device kind GrapplerTime was computed for
	hasGT      bool
	in, out    [][]int64
	est        OpEstimate
	gt         int64
	unmodelled bool
}

// NewSetupCache returns an empty cache for simulations, with profile p, of g and of graphs
// derived from g.
func NewSetupCache(g *graphdef.Graph, p *Profile) *SetupCache {
	return &SetupCache{g: g, p: p}
}

// Serves reports whether c is a cache for simulations with profile p. It serves the graphs
// derived from its graph, and the graphs derived from those (a graph with recomputations
// and its plans): whatever graph a simulation runs, only the nodes that are copies of c's
// graph's nodes at the same index are taken from the cache.
func (c *SetupCache) Serves(p *Profile) bool {
	return c != nil && c.p == p
}

// sameNodes marks the nodes of g that are copies of the cache's original nodes at the same
// index (the same NodeDef, name, op, device and data inputs); nil when none is or c is nil
// or built for another profile.
func (c *SetupCache) sameNodes(g *graphdef.Graph, p *Profile) []bool {
	if c == nil || c.p != p {
		return nil
	}
	orig := c.g.Nodes
	same := make([]bool, len(g.Nodes))
	any := false
	for i, n := range g.Nodes {
		if i >= len(orig) {
			break
		}
		o := orig[i]
		if n.Def != o.Def || n.Name != o.Name || n.Op != o.Op || n.Device != o.Device || len(n.Inputs) != len(o.Inputs) ||
			len(n.OutputTypes) != len(o.OutputTypes) {
			continue
		}
		ok := true
		for j, t := range n.Inputs {
			ot := o.Inputs[j]
			if t.Port != ot.Port || t.Node.Def != ot.Node.Def || t.Node.Op != ot.Node.Op || len(t.Node.OutputTypes) != len(ot.Node.OutputTypes) {
				ok = false
				break
			}
		}
		same[i] = ok
		any = any || ok
	}
	if !any {
		return nil
	}
	return same
}

// Spare makes c keep no estimate tables from now on (the estimates are worked out in every
// simulation, as without a cache); c still shares its other facts. A planner that
// simulates only a few graphs of a large original calls it: a table is as large as the
// graph (at a million nodes, 0.16 GB with its shapes), and the one made at the third
// simulation of a kind stays live through the later simulations, the largest heaps of the
// planning, for the few estimates a fourth one would take from it. Results are the same.
func (c *SetupCache) Spare() {
	if c == nil {
		return
	}
	c.spare = true
	c.est = [2][]nodeSetup{}
}

// cacheUsesBefore is how many simulations of a kind run before the kind's estimates are
// cached.
const cacheUsesBefore = 2

// table returns the estimates cached for simulations with shapes of the kind grappler says,
// nil while there have not been cacheUsesBefore simulations of the kind and when c is spare
// (Spare).
func (c *SetupCache) table(grappler bool) []nodeSetup {
	if c.spare {
		return nil
	}
	k := 0
	if grappler {
		k = 1
	}
	if c.uses[k] < cacheUsesBefore {
		c.uses[k]++
		return nil
	}
	if c.est[k] == nil {
		c.est[k] = make([]nodeSetup, len(c.g.Nodes))
	}
	return c.est[k]
}

// shapesOf returns the shapes of n's data inputs and outputs in shp.
func shapesOf(n *graphdef.Node, shp *Shapes) (in, out [][]int64) {
	in = make([][]int64, len(n.Inputs))
	for j, t := range n.Inputs {
		in[j] = shp.Out(t.Node, t.Port)
	}
	if n.Index < len(shp.out) {
		out = shp.out[n.Index]
	}
	return in, out
}

// sameShapes reports whether n's inputs and outputs have in shp the shapes e was made with.
func (e *nodeSetup) sameShapes(n *graphdef.Node, shp *Shapes) bool {
	if len(e.in) != len(n.Inputs) {
		return false
	}
	for j, t := range n.Inputs {
		if !slices.Equal(e.in[j], shp.Out(t.Node, t.Port)) {
			return false
		}
	}
	var out [][]int64
	if n.Index < len(shp.out) {
		out = shp.out[n.Index]
	}
	if len(out) != len(e.out) {
		return false
	}
	for port := range out {
		if !slices.Equal(out[port], e.out[port]) {
			return false
		}
	}
	return true
}

// entry returns the cached set-up of n, a copy of an original node (sameNodes), made with
// shp's shapes: nil when there is none, in which case the caller computes it and may store
// it with store.
func (c *SetupCache) entry(tbl []nodeSetup, n *graphdef.Node, shp *Shapes) *nodeSetup {
	e := &tbl[n.Index]
	if !e.set || !e.sameShapes(n, shp) {
		return nil
	}
	return e
}

// estimate returns EstimateOp(n, shp), from the cache when n is a copy of an original node
// (same) with the shapes it was cached with.
func (c *SetupCache) estimate(tbl []nodeSetup, same bool, n *graphdef.Node, shp *Shapes) OpEstimate {
	if !same || tbl == nil {
		return EstimateOp(n, shp)
	}
	if e := c.entry(tbl, n, shp); e != nil {
		c.hits++
		return e.est
	}
	est := EstimateOp(n, shp)
	e := &tbl[n.Index]
	if !e.set {
		in, out := shapesOf(n, shp)
		*e = nodeSetup{set: true, in: in, out: out, est: est}
	}
	return est
}

// grapplerTime returns GrapplerOpTime(n, shp, p, gpu), from the cache when n is a copy of an
// original node (same) with the shapes its estimate was cached with.
func (c *SetupCache) grapplerTime(tbl []nodeSetup, same bool, n *graphdef.Node, shp *Shapes, p *Profile, gpu bool) (int64, bool) {
	if !same || tbl == nil {
		return GrapplerOpTime(n, shp, p, gpu)
	}
	e := c.entry(tbl, n, shp)
	if e != nil && e.hasGT && e.gpu == gpu {
		return e.gt, e.unmodelled
	}
	t, unmodelled := GrapplerOpTime(n, shp, p, gpu)
	if e != nil && !e.hasGT {
		e.hasGT, e.gpu, e.gt, e.unmodelled = true, gpu, t, unmodelled
	}
	return t, unmodelled
}

// noOpConvertible returns noOpConvertible(n), from the cache when n is a copy of an original
// node (same[n.Index]).
func (c *SetupCache) noOpConvertible(same []bool, n *graphdef.Node) bool {
	if same == nil || n.Index >= len(same) || !same[n.Index] {
		return noOpConvertible(n)
	}
	if c.convertible == nil {
		c.convertible = make([]int8, len(c.g.Nodes))
	}
	switch c.convertible[n.Index] {
	case 1:
		return false
	case 2:
		return true
	}
	ok := noOpConvertible(n)
	c.convertible[n.Index] = 1
	if ok {
		c.convertible[n.Index] = 2
	}
	return ok
}

// originalByName returns the original nodes' indices in the order of their names (ties by
// index), sorted once.
func (c *SetupCache) originalByName() []int32 {
	if c.byName == nil {
		all := make([]named, len(c.g.Nodes))
		for i, n := range c.g.Nodes {
			all[i] = named{name: n.Name, node: int32(i)}
		}
		c.byName = byName(all)
	}
	return c.byName
}
