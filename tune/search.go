package tune

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/rewrite"
)

// Defaults of Options.
const (
	DefaultRounds    = 8
	DefaultSteps     = 10
	DefaultTolerance = 0.03
)

// Options control Tune.
type Options struct {
	// Budget is the most memory the compute device may use, as the Predictor counts it.
	Budget int64
	// Rounds bounds the measured rounds of the search for the latest triggers.
	Rounds int
	// Steps is how many steps of each plan a measurement times (interleaved with the
	// reference plan's steps).
	Steps int
	// Tolerance is how much slower than the reference a plan may measure and still count as
	// "no slower" (0.03: 3%), compared as the median of the paired step-time ratios (see
	// Slower).
	Tolerance float64
	// PredictedTime also rejects a plan whose predicted step time exceeds the earliest safe
	// plan's by more than Tolerance, without measuring it. The measured side cannot see
	// copy time where copies are free (the two-device emulation passes a pointer between its
	// devices); the simulator's GPU can.
	PredictedTime bool
	// Report, when set, is called with every round as it ends.
	Report func(Round)
}

func (o Options) withDefaults() Options {
	if o.Rounds <= 0 {
		o.Rounds = DefaultRounds
	}
	if o.Steps <= 0 {
		o.Steps = DefaultSteps
	}
	if o.Tolerance <= 0 {
		o.Tolerance = DefaultTolerance
	}
	return o
}

// Runner runs rewritten models on the real runtime.
type Runner interface {
	// Open prepares a session of m, ready for timed steps (variables initialised, warmed up).
	Open(m *graphdef.Model) (Session, error)
}

// PeakSession is a Session that can also measure the device memory a step uses (on a
// GPU: the allocator's figures in the step's RunMetadata). ok is false when the device
// reports none.
type PeakSession interface {
	Session
	Peak() (bytes int64, ok bool, err error)
}

// Session is an open session of one plan.
type Session interface {
	// Step runs one training step and returns its wall time.
	Step() (time.Duration, error)
	Close() error
}

// Round is one round of tuning, as reported.
type Round struct {
	// N numbers the rounds from 1. Phase is "earliest" (the memory side, predicted), or
	// "latest" (the time side, measured).
	N     int
	Phase string
	// Lead is the most trigger candidates a trigger sits ahead of its use (Capped; phase
	// "earliest": the largest earliest safe position). Distance is the mean number of levels
	// between a trigger and its swap-in's first consumer.
	Lead     int
	Distance float64
	// Predicted is the simulated step (the compute device's peak and the step time).
	Predicted Prediction
	// StepTime is the plan's measured median step time and Reference the reference plan's,
	// in the same interleaved measurement; Ratio is the median of the paired ratios
	// (PairedRatio), Limit the ratio the plan had to stay within, SlowerSteps the number of
	// pairs in which the plan's step was the slower one out of Pairs, and P the sign test's
	// p-value of that count (phase "latest"; see Slower).
	StepTime, Reference time.Duration
	Ratio, Limit        float64
	SlowerSteps, Pairs  int
	P                   float64
	// MeasuredPeak is the device memory the plan's step used, as the runtime measured it
	// (PeakSession; 0 when not measured).
	MeasuredPeak int64
	// Accepted says whether the plan was taken; Note says why not, or what happened.
	Accepted bool
	Note     string
	// Simulations counts the simulations of the round (phase "earliest").
	Simulations int
}

// String formats a round as one report line.
func (r Round) String() string {
	s := fmt.Sprintf("round %d %-8s dist %5.1f levels  predicted peak %s, step %s", r.N, r.Phase, r.Distance, units.FormatBytes(r.Predicted.Peak), fmtMS(time.Duration(r.Predicted.StepTime)))
	if r.Phase == "earliest" {
		return s + fmt.Sprintf("  (%d simulations) %s", r.Simulations, r.Note)
	}
	verdict := "rejected"
	if r.Accepted {
		verdict = "accepted"
	}
	if r.Pairs == 0 {
		s += fmt.Sprintf("  lead %3d  not measured  %s", r.Lead, verdict)
	} else {
		s += fmt.Sprintf("  lead %3d  measured %s vs reference %s: paired ratio %.3f (limit %.3f), slower in %d/%d pairs (p %.3f)  %s",
			r.Lead, fmtMS(r.StepTime), fmtMS(r.Reference), r.Ratio, r.Limit, r.SlowerSteps, r.Pairs, r.P, verdict)
	}
	if r.MeasuredPeak > 0 {
		s += "  measured peak " + units.FormatBytes(r.MeasuredPeak)
	}
	if r.Note != "" {
		s += "  " + r.Note
	}
	return s
}

func fmtMS(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/1e6) }

// Result is what Tune found.
type Result struct {
	// Earliest are the earliest safe triggers; Final the tuned ones, and Rewrite the model
	// rewritten with them.
	Earliest, Final Positions
	Rewrite         *rewrite.Result
	// Predicted is the final plan's simulated step.
	Predicted Prediction
	// Rounds are all rounds, in order.
	Rounds []Round
	// Converged says the search for the latest triggers ended by itself (the latest
	// triggers were accepted, or no distinct plan was left between the last accepted and the
	// first rejected one) rather than by running out of rounds.
	Converged bool
}

// BudgetError says that even with every trigger right before its use the predicted peak
// exceeds the budget: the swap set cannot fit it.
type BudgetError struct {
	Peak, Budget int64
}

// Error says by how much the budget was missed and what to change.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("the predicted peak is %s with every swap-in triggered right before its use, over the budget of %s: swap more tensors (a lower --min-bytes or --swapout-threshold) or raise the budget",
		units.FormatBytes(e.Peak), units.FormatBytes(e.Budget))
}

// predictAt rewrites with pos and predicts the result.
func predictAt(p *Problem, pr *Predictor, pos Positions) (Prediction, *rewrite.Result, error) {
	res, err := p.Apply(pos)
	if err != nil {
		return Prediction{}, nil, err
	}
	pd, err := pr.Predict(res.Model)
	return pd, res, err
}

// EarliestSafe moves every trigger earlier, from right before its use, as far as the
// predicted peak stays within budget: Kim et al.'s earliest safe trigger. Moves go round
// robin, one move per group and round, so that the groups share the memory headroom; a
// group's step doubles after a move that fits and halves after one that does not, and the
// group stops when a single step does not fit or its chain ends. It returns the positions,
// their prediction and the number of simulations.
func EarliestSafe(p *Problem, pr *Predictor, budget int64) (Positions, Prediction, int, error) {
	pos := p.Latest()
	cur, _, err := predictAt(p, pr, pos)
	if err != nil {
		return nil, Prediction{}, 0, err
	}
	sims := 1
	if cur.Peak > budget {
		return nil, cur, sims, &BudgetError{Peak: cur.Peak, Budget: budget}
	}
	step := make([]int, len(p.Groups))
	for i := range step {
		step[i] = 1
	}
	for active := true; active; {
		active = false
		for i, g := range p.Groups {
			if step[i] == 0 || pos[i] == len(g.Chain)-1 {
				continue
			}
			active = true
			try := append(Positions(nil), pos...)
			try[i] = min(pos[i]+step[i], len(g.Chain)-1)
			pd, _, err := predictAt(p, pr, try)
			sims++
			if err != nil {
				return nil, Prediction{}, sims, err
			}
			if pd.Peak <= budget {
				pos, cur = try, pd
				step[i] *= 2
			} else {
				step[i] /= 2
			}
		}
	}
	return pos, cur, sims, nil
}

// Capped returns the positions earliest limited to lead chain entries ahead of the uses:
// every trigger at most lead candidates before its swap-in's first consumer, and none
// earlier than its earliest safe position.
func Capped(earliest Positions, lead int) Positions {
	out := make(Positions, len(earliest))
	for i, e := range earliest {
		out[i] = min(e, max(lead, 0))
	}
	return out
}

// Compare times the plans of sessions a and b with n steps each, interleaved in pairs so
// that both see the same machine load, the order alternating (a b, b a, a b, ...) so that
// neither always runs right after the other; it returns their step times in pair order.
func Compare(a, b Session, n int) ([]time.Duration, []time.Duration, error) {
	ta, tb := make([]time.Duration, n), make([]time.Duration, n)
	for i := 0; i < n; i++ {
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		d1, err := first.Step()
		if err != nil {
			return nil, nil, err
		}
		d2, err := second.Step()
		if err != nil {
			return nil, nil, err
		}
		if i%2 == 1 {
			d1, d2 = d2, d1
		}
		ta[i], tb[i] = d1, d2
	}
	return ta, tb, nil
}

// Median returns the median of d (0 for none).
func Median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// SignificanceLevel is the sign test's level in Slower.
const SignificanceLevel = 0.05

// Slower decides whether cand measured slower than ref (interleaved pairs, see Compare):
// the median of the paired ratios exceeds 1 + tolerance, and the candidate's step was the
// slower one in so many pairs that a one-sided sign test rejects "equally fast" at
// SignificanceLevel. Both must hold: a stall slows every step, while the load of a shared
// machine slows single steps of either plan. It returns the decision, the median ratio,
// the number of slower pairs and the sign test's p-value.
func Slower(ref, cand []time.Duration, tolerance float64) (slower bool, ratio float64, k int, p float64) {
	ratio, _ = PairedRatio(ref, cand)
	n := min(len(ref), len(cand))
	for i := 0; i < n; i++ {
		if cand[i] > ref[i] {
			k++
		}
	}
	p = SignTestP(k, n)
	return ratio > 1+tolerance && p <= SignificanceLevel, ratio, k, p
}

// SignTestP returns P(X >= k) for X binomial with n trials of probability 1/2: the
// one-sided p-value of k successes out of n.
func SignTestP(k, n int) float64 {
	if k <= 0 {
		return 1
	}
	var sum float64
	c := 1.0 // C(n, i), built up from i = 0
	for i := 0; i <= n; i++ {
		if i >= k {
			sum += c
		}
		c = c * float64(n-i) / float64(i+1)
	}
	return sum / math.Pow(2, float64(n))
}

// PairedRatio compares interleaved measurements of a candidate (cand) and a reference (ref)
// step by step: it returns the median of cand[i] / ref[i], and half the interquartile range
// of those ratios as the measurement's noise. Steps taken side by side see the same load
// on the machine, so the ratios cancel most of its drift.
func PairedRatio(ref, cand []time.Duration) (ratio, noise float64) {
	var rs []float64
	for i := range min(len(ref), len(cand)) {
		if ref[i] > 0 {
			rs = append(rs, float64(cand[i])/float64(ref[i]))
		}
	}
	if len(rs) == 0 {
		return 1, 0
	}
	sort.Float64s(rs)
	m := len(rs) / 2
	ratio = rs[m]
	if len(rs)%2 == 0 {
		ratio = (rs[m-1] + rs[m]) / 2
	}
	if len(rs) >= 4 {
		noise = (rs[(3*len(rs))/4] - rs[len(rs)/4]) / 2
	}
	return ratio, noise
}

// Tune tunes the triggers of p: the earliest safe triggers under opts.Budget (predicted,
// EarliestSafe), then the latest triggers that do not make the measured step slower than
// the earliest ones (Kim et al.'s latest trigger without delay).
//
// The second search caps how far ahead of its use every trigger may sit, the lead (in
// trigger candidates; Capped), and looks for the smallest lead whose plan is not slower:
// it tries lead 0 (every trigger right before its use) first, doubles the lead after a plan
// that was slower (1, 2, 4, ...) and bisects between the largest slower and the smallest
// accepted lead once one was accepted, for at most opts.Rounds measured rounds. Each round
// times the candidate plan interleaved with the earliest safe plan, whose session stays
// open as the reference. A plan is accepted unless it measured slower (Slower: the median
// paired step-time ratio over 1 + opts.Tolerance, and a sign test over the pairs) or its
// peak, predicted or (on a GPU) measured, exceeds the budget; moving triggers later lowers
// the predicted peak, but the check costs one simulation.
func Tune(p *Problem, pr *Predictor, rt Runner, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	res := &Result{}
	report := func(r Round) {
		r.N = len(res.Rounds) + 1
		res.Rounds = append(res.Rounds, r)
		if opts.Report != nil {
			opts.Report(r)
		}
	}
	earliest, pd, sims, err := EarliestSafe(p, pr, opts.Budget)
	if err != nil {
		var be *BudgetError
		if errors.As(err, &be) {
			report(Round{Phase: "earliest", Distance: p.Distance(p.Latest()), Predicted: pd, Simulations: sims, Note: "over budget with the latest triggers"})
		}
		return nil, err
	}
	res.Earliest = earliest
	maxLead := 0
	for _, e := range earliest {
		maxLead = max(maxLead, e)
	}
	report(Round{Phase: "earliest", Lead: maxLead, Distance: p.Distance(earliest), Predicted: pd, Simulations: sims,
		Note: fmt.Sprintf("earliest safe triggers within the budget of %s", units.FormatBytes(opts.Budget))})
	best, bestPD := earliest, pd
	// bad is the largest lead measured slower (-1: none), good the smallest accepted (the
	// earliest safe plan itself has lead maxLead).
	bad, good := -1, maxLead
	if good == 0 {
		res.Converged = true // the earliest safe triggers are right before the uses
	}
	var ref Session
	defer func() {
		if ref != nil {
			ref.Close()
		}
	}()
	for rounds := 0; rounds < opts.Rounds && !res.Converged; rounds++ {
		lead := 0
		switch {
		case bad < 0:
		case good == maxLead && max(1, 2*bad) < good:
			lead = max(1, 2*bad)
		default:
			lead = (bad + good) / 2
		}
		cand := Capped(earliest, lead)
		r := Round{Phase: "latest", Lead: lead, Distance: p.Distance(cand)}
		cpd, crw, err := predictAt(p, pr, cand)
		if err != nil {
			return nil, err
		}
		r.Predicted = cpd
		switch {
		case cpd.Peak > opts.Budget:
			r.Note = "predicted peak over budget"
		case opts.PredictedTime && float64(cpd.StepTime) > float64(pd.StepTime)*(1+opts.Tolerance):
			r.Note = fmt.Sprintf("predicted slower: %s against the earliest safe plan's %s", fmtMS(time.Duration(cpd.StepTime)), fmtMS(time.Duration(pd.StepTime)))
		default:
			if ref == nil {
				refModel, err := p.Apply(earliest)
				if err != nil {
					return nil, err
				}
				if ref, err = rt.Open(refModel.Model); err != nil {
					return nil, fmt.Errorf("the earliest safe plan: %w", err)
				}
			}
			sess, err := rt.Open(crw.Model)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", len(res.Rounds)+1, err)
			}
			tr, tc, err := Compare(ref, sess, opts.Steps)
			if err == nil {
				if ps, ok := sess.(PeakSession); ok {
					var measured bool
					if r.MeasuredPeak, measured, err = ps.Peak(); !measured {
						r.MeasuredPeak = 0
					}
				}
			}
			sess.Close()
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", len(res.Rounds)+1, err)
			}
			r.Reference, r.StepTime = Median(tr), Median(tc)
			var slower bool
			slower, r.Ratio, r.SlowerSteps, r.P = Slower(tr, tc, opts.Tolerance)
			r.Limit, r.Pairs = 1+opts.Tolerance, len(tr)
			r.Accepted = !slower && r.MeasuredPeak <= opts.Budget
			switch {
			case r.MeasuredPeak > opts.Budget:
				r.Note = "measured peak over budget"
			case !r.Accepted:
				r.Note = "slower: swap-ins stall"
			}
		}
		report(r)
		if r.Accepted {
			best, bestPD, good = cand, cpd, lead
		} else {
			bad = lead
		}
		if good-bad <= 1 {
			res.Converged = true
		}
	}
	res.Final, res.Predicted = best, bestPD
	if res.Rewrite, err = p.Apply(best); err != nil {
		return nil, err
	}
	return res, nil
}

// Benchmark times models a and b with n steps each, interleaved, in sessions rt opens,
// and returns their step times: the figure that compares a tuned plan with another.
func Benchmark(rt Runner, a, b *graphdef.Model, n int) ([]time.Duration, []time.Duration, error) {
	sa, err := rt.Open(a)
	if err != nil {
		return nil, nil, err
	}
	defer sa.Close()
	sb, err := rt.Open(b)
	if err != nil {
		return nil, nil, err
	}
	defer sb.Close()
	return Compare(sa, sb, n)
}
