package plan

import (
	"github.com/tfswap/tfswap/rewrite"
	"sort"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// A buffer is one allocation on a compute device as the simulator sees it: a swap candidate's
// output together with the tensors that alias it (Identity, Reshape, ... of it on the same
// device), with every read of it in the unswapped step. Swapping frees a buffer only when
// every read after the gap goes to a swapped-in copy, so planners choose where a buffer is
// absent and derive the swaps (one per aliasing tensor that is read after the gap).
type buffer struct {
	root  graphdef.Tensor
	bytes int64
	dev   int // simulated device index
	// alloc is when the producer starts, prodEnd when it ends (the swap-out can start).
	alloc, prodEnd int64
	// accesses are the reads, each a consumer's run, sorted by start; an access by an alias
	// op is followed by the accesses of its output.
	accesses []*access
	// tree are the reads of root, the top of the alias tree.
	tree []*access
	// lastEnd is when the last read ends: the buffer's end in the unswapped step.
	lastEnd int64
	// order is the buffer's position among buffers (by producer topological order).
	order int
}

// access is one read of a buffer: consumer u reads tensor t.
type access struct {
	t          graphdef.Tensor
	u          graphdef.Use
	start, end int64
	// sub are the reads of the alias op's output when u.Node is an alias op on the same
	// device (its output shares the buffer); last is the end of the subtree.
	sub  []*access
	last int64
	// local says the consumer runs on the buffer's device; a read from another device is a
	// transfer that starts when the producer ends and cannot be redirected.
	local bool
	// ok says whether the read may be redirected to a swapped-in copy.
	ok bool
}

// indexBuffers builds the buffers of the swap candidates from the unswapped timing.
func (pr *Problem) indexBuffers() {
	a := pr.Analysis
	tm := pr.timing
	cands, _ := a.Candidates()
	isCand := map[graphdef.Tensor]bool{}
	for _, c := range cands {
		isCand[c.Tensor] = true
	}
	pr.bufOf = map[graphdef.Tensor]*buffer{}
	for _, c := range cands {
		t := c.Tensor
		p := t.Node
		if tm.dev[p.Index] < 0 || !tm.res.Devices[tm.dev[p.Index]].GPU {
			continue
		}
		if pr.aliasSource(t) != nil {
			continue // part of another buffer
		}
		bytes, ok := pr.shapes.Bytes(t)
		if !ok || bytes <= 0 {
			continue
		}
		b := &buffer{root: t, bytes: bytes, dev: tm.dev[p.Index], alloc: tm.times.Start[p.Index], prodEnd: tm.times.End[p.Index]}
		b.tree = pr.reads(b, t, isCand, 0)
		var flat func([]*access)
		flat = func(l []*access) {
			for _, x := range l {
				b.accesses = append(b.accesses, x)
				flat(x.sub)
				if x.last > b.lastEnd {
					b.lastEnd = x.last
				}
			}
		}
		flat(b.tree)
		if len(b.accesses) == 0 {
			continue
		}
		sort.SliceStable(b.accesses, func(i, j int) bool {
			if b.accesses[i].start != b.accesses[j].start {
				return b.accesses[i].start < b.accesses[j].start
			}
			return b.accesses[i].u.Node.TopoIndex < b.accesses[j].u.Node.TopoIndex
		})
		b.order = len(pr.buffers)
		pr.buffers = append(pr.buffers, b)
		var mark func(t graphdef.Tensor, l []*access)
		mark = func(t graphdef.Tensor, l []*access) {
			pr.bufOf[t] = b
			for _, x := range l {
				if len(x.sub) > 0 || isAliasUse(x.u) {
					mark(graphdef.Tensor{Node: x.u.Node, Port: aliasPort(x.u)}, x.sub)
				}
			}
		}
		mark(t, b.tree)
	}
}

// isAliasUse reports whether use u is an alias op reading its aliased input.
func isAliasUse(u graphdef.Use) bool { return aliasPort(u) >= 0 }

// aliasPort returns the output port of u.Node that aliases input u.Input, or -1.
func aliasPort(u graphdef.Use) int {
	n := u.Node
	outs := len(n.OutputTypes)
	if outs == 0 {
		outs = len(n.Consumers)
	}
	for port := 0; port < outs; port++ {
		if cost.AliasedInput(n.Op, port) == u.Input {
			return port
		}
	}
	return -1
}

// aliasSource returns the tensor whose buffer t shares (t's producer is an alias op on the
// same device), or nil.
func (pr *Problem) aliasSource(t graphdef.Tensor) *graphdef.Tensor {
	i := cost.AliasedInput(t.Node.Op, t.Port)
	if i < 0 || i >= len(t.Node.Inputs) {
		return nil
	}
	in := t.Node.Inputs[i]
	tm := pr.timing
	if tm.dev[in.Node.Index] != tm.dev[t.Node.Index] {
		return nil
	}
	return &in
}

// reads returns the accesses of tensor t of buffer b.
func (pr *Problem) reads(b *buffer, t graphdef.Tensor, isCand map[graphdef.Tensor]bool, depth int) []*access {
	a := pr.Analysis
	tm := pr.timing
	var out []*access
	for _, u := range t.Consumers() {
		c := u.Node
		if tm.times.Start[c.Index] < 0 {
			continue // not run in the step
		}
		if tm.pruned(c) {
			continue // a NoOp for Grappler: its value is dead and it reads nothing
		}
		x := &access{t: t, u: u, start: tm.times.Start[c.Index], end: tm.times.End[c.Index]}
		x.last = x.end
		x.local = tm.dev[c.Index] == b.dev
		if !x.local {
			// A transfer to another device: it starts when the producer ends and holds the
			// buffer until it is done; it is never redirected.
			x.start, x.end, x.last = b.prodEnd, b.prodEnd, b.prodEnd
			out = append(out, x)
			continue
		}
		x.ok = isCand[t] && a.ConsumerEligible(u)
		if port := aliasPort(u); port >= 0 && depth < 64 {
			at := graphdef.Tensor{Node: c, Port: port}
			x.sub = pr.reads(b, at, isCand, depth+1)
			for _, s := range x.sub {
				if s.last > x.last {
					x.last = s.last
				}
			}
			if s := rewrite.StandIns(c); x.ok && s[0] != c {
				// A gradient tuple Identity that reads a swap-in runs when it arrives, just
				// before its first reader: its read is timed at that reader's start.
				first := int64(-1)
				for _, r := range s {
					if st := tm.times.Start[r.Index]; st >= 0 && (first < 0 || st < first) {
						first = st
					}
				}
				if first >= x.start {
					x.start, x.end = first, first
				}
			}
		}
		out = append(out, x)
	}
	return out
}

// gap returns, for the split before access k (accesses k.. are read from a swapped-in copy),
// the end of the reads before it (the earliest the buffer can be freed) and the start of
// access k.
func (b *buffer) gap(k int) (free, due int64) {
	free = b.prodEnd
	for _, x := range b.accesses[:k] {
		if x.end > free {
			free = x.end
		}
	}
	return free, b.accesses[k].start
}

// splits returns the indices k at which the buffer can be split with a positive gap:
// accesses before k end before access k starts.
func (b *buffer) splits() []int {
	var out []int
	maxEnd := b.prodEnd
	for k, x := range b.accesses {
		if k > 0 && x.start > maxEnd {
			out = append(out, k)
		}
		if x.end > maxEnd {
			maxEnd = x.end
		}
	}
	return out
}

// splitsFromProduction returns splits() and, first, split 0 when the buffer waits between
// its production and its first read for at least minWait ns (a gradient waiting for its
// accumulation, a partial sum; minWait is the swap-out's copy time, under which the buffer
// could not leave the device before it is read): the swap-out then reads the producer's
// output itself and every read takes a swapped-in copy. Such a swap-in's trigger rarely
// descends from the producer (the reader's other inputs come from sibling branches), so its
// trigger waits for the swap-out (SwapInGroup.TriggerWaits).
func (b *buffer) splitsFromProduction(minWait int64) []int {
	out := b.splits()
	if len(b.accesses) > 0 && b.accesses[0].start-b.prodEnd >= max(minWait, 1) {
		out = append([]int{0}, out...)
	}
	return out
}

// largestGap returns the split with the longest gap, or -1.
func (b *buffer) largestGap() int {
	best, bestLen := -1, int64(0)
	for _, k := range b.splits() {
		free, due := b.gap(k)
		if due-free > bestLen {
			best, bestLen = k, due-free
		}
	}
	return best
}

// spanning returns the split whose gap contains time t, or -1.
func (b *buffer) spanning(t int64) int {
	for _, k := range b.splits() {
		free, due := b.gap(k)
		if free <= t && t < due {
			return k
		}
	}
	return -1
}

// redirects returns the reads to redirect so that every access starting in [from, to) reads
// a copy: an access starting there is redirected whole (an alias op with its subtree);
// otherwise an alias op's subtree is searched. ok is false when a read that must be
// redirected cannot be.
func redirects(tree []*access, from, to int64) (out []*access, ok bool) {
	ok = true
	var walk func([]*access)
	walk = func(l []*access) {
		for _, x := range l {
			if x.start >= from && x.start < to {
				if !x.local || !x.ok {
					ok = false
					continue
				}
				out = append(out, x)
				continue
			}
			walk(x.sub)
		}
	}
	walk(tree)
	return out, ok
}
