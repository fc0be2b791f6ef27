//go:build !tensorflow

package main

import "github.com/urfave/cli/v2"

// haveRuntime says whether this build has the TensorFlow runtime; without it, main runs the
// runtime commands with tfswap-runtime (delegate).
const haveRuntime = false

// runtimeCommand registers a command that needs the TensorFlow runtime in a build without it.
// main runs it with the runtime binary when there is one; the command itself only runs when
// there is none, and says so.
func runtimeCommand(name, usage string) {
	register(&cli.Command{
		Name:            name,
		Usage:           usage + " (runs tfswap-runtime)",
		SkipFlagParsing: true,
		Action: func(*cli.Context) error {
			return cli.Exit(name+": this tfswap was built without the TensorFlow runtime and found no "+runtimeBinaryName+
				" next to it (nor $"+runtimeEnv+"): run make setup, which builds bin/"+runtimeBinaryName+" with go build -tags tensorflow", 1)
		},
	})
}

func init() {
	runtimeCommand("train", "train graphs for a few steps in a TensorFlow session and compare them bit for bit")
}
