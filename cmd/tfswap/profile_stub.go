//go:build !tensorflow

package main

func init() {
	runtimeCommand("profile", "measure training steps in a TensorFlow session and write per-op times")
}
