//go:build !tensorflow

package main

func init() {
	runtimeCommand("tune", "tune swap-in triggers on the real runtime (Kim et al.): earliest safe, then latest without stall")
}
