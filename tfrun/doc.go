// Package tfrun runs TensorFlow graphs through the TensorFlow C API, for tests that check
// tfswap's rewrites on the real runtime.
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
// Determinism: TensorFlow's oneDNN graph rewrites are turned off for every program that links
// this package with the tag, by setting TF_ENABLE_ONEDNN_OPTS=0 before the library is first
// used (see session.go); TwoDeviceConfig fixes the thread pools. With both, two sessions of
// the same graph train to bit-identical losses and variables.
package tfrun
