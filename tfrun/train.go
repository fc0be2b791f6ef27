//go:build tensorflow

package tfrun

import (
	"fmt"
	"math"
)

// Train trains a fixture's graph (graphDef, which may be a rewritten version of the
// fixture's own) for steps steps in a new session with config cfg (a serialized
// ConfigProto): it runs init_op, fetches every variable, runs train_op steps times fetching
// the loss, then fetches every variable again.
func Train(graphDef []byte, fx *Fixture, steps int, cfg []byte) (*TrainResult, error) {
	s, err := NewSession(graphDef, cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return TrainSession(s, fx, steps)
}

// TrainSession is Train on an existing session, whose graph must be the fixture's or a
// rewrite of it.
func TrainSession(s *Session, fx *Fixture, steps int) (*TrainResult, error) {
	if _, _, err := s.Run(nil, nil, []string{fx.InitOp}, nil); err != nil {
		return nil, fmt.Errorf("fixture %s: init: %w", fx.Name, err)
	}
	vars := fx.VariableFetches()
	r := &TrainResult{}
	var err error
	if len(vars) > 0 {
		if r.Initial, _, err = s.Run(nil, vars, nil, nil); err != nil {
			return nil, fmt.Errorf("fixture %s: fetch initial variables: %w", fx.Name, err)
		}
	}
	for step := 1; step <= steps; step++ {
		out, _, err := s.Run(fx.FeedTensors, []string{fx.Loss}, []string{fx.TrainOp}, nil)
		if err != nil {
			return nil, fmt.Errorf("fixture %s: step %d: %w", fx.Name, step, err)
		}
		v, err := out[0].Scalar()
		if err != nil {
			return nil, fmt.Errorf("fixture %s: step %d: loss %s: %w", fx.Name, step, fx.Loss, err)
		}
		r.Losses = append(r.Losses, out[0])
		r.LossValues = append(r.LossValues, v)
	}
	if len(vars) > 0 {
		if r.Final, _, err = s.Run(nil, vars, nil, nil); err != nil {
			return nil, fmt.Errorf("fixture %s: fetch final variables: %w", fx.Name, err)
		}
	}
	return r, nil
}

// TraceStep runs init_op and warmup training steps in a new session, then one more training
// step with TraceOptions (FULL_TRACE and partition graphs), and returns that step's trace.
// extraTargets are run as targets of the traced step besides train_op (probes, for example).
func TraceStep(graphDef []byte, fx *Fixture, cfg []byte, warmup int, extraTargets ...string) (*Trace, error) {
	s, err := NewSession(graphDef, cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if _, _, err := s.Run(nil, nil, []string{fx.InitOp}, nil); err != nil {
		return nil, fmt.Errorf("fixture %s: init: %w", fx.Name, err)
	}
	for i := 0; i < warmup; i++ {
		if _, _, err := s.Run(fx.FeedTensors, []string{fx.Loss}, []string{fx.TrainOp}, nil); err != nil {
			return nil, fmt.Errorf("fixture %s: warm-up step %d: %w", fx.Name, i+1, err)
		}
	}
	targets := append([]string{fx.TrainOp}, extraTargets...)
	out, md, err := s.Run(fx.FeedTensors, []string{fx.Loss}, targets, TraceOptions())
	if err != nil {
		return nil, fmt.Errorf("fixture %s: traced step: %w", fx.Name, err)
	}
	if v, err := out[0].Scalar(); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("fixture %s: traced step: loss %v (%v)", fx.Name, v, err)
	}
	return NewTrace(md), nil
}
