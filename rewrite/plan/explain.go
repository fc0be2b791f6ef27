package plan

import (
	"fmt"
	"github.com/tfswap/tfswap/rewrite"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// Explainer collects the reason each planned buffer was chosen, per plan.
type Explainer struct {
	whys map[*rewrite.Plan]map[*buffer]string
}

func newExplainer() *Explainer { return &Explainer{whys: map[*rewrite.Plan]map[*buffer]string{}} }

// record remembers why each choice of plan was made.
func (e *Explainer) record(plan *rewrite.Plan, cs []*choice) {
	if e == nil {
		return
	}
	m := map[*buffer]string{}
	for _, c := range cs {
		m[c.b] = c.why
	}
	e.whys[plan] = m
}

// derive records that plan was derived from src, with a note.
func (e *Explainer) derive(plan, src *rewrite.Plan, note string) {
	if e == nil {
		return
	}
	m := map[*buffer]string{}
	for b, w := range e.whys[src] {
		if note != "" && !strings.HasSuffix(w, note) {
			w += "; " + note
		}
		m[b] = w
	}
	e.whys[plan] = m
}

// TensorExplanation is the reasoning about one swap candidate in the chosen plan.
type TensorExplanation struct {
	// Tensor is the buffer's tensor ("node:port") and Bytes its simulated size.
	Tensor string
	Bytes  int64
	// Swapped says whether the plan swaps it and Recomputed whether its later readers read a
	// recomputed copy; Reason says why (or why not).
	Swapped    bool
	Recomputed bool `json:",omitempty"`
	Reason     string
	// Reads are its reads in the unswapped step and Gaps the idle gaps between them.
	Reads int
	// Out is when its device copy is predicted to be given up (the last read before the gap
	// has ended and the copy to the host is done), ns in the planned step.
	Out int64
	// SwapIns are its swap-ins in the planned step.
	SwapIns []SwapInExplanation
}

// SwapInExplanation is the predicted timing of one swap-in in the planned step (ns).
type SwapInExplanation struct {
	Node     string
	Trigger  string
	Consumer string
	// TriggerEnd is when the trigger ends; CopyStart and CopyEnd the host-to-device copy;
	// ConsumerStart when the first consumer starts; Wait how long the consumer waited for
	// the copy (0 when it arrived in time).
	TriggerEnd, CopyStart, CopyEnd, ConsumerStart, Wait int64
}

// explain returns the reasoning behind the plan of ev.
func (pr *planRun) explain(ev *Evaluation) []TensorExplanation {
	_, tm, err := pr.evaluateTimed(ev.Plan)
	if err != nil {
		return nil
	}
	res := tm.res
	whys := map[*buffer]string{}
	if pr.Explain != nil {
		whys = pr.Explain.whys[ev.Plan]
	}
	// Transfers by tensor name.
	d2hEnd := map[string]int64{}
	h2d := map[string]cost.XferSpan{}
	for _, x := range res.Timeline.Xfers {
		if x.Src < len(res.Devices) && res.Devices[x.Src].GPU && !res.Devices[x.Dst].GPU {
			if x.End > d2hEnd[x.Tensor] {
				d2hEnd[x.Tensor] = x.End
			}
		}
		if !res.Devices[x.Src].GPU && res.Devices[x.Dst].GPU {
			h2d[x.Tensor] = x
		}
	}
	start := map[string][2]int64{}
	for _, op := range res.Timeline.Ops {
		start[op.Node.Name] = [2]int64{op.Start, op.End}
	}
	swappedT := map[graphdef.Tensor]*rewrite.PlannedSwap{}
	for i := range ev.Plan.Swaps {
		swappedT[ev.Plan.Swaps[i].Tensor] = &ev.Plan.Swaps[i]
	}
	var out []TensorExplanation
	for _, b := range pr.buffers {
		te := TensorExplanation{Tensor: b.root.String(), Bytes: b.bytes, Reads: len(b.accesses)}
		var mine []*rewrite.PlannedSwap
		for t, ps := range swappedT {
			if pr.bufOf[t] == b {
				mine = append(mine, ps)
			}
		}
		sort.SliceStable(mine, func(i, j int) bool {
			ti, tj := mine[i].Tensor, mine[j].Tensor
			if ti.Node.TopoIndex != tj.Node.TopoIndex {
				return ti.Node.TopoIndex < tj.Node.TopoIndex
			}
			return ti.Port < tj.Port
		})
		if len(mine) == 0 {
			te.Reason = pr.whyNot(b, ev)
			out = append(out, te)
			continue
		}
		te.Swapped = true
		te.Reason = whys[b]
		if te.Reason == "" {
			te.Reason = "chosen by " + ev.Strategy
		}
		for _, ps := range mine {
			if d, ok := d2hEnd[ps.Tensor.String()]; ok && d > te.Out {
				te.Out = d
			}
			for k, grp := range ps.Groups {
				name := rewrite.SwapNodeName(ps.Tensor, fmt.Sprintf("swap_in_%d", k))
				si := SwapInExplanation{Node: name, Trigger: grp.Trigger.Name, TriggerEnd: start[grp.Trigger.Name][1]}
				first := rewrite.SwapInReaders(grp.Uses)
				c := first[0]
				for _, n := range first {
					if start[n.Name][0] < start[c.Name][0] {
						c = n
					}
				}
				si.Consumer = c.Name
				si.ConsumerStart = start[c.Name][0]
				if x, ok := h2d[name+":0"]; ok {
					si.CopyStart, si.CopyEnd = x.Start, x.End
					if x.End >= si.ConsumerStart {
						// The consumer started when the copy arrived: it may have waited.
						prev := int64(0)
						for _, in := range c.Inputs {
							if in.Node.Name != name {
								if e := start[in.Node.Name][1]; e > prev {
									prev = e
								}
							}
						}
						if w := x.End - max(prev, 0); w > 0 {
							si.Wait = w
						}
					}
				}
				te.SwapIns = append(te.SwapIns, si)
			}
		}
		out = append(out, te)
	}
	return out
}

// whyNot says why buffer b is not swapped by the plan of ev.
func (pr *Problem) whyNot(b *buffer, ev *Evaluation) string {
	splits := b.splits()
	if len(splits) == 0 {
		return "not swapped: no idle gap between its reads"
	}
	ok := false
	for _, k := range splits {
		if _, good := redirects(b.tree, b.accesses[k].start, 1<<62); good {
			ok = true
		}
	}
	if !ok {
		return "not swapped: a read after each gap cannot take a swapped-in copy (another device, control flow)"
	}
	longest := int64(0)
	for _, k := range splits {
		free, due := b.gap(k)
		longest = max(longest, due-free)
	}
	need := pr.fast.xferTime(b.bytes, false) + pr.fast.xferTime(b.bytes, true)
	if longest < need {
		return fmt.Sprintf("not swapped: its longest gap (%s) is shorter than its copies out and back (%s)", cost.FormatDuration(longest), cost.FormatDuration(need))
	}
	if ev == pr.Base {
		return "not swapped: the unswapped step fits the budget"
	}
	return "not swapped: " + ev.Strategy + " meets the budget without it"
}

// withRecomputes puts the recomputations into an explanation: the entry of a recomputed
// tensor (which the swap planner saw with its forward reads only) says how it is remade, and
// recomputed tensors the swap planner did not list are added, the whole in tensor order.
func withRecomputes(exps []TensorExplanation, rcs []rewrite.Recompute, mode string) []TensorExplanation {
	type info struct {
		rc      rewrite.Recompute
		primary bool
		bytes   int64
		readers []string
	}
	byT := map[string]info{}
	for _, rc := range rcs {
		byT[rc.Tensor] = info{rc: rc, primary: true, bytes: rc.Bytes, readers: rc.Consumers}
		for _, x := range rc.Also {
			byT[x.Tensor] = info{rc: rc, bytes: x.Bytes, readers: x.Consumers}
		}
	}
	why := func(in info) string {
		r := fmt.Sprintf("recomputed by %s (copies of %s) after trigger %s, predicted %s in the unswapped step, for %s",
			map[bool]string{true: "its chain", false: "the chain of " + in.rc.Tensor}[in.primary],
			strings.Join(in.rc.Ops, ", "), in.rc.Trigger, cost.FormatDuration(in.rc.CostNS), strings.Join(in.readers, ", "))
		if mode == "max" {
			return r + " (--recompute max)"
		}
		return r + "; the plan with recomputations was predicted faster than the best without"
	}
	seen := map[string]bool{}
	out := make([]TensorExplanation, 0, len(exps)+len(byT))
	for _, e := range exps {
		if in, ok := byT[e.Tensor]; ok && !e.Swapped {
			e.Recomputed, e.Reason = true, why(in)
			seen[e.Tensor] = true
		}
		out = append(out, e)
	}
	var extra []string
	for t := range byT {
		if !seen[t] {
			extra = append(extra, t)
		}
	}
	sort.Strings(extra)
	for _, t := range extra {
		in := byT[t]
		out = append(out, TensorExplanation{Tensor: t, Bytes: in.bytes, Recomputed: true, Reason: why(in)})
	}
	return out
}

// FormatExplanation writes the explanation as text, one paragraph per tensor.
func FormatExplanation(exps []TensorExplanation, bytes func(int64) string) string {
	var w strings.Builder
	ms := cost.FormatDuration
	for _, e := range exps {
		state := "kept"
		if e.Swapped {
			state = "swapped"
		} else if e.Recomputed {
			state = "recomputed"
		}
		reads := "reads"
		if e.Reads == 1 {
			reads = "read"
		}
		fmt.Fprintf(&w, "%s %s %s, %d %s: %s\n", state, e.Tensor, bytes(e.Bytes), e.Reads, reads, e.Reason)
		if e.Swapped {
			fmt.Fprintf(&w, "    out: device copy released at %s (copy to host done)\n", ms(e.Out))
			for _, s := range e.SwapIns {
				fmt.Fprintf(&w, "    in:  %s for %s: trigger %s ends %s, copy %s-%s, consumer starts %s", s.Node, s.Consumer, s.Trigger, ms(s.TriggerEnd), ms(s.CopyStart), ms(s.CopyEnd), ms(s.ConsumerStart))
				if s.Wait > 0 {
					fmt.Fprintf(&w, " (waited %s)", ms(s.Wait))
				}
				w.WriteByte('\n')
			}
		}
	}
	return w.String()
}
