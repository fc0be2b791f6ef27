//go:build !tensorflow

package main

func init() {
	runtimeCommand("gpu-check", "measure on this machine's GPU what the simulator predicts: peaks, overheads, out-of-memory, bit identity")
}
