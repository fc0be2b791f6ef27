package session

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/tfrun"
)

// backend is a session of the TensorFlow runtime (tfrun.Session in a build with the
// "tensorflow" tag).
type backend interface {
	Run(feeds map[string]*Tensor, fetches []string, targets []string, opts *tfrun.RunOptions) ([]*Tensor, *RunMetadata, error)
	Devices() ([]tfrun.DeviceInfo, error)
	Close() error
}

// Session is a TensorFlow session on one graph, in this process. It is safe for concurrent
// use; Close frees it.
type Session struct {
	b   backend
	cfg Config
}

// Device is one device of a session.
type Device struct {
	// Name is the full device name, "/job:localhost/replica:0/task:0/device:GPU:0", and
	// Type "GPU" or "CPU".
	Name string
	Type string
	// MemoryBytes is the device's memory limit: for a GPU, what TensorFlow's allocator may
	// hand out (a plan's budget on that GPU).
	MemoryBytes int64
	// Description is TensorFlow's description of the device (a GPU's model, bus and compute
	// capability; empty for a CPU).
	Description string
}

// Open creates a session on the model's graph (a model tfswap.Plan rewrote, or any other)
// with the configuration cfg. In a build without the "tensorflow" tag it returns an error
// matching tfswap.ErrNoRuntime.
func Open(m *tfswap.Model, cfg Config) (*Session, error) {
	if m == nil {
		return nil, errors.New("session: no model given")
	}
	data, err := m.Marshal(tfswap.FormatPB)
	if err != nil {
		return nil, err
	}
	return OpenGraphDef(data, cfg)
}

// OpenGraphDef is Open on a serialised binary GraphDef.
func OpenGraphDef(graphDef []byte, cfg Config) (*Session, error) {
	c, err := cfg.marshal()
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	b, err := openBackend(graphDef, c)
	if err != nil {
		return nil, err
	}
	return &Session{b: b, cfg: cfg}, nil
}

// Close closes the session and frees it. Closing twice is a no-op.
func (s *Session) Close() error { return s.b.Close() }

// Devices returns the session's devices.
func (s *Session) Devices() ([]Device, error) {
	ds, err := s.b.Devices()
	if err != nil {
		return nil, err
	}
	out := make([]Device, len(ds))
	for i, d := range ds {
		out[i] = Device{Name: d.Name, Type: d.Type, MemoryBytes: d.MemoryBytes, Description: d.Description}
	}
	return out, nil
}

// Run runs one step: it feeds feeds (by tensor name, "node:port"), computes fetches (tensor
// names) and runs targets (node names), and returns the fetched tensors in order. A failure
// TensorFlow reports is an *Error.
func (s *Session) Run(feeds map[string]*Tensor, fetches []string, targets ...string) ([]*Tensor, error) {
	out, _, err := s.b.Run(feeds, fetches, targets, nil)
	return out, err
}

// Train runs steps training steps, each feeding step.Feeds, running step.TrainOp and
// fetching step.Loss, and returns the losses. Initialise the variables first (Run with the
// initialisation op as target).
func (s *Session) Train(step Step, steps int) ([]float64, error) {
	var losses []float64
	for i := 1; i <= steps; i++ {
		loss, _, err := s.step(step, nil)
		if err != nil {
			return losses, fmt.Errorf("session: step %d: %w", i, err)
		}
		losses = append(losses, loss)
	}
	return losses, nil
}

// TraceStep runs one training step with TensorFlow's full trace and the partition graphs,
// and returns what they say: the loss, every device's allocator peak, and the transfers
// between host and compute devices, the swaps among them.
func (s *Session) TraceStep(step Step) (*StepStats, error) {
	loss, md, err := s.step(step, tfrun.TraceOptions())
	if err != nil {
		return nil, fmt.Errorf("session: traced step: %w", err)
	}
	st := NewStepStats(md, s.cfg.TwoDevice)
	st.Loss = loss
	return st, nil
}

// step runs one training step and returns its loss, which must be a finite number.
func (s *Session) step(step Step, opts *tfrun.RunOptions) (float64, *RunMetadata, error) {
	if step.Loss == "" || step.TrainOp == "" {
		return 0, nil, errors.New("a training step needs its loss and its training op")
	}
	out, md, err := s.b.Run(step.Feeds, []string{step.Loss}, []string{step.TrainOp}, opts)
	if err != nil {
		return 0, nil, err
	}
	v, err := out[0].Scalar()
	if err != nil {
		return 0, nil, fmt.Errorf("loss %s: %w", step.Loss, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v, md, fmt.Errorf("loss %s is %v", step.Loss, v)
	}
	return v, md, nil
}

// IsOutOfMemory reports whether err is TensorFlow running out of memory on a device: the
// status RESOURCE_EXHAUSTED, or an allocation failure TensorFlow reports under another code
// (cuDNN's and cuBLAS's).
func IsOutOfMemory(err error) bool {
	var te *Error
	if !errors.As(err, &te) {
		return false
	}
	if tfrun.CodeName(te.Code) == "RESOURCE_EXHAUSTED" {
		return true
	}
	low := strings.ToLower(te.Message)
	for _, s := range []string{"oom when allocating", "out of memory", "cudnn_status_alloc_failed", "cublas_status_alloc_failed", "failed to allocate"} {
		if strings.Contains(low, s) {
			return true
		}
	}
	return false
}

// VisibleGPUs returns the GPUs TensorFlow sees in this process, each with the memory its
// allocator may hand out; pass it as tfswap.Options.VisibleGPUs to plan for this machine's
// GPU. On a machine with a GPU it initialises CUDA in the calling process. In a build
// without the "tensorflow" tag it returns an error matching tfswap.ErrNoRuntime.
func VisibleGPUs() ([]tfswap.GPU, error) {
	gpus, err := visibleGPUs()
	if err != nil {
		return nil, err
	}
	out := make([]tfswap.GPU, len(gpus))
	for i, g := range gpus {
		out[i] = tfswap.GPU(g)
	}
	return out, nil
}
