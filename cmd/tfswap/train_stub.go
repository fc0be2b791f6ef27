//go:build !tensorflow

package main

import "github.com/urfave/cli/v2"

// runtimeCommand registers a command that needs the TensorFlow runtime in a build without it.
func runtimeCommand(name, usage string) {
	register(&cli.Command{
		Name:            name,
		Usage:           usage + " (needs the TensorFlow runtime)",
		SkipFlagParsing: true,
		Action: func(*cli.Context) error {
			return cli.Exit(name+": this tfswap was built without the TensorFlow runtime; rebuild with -tags tensorflow (make setup builds bin/tfswap that way)", 1)
		},
	})
}

func init() {
	runtimeCommand("train", "train graphs for a few steps in a TensorFlow session and compare them bit for bit")
}
