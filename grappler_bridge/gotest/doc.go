// Package gotest checks the Grappler bridge (grappler_bridge/libtfswap_grappler.so) from a
// Go process: the library is loaded with TF_LoadLibrary into a program that already runs a
// Go runtime, and sessions created through the C API (and through the graft Go bindings, as
// in the README's example) run tfswap's rewrite as a Grappler custom optimizer.
//
// The tests need cgo, the TensorFlow C library and the build tag "tensorflow":
//
//	source .tfenv && go test -tags tensorflow ./grappler_bridge/gotest/
//
// They build tfswap and the bridge themselves (go build, grappler_bridge/build.sh).
package gotest
