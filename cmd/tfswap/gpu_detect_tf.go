//go:build tensorflow

package main

import (
	"encoding/json"

	"github.com/tfswap/tfswap/tfrun"
	"github.com/urfave/cli/v2"
)

func init() {
	visibleGPUs = tfrun.VisibleGPUs
	register(&cli.Command{
		Name:   gpusCommand,
		Hidden: true,
		Usage:  "print the GPUs TensorFlow's runtime sees, with their allocators' memory limits, as JSON",
		Action: func(c *cli.Context) error {
			gpus, err := tfrun.VisibleGPUs()
			if err != nil {
				return err
			}
			if gpus == nil {
				gpus = []tfrun.GPU{}
			}
			return json.NewEncoder(c.App.Writer).Encode(gpus)
		},
	})
}
