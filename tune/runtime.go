//go:build tensorflow

package tune

import (
	"fmt"
	"time"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/tfrun"
)

// TFRunner opens sessions of the TensorFlow C runtime (the Runner of real measurements).
type TFRunner struct {
	// Config is the sessions' serialized ConfigProto (nil: TensorFlow's defaults).
	Config []byte
	// Place is the device nodes without one are placed on before the graph is run (see
	// Place; "" leaves them to TensorFlow).
	Place string
	// Init is run once per session; every step feeds Feeds, fetches Fetches and runs
	// Targets.
	Init             string
	Targets, Fetches []string
	Feeds            map[string]*tfrun.Tensor
	// Warmup steps run when a session opens, untimed.
	Warmup int
}

type tfSession struct {
	s  *tfrun.Session
	rt *TFRunner
}

// Open places m, creates its session, runs the init op and the warm-up steps.
func (r *TFRunner) Open(m *graphdef.Model) (Session, error) {
	data, err := Place(m, r.Place).Marshal()
	if err != nil {
		return nil, err
	}
	s, err := tfrun.NewSession(data, r.Config)
	if err != nil {
		return nil, err
	}
	if r.Init != "" {
		if _, _, err := s.Run(nil, nil, []string{r.Init}, nil); err != nil {
			s.Close()
			return nil, fmt.Errorf("init op %s: %w", r.Init, err)
		}
	}
	ts := &tfSession{s: s, rt: r}
	for i := 1; i <= r.Warmup; i++ {
		if _, err := ts.Step(); err != nil {
			s.Close()
			return nil, fmt.Errorf("warm-up step %d: %w", i, err)
		}
	}
	return ts, nil
}

// Step runs one step and returns the wall time of the Session.Run call.
func (t *tfSession) Step() (time.Duration, error) {
	t0 := time.Now()
	_, _, err := t.s.Run(t.rt.Feeds, t.rt.Fetches, t.rt.Targets, nil)
	return time.Since(t0), err
}

// Close closes the session.
func (t *tfSession) Close() error { return t.s.Close() }

// Peak runs one traced step and returns the most memory a GPU allocator had allocated
// during it (profiling.GPUPeak); ok is false when no GPU allocator reported, as in the
// two-device emulation, where both devices share the host allocator and the step says
// nothing about either.
func (t *tfSession) Peak() (int64, bool, error) {
	_, md, err := t.s.Run(t.rt.Feeds, t.rt.Fetches, t.rt.Targets, tfrun.TraceOptions())
	if err != nil {
		return 0, false, err
	}
	peak, _, ok := profiling.GPUPeak(md)
	return peak, ok, nil
}
