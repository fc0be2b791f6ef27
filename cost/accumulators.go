package cost

import (
	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"

	"github.com/tfswap/tfswap/graphdef"
)

// A while loop's gradient keeps what the backward pass needs of each forward iteration in an
// accumulator: a v1 loop in a stack (StackV2; StackPushV2 in the forward loop, StackPopV2 in
// the gradient loop), a v2 loop in a TensorList (EmptyTensorList; TensorListPushBack in the
// forward body, TensorListPopBack in the gradient body). The simulator runs a loop's body
// once, so it would see one element of each. Instead an accumulator holds its elements'
// bytes times the loop's iteration count from the push (the forward loop) until the
// gradient loop's pops have finished: the accumulated bytes grow over the forward loop to
// that total and shrink over the backward one, so the total is what is live where the two
// loops meet, and the simulation holds it over both.
//
// Where the accumulator sits in the graph:
//   - a stack or a lowered v2 list (Enter/Merge/Switch/NextIteration/Exit in the graph): an
//     accumulator buffer named after the push, on the push's device, allocated when the push
//     starts and freed when the last of the accumulator's pops in the step has finished;
//   - an unlowered v2 While (While, StatelessWhile) whose body pushes onto a loop variable
//     that enters as an empty list: that output of the While holds the accumulated bytes,
//     freed after its last reader (the gradient While) as any output is.
//
// The iteration count is the accumulator's declared capacity where it is static
// (EmptyTensorList's max_num_elements, TensorListReserve's num_elements, StackV2's max_size:
// while_v2 sets the first to the loop's maximum_iterations), else the smallest static bound a
// Less or LessEqual of the loop's condition (a v1 loop's frame, a While's cond function)
// compares an iteration variable with (an iteration variable counting up from 0 by 1 is assumed, as dynamic_rnn's
// and tf.while_loop's counters do). Where neither is static the accumulator counts one
// element (Result.UnboundedAccumulators says how many).

// accumulatorSources are the ops that make an accumulator, with the input holding its
// capacity (-1: none).
var accumulatorSources = map[string]int{"StackV2": 0, "EmptyTensorList": 1, "TensorListReserve": 1}

// accumulatorPushes and accumulatorPops are the ops that push onto and pop from an
// accumulator, through their input 0 (the handle or list), with the pushed tensor's input.
var (
	accumulatorPushes = map[string]int{"StackPushV2": 1, "TensorListPushBack": 1}
	accumulatorPops   = map[string]bool{"StackPopV2": true, "TensorListPopBack": true}
)

// accumulatorCarriers are the ops that carry a handle or a list on unchanged, through input 0
// (a Merge through its entry from outside the loop, not its back edge).
var accumulatorCarriers = map[string]bool{"Enter": true, "RefEnter": true, "Exit": true, "RefExit": true,
	"Switch": true, "RefSwitch": true, "Merge": true, "RefMerge": true, "Identity": true, "RefIdentity": true}

// accumulators is what a simulation knows of the graph's accumulators.
type accumulators struct {
	// push is the bytes each push node holds (its element's bytes times the iterations);
	// key the accumulator source of each push and pop node.
	push map[int32]int64
	key  map[int32]int32
	// pops counts the pops of each accumulator in the step that have not finished yet; held
	// are the accumulator buffers waiting for them.
	pops map[int32]int32
	held map[int32][]int32
	// popsOf are the pops of each accumulator in the step: each waits for the accumulator's
	// pushes (a pop of an empty stack or list fails; the runtime's loops order them so).
	popsOf map[int32][]int32
	// whileOut is the bytes of an unlowered While's outputs that carry accumulators.
	whileOut map[[2]int32]int64
}

// accumulatorSource follows t back through the nodes that carry a handle or list on to the
// node that made it, or returns nil when it reaches anything else.
func accumulatorSource(t graphdef.Tensor) *graphdef.Node {
	for range 64 {
		n := t.Node
		if _, ok := accumulatorSources[n.Op]; ok {
			return n
		}
		if !accumulatorCarriers[n.Op] || len(n.Inputs) == 0 {
			return nil
		}
		next := n.Inputs[0]
		if n.Op == "Merge" || n.Op == "RefMerge" {
			found := false
			for _, in := range n.Inputs {
				if !isBackEdgeSource(in.Node) {
					next, found = in, true
					break
				}
			}
			if !found {
				return nil
			}
		}
		t = next
	}
	return nil
}

// findAccumulators returns the accumulators of the step's nodes, or nil when there are none
// (or Conventions.NoAccumulators).
func (s *sim) findAccumulators() *accumulators {
	if s.conv.NoAccumulators {
		return nil
	}
	g := s.g
	var pushes, pops, whiles []*graphdef.Node
	for _, n := range g.Nodes {
		if !s.incl[n.Index] || s.pruned != nil && s.pruned[n.Index] {
			continue
		}
		switch {
		case accumulatorPushes[n.Op] > 0:
			pushes = append(pushes, n)
		case accumulatorPops[n.Op]:
			pops = append(pops, n)
		case n.Op == "While" || n.Op == "StatelessWhile":
			whiles = append(whiles, n)
		}
	}
	if len(pushes) == 0 && len(whiles) == 0 {
		return nil
	}
	a := &accumulators{push: map[int32]int64{}, key: map[int32]int32{}, pops: map[int32]int32{},
		held: map[int32][]int32{}, popsOf: map[int32][]int32{}, whileOut: map[[2]int32]int64{}}
	values := graphdef.IntValues(g)
	var bounds map[string]int64 // v1 loops' bounds by frame, computed when first needed
	for _, p := range pushes {
		src := accumulatorSource(p.Inputs[0])
		if src == nil {
			continue // a list pushed onto in a loop body (its function), or not an accumulator
		}
		iters, ok := capacity(src, values)
		if !ok && src.Op == "StackV2" {
			if bounds == nil {
				bounds = loopBounds(g, values)
			}
			iters, ok = bounds[frameOf(p.Inputs[0].Node)]
		}
		if !ok {
			iters = 1
			s.res.UnboundedAccumulators++
		}
		elem := s.tensorBytes(p.Inputs[accumulatorPushes[p.Op]].Node, p.Inputs[accumulatorPushes[p.Op]].Port)
		a.push[int32(p.Index)] = elem * iters
		s.res.AccumulatorBytes += elem * iters
		a.key[int32(p.Index)] = int32(src.Index)
		s.res.Accumulators++
	}
	pushesOf := map[int32]int32{}
	for _, k := range a.key {
		pushesOf[k]++
	}
	for _, p := range pops {
		if src := accumulatorSource(p.Inputs[0]); src != nil {
			k := int32(src.Index)
			a.key[int32(p.Index)] = k
			a.pops[k]++
			a.popsOf[k] = append(a.popsOf[k], int32(p.Index))
			s.pend[p.Index] += pushesOf[k]
		}
	}
	for _, w := range whiles {
		s.whileAccumulators(w, values, a)
	}
	return a
}

// capacity returns the static capacity of accumulator source src (positive), if it has one.
func capacity(src *graphdef.Node, values func(graphdef.Tensor) []int64) (int64, bool) {
	i := accumulatorSources[src.Op]
	if i < 0 || i >= len(src.Inputs) {
		return 0, false
	}
	if v := values(src.Inputs[i]); len(v) == 1 && v[0] > 0 {
		return v[0], true
	}
	return 0, false
}

// frameOf returns the frame an Enter (or the node carrying one's output) belongs to, "" when
// it is not found within a few carriers.
func frameOf(n *graphdef.Node) string {
	for range 8 {
		if n.Op == "Enter" || n.Op == "RefEnter" {
			return string(n.Def.GetAttr()["frame_name"].GetS())
		}
		if len(n.Inputs) == 0 {
			return ""
		}
		n = n.Inputs[0].Node
	}
	return ""
}

// loopBounds returns, by frame ("" for a function's cond, which has no frames), the smallest
// static bound a Less or LessEqual compares its input 0 with: its input 1 static, or an Enter
// of a static tensor (a LessEqual's bound counts one more iteration).
func loopBounds(g *graphdef.Graph, values func(graphdef.Tensor) []int64) map[string]int64 {
	b := map[string]int64{}
	for _, n := range g.Nodes {
		if n.Op != "Less" && n.Op != "LessEqual" || len(n.Inputs) < 2 {
			continue
		}
		bound, in := n.Inputs[1], n.Inputs[0].Node
		if e := bound.Node; (e.Op == "Enter" || e.Op == "RefEnter") && len(e.Inputs) > 0 {
			bound, in = e.Inputs[0], e
		}
		v := values(bound)
		if len(v) != 1 || v[0] < 0 {
			continue
		}
		c := v[0]
		if n.Op == "LessEqual" {
			c++
		}
		f := frameOf(in)
		if old, ok := b[f]; !ok || c < old {
			b[f] = c
		}
	}
	return b
}

// WhileListPushes returns the pushes of While w's body (lib's function) that accumulate: a
// TensorListPushBack onto its argument k, loop variable k entering w as an accumulator
// source's list (an EmptyTensorList or TensorListReserve: while_v2's gradient
// accumulators), with each push's loop variable and the body's graph; nil when w's body has
// none or cannot be read.
func WhileListPushes(lib *fpb.FunctionDefLibrary, w *graphdef.Node) (pushes []*graphdef.Node, vars []int, body *graphdef.Graph) {
	name := w.Def.GetAttr()["body"].GetFunc().GetName()
	if name == "" || lib == nil {
		return nil, nil, nil
	}
	bg, err := graphdef.FunctionGraph(lib, name)
	if err != nil {
		return nil, nil, nil
	}
	for _, p := range bg.Nodes {
		if p.Op != "TensorListPushBack" || len(p.Inputs) <= accumulatorPushes[p.Op] {
			continue
		}
		arg := p.Inputs[0].Node
		if arg.Op != "_Arg" {
			continue
		}
		k := int(arg.Def.GetAttr()["index"].GetI())
		if k >= len(w.Inputs) || k >= numOutputs(w) {
			continue
		}
		if _, ok := accumulatorSources[w.Inputs[k].Node.Op]; !ok {
			continue
		}
		pushes, vars = append(pushes, p), append(vars, k)
	}
	if len(pushes) == 0 {
		return nil, nil, nil
	}
	return pushes, vars, bg
}

// whileAccumulators records the outputs of unlowered While w that carry accumulators
// (WhileListPushes): output k then holds the pushed element's bytes times the iterations.
func (s *sim) whileAccumulators(w *graphdef.Node, values func(graphdef.Tensor) []int64, a *accumulators) {
	lib := s.g.Def.GetLibrary()
	pushes, vars, bg := WhileListPushes(lib, w)
	if pushes == nil {
		return
	}
	shp, err := newShapes(bg, s.opts.BatchScale, s.shp.Batch)
	if err != nil {
		return
	}
	for i, p := range pushes {
		k := vars[i]
		iters, ok := capacity(w.Inputs[k].Node, values)
		if !ok {
			iters, ok = condBound(lib, w)
		}
		if !ok {
			iters = 1
			s.res.UnboundedAccumulators++
		}
		elem, _ := shp.Bytes(p.Inputs[accumulatorPushes[p.Op]])
		a.whileOut[[2]int32{int32(w.Index), int32(k)}] += elem * iters
		s.res.AccumulatorBytes += elem * iters
		s.res.Accumulators++
	}
}

// condBound returns the static bound While w's cond function compares with (see
// loopBounds), if it has one.
func condBound(lib *fpb.FunctionDefLibrary, w *graphdef.Node) (int64, bool) {
	cg, err := graphdef.FunctionGraph(lib, w.Def.GetAttr()["cond"].GetFunc().GetName())
	if err != nil {
		return 0, false
	}
	b, ok := loopBounds(cg, graphdef.IntValues(cg))[""]
	return b, ok
}

// accumulatorPushed allocates the accumulator push node holds, on its device, at time t.
func (s *sim) accumulatorPushed(node int, t int64) {
	bytes, ok := s.acc.push[int32(node)]
	if !ok || bytes <= 0 {
		return
	}
	b := s.newBuffer(bytes, s.dev[node], node, 0, kindAccumulator, t)
	s.bufs[b].refs = 1
	k := s.acc.key[int32(node)]
	s.acc.held[k] = append(s.acc.held[k], b)
}

// accumulatorFinished is called when node finishes at time t: a push lets the
// accumulator's pops go on; the last pop of an accumulator in the step frees it.
func (s *sim) accumulatorFinished(node int, t int64) {
	k, ok := s.acc.key[int32(node)]
	if !ok {
		return
	}
	if !accumulatorPops[s.g.Nodes[node].Op] {
		for _, p := range s.acc.popsOf[k] {
			s.arrive(int(p), t, -1, s.key(node))
		}
		return
	}
	s.acc.pops[k]--
	if s.acc.pops[k] > 0 {
		return
	}
	for _, b := range s.acc.held[k] {
		s.unref(b, t)
	}
	delete(s.acc.held, k)
}
