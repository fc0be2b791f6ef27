//go:build tensorflow

package profiling

import (
	"fmt"
	"time"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/tfrun"
)

// Options say how to profile a graph.
type Options struct {
	// Init is the node run once, before the steps, to initialise variables; "" runs none.
	Init string
	// Targets (node names) and Fetches (tensor names) are what every step runs.
	Targets, Fetches []string
	// Feeds are the values fed at every step, by tensor name.
	Feeds map[string]*tfrun.Tensor
	// Warmup steps run untraced before the Iterations traced ones.
	Warmup, Iterations int
	// Config is the session's serialized ConfigProto (nil: TensorFlow's defaults).
	Config []byte
	// Progress, when set, reports the steps.
	Progress *Progress
}

// Run profiles the graph graphDef (indexed as g) in a new TensorFlow session: it runs the
// init op, the warm-up steps, then the measured steps with RunOptions FULL_TRACE, and
// collects their step stats. Errors from TensorFlow keep the node TensorFlow names.
func Run(graphDef []byte, g *graphdef.Graph, opts Options) (*Result, error) {
	if opts.Iterations < 1 {
		return nil, fmt.Errorf("profiling: at least one measured step is needed")
	}
	s, err := tfrun.NewSession(graphDef, opts.Config)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if opts.Init != "" {
		if _, _, err := s.Run(nil, nil, []string{opts.Init}, nil); err != nil {
			return nil, fmt.Errorf("init op %s: %w", opts.Init, err)
		}
	}
	p := opts.Progress
	if opts.Warmup > 0 {
		p.Start("warm-up", opts.Warmup)
		for i := 1; i <= opts.Warmup; i++ {
			if _, _, err := s.Run(opts.Feeds, opts.Fetches, opts.Targets, nil); err != nil {
				p.Done()
				return nil, fmt.Errorf("warm-up step %d: %w", i, err)
			}
			p.Step(i)
		}
	}
	c := NewCollector(g)
	p.Start("measured", opts.Iterations)
	for i := 1; i <= opts.Iterations; i++ {
		t0 := time.Now()
		_, md, err := s.Run(opts.Feeds, opts.Fetches, opts.Targets, tfrun.TraceOptions())
		wall := time.Since(t0)
		if err != nil {
			p.Done()
			return nil, fmt.Errorf("measured step %d: %w", i, err)
		}
		if err := c.Add(md, wall); err != nil {
			p.Done()
			return nil, err
		}
		p.Step(i)
	}
	p.Done()
	return c.Result(), nil
}
