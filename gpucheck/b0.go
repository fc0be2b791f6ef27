package gpucheck

import (
	"fmt"
	"sort"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
)

// Judge predicts unswapped steps for a device profile and judges them against a budget.
type Judge struct {
	Profile *cost.Profile
	Budget  int64
	// Fetch names the nodes a step runs (the train op).
	Fetch []string
}

// Prediction is an unswapped graph's simulated step.
type Prediction struct {
	// Peak is the GPU's simulated peak by tfswap's accounting, GrapplerPeak by the rules of
	// Grappler's VirtualCluster (cost.GrapplerConventions; 0 when Peak is already over the
	// budget and it was not computed). StepNS is the simulated step time.
	Peak, GrapplerPeak, StepNS int64
	// Fits says both peaks are within the budget, as `tfswap rewrite` judges a plan with its
	// default --fit-accounting both.
	Fits bool
}

// Predict simulates g without swaps, its batch scaled by scale (cost.Options.BatchScale).
func (j Judge) Predict(g *graphdef.Graph, scale int) (Prediction, error) {
	opts := cost.Options{Fetch: j.Fetch, BatchScale: scale, TopLive: -1}
	r, err := cost.Simulate(g, j.Profile, opts)
	if err != nil {
		return Prediction{}, err
	}
	gpu := r.Compute()
	if gpu == nil {
		return Prediction{}, fmt.Errorf("gpucheck: nothing of %s runs on a GPU", g.Source)
	}
	p := Prediction{Peak: gpu.PeakBytes, StepNS: r.StepTime}
	if p.Peak > j.Budget {
		return p, nil
	}
	opts.Conventions = cost.GrapplerConventions()
	gr, err := cost.Simulate(g, j.Profile, opts)
	if err != nil {
		return Prediction{}, err
	}
	if d := gr.Compute(); d != nil {
		p.GrapplerPeak = d.PeakBytes
	}
	p.Fits = p.GrapplerPeak <= j.Budget
	return p, nil
}

// B0 is the largest batch whose unswapped graph fits the budget by the simulator.
type B0 struct {
	// Batch is B0: 0 when not even batch 1 fits; MaxBatch when the search stopped there.
	Batch int
	// At and Next are the predictions at B0 and at B0+1 (Next is zero when B0 is the cap).
	At, Next Prediction
	// Capped says the search stopped at the largest batch it tries.
	Capped bool
	// Generated are the batches whose graphs were generated to settle B0.
	Generated []int
	// Graphs holds the graphs generated, by batch.
	Graphs map[int]*Graph
}

// FindB0 finds B0 of model. The unswapped peak is close to affine in the batch (activations
// grow with it, weights do not), so the batch-2 graph simulated with its batch scaled
// (cost.Options.BatchScale, which is exact for convolutional networks and within a few
// percent for the Transformer, whose reshapes fold the batch into other dimensions) narrows
// B0 to an even batch; graphs generated at the batch itself then settle it: from that guess,
// galloping until one batch fits and the next does not, then bisecting. maxBatch caps the
// search.
func FindB0(gen Generator, model string, j Judge, maxBatch int) (*B0, error) {
	res := &B0{Graphs: map[int]*Graph{}}
	preds := map[int]Prediction{}
	fits := func(b int) (bool, error) {
		if p, ok := preds[b]; ok {
			return p.Fits, nil
		}
		g, err := gen.Generate(model, b)
		if err != nil {
			return false, err
		}
		res.Graphs[b] = g
		res.Generated = append(res.Generated, b)
		p, err := j.Predict(g.Graph, 1)
		if err != nil {
			return false, fmt.Errorf("%s: %w", g.Path, err)
		}
		preds[b] = p
		return p.Fits, nil
	}
	ok, err := fits(min(2, maxBatch))
	if err != nil {
		return nil, err
	}
	if !ok {
		if ok, err = fits(1); err != nil {
			return nil, err
		}
		if ok {
			res.Batch = 1
		}
		return res.finish(preds, fits)
	}
	if maxBatch <= 2 {
		res.Batch, res.Capped = maxBatch, true
		return res.finish(preds, fits)
	}
	// Scaled simulations of the batch-2 graph: the largest scale k that fits.
	base := res.Graphs[2]
	scaled := func(k int) (bool, error) {
		p, err := j.Predict(base.Graph, k)
		return p.Fits, err
	}
	lo, hi := 1, 2
	for 2*hi <= maxBatch {
		ok, err := scaled(hi)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := scaled(mid)
		if err != nil {
			return nil, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	guess := min(2*lo, maxBatch)
	// Real graphs from the guess: gallop to a fitting and a failing batch, then bisect.
	ok, err = fits(guess)
	if err != nil {
		return nil, err
	}
	var good, bad int
	if ok {
		good, step := guess, 1
		for {
			next := good + step
			if next > maxBatch {
				if good == maxBatch {
					res.Batch, res.Capped = maxBatch, true
					return res.finish(preds, fits)
				}
				next = maxBatch
			}
			ok, err := fits(next)
			if err != nil {
				return nil, err
			}
			if !ok {
				bad = next
				break
			}
			good, step = next, step*2
		}
		lo, hi = good, bad
	} else {
		bad, step := guess, 1
		for {
			next := max(2, bad-step)
			ok, err := fits(next)
			if err != nil {
				return nil, err
			}
			if ok {
				good = next
				break
			}
			bad, step = next, step*2
		}
		lo, hi = good, bad
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := fits(mid)
		if err != nil {
			return nil, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	res.Batch = lo
	return res.finish(preds, fits)
}

// finish fills At and Next from the predictions made (B0+1's was made unless B0 is the cap).
func (r *B0) finish(preds map[int]Prediction, fits func(int) (bool, error)) (*B0, error) {
	if r.Batch > 0 {
		if _, err := fits(r.Batch); err != nil {
			return nil, err
		}
		r.At = preds[r.Batch]
	}
	if !r.Capped {
		if _, err := fits(r.Batch + 1); err != nil {
			return nil, err
		}
		r.Next = preds[r.Batch+1]
	}
	sort.Ints(r.Generated)
	return r, nil
}
