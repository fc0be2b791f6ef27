// Command tfswap-synth writes a synthetic training graph (package synth) as a binary GraphDef:
//
//	go run ./testmodels/synth/cmd/tfswap-synth -nodes 100000 -out /tmp/synth100k.pb
//
// The output is written atomically; the command never overwrites an existing file unless -f is
// given.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/testmodels/synth"
)

func main() {
	var c synth.Config
	flag.IntVar(&c.Nodes, "nodes", 10000, "number of nodes (rounded down to whole blocks)")
	flag.IntVar(&c.Batch, "batch", 0, "batch of the activations (0: 8)")
	flag.IntVar(&c.Size, "size", 0, "height and width of the activations (0: 32)")
	flag.IntVar(&c.Channels, "channels", 0, "channels of the activations (0: 16)")
	out := flag.String("out", "", "output GraphDef (.pb)")
	force := flag.Bool("f", false, "overwrite an existing output")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 || c.Nodes <= 0 {
		fmt.Fprintln(os.Stderr, "usage: tfswap-synth -nodes N -out FILE.pb [-batch B -size S -channels C] [-f]")
		os.Exit(2)
	}
	if _, err := os.Lstat(*out); err == nil && !*force {
		fmt.Fprintf(os.Stderr, "tfswap-synth: %s exists (use -f to overwrite)\n", *out)
		os.Exit(2)
	}
	data, err := graphdef.NewModel(synth.Generate(c)).Marshal()
	if err == nil {
		err = graphdef.WriteFileAtomic(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tfswap-synth: %v\n", err)
		os.Exit(1)
	}
}
