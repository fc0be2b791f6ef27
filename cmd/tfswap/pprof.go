package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts the profiles the environment asks for and returns the function that
// ends them: TFSWAP_CPUPROFILE names a file for a CPU profile of the whole command,
// TFSWAP_MEMPROFILE one for a heap profile written when the command ends (allocations since
// the start, in go tool pprof's -sample_index=alloc_space, and the live heap at the end). They
// are for the scale benchmark (bench/scale.py) and for finding where time and memory go; a
// profile that cannot be written is reported on stderr and does not change the exit status.
func startProfiles() (stop func()) {
	var cpu *os.File
	if path := os.Getenv("TFSWAP_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "tfswap: TFSWAP_CPUPROFILE: %v\n", err)
			if f != nil {
				f.Close()
			}
		} else {
			cpu = f
		}
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "tfswap: TFSWAP_CPUPROFILE: %v\n", err)
			}
		}
		if path := os.Getenv("TFSWAP_MEMPROFILE"); path != "" {
			runtime.GC()
			f, err := os.Create(path)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "tfswap: TFSWAP_MEMPROFILE: %v\n", err)
			}
		}
	}
}
