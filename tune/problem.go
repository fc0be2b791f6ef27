package tune

import (
	"fmt"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/tfswap/tfswap/triggers"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// Group is one swap-in whose trigger is tuned: the swapped tensor's index in the base plan,
// the group's index among that tensor's swap-ins, and the trigger candidates.
type Group struct {
	Swap, Index int
	// Chain are the ops that may trigger the swap-in, nearest to its consumers first: the
	// eligible nodes on the critical path back from the earliest consumer among the
	// producer's descendants (at each step the input, data or control, with the highest
	// topological level among those that descend from the producer), down to the producer's
	// level (exclusive). Chain[0] is the trigger "right before the use"; each later entry
	// releases the swap-in earlier.
	Chain []*graphdef.Node
}

// Positions give each group's trigger as an index into its Chain.
type Positions []int

// Equal reports whether p and q choose the same triggers.
func (p Positions) Equal(q Positions) bool {
	if len(p) != len(q) {
		return false
	}
	for i := range p {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// Problem is a graph, the set of tensors to swap (a base plan, whose triggers are ignored)
// and the trigger candidates of every swap-in.
type Problem struct {
	Model    *graphdef.Model
	Analysis *rewrite.Analysis
	Base     *rewrite.Plan
	Groups   []Group
}

// NewProblem prepares tuning the triggers of base, a plan for model analysed as a. A
// swap-in without any eligible op between producer and consumer cannot be tuned and is an
// error (the planners never produce one).
func NewProblem(model *graphdef.Model, a *rewrite.Analysis, base *rewrite.Plan) (*Problem, error) {
	p := &Problem{Model: model, Analysis: a, Base: base}
	for si, ps := range base.Swaps {
		for gi, grp := range ps.Groups {
			consumers := rewrite.SwapInReaders(grp.Uses)
			ch := Chain(ps.Tensor.Node, consumers, a.TriggerEligible)
			if len(ch) == 0 {
				return nil, fmt.Errorf("tensor %s: no op between producer and consumer %s can trigger its swap-in", ps.Tensor, consumers[0].Name)
			}
			p.Groups = append(p.Groups, Group{Swap: si, Index: gi, Chain: ch})
		}
	}
	return p, nil
}

// Chain returns the trigger candidates of a swap-in of a tensor made by producer for
// consumers (see Group.Chain): the eligible nodes of triggers.Ancestry, which all descend
// from the producer.
func Chain(producer *graphdef.Node, consumers []*graphdef.Node, eligible func(*graphdef.Node) bool) []*graphdef.Node {
	var out []*graphdef.Node
	for _, n := range triggers.Ancestry(producer, consumers) {
		if eligible == nil || eligible(n) {
			out = append(out, n)
		}
	}
	return out
}

// Latest returns the positions with every trigger right before its use.
func (p *Problem) Latest() Positions { return make(Positions, len(p.Groups)) }

// Clamp returns pos with each position limited to its chain.
func (p *Problem) Clamp(pos Positions) Positions {
	out := make(Positions, len(p.Groups))
	for i, g := range p.Groups {
		out[i] = min(max(pos[i], 0), len(g.Chain)-1)
	}
	return out
}

// Plan returns the base plan with the triggers pos chooses.
func (p *Problem) Plan(pos Positions) *rewrite.Plan {
	plan := &rewrite.Plan{Swaps: make([]rewrite.PlannedSwap, len(p.Base.Swaps))}
	for i, ps := range p.Base.Swaps {
		plan.Swaps[i] = rewrite.PlannedSwap{Tensor: ps.Tensor, Bytes: ps.Bytes, Groups: append([]rewrite.SwapInGroup(nil), ps.Groups...)}
	}
	for i, g := range p.Groups {
		plan.Swaps[g.Swap].Groups[g.Index].Trigger = g.Chain[pos[i]]
	}
	return plan
}

// Apply rewrites the model with the triggers pos chooses.
func (p *Problem) Apply(pos Positions) (*rewrite.Result, error) {
	return rewrite.Apply(p.Model, p.Analysis, p.Plan(pos))
}

// Distance returns the mean number of levels between a trigger and the earliest consumer
// of its swap-in, over the groups: how far ahead the swap-ins are released.
func (p *Problem) Distance(pos Positions) float64 { return PlanDistance(p.Plan(pos)) }

// PlanDistance returns the mean number of levels (of the graph planned for) between a
// swap-in's trigger and its earliest consumer, over the swap-ins of plan.
func PlanDistance(plan *rewrite.Plan) float64 {
	var sum, n int
	for _, ps := range plan.Swaps {
		for _, grp := range ps.Groups {
			if grp.Trigger == nil || len(grp.Uses) == 0 {
				continue
			}
			readers := rewrite.SwapInReaders(grp.Uses)
			first := readers[0].Level
			for _, r := range readers {
				first = min(first, r.Level)
			}
			sum += first - grp.Trigger.Level
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// Predictor predicts the peak memory of the compute device for a rewritten model.
type Predictor struct {
	// Profile is the GPU simulated; Sim the simulation options (Fetch, Measured,
	// ScaleMeasured, BatchScale...). ComputeDevice is left empty: the nodes on the compute
	// device are simulated on the simulator's default GPU.
	Profile *cost.Profile
	Sim     cost.Options
	// Analysis says which nodes run on the compute device.
	Analysis *rewrite.Analysis
}

// Prediction is a simulated step: the compute device's peak bytes and the step time (ns).
type Prediction struct {
	Peak, StepTime int64
}

// Predict simulates a model: the nodes that run on the compute device (Analysis.OnCompute:
// the emulated GPU /device:CPU:1 included) are simulated on the profile's GPU, everything
// else (the swap nodes on the host) where it is placed.
func (pr *Predictor) Predict(m *graphdef.Model) (Prediction, error) {
	g, err := pr.SimGraph(m)
	if err != nil {
		return Prediction{}, err
	}
	opts := pr.Sim
	opts.ComputeDevice = ""
	opts.Timeline = false
	opts.TopLive = -1
	res, err := cost.Simulate(g, pr.Profile, opts)
	if err != nil {
		return Prediction{}, err
	}
	d := res.Compute()
	if d == nil {
		return Prediction{}, fmt.Errorf("the simulation ran nothing on a GPU")
	}
	return Prediction{Peak: d.PeakBytes, StepTime: res.StepTime}, nil
}

// SimGraph returns the graph the simulator sees for m: a copy in which every node on the
// compute device (Analysis.OnCompute; tfswap's gates included, which sit on their
// trigger's device) has no device, so that it runs on the simulator's default GPU.
func (pr *Predictor) SimGraph(m *graphdef.Model) (*graphdef.Graph, error) {
	gd := m.Clone().Graph
	for i, nd := range gd.Node {
		if nd.GetDevice() == "" {
			continue
		}
		d, err := graphdef.ParseDevice(nd.GetDevice())
		if err != nil || !pr.Analysis.OnCompute(&graphdef.Node{Device: d}) {
			continue
		}
		c := proto.Clone(nd).(*npb.NodeDef)
		c.Device = ""
		gd.Node[i] = c
	}
	return graphdef.NewGraph(gd, m.Source)
}
