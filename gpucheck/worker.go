//go:build tensorflow

package gpucheck

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/tfrun"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// Work runs spec in this process, in a session of the TensorFlow C runtime with
// SessionConfig: the init op, spec.Warmup untimed and spec.Steps timed training steps, then,
// with spec.Trace, one step traced with FULL_TRACE. Placeholders are fed random data of their
// dtype and shape (profiling.RandomFeeds, seeded by spec.Seed). A failure inside TensorFlow is
// a result with its status, not an error; the error is for a spec that cannot be run at all.
func Work(spec RunSpec) (*RunResult, error) {
	m, err := graphdef.Load(spec.Graph, graphdef.LoadOptions{})
	if err != nil {
		return nil, err
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		return nil, err
	}
	mark, err := profiling.FanIn(g, []string{spec.Train, spec.Loss})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Graph, err)
	}
	ps, err := profiling.Placeholders(g, mark)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Graph, err)
	}
	feeds, err := profiling.RandomFeeds(ps, nil, spec.Seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Graph, err)
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	res := &RunResult{Status: StatusRan}
	fail := func(what string, err error) (*RunResult, error) {
		var te *tfrun.Error
		if !errors.As(err, &te) {
			return nil, fmt.Errorf("%s: %s: %w", spec.Graph, what, err)
		}
		res.Code, res.Error = tfrun.CodeName(te.Code), what+": "+te.Message
		res.Status = Classify(res.Code, te.Message)
		return res, nil
	}
	s, err := tfrun.NewSession(data, SessionConfig())
	if err != nil {
		return fail("creating the session", err)
	}
	defer s.Close()
	devs, err := s.Devices()
	if err != nil {
		return fail("listing devices", err)
	}
	for _, d := range devs {
		res.Devices = append(res.Devices, DeviceSummary{Name: d.Name, Type: d.Type, MemoryBytes: d.MemoryBytes})
	}
	if _, _, err := s.Run(nil, nil, []string{spec.Init}, nil); err != nil {
		return fail("init op "+spec.Init, err)
	}
	step := func(opts *tfrun.RunOptions) (*tfrun.Tensor, *tfrun.RunMetadata, error) {
		out, md, err := s.Run(feeds, []string{spec.Loss}, []string{spec.Train}, opts)
		if err != nil {
			return nil, nil, err
		}
		return out[0], md, nil
	}
	for i := 1; i <= spec.Warmup; i++ {
		if _, _, err := step(nil); err != nil {
			return fail(fmt.Sprintf("warm-up step %d", i), err)
		}
	}
	for i := 1; i <= spec.Steps; i++ {
		t0 := time.Now()
		loss, _, err := step(nil)
		d := time.Since(t0)
		if err != nil {
			return fail(fmt.Sprintf("step %d", i), err)
		}
		res.StepNS = append(res.StepNS, d.Nanoseconds())
		v, err := loss.Scalar()
		if err != nil {
			return nil, fmt.Errorf("%s: loss %s: %w", spec.Graph, spec.Loss, err)
		}
		res.Losses = append(res.Losses, v)
		if spec.Deterministic {
			res.LossDigests = append(res.LossDigests, digest(loss))
		}
	}
	if spec.Deterministic && len(spec.Variables) > 0 {
		vals, _, err := s.Run(nil, spec.Variables, nil, nil)
		if err != nil {
			return fail("fetching the variables", err)
		}
		for _, v := range vals {
			res.VariableDigests = append(res.VariableDigests, digest(v))
		}
	}
	if spec.Trace {
		_, md, err := step(&tfrun.RunOptions{TraceLevel: cpb.RunOptions_FULL_TRACE})
		if err != nil {
			return fail("the traced step", err)
		}
		if m, ok := Measure(md); ok {
			res.Measurement = m
		}
		if spec.TraceFile != "" {
			b, err := proto.Marshal(md)
			if err != nil {
				return nil, err
			}
			if err := graphdef.WriteFileAtomic(spec.TraceFile, b, 0o644); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// digest is the SHA-256 of a tensor's dtype, shape and bytes.
func digest(t *tfrun.Tensor) string {
	h := sha256.New()
	fmt.Fprintf(h, "%v %v ", t.DType, t.Shape)
	h.Write(t.Data)
	return hex.EncodeToString(h.Sum(nil))
}
