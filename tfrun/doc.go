// Package tfrun runs TensorFlow graphs through the TensorFlow C API, for tfswap's own
// commands and for the tests that check its rewrites on the real runtime. Go programs that
// train a rewritten graph use package session (github.com/tfswap/tfswap/session), which is
// built on this one.
//
// The session layer (Session, Train, TraceStep) needs cgo and the TensorFlow C library and is
// built only with the build tag "tensorflow":
//
//	source .tfenv && go test -tags tensorflow ./tfrun/...
//
// The parts that do not call TensorFlow build without the tag: Tensor (dtype, shape and raw
// little-endian bytes, convertible to and from npy.Array), Fixture (the testmodels sidecar
// JSON and its feeds), the session configurations (TwoDeviceConfig), and Trace, which reads
// RunMetadata: per-device node timelines from StepStats and the _Send/_Recv pairs of the
// partition graphs.
//
// Session.Devices and ListDevices list a runtime's devices with their memory limits and,
// through a small C++ shim (device_attributes.cc, compiled with the wheel's headers:
// CGO_CXXFLAGS in .tfenv), the descriptions TensorFlow writes for GPUs; GPUs and DetectGPUs
// (pure, with a DeviceLister seam) read model names and compute capabilities from them.
//
// For the rewrite's runtime tests, PlaceAll pins a model to one device, AddProbes adds the
// nodes that show when a swapped-in tensor reaches the device, CheckSwapPartitions checks
// that the swap nodes survived the optimizers with the transfers they imply, and
// CheckSwapOrder checks a traced step against the triggers.
//
// Two facts of TensorFlow 2.18 shape these checks. Step stats never hold _Send or _Recv
// (StepStatsCollector skips transfer nodes), so a transfer's time is read off its neighbours
// and the probes. And the partition graphs are what ran after Grappler and after the
// classic graph optimizer that runs on each partition (common-subexpression elimination,
// constant folding), which does not honour _grappler_do_not_remove.
//
// Determinism: TensorFlow reads TF_ENABLE_ONEDNN_OPTS while the library loads, before any
// Go code runs, so the tests' TestMain calls ReexecWithOneDNNOff, which re-executes the test
// binary with the variable set to 0 when it is unset. TwoDeviceConfig fixes the thread pools
// (one intra-op thread: the rounding of multi-threaded kernels depends on the thread count).
// With both, two sessions of the same graph train to bit-identical losses and variables.
package tfrun
