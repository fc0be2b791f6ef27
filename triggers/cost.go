package triggers

import (
	"fmt"
	"sort"

	"github.com/tfswap/tfswap/graphdef"
)

// Times are predicted start and end times of nodes in nanoseconds, indexed by Node.Index
// (for example from a simulated step). A node whose Start is negative, or whose index is out of
// range, did not run.
type Times struct {
	Start, End []int64
}

// StartOf returns n's predicted start, or -1.
func (t *Times) StartOf(n *graphdef.Node) int64 {
	if n.Index >= len(t.Start) {
		return -1
	}
	return t.Start[n.Index]
}

// EndOf returns n's predicted end, or -1.
func (t *Times) EndOf(n *graphdef.Node) int64 {
	if n.Index >= len(t.End) || t.Start[n.Index] < 0 {
		return -1
	}
	return t.End[n.Index]
}

// Transfer is one swap-in's host-to-device copy as the cost-based choice sees it.
type Transfer struct {
	// Producer made the swapped tensor; Consumers read this swap-in.
	Producer  *graphdef.Node
	Consumers []*graphdef.Node
	// Engine names the copy queue that carries the copy (one per GPU, or one per shared host
	// link); copies on one engine run one at a time.
	Engine int
	// Duration is the copy's time on the engine; Latency the fixed time from the trigger's end
	// until the copy joins the queue (the control message to the host, the host-side Identity,
	// the transfer's own set-up).
	Duration, Latency int64
	// Margin is slack kept between the copy's end and the consumer's start.
	Margin int64
}

// Choice is the trigger chosen for one Transfer and the schedule behind it.
type Choice struct {
	Trigger *graphdef.Node
	// Due is when the earliest consumer is predicted to start; Start the latest time the copy
	// may start so that it and every copy queued after it on the engine still finish in time;
	// By the latest end of a trigger that meets Start.
	Due, Start, By int64
	// Late is set when no op on the consumer's ancestry ends by By: the trigger is then the
	// earliest op after the producer, and the consumer is predicted to wait.
	Late bool
}

// ByCost chooses the trigger of each transfer from predicted times: the latest op on the
// earliest consumer's ancestry that still lets the copy finish before the consumer is due,
// given the queue of the copy engine. Copies on one engine are ordered by due time (earliest
// deadline first) and scheduled backwards from the last one, each as late as possible: a copy
// must end by its own due time and before the next copy on the engine starts. So the triggers
// release copies one after another in the order they are needed, and a copy released early
// does not wait behind copies that are needed after it. The result is in the order of ts.
//
// eligible restricts the triggers (see Eligible). A transfer whose consumers did not run gets
// an error.
func ByCost(ts []Transfer, times *Times, eligible Eligible) ([]Choice, error) {
	return ByCostMemo(ts, NewMemo(times), eligible)
}

// Memo remembers ByTime's answers for one Times, so that a planner asking the same question
// again (the same producer, earliest consumer and deadline) does not search again. The
// eligible function must not change between calls.
type Memo struct {
	times *Times
	m     map[memoKey]memoVal
	v     visits
}

type memoKey struct {
	producer, first, minTopo int32
	deadline                 int64
}

type memoVal struct {
	trig *graphdef.Node
	late bool
	err  error
}

// NewMemo returns an empty memo for times.
func NewMemo(times *Times) *Memo { return &Memo{times: times, m: map[memoKey]memoVal{}} }

// ByTime is ByTime with the memo's times, remembered.
func (m *Memo) ByTime(producer *graphdef.Node, consumers []*graphdef.Node, deadline int64, eligible Eligible) (*graphdef.Node, bool, error) {
	if len(consumers) == 0 {
		return ByTime(producer, consumers, deadline, m.times, eligible)
	}
	first := consumerFirst(consumers, m.times)
	minTopo := consumers[0].TopoIndex
	for _, c := range consumers {
		minTopo = min(minTopo, c.TopoIndex)
	}
	k := memoKey{int32(producer.Index), int32(first.Index), int32(minTopo), deadline}
	if v, ok := m.m[k]; ok {
		return v.trig, v.late, v.err
	}
	t, late, err := byTime(&m.v, producer, consumers, deadline, m.times, eligible)
	m.m[k] = memoVal{t, late, err}
	return t, late, err
}

// ByCostMemo is ByCost with a memo of trigger searches.
func ByCostMemo(ts []Transfer, memo *Memo, eligible Eligible) ([]Choice, error) {
	times := memo.times
	out := make([]Choice, len(ts))
	firsts := make([]*graphdef.Node, len(ts))
	for i, tr := range ts {
		if len(tr.Consumers) == 0 {
			return nil, fmt.Errorf("transfer %d has no consumers", i)
		}
		var first *graphdef.Node
		for _, c := range tr.Consumers {
			s := times.StartOf(c)
			if s < 0 {
				return nil, fmt.Errorf("consumer %q did not run", c.Name)
			}
			if first == nil || s < times.StartOf(first) || (s == times.StartOf(first) && c.TopoIndex < first.TopoIndex) {
				first = c
			}
		}
		firsts[i] = first
		out[i].Due = times.StartOf(first)
	}
	// As-late-as-possible schedule per engine, latest due first.
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ia, ib := order[a], order[b]
		if ts[ia].Engine != ts[ib].Engine {
			return ts[ia].Engine < ts[ib].Engine
		}
		if out[ia].Due != out[ib].Due {
			return out[ia].Due > out[ib].Due
		}
		return firsts[ia].TopoIndex > firsts[ib].TopoIndex
	})
	var next int64
	engine := -1
	for _, i := range order {
		if ts[i].Engine != engine {
			engine = ts[i].Engine
			next = int64(1) << 62
		}
		end := min(out[i].Due-ts[i].Margin, next)
		out[i].Start = end - ts[i].Duration
		next = out[i].Start
		out[i].By = out[i].Start - ts[i].Latency
	}
	for i, tr := range ts {
		trig, late, err := memo.ByTime(tr.Producer, tr.Consumers, out[i].By, eligible)
		if err != nil {
			return nil, err
		}
		out[i].Trigger, out[i].Late = trig, late
	}
	return out, nil
}

// ByTime returns the latest eligible op on the earliest consumer's ancestry that descends
// from the producer and ends at or before deadline (ns, in times), the earliest consumer being
// the one predicted to start first. When none does, it returns the earliest eligible such op
// that ends after the producer, and late is set.
func ByTime(producer *graphdef.Node, consumers []*graphdef.Node, deadline int64, times *Times, eligible Eligible) (trig *graphdef.Node, late bool, err error) {
	v := pooledVisits()
	defer visitsPool.Put(v)
	return byTime(v, producer, consumers, deadline, times, eligible)
}

func byTime(v *visits, producer *graphdef.Node, consumers []*graphdef.Node, deadline int64, times *Times, eligible Eligible) (trig *graphdef.Node, late bool, err error) {
	if len(consumers) == 0 {
		return nil, false, fmt.Errorf("no consumers")
	}
	for _, c := range consumers {
		if times.StartOf(c) < 0 {
			return nil, false, fmt.Errorf("consumer %q did not run", c.Name)
		}
	}
	first := consumerFirst(consumers, times)
	notAfter := beforeAll(consumers)
	prodEnd := times.EndOf(producer)
	d := newDescent(producer)
	trig = latest(v, d, first, times.EndOf, deadline, eligible, notAfter)
	if trig != nil && times.EndOf(trig) >= prodEnd {
		return trig, false, nil
	}
	// Nothing on the ancestry ends in time after the producer: take the earliest op after it,
	// and accept the wait.
	if e := earliestAfter(v, d, first, times.EndOf, prodEnd, eligible, notAfter); e != nil {
		return e, times.EndOf(e) > deadline, nil
	}
	if trig != nil {
		return trig, false, nil
	}
	return nil, false, fmt.Errorf("no eligible op on the ancestry of %q after producer %q", first.Name, producer.Name)
}

func consumerFirst(consumers []*graphdef.Node, times *Times) *graphdef.Node {
	var first *graphdef.Node
	for _, c := range consumers {
		s := times.StartOf(c)
		if first == nil || s < times.StartOf(first) || (s == times.StartOf(first) && c.TopoIndex < first.TopoIndex) {
			first = c
		}
	}
	return first
}
