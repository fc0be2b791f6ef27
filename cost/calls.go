package cost

import (
	"strings"

	"github.com/tfswap/tfswap/graphdef"
)

// maxCallDepth bounds the nesting of function calls costed from their bodies; deeper calls
// (or a function that calls itself) are timed by their bytes.
const maxCallDepth = 8

// callCost is what a function call costs, from its body.
type callCost struct {
	// time is how long the body's ops run on one stream (ns).
	time int64
	// transient is the memory the body holds beyond its arguments and results while it runs:
	// its simulated peak less the bytes of its arguments and results.
	transient int64
}

// bodyCost simulates function name of g's library on its own, with the simulation's profile,
// conventions and batch scale (the body's arguments that carry the caller's batch are
// scaled as the caller's placeholders are), on the device the call runs on (onHost: the
// host), and returns its cost.
// Bodies are cached by function and device.
func (s *sim) bodyCost(name string, onHost bool) (callCost, bool) {
	key := name
	if onHost {
		key += "@host"
	}
	if c, ok := s.bodies[key]; ok {
		return c, c.time >= 0
	}
	s.bodies[key] = callCost{time: -1} // a call of itself is not costed from its body
	bg, err := graphdef.FunctionGraph(s.g.Def.GetLibrary(), name)
	if err != nil {
		return callCost{}, false
	}
	opts := Options{Conventions: s.conv, NoTF32: s.opts.NoTF32, TopLive: -1, callDepth: s.opts.callDepth + 1}
	if s.opts.BatchScale > 1 && s.shp.Batch > 0 {
		// The body runs on the caller's scaled tensors: scale its batch too.
		opts.BatchScale, opts.callerBatch = s.opts.BatchScale, s.shp.Batch
	}
	if onHost {
		opts.ComputeDevice = "/device:CPU:0"
	}
	r, err := Simulate(bg, s.p, opts)
	if err != nil {
		return callCost{}, false
	}
	var edge int64 // arguments and results
	for _, n := range bg.Nodes {
		if n.Op == "_Arg" || n.Op == "Identity" && strings.HasPrefix(n.Name, graphdef.RetvalPrefix) {
			if b, ok := r.Shapes.Bytes(graphdef.Tensor{Node: n, Port: 0}); ok {
				edge += b
			}
		}
	}
	var peak int64
	for _, d := range r.Devices {
		peak = max(peak, d.PeakBytes)
	}
	c := callCost{time: r.StepTime, transient: max(0, peak-edge)}
	s.bodies[key] = c
	return c, true
}

// callCostOf returns what call node n costs from the bodies of the functions it calls, and
// false when n calls none or a body could not be costed (the call is then timed by its
// bytes, as an op without a cost rule): a call (PartitionedCall, StatefulPartitionedCall, a
// function called as an op) runs its function; an If or a Case the largest of its branches
// (their sum with Conventions.BothBranches); a While its cond and its body once (loops are
// simulated for one iteration).
func (s *sim) callCostOf(n *graphdef.Node, onHost bool) (callCost, bool) {
	if s.conv.CallsByBytes || s.opts.callDepth >= maxCallDepth {
		return callCost{}, false
	}
	fns := graphdef.CalledFunctions(n.Def, s.g.Def.GetLibrary())
	if len(fns) == 0 {
		return callCost{}, false
	}
	var costs []callCost
	for _, attr := range graphdef.FunctionCalls[n.Op] {
		for _, f := range fns[attr] {
			c, ok := s.bodyCost(f, onHost)
			if !ok {
				return callCost{}, false
			}
			costs = append(costs, c)
		}
	}
	for _, f := range fns[""] {
		c, ok := s.bodyCost(f, onHost)
		if !ok {
			return callCost{}, false
		}
		costs = append(costs, c)
	}
	if len(costs) == 0 {
		return callCost{}, false
	}
	var out callCost
	switch n.Op {
	case "If", "StatelessIf", "Case", "StatelessCase":
		for _, c := range costs {
			if s.conv.BothBranches {
				out.time += c.time
				out.transient += c.transient
			} else {
				out.time = max(out.time, c.time)
				out.transient = max(out.transient, c.transient)
			}
		}
	default: // a call, or a While's cond and body, one after the other
		for _, c := range costs {
			out.time += c.time
			out.transient = max(out.transient, c.transient)
		}
	}
	return out, true
}
