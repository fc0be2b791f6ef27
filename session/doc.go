// Package session runs a tfswap-rewritten TensorFlow graph in a TensorFlow session of its
// own, through TensorFlow's C API, so that a Go program can train it and check the saving on
// its own machine: training steps, and a traced step's per-device peak memory and
// host-device transfers.
//
// Open creates a session on a model (package tfswap's Model, rewritten or not) with the
// ConfigProto Config makes: on a GPU machine TensorFlow's defaults with Grappler's memory
// optimizer off (its own swapping would blur what the plan does), or the two-device CPU
// emulation (Config.TwoDevice), where /device:CPU:1 stands for the GPU and /device:CPU:0 is
// the host, so that every swap crosses a real device boundary. Session.Train runs training
// steps and returns the losses; Session.TraceStep runs one with TensorFlow's full trace and
// returns its StepStats: the peak of every device's allocator and the transfers between host
// and compute devices, the swaps among them. LoadFixture reads the training fixtures of
// testmodels/ (feeds, loss, training and initialisation ops).
//
// The session itself needs cgo and the TensorFlow C library and is built only with the
// build tag "tensorflow":
//
//	source .tfenv && go test -tags tensorflow ./session/...
//
// Without the tag the package still builds (its types, Config, LoadFixture and the reading
// of step stats need no TensorFlow), and Open and VisibleGPUs return an error matching
// tfswap.ErrNoRuntime.
//
// For results that are the same to the bit between two graphs, TensorFlow's oneDNN
// optimizations must be off (TF_ENABLE_ONEDNN_OPTS=0 in the environment; TensorFlow reads it
// when the library loads) and the intra-op thread pool one thread (the two-device
// emulation's default).
package session
