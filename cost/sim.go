package cost

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/radix"
)

// Conventions are the memory and timing accounting rules of a simulation. The zero value is
// tfswap's model of TensorFlow's runtime; GrapplerConventions gives the rules of Grappler's
// VirtualCluster (VirtualScheduler + GraphMemory), which tfswap is checked against. Each
// field switches one rule, so that a difference between the two can be traced to its cause.
type Conventions struct {
	// NoResidentVariables: variable buffers and constants are not resident for the step;
	// ReadVariableOp and Const outputs are ordinary tensors, allocated when the op runs and
	// freed after their last consumer (GraphMemory counts every op output that way; resource
	// handles have size 0, so the variables and optimizer slots themselves are not counted).
	NoResidentVariables bool
	// NoAliasing: Identity, Reshape, Squeeze, ExpandDims, StopGradient and the like allocate
	// their own output instead of sharing their input's buffer.
	NoAliasing bool
	// NoForwarding: elementwise ops (and FusedBatchNorm's y over its x) never write into the
	// buffer of an input they are the last reader of (TensorFlow's
	// forward_input_or_allocate_output).
	NoForwarding bool
	// NoWorkspace: kernels' temporary buffers are not counted.
	NoWorkspace bool
	// UnknownDimsAsOne: a dimension of unknown size counts as 1 and a tensor of unknown rank
	// as a scalar (Grappler's CalculateTensorSize); otherwise such tensors count 0 bytes and
	// are reported as unsized.
	UnknownDimsAsOne bool
	// TransientRecv: a tensor sent to another device stays allocated on its producer's device
	// until its consumers there have finished, and the received copy exists only while the
	// transfer runs (GraphMemory extends a tensor's life to its last consumer in the original
	// graph, on whatever device, and frees a _Recv's output when the _Recv ends). Otherwise
	// the producer's buffer is released when the last transfer out of it completes, and the
	// received copy lives until its last consumer on the receiving device has finished.
	TransientRecv bool
	// InstantTransfers: cross-device transfers take no time (an infinitely fast link; not one
	// of Grappler's rules, a what-if).
	InstantTransfers bool
	// RecvOps: a transfer is what Grappler's VirtualScheduler makes of it: a _Send taking 1 ns
	// on a channel between the two devices (one queue per direction, ordered like ops), then
	// a _Recv taking 1 ns that runs on the receiving device's compute stream, in the ready
	// order, and outputs the received copy; the consumers wait for the _Recv. A control edge
	// between devices is no transfer at all: its consumer is ready when the producer ends.
	// Otherwise transfers run on the GPU's copy engines at the link's rate, and a control
	// edge between devices is a 0-byte message.
	RecvOps bool
	// DelayedFree: buffers released when an op or a transfer ends are freed just after the
	// ops starting at that instant have allocated their outputs (GraphMemory frees a tensor
	// 1 ns after its last consumer ends, "to account for TF overhead that slightly delays
	// deallocations"). Otherwise they are freed before.
	DelayedFree bool
	// TieByName: among ops that became ready at the same time, the one whose name sorts
	// first runs first (Grappler's FirstReadyManager); otherwise the one earliest in the
	// graph's topological order (graphdef.Graph.Topo, stable in GraphDef order).
	TieByName bool
	// GrapplerTimes: every op takes the time Grappler's OpLevelCostEstimator gives it on the
	// device tools/vcluster/vcluster.py builds from the profile (GrapplerOpTime), so that the
	// step's trace is the VirtualScheduler's to the nanosecond; measured times are not used.
	// Tensors, for these times and for their sizes, have the shapes Grappler's static shape
	// inference gives them (GrapplerShapes). Otherwise ops take tfswap's estimates (OpTime)
	// and tensors the shapes the graph records.
	GrapplerTimes bool
	// BothBranches: both branches of every v1 conditional (Switch/Merge) run, and a
	// conditional call (If, StatelessIf) costs both its branch functions, as if every side
	// were taken (what Grappler's VirtualScheduler does with Switch and Merge; a conditional's
	// Merge then runs once per input that arrives, as the VirtualScheduler runs it, see
	// vsMerge). Otherwise a step runs the larger branch of each conditional only (see
	// untakenBranches), and an If costs its larger branch function. Not one of Grappler's
	// rules: an opt-in what-if.
	BothBranches bool
	// CallsByBytes: function calls (PartitionedCall, StatefulPartitionedCall, If, While, ...)
	// are timed by the bytes they read and write, as ops without a cost rule are, and hold no
	// memory of their own. Otherwise they are costed from their bodies in the graph's function
	// library (see calls.go). Not one of Grappler's rules: the behaviour before bodies were
	// costed, on request.
	CallsByBytes bool
	// RunValueDead: the nodes whose value nothing in the step reads run as written, reading
	// their inputs (what the VirtualCluster does with a graph Grappler has not optimized,
	// and TensorFlow with the dependency optimizer off). Otherwise, when the fetches are
	// known, they run as the NoOps Grappler's dependency optimizer makes of them: they wait
	// for their inputs, take no time, allocate nothing and hold no tensor (see pruned.go).
	RunValueDead bool
	// NoAccumulators: a while loop's stack and TensorList accumulators hold the one element
	// the simulated iteration pushes, not every iteration's (what the VirtualCluster does,
	// which runs a loop's body once and knows no accumulators). Otherwise they hold their
	// element's bytes times the loop's iterations between the forward and the backward loop
	// (see accumulators.go).
	NoAccumulators bool
	// MergeReruns: a while loop's Merge runs again when its NextIteration ends, on its device
	// in the ready order, without delivering its outputs again, and holds the tensors it reads
	// (the loop's Enter and the NextIteration) and its outputs until that second run ends, as
	// Grappler's VirtualScheduler runs it (a Merge runs whenever one of its inputs becomes
	// ready; see vsMerge). Otherwise a loop's Merge runs once, on its Enter, and releases the
	// Enter's tensor when it ends, as TensorFlow's executor does. Not one of Grappler's
	// accounting rules: how the VirtualScheduler schedules a v1 loop, whose body it runs once.
	MergeReruns bool
}

// GrapplerConventions returns the accounting rules of Grappler's VirtualCluster.
//
// Under them a simulation reports two peaks per device, both by GraphMemory's rule (an op's
// outputs live from its start until its last consumer has ended) applied to the same trace:
// DeviceResult.PeakBytes reads the trace's nanosecond timestamps (the figure
// tools/vcluster/vcluster.py re-times the trace for), DeviceResult.MicrosecondPeakBytes its
// microsecond ones, as GraphMemory::InferFromTrace does (the figure TensorFlow's own
// Cluster.DeterminePeakMemoryUsage returns).
func GrapplerConventions() Conventions {
	return Conventions{
		NoResidentVariables: true, NoAliasing: true, NoForwarding: true, NoWorkspace: true,
		UnknownDimsAsOne: true, TransientRecv: true, RecvOps: true, DelayedFree: true,
		TieByName: true, GrapplerTimes: true, NoAccumulators: true,
	}
}

// Options control a simulation. The zero value simulates every node on the default
// compute device /device:GPU:0 with tfswap's accounting.
type Options struct {
	// Fetch names the nodes a step runs (like Session.run's fetches and targets): only
	// their transitive fan-in (data and control inputs) is simulated. Empty means every node.
	Fetch []string
	// BatchScale multiplies the batch dimension (see NewShapes); 0 or 1 means unchanged.
	BatchScale int
	// ComputeDevice is where nodes without a device run, e.g. "/device:GPU:0" (the default).
	ComputeDevice string
	// Measured, when set, gives measured compute times that replace the estimates.
	Measured *Measured
	// ScaleMeasured also uses the times of nodes measured on another kind of device than
	// the one they are simulated on, scaled by the rule stated with Measured (one factor,
	// Result.MeasuredScale). Without it those nodes keep their analytical estimates.
	ScaleMeasured bool
	// NoTF32 runs float32 matrix products and convolutions at the FP32 rate even on GPUs with
	// TF32 tensor cores (tf.config.experimental.enable_tensor_float_32_execution(False)).
	NoTF32 bool
	// Conventions are the accounting rules.
	Conventions Conventions
	// Timeline records every op, transfer and memory change for traces and plots.
	Timeline bool
	// TopLive is how many of the tensors live at each device's peak to report (default 20;
	// negative for none).
	TopLive int
	// SharedLinks lists groups of GPUs (device names or specs such as "/device:GPU:1") that
	// share one host link, a PCIe switch: each group's transfers queue on common copy
	// engines (see sharedlink.go).
	SharedLinks [][]string
	// Setup, when set, caches the per-node set-up of simulations of one graph and of the
	// graphs derived from it (see SetupCache); results are the same without it.
	Setup *SetupCache `json:"-"`

	// callDepth is how deep in function calls a simulation of a body is (calls.go).
	callDepth int
	// callerBatch is, in the simulation of a function body, the batch of the calling graph
	// when BatchScale scales it: the body's arguments whose dimension 0 is this batch carry
	// it, and the body is scaled like the caller (calls.go).
	callerBatch int64
}

// LiveTensor is a buffer live at a device's peak.
type LiveTensor struct {
	// Name is the tensor ("node:port"), or the node for variables, constants and workspace.
	Name string
	Op   string
	// Kind is "activation", "variable", "constant", "copy" (received from another device) or
	// "workspace".
	Kind  string
	Bytes int64
	// Since is when it was allocated, in ns from the start of the step.
	Since int64
}

// DeviceResult is what a simulation found for one device.
type DeviceResult struct {
	// Name is the device ("/device:GPU:0"); GPU says whether it is simulated with the profile
	// (otherwise it is the host).
	Name string
	GPU  bool
	// MemoryLimit is the profile's memory size for GPUs, 0 for the host.
	MemoryLimit int64
	// PeakBytes is the most memory allocated at once, at PeakTime (ns).
	PeakBytes int64
	PeakTime  int64
	// ResidentBytes are the buffers resident for the whole step (variables, optimizer
	// slots, constants), included in PeakBytes.
	ResidentBytes int64
	// Live are the largest buffers live at the peak (Options.TopLive of them); LiveCount is
	// how many there were in all.
	Live      []LiveTensor
	LiveCount int
	// MicrosecondPeakBytes is the peak with every buffer's allocation and release time
	// truncated to the microsecond, as GraphMemory reads the VirtualScheduler's trace
	// (all_start_micros, op_end_rel_micros): a buffer is live in every microsecond from the
	// one its producer starts in to the one its last reader ends in, so ops that start within
	// the same microsecond look simultaneous. It is never below PeakBytes. It is computed
	// under Conventions.DelayedFree (GraphMemory's rule) and is 0 otherwise.
	// MicrosecondPeakTime is the start of that microsecond (ns), MicrosecondLive and
	// MicrosecondLiveCount the buffers live in it (like Live and LiveCount).
	MicrosecondPeakBytes int64
	MicrosecondPeakTime  int64
	MicrosecondLive      []LiveTensor
	MicrosecondLiveCount int
	// Ops is the number of ops run on the device; BusyTime the time its compute stream ran
	// them (ns).
	Ops      int
	BusyTime int64
	// SwapInStall is the time the compute stream sat idle with the next op waiting for a
	// host-to-device transfer (a swap-in); IdleTime is the other idle time before the end of
	// the step (waiting for other devices, control messages, ...).
	SwapInStall int64
	IdleTime    int64
	// End is when the device's last op finished (ns).
	End int64
}

// TransferStats sums the transfers of one direction.
type TransferStats struct {
	Count int
	Bytes int64
	// Busy is the time the copy engine(s) of this direction were busy (ns).
	Busy int64
}

// OpSpan is one op's run on a device's compute stream.
type OpSpan struct {
	Node       *graphdef.Node
	Device     int
	Start, End int64
}

// XferSpan is one transfer on a copy engine.
type XferSpan struct {
	// Tensor is the tensor moved ("node:port"), or "^node" for a control message.
	Tensor   string
	Src, Dst int
	// Engine is the copy engine's name ("/device:GPU:0 D2H").
	Engine              string
	Enqueue, Start, End int64
	Bytes               int64
}

// MemPoint is a device's allocated bytes from time T on; Max is the most allocated at any
// moment at time T (allocations and frees at the same instant can spike above Bytes).
type MemPoint struct {
	T     int64
	Bytes int64
	Max   int64
}

// Timeline is the full record of a simulation (Options.Timeline).
type Timeline struct {
	Ops    []OpSpan
	Xfers  []XferSpan
	Memory [][]MemPoint // per device, in Result.Devices order
}

// Result is a simulation's outcome.
type Result struct {
	Profile *Profile
	Options Options
	// Devices are the devices that ran ops or hold variables, GPUs first, by name.
	Devices []*DeviceResult
	// StepTime is when the last op or transfer finished (ns).
	StepTime int64
	// Simulated is the number of nodes simulated (the fetch fan-in, or all, less the
	// branches of conditionals not taken).
	Simulated int
	// UntakenNodes counts the nodes of the fetch fan-in left out as the smaller branch of a
	// v1 conditional (Conventions.BothBranches unset).
	UntakenNodes int
	// PrunedNodes counts the nodes of the step run as NoOps because nothing reads their value
	// (Conventions.RunValueDead unset; see pruned.go), and Pruned marks them by node index
	// (nil when there are none).
	PrunedNodes int
	Pruned      []bool
	// CostedCalls counts the function calls (PartitionedCall, If, While, ...) costed from
	// their bodies in the graph's function library.
	CostedCalls int
	// Accumulators counts the while loops' pushes onto stack and TensorList accumulators
	// whose every iteration's element the simulation holds (see accumulators.go), and
	// UnboundedAccumulators those among them whose iteration count is not static (counted
	// as one iteration). AccumulatorBytes is what they hold in all, on every device.
	Accumulators, UnboundedAccumulators int
	AccumulatorBytes                    int64
	// UnknownOps counts the simulated nodes, by op type, that no rule estimates (timed by
	// their bytes alone) or whose shapes were unknown.
	UnknownOps map[string]int
	// UnsizedTensors counts outputs of simulated nodes of unknown size (counted as 0 bytes
	// unless Conventions.UnknownDimsAsOne).
	UnsizedTensors int
	// MeasuredNodes counts nodes timed from Options.Measured.
	MeasuredNodes int
	// MeasuredScaled counts those among them measured on another kind of device, whose
	// times were multiplied by MeasuredScale (Options.ScaleMeasured); MeasuredScale is 0
	// when no time was scaled.
	MeasuredScaled int
	MeasuredScale  float64
	// GrapplerUnmodelled counts, under Conventions.GrapplerTimes, the simulated nodes whose
	// op has a rule in Grappler's OpLevelCostEstimator that GrapplerOpTime does not
	// reproduce (they are timed as unknown ops), by op type.
	GrapplerUnmodelled map[string]int
	// D2H and H2D sum the transfers from a GPU to the host and from the host to a GPU.
	D2H, H2D TransferStats
	// Shapes are the shapes simulated (with the batch scale applied).
	Shapes *Shapes
	// Timeline is set when Options.Timeline is.
	Timeline *Timeline
}

// Device returns the result for the named device, or nil.
func (r *Result) Device(name string) *DeviceResult {
	for _, d := range r.Devices {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// Compute returns the result of the default compute device (the first GPU), or nil.
func (r *Result) Compute() *DeviceResult {
	for _, d := range r.Devices {
		if d.GPU {
			return d
		}
	}
	return nil
}

// SwapInStall sums the swap-in stalls of every device.
func (r *Result) SwapInStall() int64 {
	var s int64
	for _, d := range r.Devices {
		s += d.SwapInStall
	}
	return s
}

// buffer kinds
const (
	kindActivation uint8 = iota
	kindVariable
	kindConstant
	kindCopy
	kindWorkspace
	kindAccumulator
)

var kindNames = [...]string{"activation", "variable", "constant", "copy", "workspace", "accumulator"}

type buffer struct {
	bytes    int64
	allocT   int64
	dev      int32
	refs     int32
	node     int32 // producing node, or -1
	port     int32
	allocEv  int32
	freeEv   int32
	kind     uint8
	resident bool
}

type memEv struct {
	t     int64
	delta int64
	buf   int32
}

type simDevice struct {
	name  string
	gpu   bool
	ready timedHeap
	// inline holds the host's ready ops that launch no kernel (a swap's or a weight copy's
	// Identity, a gate): while the host runs a kernel they start at once beside it, as
	// TensorFlow's executor runs inexpensive kernels inline instead of queueing them behind
	// an expensive one (an optimizer update) on the inter-op thread pool. Otherwise they
	// take their turn in ready order with the other ops.
	inline    timedHeap
	busy      bool
	kernel    bool // busy with an op that is not inline-eligible
	dirty     bool
	idleSince int64
	d2h, h2d  int32 // copy engines of a GPU; -1 on the host
	cur, peak int64
	peakT     int64
	peakEv    int32
	log       []memEv
	resident  int64
	res       DeviceResult
}

type xfer struct {
	node, port int32 // source tensor; port -1 for a control message
	src, dst   int32 // devices
	bytes      int64
	engine     int32 // -1: no engine (host to host, or instant)
	next       int32 // the transfer made before this one of the same source (xfirst), or -1
	channel    int32 // RecvOps: the channel the _Send runs on
	srcBuf     int32
	dstBuf     int32
	waiters    []int32
	enq        int64
	start, end int64
	recvKey    pickKey // RecvOps: the _Recv's ready time and tie rank
}

// pickKey orders inputs as the VirtualScheduler marks their producers executed: its single
// ready queue takes nodes by ready time, then name, so the producers of one node's inputs are
// marked in the order of their own (ready time, tie rank).
type pickKey struct {
	ready int64
	tie   int32
}

type copyEngine struct {
	name  string
	dev   int32
	h2d   bool
	busy  bool
	queue []int32
	head  int
}

// rename records that a buffer started holding another op's output (forwarding) when its
// device's memory log had ev entries; prev is the buffer as it was before.
type rename struct {
	ev   int32
	node int32
	prev buffer
}

// channel is the VirtualScheduler's "Channel" device between two devices: _Sends run on it
// one after the other (RecvOps).
type channel struct {
	busy, dirty bool
	ready       timedHeap
}

type xkey struct {
	node, port, dev int32
}

type sim struct {
	g        *graphdef.Graph
	p        *Profile
	cache    *SetupCache // Options.Setup, nil in function bodies
	same     []bool      // the nodes that are copies of the cache's original nodes (sameNodes)
	facts    *graphFacts // the cache's facts about g (SetupCache.factsFor), nil without a cache
	opts     Options
	conv     Conventions
	shp      *Shapes
	res      *Result
	incl     []bool
	pruned   []bool // nodes run as NoOps (prunedNodes), nil for none
	dev      []int32
	dur      []int64
	wsz      []int64
	tie      []int32
	pend     []int32
	ready    []int64
	picked   []pickKey // RecvOps: the input the VirtualScheduler marks executed last so far
	lastX    []int32   // the transfer that last delivered an input (stall attribution), or -1
	inlineOK []bool    // host ops that launch no kernel (simDevice.inline); nil with RecvOps
	inlined  []bool    // ops started beside a host kernel: they leave the device's stream alone
	start    []int64
	merges   []vsMerge // BothBranches, MergeReruns: Merges run as the VirtualScheduler runs them; nil for none
	outOf    []int32   // first index in outBuf of a node's outputs
	outB     []int32   // per output: its buffer, -1 for none
	newB     []bool    // per output: whether the buffer was allocated by the op (hold to release)
	wsBuf    []int32
	resid    []int32 // resident buffer of a variable or constant node, -1 for none
	bufs     []buffer
	devs     []*simDevice
	engs     []*copyEngine
	xfers    []*xfer
	xslab    []xfer // where new transfers are made: a few allocations instead of one each
	// xfirst is, per output (outOf) and then per node (its control messages), the last
	// transfer made of it (to some device), -1 for none; each transfer's next is the one
	// made before it of the same source. xmore holds the transfers of a port past the node's
	// outputs, which have no slot. They find a transfer by its source and destination
	// (findXfer) without a map of every transfer: at a million nodes, the map's look-ups and
	// growth were about 1 s of the default rewrite's simulations.
	xfirst   []int32
	xmore    map[xkey]int32
	renames  map[int32][]rename
	chans    []*channel
	chanIdx  map[[2]int32]int32
	sendTie  map[xkey]int32 // RecvOps: rank of the _Send's name among the sends
	recvTie  map[xkey]int32 // RecvOps: rank of the _Recv's name among the nodes' names
	evq      eventHeap
	seq      int64
	deferred []int32 // releases waiting for DelayedFree
	tl       *Timeline
	bodies   map[string]callCost // function bodies costed (calls.go), by function and device
	acc      *accumulators       // the while loops' accumulators (accumulators.go), nil for none
}

// Simulate replays one step of g on devices described by p. See docs/SIMULATOR.md for the
// execution model.
func Simulate(g *graphdef.Graph, p *Profile, opts Options) (*Result, error) {
	if p == nil {
		return nil, fmt.Errorf("no device profile")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("profile %s: %v", p.Name, err)
	}
	if opts.BatchScale == 0 {
		opts.BatchScale = 1
	}
	if opts.TopLive == 0 {
		opts.TopLive = 20
	}
	// Grappler's swap kernels run as host transfers (grappler_swaps.go). A graph the set-up
	// cache's facts are about was the last simulation's graph after lowering, so it has none
	// (the judge by Grappler's accounting simulates the graph tfswap's accounting just did).
	var err error
	if !opts.Setup.lastLowered(g) {
		if g, err = lowerGrapplerSwaps(g); err != nil {
			return nil, err
		}
	}
	// What the last simulation with the cache found about g, if g was its graph.
	var facts *graphFacts
	if opts.callDepth == 0 && opts.Setup.Serves(p) {
		facts = opts.Setup.factsFor(g, opts.Fetch)
	}
	// The graph's tensors were checked against the most tfswap accepts when the last
	// simulation read them at the same batch scale.
	checked := facts != nil && facts.checkedScale == opts.BatchScale
	shp, err := newShapesChecked(g, opts.BatchScale, opts.callerBatch, !checked)
	if err != nil {
		return nil, err
	}
	if facts != nil {
		facts.checkedScale = opts.BatchScale
	}
	if opts.Conventions.GrapplerTimes {
		shp = GrapplerShapes(g, shp)
	}
	s := &sim{g: g, p: p, facts: facts, opts: opts, conv: opts.Conventions, shp: shp, renames: map[int32][]rename{},
		chanIdx: map[[2]int32]int32{}, sendTie: map[xkey]int32{}, recvTie: map[xkey]int32{}, bodies: map[string]callCost{}}
	s.res = &Result{Profile: p, Options: opts, UnknownOps: map[string]int{}, Shapes: shp}
	s.res.Options.Setup = nil // a result does not keep the cache alive
	if opts.Timeline {
		s.tl = &Timeline{}
	}
	if err := s.setup(); err != nil {
		return nil, err
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	s.finish()
	return s.res, nil
}

// fanin marks the nodes needed to run the fetches.
func fanin(g *graphdef.Graph, fetch []string) ([]bool, error) {
	if len(fetch) == 0 {
		incl := make([]bool, len(g.Nodes))
		for i := range incl {
			incl[i] = true
		}
		return incl, nil
	}
	var roots []*graphdef.Node
	for _, f := range fetch {
		name, _, _ := strings.Cut(strings.TrimPrefix(f, "^"), ":")
		n := nodeByName(g, name)
		if n == nil {
			return nil, fmt.Errorf("fetch %q: no such node in %s", f, g.Source)
		}
		roots = append(roots, n)
	}
	return g.FanIn(roots), nil
}

func isBackEdgeSource(n *graphdef.Node) bool {
	return n.Op == "NextIteration" || n.Op == "RefNextIteration"
}

// findLoopMerges marks the while loops' Merges that run again when their NextIteration ends
// (Conventions.MergeReruns): the Merges of the step that read a NextIteration of the step on
// their own device. A Merge run as a NoOp holds nothing and is not marked.
func (s *sim) findLoopMerges() {
	for _, n := range s.g.Nodes {
		if !s.incl[n.Index] || (n.Op != "Merge" && n.Op != "RefMerge") || !s.reads(n.Index) {
			continue
		}
		for _, in := range n.Inputs {
			if isBackEdgeSource(in.Node) && s.incl[in.Node.Index] && s.dev[in.Node.Index] == s.dev[n.Index] {
				if s.merges == nil {
					s.merges = make([]vsMerge, len(s.g.Nodes))
				}
				s.merges[n.Index] = vsMerge{runs: s.pend[n.Index] + 1, loop: true}
				break
			}
		}
	}
}

func (s *sim) deviceIndex(name string, gpu bool) int32 {
	for i, d := range s.devs {
		if d.name == name {
			return int32(i)
		}
	}
	d := &simDevice{name: name, gpu: gpu, d2h: -1, h2d: -1, peakEv: -1}
	d.res.Name, d.res.GPU = name, gpu
	if gpu {
		d.res.MemoryLimit = s.p.MemoryBytes
	}
	s.devs = append(s.devs, d)
	return int32(len(s.devs) - 1)
}

// placement returns the device node n runs on: its own device, or the default compute device
// (with n's job, replica and task) when it names none.
func placement(n *graphdef.Node, def graphdef.Device) graphdef.Device {
	d := n.Device
	if d.Type == "" {
		dd := def
		if !d.IsZero() {
			dd.Job, dd.Replica, dd.Task = d.Job, d.Replica, d.Task
		}
		return dd
	}
	if d.Index < 0 {
		d.Index = 0
	}
	return d
}

func (s *sim) setup() error {
	g := s.g
	def := graphdef.Device{Replica: -1, Task: -1, Type: "GPU", Index: 0}
	if s.opts.ComputeDevice != "" {
		d, err := graphdef.ParseDevice(s.opts.ComputeDevice)
		if err != nil {
			return fmt.Errorf("compute device: %v", err)
		}
		if d.Type == "" {
			return fmt.Errorf("compute device %q names no device type", s.opts.ComputeDevice)
		}
		if d.Index < 0 {
			d.Index = 0
		}
		def = d
	}
	facts := s.facts
	if s.opts.callDepth == 0 {
		s.cache = s.opts.Setup
	}
	var incl []bool
	if facts != nil && facts.fanin != nil {
		incl = slices.Clone(facts.fanin)
	} else {
		var err error
		if incl, err = fanin(g, s.opts.Fetch); err != nil {
			return err
		}
		if facts != nil {
			facts.fanin = slices.Clone(incl)
		}
	}
	if s.cache != nil {
		if facts != nil && facts.sameSet {
			s.same = facts.same
		} else {
			s.same = s.cache.sameNodes(g, s.p)
			if facts != nil {
				facts.same, facts.sameSet = s.same, true
			}
		}
	}
	if !s.conv.BothBranches {
		// A conditional runs one branch: the smaller ones are not simulated.
		size := func(n *graphdef.Node) int64 {
			var b int64
			for port := 0; port < numOutputs(n); port++ {
				b += s.tensorBytes(n, port)
			}
			return b
		}
		if untaken := untakenBranches(g, incl, size); untaken != nil {
			for i, u := range untaken {
				if u && incl[i] {
					incl[i] = false
					s.res.UntakenNodes++
				}
			}
		}
	}
	s.incl = incl
	if !s.conv.RunValueDead {
		if facts != nil && facts.prunedSet && slices.Equal(facts.prunedFor, incl) {
			s.pruned = facts.pruned
		} else {
			convertible := noOpConvertible
			if s.same != nil {
				convertible = func(n *graphdef.Node) bool { return s.cache.noOpConvertible(s.same, n) }
			}
			s.pruned = prunedNodes(g, incl, s.opts.Fetch, convertible)
			if facts != nil {
				facts.prunedFor, facts.pruned, facts.prunedSet = slices.Clone(incl), s.pruned, true
			}
		}
		s.res.Pruned = s.pruned
		for _, p := range s.pruned {
			if p {
				s.res.PrunedNodes++
			}
		}
	}
	nn := len(g.Nodes)
	// The per-node lists, zeroed: a simulation with a set-up cache reuses those of the one
	// before it (simScratch).
	sc := &simScratch{}
	if s.cache != nil {
		sc = s.cache.simScratch()
	}
	s.dev = zeroed(&sc.dev, nn)
	s.dur = zeroed(&sc.dur, nn)
	s.wsz = zeroed(&sc.wsz, nn)
	s.tie = zeroed(&sc.tie, nn)
	s.pend = zeroed(&sc.pend, nn)
	s.ready = zeroed(&sc.ready, nn)
	s.picked = zeroed(&sc.picked, nn)
	s.lastX = zeroed(&sc.lastX, nn)
	s.inlined = zeroed(&sc.inlined, nn)
	if !s.conv.RecvOps {
		s.inlineOK = zeroed(&sc.inlineOK, nn)
	}
	s.start = zeroed(&sc.start, nn)
	s.outOf = zeroed(&sc.outOf, nn+1)
	s.wsBuf = zeroed(&sc.wsBuf, nn)
	s.resid = zeroed(&sc.resid, nn)
	// Devices: the default compute device first, then in order of first use.
	s.deviceIndex(def.String(), def.Type != "CPU")
	var lastD graphdef.Device
	lastIdx := int32(-1)
	for _, n := range g.Nodes {
		if !incl[n.Index] && !isVariableOp(n.Op) {
			continue
		}
		d := placement(n, def)
		if lastIdx < 0 || d != lastD {
			// Most nodes run where the one before did: the device's name is looked up once.
			lastD, lastIdx = d, s.deviceIndex(d.String(), d.Type != "CPU")
		}
		s.dev[n.Index] = lastIdx
	}
	// Tie-break ranks.
	if s.conv.TieByName {
		s.nameRanks()
	} else {
		for _, n := range g.Nodes {
			s.tie[n.Index] = int32(n.TopoIndex)
		}
	}
	// Outputs.
	total, simulated := 0, 0
	outputsOn := make([]int, len(s.devs)) // the simulated nodes' outputs per device
	for _, n := range g.Nodes {
		s.outOf[n.Index] = int32(total)
		total += numOutputs(n)
		if incl[n.Index] {
			simulated += numOutputs(n)
			outputsOn[s.dev[n.Index]] += numOutputs(n)
		}
	}
	s.outOf[nn] = int32(total)
	// Most buffers hold an output of a simulated node, allocated and released on its device:
	// the buffer list and each device's memory log are allocated for them once instead of
	// growing (on a large graph each growth copies tens of megabytes).
	s.bufs = make([]buffer, 0, simulated)
	for i, d := range s.devs {
		d.log = make([]memEv, 0, 2*outputsOn[i])
	}
	s.outB = zeroed(&sc.outB, total)
	s.newB = zeroed(&sc.newB, total)
	s.xfirst = zeroed(&sc.xfirst, total+nn)
	for i := range s.xfirst {
		s.xfirst[i] = -1
	}
	for i := range s.outB {
		s.outB[i] = -1
	}
	tf32 := !s.opts.NoTF32
	var est []nodeSetup // the cached estimates for this simulation's shapes
	if s.same != nil {
		est = s.cache.table(s.conv.GrapplerTimes)
	}
	// Nodes measured on another kind of device (Options.ScaleMeasured): their indices and
	// measured times, and the sums the scale factor is made of.
	var scaled []int
	var scaledNS []int64
	var estSum, measSum float64
	profileName := "" // a GPU measured with another profile counts as another device only when scaling
	if s.opts.ScaleMeasured {
		profileName = s.p.Name
	}
	for _, n := range g.Nodes {
		s.resid[n.Index] = -1
		s.wsBuf[n.Index] = -1
		s.lastX[n.Index] = -1
		s.picked[n.Index] = pickKey{-1, -1}
		if !incl[n.Index] {
			continue
		}
		s.res.Simulated++
		if s.pruned != nil && s.pruned[n.Index] {
			// A NoOp: it waits for its inputs, takes no time and reads nothing.
			s.countInputs(n)
			continue
		}
		onHost := !s.devs[s.dev[n.Index]].gpu
		copied := s.same != nil && n.Index < len(s.same) && s.same[n.Index]
		e := s.cache.estimate(est, copied, n, s.shp)
		call, isCall := s.callCostOf(n, onHost)
		if e.Kind == KindUnknown && !isCall {
			s.res.UnknownOps[n.Op]++
		}
		if isCall {
			s.res.CostedCalls++
		}
		m, same, ok := s.opts.Measured.lookupAny(n, s.devs[s.dev[n.Index]].name, profileName)
		switch {
		case isCall && !(ok && same):
			// A function call costs what its body does (calls.go); the memory its body
			// holds while it runs is counted as the call's workspace.
			s.dur[n.Index] = max(MinOpTime, call.time)
		case s.conv.GrapplerTimes:
			t, unmodelled := s.cache.grapplerTime(est, copied, n, s.shp, s.p, !onHost)
			s.dur[n.Index] = t
			if unmodelled {
				if s.res.GrapplerUnmodelled == nil {
					s.res.GrapplerUnmodelled = map[string]int{}
				}
				s.res.GrapplerUnmodelled[n.Op]++
			}
		case ok && same:
			s.dur[n.Index] = max(MinOpTime, m)
			s.res.MeasuredNodes++
		case ok && s.opts.ScaleMeasured:
			s.dur[n.Index] = OpTime(e, s.p, onHost, tf32)
			scaled = append(scaled, n.Index)
			scaledNS = append(scaledNS, m)
			estSum += float64(s.dur[n.Index])
			measSum += float64(m)
		default:
			s.dur[n.Index] = OpTime(e, s.p, onHost, tf32)
		}
		if s.inlineOK != nil && onHost && e.Kind == KindNoKernel && !isCall && s.dur[n.Index] <= MinOpTime {
			s.inlineOK[n.Index] = true
		}
		if !s.conv.NoWorkspace && !onHost {
			s.wsz[n.Index] = e.Workspace
		}
		if isCall {
			s.wsz[n.Index] = call.transient
		}
		for port := 0; port < numOutputs(n); port++ {
			t := graphdef.Tensor{Node: n, Port: port}
			if dt, ok := t.DataType(); ok && (graphdef.IsHandle(dt) || graphdef.IsRef(dt)) {
				continue
			}
			if _, ok := s.shp.Bytes(t); !ok {
				s.res.UnsizedTensors++
			}
		}
		s.countInputs(n)
		if s.conv.BothBranches && isCondMerge(n) && s.pend[n.Index] > 1 {
			if s.merges == nil {
				s.merges = make([]vsMerge, len(g.Nodes))
			}
			s.merges[n.Index].runs = s.pend[n.Index]
		}
	}
	if len(scaled) > 0 && measSum > 0 {
		f := estSum / measSum
		for i, idx := range scaled {
			s.dur[idx] = max(MinOpTime, int64(math.Round(float64(scaledNS[i])*f)))
		}
		s.res.MeasuredNodes += len(scaled)
		s.res.MeasuredScaled = len(scaled)
		s.res.MeasuredScale = f
	}
	// Resident buffers: every variable of the graph (variables live in the session whether
	// or not this step reads them) and the constants the step runs.
	if !s.conv.NoResidentVariables {
		for _, n := range g.Nodes {
			var b int64
			var ok bool
			kind := kindVariable
			switch {
			case isVariableOp(n.Op):
				b, ok = variableBytes(n)
			case (n.Op == "Const" || n.Op == "HostConst") && incl[n.Index]:
				b, ok = s.shp.Bytes(graphdef.Tensor{Node: n, Port: 0})
				kind = kindConstant
			}
			if !ok || b == 0 {
				continue
			}
			id := s.newBuffer(b, s.dev[n.Index], n.Index, 0, kind, 0)
			s.bufs[id].resident = true
			s.devs[s.dev[n.Index]].resident += b
			s.resid[n.Index] = id
		}
	}
	s.acc = s.findAccumulators()
	if s.conv.MergeReruns {
		s.findLoopMerges()
	}
	s.makeEngines()
	for _, n := range g.Nodes {
		if incl[n.Index] && s.pend[n.Index] == 0 {
			s.makeReady(n.Index, 0)
		}
	}
	return nil
}

// simScratch holds the per-node and per-output lists of a simulation's set-up, kept by a
// SetupCache for the next simulation with it: a planning simulates hundreds of graphs of
// about the same size one after another, and allocating the lists afresh for each was about
// a tenth of the memory planning ResNet-50 at 4x its batch allocated. No result refers to
// them (the simulation copies what it reports).
type simScratch struct {
	dev, tie, pend, lastX, outOf, wsBuf, resid, outB, xfirst []int32
	dur, wsz, ready, start                                   []int64
	picked                                                   []pickKey
	inlined, inlineOK, newB                                  []bool
}

// zeroed returns (*p)[:n] cleared when it has room for n, or else a new list of n that it
// keeps in *p.
func zeroed[T any](p *[]T, n int) []T {
	if cap(*p) >= n {
		l := (*p)[:n]
		clear(l)
		return l
	}
	*p = make([]T, n)
	return *p
}

// usEvent is a change of a device's memory in microsecondPeak: delta bytes at microsecond t.
type usEvent struct {
	t     int64
	delta int64
}

// sortUsEvents returns evs in order by time, the order of events of one time unspecified: by
// a radix sort on the time (a few passes for a step of seconds, where a comparison sort of a
// device's thousands of events was 1.3% of the CPU profile of planning ResNet-50 at 4x its
// batch), or by comparison for short lists and negative times.
func sortUsEvents(evs []usEvent) []usEvent {
	var hi int64
	for _, e := range evs {
		if e.t < 0 {
			hi = -1
			break
		}
		hi = max(hi, e.t)
	}
	if len(evs) < 256 || hi < 0 {
		slices.SortFunc(evs, func(a, b usEvent) int { return cmp.Compare(a.t, b.t) })
		return evs
	}
	return radix.Sort(evs, hi, func(e usEvent) int64 { return e.t })
}

// countInputs sets the number of inputs n waits for. Inputs from a branch not taken never
// arrive (a Merge waits for the branch taken).
func (s *sim) countInputs(n *graphdef.Node) {
	for _, in := range n.Inputs {
		if !isBackEdgeSource(in.Node) && s.incl[in.Node.Index] {
			s.pend[n.Index]++
		}
	}
	for _, c := range n.ControlInputs {
		if !isBackEdgeSource(c) && s.incl[c.Index] {
			s.pend[n.Index]++
		}
	}
}

// vsDeviceName is a device's name as the VirtualScheduler spells it in the _Send and _Recv
// nodes it adds: the full name with ':' replaced by '_'.
func vsDeviceName(name string) string {
	d, _ := graphdef.ParseDevice(name)
	if d.Job == "" {
		d.Job = "localhost"
	}
	if d.Replica < 0 {
		d.Replica = 0
	}
	if d.Task < 0 {
		d.Task = 0
	}
	return strings.ReplaceAll(d.String(), ":", "_")
}

// nameRanks ranks the nodes by name for TieByName; with RecvOps, the _Recv nodes the
// VirtualScheduler would add ("Recv_<node>_<port>_on_<device>") are ranked among them, and
// its _Sends among themselves.
func (s *sim) nameRanks() {
	g := s.g
	// With RecvOps, the transfers are found first, so that the lists of names are made at
	// their size: grown by appends, they were copied again and again (at 1M nodes, with
	// 0.34M transfers, the growth was 0.29 s of the 1.95 s the default rewrite's two
	// simulations by Grappler's accounting spent here).
	var keys []xkey
	if s.conv.RecvOps {
		// The devices a transfer of the current output goes to: add is called for one
		// output's consumers at a time, so a transfer is listed once per output and device.
		var seen []int32
		add := func(p *graphdef.Node, port int, c *graphdef.Node) {
			if !s.incl[c.Index] || s.dev[c.Index] == s.dev[p.Index] {
				return
			}
			k := xkey{int32(p.Index), int32(port), s.dev[c.Index]}
			if slices.Contains(seen, k.dev) {
				return
			}
			seen = append(seen, k.dev)
			keys = append(keys, k)
		}
		for _, n := range g.Nodes {
			if !s.incl[n.Index] || isBackEdgeSource(n) {
				continue
			}
			for port, uses := range n.Consumers {
				seen = seen[:0]
				for _, u := range uses {
					if s.reads(u.Node.Index) {
						add(n, port, u.Node)
					}
				}
			}
		}
	}
	all := make([]named, 0, len(g.Nodes)+len(keys))
	for _, n := range g.Nodes {
		all = append(all, named{name: n.Name, node: int32(n.Index)})
	}
	var sends []named
	if len(keys) > 0 {
		sends = make([]named, 0, len(keys))
		vs := make([]string, len(s.devs)) // vsDeviceName by device, made once
		vsName := func(d int32) string {
			if vs[d] == "" {
				vs[d] = vsDeviceName(s.devs[d].name)
			}
			return vs[d]
		}
		for _, k := range keys {
			// Each name is made by one concatenation (the producer's name, then the port's
			// suffix).
			p := g.Nodes[k.node]
			sfx := "_minus1"
			if k.port >= 0 {
				sfx = portSuffix(int(k.port))
			}
			from, to := vsName(s.dev[k.node]), vsName(k.dev)
			all = append(all, named{name: "Recv_" + p.Name + sfx + "_on_" + to, node: -1, key: k})
			sends = append(sends, named{name: "Send_" + p.Name + sfx + "_from_" + from + "_to_" + to, node: -1, key: k})
		}
	}
	if len(sends) > 0 {
		// One entry per transfer in each: made at their size rather than grown.
		s.recvTie = make(map[xkey]int32, len(sends))
		s.sendTie = make(map[xkey]int32, len(sends))
	}
	for r, i := range s.byName(all) {
		if x := all[i]; x.node >= 0 {
			s.tie[x.node] = int32(r)
		} else {
			s.recvTie[x.key] = int32(r)
		}
	}
	for r, i := range byName(sends) {
		s.sendTie[sends[i].key] = int32(r)
	}
}

// portSuffixes are portSuffix's answers for the first ports.
var portSuffixes = func() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = "_" + strconv.Itoa(i)
	}
	return out
}()

// portSuffix returns "_" and port in decimal (port >= 0), without allocating for the first
// ports.
func portSuffix(port int) string {
	if port < len(portSuffixes) {
		return portSuffixes[port]
	}
	return "_" + strconv.Itoa(port)
}

// byName returns byName(all), all beginning with g's nodes: with a SetupCache whose original
// nodes' names g's first nodes have, the original nodes' order is the cache's and only the
// rest are sorted, then merged with them.
func (s *sim) byName(all []named) []int32 {
	c := s.cache
	if c == nil || len(all) < len(c.g.Nodes) {
		return byName(all)
	}
	n0 := len(c.g.Nodes)
	for i, o := range c.g.Nodes {
		if all[i].node != int32(i) || all[i].name != o.Name {
			return byName(all)
		}
	}
	base := c.originalByName()
	rest := byName(all[n0:])
	order := make([]int32, 0, len(all))
	i := 0
	for _, k := range rest {
		// The rest are few: each goes after the original nodes whose names are not greater
		// (equal names keep the order of all: the original node first), found by binary
		// search rather than by comparing every original name.
		r := int32(n0) + k
		name := all[r].name
		at := i + sort.Search(len(base)-i, func(x int) bool { return all[base[i+x]].name > name })
		order = append(order, base[i:at]...)
		order = append(order, r)
		i = at
	}
	return append(order, base[i:]...)
}

// named is an op of the simulated step by its name, for nameRanks: a graph node, or (node
// -1) a Recv or Send op the runtime adds, by the transfer it serves.
type named struct {
	name string
	node int32 // >= 0: a graph node
	key  xkey
}

// byName returns the indices of xs in the order of their names, equal names in the order
// of xs: the order a stable sort by name gives, found by sorting indices (a million-node
// graph's entries are not moved).
func byName(xs []named) []int32 {
	order := make([]int32, len(xs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := strings.Compare(xs[a].name, xs[b].name); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

func isFeed(op string) bool { return op == "Placeholder" || op == "PlaceholderWithDefault" }

func isVariableOp(op string) bool {
	return op == "VarHandleOp" || op == "VariableV2" || op == "Variable"
}

func numOutputs(n *graphdef.Node) int {
	if len(n.OutputTypes) > 0 {
		return len(n.OutputTypes)
	}
	return len(n.Consumers)
}

func (s *sim) newEngine(d *simDevice, h2d bool) int32 {
	dir := "D2H"
	if h2d {
		dir = "H2D"
	}
	s.engs = append(s.engs, &copyEngine{name: d.name + " " + dir, dev: int32(len(s.devs)), h2d: h2d})
	for i, dd := range s.devs {
		if dd == d {
			s.engs[len(s.engs)-1].dev = int32(i)
		}
	}
	return int32(len(s.engs) - 1)
}

// tensorBytes returns the size the simulation gives tensor (n, port).
func (s *sim) tensorBytes(n *graphdef.Node, port int) int64 {
	t := graphdef.Tensor{Node: n, Port: port}
	dt, ok := t.DataType()
	if !ok {
		return 0
	}
	if s.acc != nil && len(s.acc.whileOut) > 0 {
		if b, ok := s.acc.whileOut[[2]int32{int32(n.Index), int32(port)}]; ok {
			return b
		}
	}
	if graphdef.IsHandle(dt) {
		return 0
	}
	if s.conv.UnknownDimsAsOne {
		elem, ok := graphdef.ElementBytes(dt)
		if !ok {
			return 0
		}
		return elementsMin1(s.shp.Out(n, port)) * elem
	}
	b, ok := s.shp.Bytes(t)
	if !ok {
		// A measured profile may know the size the shapes do not.
		b, _ = s.opts.Measured.outputBytes(n, port)
	}
	return b
}

func (s *sim) newBuffer(bytes int64, dev int32, node, port int, kind uint8, t int64) int32 {
	s.bufs = append(s.bufs, buffer{bytes: bytes, allocT: t, dev: dev, node: int32(node), port: int32(port), kind: kind, freeEv: -1})
	id := int32(len(s.bufs) - 1)
	d := s.devs[dev]
	d.cur += bytes
	d.log = append(d.log, memEv{t: t, delta: bytes, buf: id})
	s.bufs[id].allocEv = int32(len(d.log) - 1)
	if d.cur > d.peak {
		d.peak, d.peakT, d.peakEv = d.cur, t, int32(len(d.log)-1)
	}
	return id
}

// unref drops one reference to buffer id at time t, now or (DelayedFree) after the ops
// starting at t have allocated.
func (s *sim) unref(id int32, t int64) {
	if id < 0 {
		return
	}
	if s.conv.DelayedFree {
		s.deferred = append(s.deferred, id)
		return
	}
	s.release(id, t)
}

func (s *sim) release(id int32, t int64) {
	if id < 0 {
		return
	}
	b := &s.bufs[id]
	if b.resident {
		return
	}
	b.refs--
	if b.refs > 0 {
		return
	}
	if b.refs < 0 {
		panic(fmt.Sprintf("cost: buffer of %s released too often", s.bufName(id)))
	}
	d := s.devs[b.dev]
	d.cur -= b.bytes
	d.log = append(d.log, memEv{t: t, delta: -b.bytes, buf: id})
	b.freeEv = int32(len(d.log) - 1)
}

func (s *sim) bufName(id int32) string { return s.nameOf(s.bufs[id]) }

func (s *sim) nameOf(b buffer) string {
	if b.node < 0 {
		return "?"
	}
	n := s.g.Nodes[b.node]
	switch b.kind {
	case kindVariable, kindConstant, kindWorkspace, kindAccumulator:
		return n.Name
	}
	if b.port < 0 {
		return "^" + n.Name // a control message
	}
	return n.Name + ":" + strconv.Itoa(int(b.port))
}

func (s *sim) push(t int64, kind uint8, id int32) {
	s.seq++
	s.evq.Push(event{t: t, seq: s.seq, kind: kind, id: id})
}

func (s *sim) makeReady(node int, t int64) {
	d := s.devs[s.dev[node]]
	it := timed{at: t, seq: s.tie[node], id: int32(node)}
	if s.inlineOK != nil && s.inlineOK[node] {
		d.inline.Push(it)
	} else {
		d.ready.Push(it)
	}
	d.dirty = true
}

// arrive delivers one input (data or control) of node at time t, through transfer x (-1 for
// a same-device input), from a producer that became ready at from.ready with tie rank
// from.tie. A node becomes ready when its last input has arrived. With RecvOps that is the
// VirtualScheduler's rule, which takes the time the input whose producer it marks executed
// last (the largest pickKey) arrives: on one device that is the last to arrive, but a control
// input from another device (which has no _Recv) may be marked after an input that arrives
// later (SchedulerState::GetOutputNodes sets time_ready when the last input is marked).
func (s *sim) arrive(node int, t int64, x int32, from pickKey) {
	s.pend[node]--
	if s.merges != nil && s.merges[node].runs > 0 {
		// A conditional's Merge runs again for every input that arrives (vsMerge).
		s.ready[node], s.lastX[node] = t, x
		s.makeReady(node, t)
		return
	}
	if s.conv.RecvOps {
		if p := s.picked[node]; from.ready > p.ready || from.ready == p.ready && from.tie >= p.tie {
			s.picked[node] = from
			s.ready[node] = t
			s.lastX[node] = x
		}
	} else if t >= s.ready[node] {
		s.ready[node] = t
		s.lastX[node] = x
	}
	if s.pend[node] == 0 {
		s.makeReady(node, s.ready[node])
	}
}

// key returns the pickKey of node as a producer.
func (s *sim) key(node int) pickKey { return pickKey{s.ready[node], s.tie[node]} }

// inputBuf returns the buffer node reads as data input i on its own device: the producer's
// buffer, or the received copy, or -1.
func (s *sim) inputBuf(n *graphdef.Node, i int) int32 {
	t := n.Inputs[i]
	if s.dev[t.Node.Index] == s.dev[n.Index] {
		return s.outB[s.outOf[t.Node.Index]+int32(t.Port)]
	}
	if x := s.findXfer(t.Node.Index, t.Port, s.dev[n.Index]); x >= 0 {
		return s.xfers[x].dstBuf
	}
	return -1
}

// xslot returns the xfirst slot of the transfers of (node, port): its output's, or for port
// -1 (a control message) the node's; false for a port past the node's outputs.
func (s *sim) xslot(node, port int) (int, bool) {
	if port < 0 {
		return int(s.outOf[len(s.outOf)-1]) + node, true
	}
	o := int(s.outOf[node]) + port
	return o, o < int(s.outOf[node+1])
}

// findXfer returns the transfer of (node, port) to device dst, or -1 for none.
func (s *sim) findXfer(node, port int, dst int32) int32 {
	slot, ok := s.xslot(node, port)
	if !ok {
		if x, ok := s.xmore[xkey{int32(node), int32(port), dst}]; ok {
			return x
		}
		return -1
	}
	for x := s.xfirst[slot]; x >= 0; x = s.xfers[x].next {
		if s.xfers[x].dst == dst {
			return x
		}
	}
	return -1
}

// uses counts the references a new output buffer of (n, port) starts with: one per consumer
// edge on n's device, plus one per receiving device (released when the transfer completes)
// or, with TransientRecv, one per consumer edge on other devices (released when that
// consumer finishes).
func (s *sim) uses(n *graphdef.Node, port int) int32 {
	if port >= len(n.Consumers) {
		return 0
	}
	var local, remote int32
	var devs []int32
	for _, u := range n.Consumers[port] {
		if !s.reads(u.Node.Index) {
			continue
		}
		dv := s.dev[u.Node.Index]
		if dv == s.dev[n.Index] {
			local++
			continue
		}
		if s.conv.TransientRecv {
			remote++
			continue
		}
		seen := false
		for _, d := range devs {
			seen = seen || d == dv
		}
		if !seen {
			devs = append(devs, dv)
			remote++
		}
	}
	return local + remote
}

// residentOf returns the resident buffer output port of n reads, or -1: a constant's own
// buffer, a ref variable's, or for ReadVariableOp the variable's when it is on the same
// device.
func (s *sim) residentOf(n *graphdef.Node, port int) int32 {
	if s.conv.NoResidentVariables {
		return -1
	}
	switch n.Op {
	case "Const", "HostConst", "VariableV2", "Variable":
		return s.resid[n.Index]
	case "ReadVariableOp":
		v := n.Inputs[0].Node
		for !isVariableOp(v.Op) && aliasInput(v.Op, 0) == 0 && len(v.Inputs) > 0 {
			v = v.Inputs[0].Node
		}
		if isVariableOp(v.Op) && s.dev[v.Index] == s.dev[n.Index] {
			return s.resid[v.Index]
		}
	}
	return -1
}

func (s *sim) startOp(node int, t int64) {
	n := s.g.Nodes[node]
	dv := s.dev[node]
	d := s.devs[dv]
	off := s.outOf[node]
	nOut := numOutputs(n)
	if s.pruned != nil && s.pruned[node] {
		nOut = 0 // a NoOp
	}
	if m := s.merges; m != nil && m[node].runs > 0 {
		m[node].started++
		if m[node].started > 1 {
			// A Merge run again keeps the outputs of its first run (vsMerge).
			nOut = 0
		} else {
			s.start[node] = t
		}
	} else {
		s.start[node] = t
	}
	for port := 0; port < nOut; port++ {
		u := s.uses(n, port)
		if r := s.residentOf(n, port); r >= 0 {
			s.outB[off+int32(port)] = r
			continue
		}
		size := s.tensorBytes(n, port)
		if !s.conv.NoAliasing {
			i := aliasInput(n.Op, port)
			if port == 0 && (n.Op == "Merge" || n.Op == "RefMerge") {
				i = s.mergedInput(n)
			}
			if i >= 0 && i < len(n.Inputs) {
				if b := s.inputBuf(n, i); b >= 0 && s.bufs[b].dev == dv {
					s.outB[off+int32(port)] = b
					s.bufs[b].refs += u
					continue
				}
			}
		}
		if !s.conv.NoForwarding && port == 0 && (elementwiseOps[n.Op] || forwardsInput0Ops[n.Op]) && size > 0 {
			only := -1
			if forwardsInput0Ops[n.Op] {
				only = 0
			}
			if b := s.forwardable(n, size, only); b >= 0 {
				// The buffer now holds n's output: from now on it is reported under n's name.
				s.outB[off+int32(port)] = b
				s.bufs[b].refs += u
				s.renames[b] = append(s.renames[b], rename{ev: int32(len(d.log)), node: int32(node), prev: s.bufs[b]})
				s.bufs[b].node, s.bufs[b].port, s.bufs[b].kind = int32(node), 0, kindActivation
				continue
			}
		}
		if size <= 0 {
			continue
		}
		b := s.newBuffer(size, dv, node, port, kindActivation, t)
		s.bufs[b].refs = u + 1 // the op holds it until it finishes
		s.outB[off+int32(port)] = b
		s.newB[off+int32(port)] = true
	}
	if s.wsz[node] > 0 {
		b := s.newBuffer(s.wsz[node], dv, node, 0, kindWorkspace, t)
		s.bufs[b].refs = 1
		s.wsBuf[node] = b
	}
	if s.acc != nil {
		s.accumulatorPushed(node, t)
	}
	d.res.Ops++
	d.res.BusyTime += s.dur[node]
	if !s.inlined[node] {
		d.busy = true
		d.kernel = s.inlineOK == nil || !s.inlineOK[node]
	}
	s.push(t+s.dur[node], evOpDone, int32(node))
}

// vsMerge is how Grappler's VirtualScheduler runs the Merge of a v1 conditional, both of whose
// branches it runs (Conventions.BothBranches): the Merge becomes ready as soon as one input
// arrives, and runs again each time another arrives (SchedulerState::GetOutputNodes makes a
// Merge ready on every input, MarkNodeExecuted runs it again without scheduling its outputs).
// Its first run allocates its output and hands it to its consumers; the step's trace gives
// the Merge one span, from its first run's start to its last run's end, so that GraphMemory
// keeps its output and every input, the paired zero gradient of the side not taken beside
// the gradient of the side taken, live until the last input has arrived and the Merge has run
// again. A while loop's Merge (Conventions.MergeReruns) runs so too: on its Enter, and again
// when the loop's NextIteration, whose tensor it then releases, ends; so GraphMemory keeps the
// Enter's tensor and the Merge's output until the loop's body has run.
type vsMerge struct {
	runs     int32 // the inputs the step runs, each of which runs the Merge once
	started  int32
	finished int32
	loop     bool // a while loop's Merge, run again by its NextIteration
}

// isCondMerge reports whether n is a conditional's Merge: a Merge no loop's NextIteration feeds.
func isCondMerge(n *graphdef.Node) bool {
	if n.Op != "Merge" && n.Op != "RefMerge" {
		return false
	}
	for _, in := range n.Inputs {
		if isBackEdgeSource(in.Node) {
			return false
		}
	}
	return true
}

// mergedInput returns the data input whose tensor the Merge n forwards as its output: the
// first input the step runs that has reached n's device (MergeOp::Compute sets output 0 to
// its one live input, a buffer shared, not copied). An input from a branch not taken never
// arrives and holds no buffer; with BothBranches every input arrives and the first is kept.
// It returns -1 when no input has a buffer.
func (s *sim) mergedInput(n *graphdef.Node) int {
	for i, in := range n.Inputs {
		if !s.incl[in.Node.Index] {
			continue
		}
		if s.inputBuf(n, i) >= 0 {
			return i
		}
	}
	return -1
}

// forwardable returns an input buffer n may write its output into: on n's device, not
// resident, of the output's size and dtype, and referenced only by this one input of n; only
// input only when only >= 0.
func (s *sim) forwardable(n *graphdef.Node, size int64, only int) int32 {
	out, _ := graphdef.Tensor{Node: n, Port: 0}.DataType()
	for i, t := range n.Inputs {
		if only >= 0 && i != only {
			continue
		}
		b := s.inputBuf(n, i)
		if b < 0 {
			continue
		}
		bb := s.bufs[b]
		if bb.resident || bb.dev != s.dev[n.Index] || bb.bytes != size || bb.refs != 1 || bb.kind == kindWorkspace {
			continue
		}
		if bb.node >= 0 && isFeed(s.g.Nodes[bb.node].Op) {
			continue // the caller of Session.run still holds a fed tensor
		}
		if dt, ok := t.DataType(); !ok || graphdef.BaseType(dt) != graphdef.BaseType(out) {
			continue
		}
		return b
	}
	return -1
}

func (s *sim) finishOp(node int, t int64) {
	n := s.g.Nodes[node]
	dv := s.dev[node]
	d := s.devs[dv]
	if !s.inlined[node] {
		d.busy = false
		d.idleSince = t
	}
	d.dirty = true
	if t > d.res.End {
		d.res.End = t
	}
	if m := s.merges; m != nil && m[node].runs > 0 {
		m[node].finished++
		if m[node].finished < m[node].runs {
			// Not the Merge's last run: it holds its inputs and outputs until then, and only
			// its first run delivers its outputs (vsMerge).
			if m[node].finished == 1 {
				s.deliver(node, t)
			}
			return
		}
	}
	if s.tl != nil {
		s.tl.Ops = append(s.tl.Ops, OpSpan{Node: n, Device: int(dv), Start: s.start[node], End: t})
	}
	// Release the inputs (a NoOp holds none; a loop's Merge run again the NextIteration's).
	loop := s.merges != nil && s.merges[node].loop
	for i, in := range n.Inputs {
		if isBackEdgeSource(in.Node) && !loop || !s.reads(node) {
			continue
		}
		if s.dev[in.Node.Index] != dv && s.conv.TransientRecv {
			s.unref(s.outB[s.outOf[in.Node.Index]+int32(in.Port)], t)
			continue
		}
		s.unref(s.inputBuf(n, i), t)
	}
	off := s.outOf[node]
	for port := 0; port < numOutputs(n); port++ {
		if s.newB[off+int32(port)] {
			s.unref(s.outB[off+int32(port)], t)
		}
	}
	s.unref(s.wsBuf[node], t)
	if s.acc != nil {
		s.accumulatorFinished(node, t)
	}
	if isBackEdgeSource(n) {
		if m := s.merges; m != nil {
			// The tensor goes back to the loop's Merge, which runs again (MergeReruns).
			for _, uses := range n.Consumers {
				for _, u := range uses {
					if c := u.Node.Index; m[c].loop && s.dev[c] == dv {
						s.ready[c], s.lastX[c] = t, -1
						s.makeReady(c, t)
					}
				}
			}
		}
		return
	}
	if m := s.merges; m != nil && m[node].runs > 1 {
		return // delivered by its first run
	}
	s.deliver(node, t)
}

// deliver hands the outputs of node, which finished at t, to its consumers.
func (s *sim) deliver(node int, t int64) {
	n := s.g.Nodes[node]
	dv := s.dev[node]
	for port, uses := range n.Consumers {
		for _, u := range uses {
			c := u.Node.Index
			if !s.incl[c] {
				continue
			}
			if s.dev[c] == dv || !s.reads(c) && s.conv.RecvOps {
				s.arrive(c, t, -1, s.key(node))
				continue
			}
			p := port
			if !s.reads(c) {
				p = -1 // a NoOp's input is a control edge: a message, not the tensor
			}
			x := s.transfer(node, p, s.dev[c], t)
			s.xfers[x].waiters = append(s.xfers[x].waiters, int32(c))
		}
	}
	for _, c := range n.ControlOutputs {
		if !s.incl[c.Index] {
			continue
		}
		if s.dev[c.Index] == dv || s.conv.RecvOps {
			// The VirtualScheduler adds no _Send/_Recv for a control input from another
			// device: it treats it as an edge on one device (SchedulerState::Init).
			s.arrive(c.Index, t, -1, s.key(node))
			continue
		}
		x := s.transfer(node, -1, s.dev[c.Index], t)
		s.xfers[x].waiters = append(s.xfers[x].waiters, int32(c.Index))
	}
}

// transfer returns the transfer of tensor (node, port) (port -1: a control message) to
// device dst, creating and enqueueing it at time t the first time it is asked for: TensorFlow
// sends a tensor once to each device that reads it.
func (s *sim) transfer(node, port int, dst int32, t int64) int32 {
	k := xkey{int32(node), int32(port), dst}
	if x := s.findXfer(node, port, dst); x >= 0 {
		return x
	}
	n := s.g.Nodes[node]
	src := s.dev[node]
	if len(s.xslab) == cap(s.xslab) {
		// A new slab, as large as the transfers so far (16 to 8192): its elements never move.
		s.xslab = make([]xfer, 0, min(max(len(s.xfers), 16), 8192))
	}
	s.xslab = append(s.xslab, xfer{node: int32(node), port: int32(port), src: src, dst: dst, engine: -1, next: -1, channel: -1, srcBuf: -1, dstBuf: -1, enq: t})
	x := &s.xslab[len(s.xslab)-1]
	if port >= 0 {
		x.srcBuf = s.outB[s.outOf[node]+int32(port)]
		if x.srcBuf >= 0 {
			x.bytes = s.bufs[x.srcBuf].bytes
		} else {
			x.bytes = s.tensorBytes(n, port)
		}
	}
	id := int32(len(s.xfers))
	s.xfers = append(s.xfers, x)
	if slot, ok := s.xslot(node, port); ok {
		x.next, s.xfirst[slot] = s.xfirst[slot], id
	} else {
		if s.xmore == nil {
			s.xmore = map[xkey]int32{}
		}
		s.xmore[k] = id
	}
	if s.conv.RecvOps {
		// The _Send queues on the channel from src to dst; the _Recv follows (sendDone).
		key := [2]int32{src, dst}
		ci, ok := s.chanIdx[key]
		if !ok {
			ci = int32(len(s.chans))
			s.chans = append(s.chans, &channel{})
			s.chanIdx[key] = ci
		}
		x.channel = ci
		ch := s.chans[ci]
		ch.ready.Push(timed{at: t, seq: s.sendTie[k], id: id})
		ch.dirty = true
		return id
	}
	sd, dd := s.devs[src], s.devs[dst]
	switch {
	case sd.gpu:
		x.engine = sd.d2h // device to host (or to a peer GPU)
	case dd.gpu:
		x.engine = dd.h2d
	}
	if port >= 0 && x.bytes > 0 {
		// The receiving side allocates the destination buffer when the tensor is ready to be
		// sent (TensorFlow's _Recv allocates it when the rendezvous delivers the tensor).
		b := s.newBuffer(x.bytes, dst, node, port, kindCopy, t)
		refs := int32(1) // held by the transfer
		if !s.conv.TransientRecv {
			for _, u := range n.Consumers[port] {
				if s.reads(u.Node.Index) && s.dev[u.Node.Index] == dst {
					refs++
				}
			}
		}
		s.bufs[b].refs = refs
		x.dstBuf = b
	}
	if x.engine < 0 || s.conv.InstantTransfers {
		x.start, x.end = t, t
		s.push(t, evXferDone, id)
		return id
	}
	// The fixed latency (issuing the copy, TensorFlow's rendezvous) passes before the copy
	// joins its engine's queue; the engine is then busy for bytes / bandwidth.
	s.push(t+ceilNS(s.p.TransferLatency), evXferQueued, id)
	return id
}

func (s *sim) queueXfer(id int32, t int64) {
	e := s.engs[s.xfers[id].engine]
	e.queue = append(e.queue, id)
	if !e.busy {
		s.startXfer(e, t)
	}
}

func (s *sim) xferDuration(x *xfer) int64 {
	bw := s.p.D2H
	if s.engs[x.engine].h2d || (!s.devs[x.src].gpu && s.devs[x.dst].gpu) {
		bw = s.p.H2D
	}
	return ceilNS(float64(x.bytes) / bw)
}

func (s *sim) startXfer(e *copyEngine, t int64) {
	if e.head >= len(e.queue) {
		return
	}
	id := e.queue[e.head]
	e.head++
	x := s.xfers[id]
	x.start = t
	x.end = t + s.xferDuration(x)
	e.busy = true
	s.push(x.end, evXferDone, id)
}

func (s *sim) finishXfer(id int32, t int64) {
	x := s.xfers[id]
	if x.engine >= 0 && !s.conv.InstantTransfers {
		e := s.engs[x.engine]
		e.busy = false
		s.startXfer(e, t)
	}
	sd, dd := s.devs[x.src], s.devs[x.dst]
	if x.port >= 0 {
		switch {
		case sd.gpu && !dd.gpu:
			s.res.D2H.Count++
			s.res.D2H.Bytes += x.bytes
			s.res.D2H.Busy += x.end - x.start
		case !sd.gpu && dd.gpu:
			s.res.H2D.Count++
			s.res.H2D.Bytes += x.bytes
			s.res.H2D.Busy += x.end - x.start
		}
	}
	if s.tl != nil && (x.engine >= 0 || x.channel >= 0) {
		name := s.g.Nodes[x.node].Name
		if x.port >= 0 {
			name += ":" + strconv.Itoa(int(x.port))
		} else {
			name = "^" + name
		}
		engine := ""
		if x.engine >= 0 {
			engine = s.engs[x.engine].name
		} else {
			engine = "channel " + s.devs[x.src].name + " to " + s.devs[x.dst].name
		}
		s.tl.Xfers = append(s.tl.Xfers, XferSpan{Tensor: name, Src: int(x.src), Dst: int(x.dst), Engine: engine, Enqueue: x.enq, Start: x.start, End: x.end, Bytes: x.bytes})
	}
	s.unref(x.dstBuf, t)
	if x.port >= 0 && !s.conv.TransientRecv {
		s.unref(x.srcBuf, t)
	}
	// A host-to-device data transfer delivers a swap-in; it is what a stall waits for.
	via := int32(-1)
	if x.port >= 0 && !sd.gpu && dd.gpu {
		via = id
	}
	for _, c := range x.waiters {
		s.arrive(int(c), t, via, x.recvKey)
	}
}

func (s *sim) dispatch(t int64) {
	for di, d := range s.devs {
		if !d.dirty {
			continue
		}
		d.dirty = false
		if d.busy && d.kernel {
			// Ops that launch no kernel run beside the host's kernel (simDevice.inline).
			for d.inline.Len() > 0 {
				node := int(d.inline.Pop().id)
				s.inlined[node] = true
				s.startOp(node, t)
			}
		}
		if d.busy || d.ready.Len()+d.inline.Len() == 0 {
			continue
		}
		var it timed
		if d.inline.Len() > 0 && (d.ready.Len() == 0 || d.inline.Peek().Less(d.ready.Peek())) {
			it = d.inline.Pop()
		} else {
			it = d.ready.Pop()
		}
		if it.id < 0 {
			// A _Recv (RecvOps).
			d.res.IdleTime += t - d.idleSince
			s.startRecv(int32(di), -it.id-1, t)
			continue
		}
		if gap := t - d.idleSince; gap > 0 {
			if s.lastX[it.id] >= 0 {
				d.res.SwapInStall += gap
			} else {
				d.res.IdleTime += gap
			}
		}
		s.startOp(int(it.id), t)
	}
	for _, ch := range s.chans {
		if !ch.dirty {
			continue
		}
		ch.dirty = false
		if ch.busy || ch.ready.Len() == 0 {
			continue
		}
		id := ch.ready.Pop().id
		ch.busy = true
		s.xfers[id].start = t
		s.push(t+MinOpTime, evSendDone, id)
	}
}

// sendDone: a _Send finished on its channel; its _Recv becomes ready on the receiving device.
func (s *sim) sendDone(id int32, t int64) {
	x := s.xfers[id]
	ch := s.chans[x.channel]
	ch.busy, ch.dirty = false, true
	tie, ok := s.recvTie[xkey{x.node, x.port, x.dst}]
	if !ok {
		tie = int32(len(s.g.Nodes)) + id
	}
	d := s.devs[x.dst]
	d.ready.Push(timed{at: t, seq: tie, id: -id - 1})
	d.dirty = true
	x.recvKey = pickKey{t, tie}
}

// startRecv runs a _Recv on its device's stream: it allocates the received copy, held until
// the _Recv ends unless consumers keep it (!TransientRecv). (A control edge between devices
// makes no transfer under RecvOps; were one sent, its message would count 4 bytes, the
// VirtualScheduler's control_message.)
func (s *sim) startRecv(dev int32, id int32, t int64) {
	x := s.xfers[id]
	d := s.devs[dev]
	bytes := x.bytes
	if x.port < 0 {
		bytes = 4
	}
	if bytes > 0 {
		b := s.newBuffer(bytes, dev, int(x.node), int(x.port), kindCopy, t)
		refs := int32(1)
		if !s.conv.TransientRecv && x.port >= 0 {
			for _, u := range s.g.Nodes[x.node].Consumers[x.port] {
				if s.reads(u.Node.Index) && s.dev[u.Node.Index] == dev {
					refs++
				}
			}
		}
		s.bufs[b].refs = refs
		x.dstBuf = b
	}
	d.busy = true
	d.res.BusyTime += MinOpTime
	s.push(t+MinOpTime, evRecvDone, id)
}

func (s *sim) recvDone(id int32, t int64) {
	x := s.xfers[id]
	d := s.devs[x.dst]
	d.busy, d.dirty, d.idleSince = false, true, t
	if t > d.res.End {
		d.res.End = t
	}
	x.end = t
	s.finishXfer(id, t)
}

func (s *sim) run() error {
	s.dispatch(0)
	for s.evq.Len() > 0 {
		t := s.evq.Peek().t
		for s.evq.Len() > 0 && s.evq.Peek().t == t {
			e := s.evq.Pop()
			switch e.kind {
			case evOpDone:
				s.finishOp(int(e.id), t)
			case evXferDone:
				s.finishXfer(e.id, t)
			case evXferQueued:
				s.queueXfer(e.id, t)
			case evSendDone:
				s.sendDone(e.id, t)
			case evRecvDone:
				s.recvDone(e.id, t)
			}
		}
		s.dispatch(t)
		// DelayedFree releases after everything that happens at t, ops of no duration that
		// end at t and what they make ready included (GraphMemory frees at t + 1 ns).
		if s.evq.Len() == 0 || s.evq.Peek().t > t {
			for _, id := range s.deferred {
				s.release(id, t)
			}
			s.deferred = s.deferred[:0]
		}
		if t > s.res.StepTime {
			s.res.StepTime = t
		}
	}
	for _, n := range s.g.Nodes {
		if s.incl[n.Index] && s.pend[n.Index] > 0 {
			return fmt.Errorf("%s: node %q never became ready (%d inputs outstanding): unsupported control flow?", s.g.Source, n.Name, s.pend[n.Index])
		}
	}
	return nil
}

func (s *sim) finish() {
	var gpus, hosts []*simDevice
	for _, d := range s.devs {
		if d.gpu {
			gpus = append(gpus, d)
		} else {
			hosts = append(hosts, d)
		}
	}
	order := append(gpus, hosts...)
	if s.tl != nil {
		s.tl.Memory = make([][]MemPoint, len(order))
	}
	remap := make([]int, len(s.devs))
	for i, d := range order {
		for j, dd := range s.devs {
			if dd == d {
				remap[j] = i
			}
		}
	}
	for i, d := range order {
		r := d.res
		r.PeakBytes, r.PeakTime, r.ResidentBytes = d.peak, d.peakT, d.resident
		if d.peakEv >= 0 {
			r.Live, r.LiveCount = s.liveTensors(d, func(_ int, b *buffer) bool {
				return b.allocEv <= d.peakEv && (b.freeEv < 0 || b.freeEv > d.peakEv)
			})
		}
		if s.conv.DelayedFree {
			s.microsecondPeak(d, &r)
		}
		rr := r
		s.res.Devices = append(s.res.Devices, &rr)
		if s.tl != nil {
			var pts []MemPoint
			var cur int64
			for _, ev := range d.log {
				cur += ev.delta
				if k := len(pts); k > 0 && pts[k-1].T == ev.t {
					pts[k-1].Bytes = cur
					pts[k-1].Max = max(pts[k-1].Max, cur)
					continue
				}
				pts = append(pts, MemPoint{T: ev.t, Bytes: cur, Max: cur})
			}
			s.tl.Memory[i] = pts
		}
	}
	if s.tl != nil {
		for i := range s.tl.Ops {
			s.tl.Ops[i].Device = remap[s.tl.Ops[i].Device]
		}
		for i := range s.tl.Xfers {
			s.tl.Xfers[i].Src = remap[s.tl.Xfers[i].Src]
			s.tl.Xfers[i].Dst = remap[s.tl.Xfers[i].Dst]
		}
		s.res.Timeline = s.tl
	}
}

// liveTensors returns the largest buffers of device d that live says were live (at most
// Options.TopLive of them), named after the output each held then, and how many there were.
// Only the buffers that can be among those reported are named and sorted: on a graph of a
// million nodes most of the live buffers are not, and a simulation that reports none
// (TopLive < 0, as Grappler's accounting is run by planners) only counts them.
func (s *sim) liveTensors(d *simDevice, live func(id int, b *buffer) bool) ([]LiveTensor, int) {
	var ids []int32
	for id := range s.bufs {
		if b := &s.bufs[id]; s.devs[b.dev] == d && live(id, b) {
			ids = append(ids, int32(id))
		}
	}
	n := len(ids)
	if s.opts.TopLive < 0 {
		return nil, n
	}
	if k := s.opts.TopLive; k > 0 && n > k {
		// The first k by size (ties by name) are all at least as large as the k-th largest
		// buffer; keeping every such buffer, in id order, sorts them as the whole list would.
		sizes := make([]int64, n)
		for i, id := range ids {
			sizes[i] = s.bufs[id].bytes
		}
		slices.Sort(sizes)
		least := sizes[n-k]
		kept := ids[:0]
		for _, id := range ids {
			if s.bufs[id].bytes >= least {
				kept = append(kept, id)
			}
		}
		ids = kept
	}
	out := make([]LiveTensor, 0, len(ids))
	for _, id := range ids {
		b := &s.bufs[id]
		// Name the buffer after the output it held at the peak.
		at := *b
		for i := len(s.renames[id]) - 1; i >= 0; i-- {
			if rn := s.renames[id][i]; rn.ev > d.peakEv {
				at = rn.prev
			}
		}
		lt := LiveTensor{Name: s.nameOf(at), Kind: kindNames[at.kind], Bytes: b.bytes, Since: b.allocT}
		if at.node >= 0 {
			lt.Op = s.g.Nodes[at.node].Op
		}
		out = append(out, lt)
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Bytes != out[b].Bytes {
			return out[a].Bytes > out[b].Bytes
		}
		return out[a].Name < out[b].Name
	})
	if s.opts.TopLive > 0 && len(out) > s.opts.TopLive {
		out = out[:s.opts.TopLive]
	}
	return out, n
}

// microsecondPeak sets r's microsecond peak for device d: GraphMemory::InferFromTrace reads
// an op's start as all_start_micros and its end as all_start_micros + op_end_rel_micros,
// the VirtualScheduler's nanosecond times truncated (Costs::NanoSeconds::asMicroSeconds), and
// counts a tensor from its allocation at the start microsecond to its release 1 ns after the
// end microsecond of the last op reading it. A buffer is therefore live in every microsecond
// from floor(allocation / 1000) to floor(release / 1000), where the simulation releases it
// when that last op ends; the peak is the largest sum over one microsecond.
func (s *sim) microsecondPeak(d *simDevice, r *DeviceResult) {
	const never = math.MaxInt64 / 2
	type span struct{ from, to int64 }
	spans := make([]span, len(s.bufs))
	type ev = usEvent
	size := 0 // the events, counted first so that they are allocated once
	for id := range s.bufs {
		if b := &s.bufs[id]; s.devs[b.dev] == d && b.bytes != 0 {
			size += 2
		}
	}
	evs := make([]ev, 0, size)
	for id := range s.bufs {
		b := &s.bufs[id]
		if s.devs[b.dev] != d || b.bytes == 0 {
			continue
		}
		sp := span{from: b.allocT / 1000, to: never}
		if b.resident {
			sp.from = 0
		} else if b.freeEv >= 0 {
			sp.to = d.log[b.freeEv].t / 1000
		}
		spans[id] = sp
		evs = append(evs, ev{sp.from, b.bytes})
		if sp.to < never {
			evs = append(evs, ev{sp.to + 1, -b.bytes})
		}
	}
	if len(evs) == 0 {
		return
	}
	// The order of the events of one microsecond does not matter: the sum is compared only
	// after the last of them.
	evs = sortUsEvents(evs)
	var cur, peak, at int64
	for i, e := range evs {
		cur += e.delta
		if (i+1 == len(evs) || evs[i+1].t != e.t) && cur > peak {
			peak, at = cur, e.t
		}
	}
	r.MicrosecondPeakBytes, r.MicrosecondPeakTime = peak, at*1000
	r.MicrosecondLive, r.MicrosecondLiveCount = s.liveTensors(d, func(id int, b *buffer) bool {
		sp := spans[id]
		return b.bytes > 0 && sp.from <= at && at <= sp.to
	})
}
