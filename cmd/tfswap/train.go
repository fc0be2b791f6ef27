//go:build tensorflow

package main

import (
	"fmt"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/tfrun"
	"github.com/urfave/cli/v2"
)

// haveRuntime says whether this build has the TensorFlow runtime: it has, and runs every
// command itself.
const haveRuntime = true

func init() {
	register(&cli.Command{
		Name:      "train",
		Usage:     "train graphs for a few steps in a TensorFlow session and compare them bit for bit",
		UsageText: "tfswap train [options] --fixture FIXTURE.json MODEL [MODEL...]",
		Description: "Runs each MODEL (the fixture's graph, or a placement or rewrite of it) in a Go session of the\n" +
			"TensorFlow C runtime: the fixture's init op, then --steps training steps on its feeds. Prints\n" +
			"the loss of each step and says whether every loss and every variable of each MODEL is\n" +
			"bit-identical to the first MODEL's. Exits 1 when they differ.\n\n" +
			"With --config two-device (the default) the session has /device:CPU:0 and /device:CPU:1, CPU:1\n" +
			"standing for the GPU. Bit-exact comparisons need TensorFlow's oneDNN rewrites off\n" +
			"(TF_ENABLE_ONEDNN_OPTS=0, read when the library loads): oneDNN fuses differently around the\n" +
			"swap nodes, which changes rounding.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "fixture", Required: true, Usage: "the fixture sidecar (testmodels/fixtures/NAME.json): feeds, loss, train/init ops, variables"},
			&cli.IntFlag{Name: "steps", Value: 5, Usage: "training steps"},
			&cli.StringFlag{Name: "config", Value: "two-device", Usage: "session config: two-device (CPU:0 + CPU:1) or default"},
		},
		Action: trainAction,
	})
}

func trainAction(c *cli.Context) error {
	if c.NArg() < 1 {
		return usagef("train needs at least one model")
	}
	if c.Int("steps") < 1 {
		return usagef("--steps must be at least 1")
	}
	var cfg []byte
	switch c.String("config") {
	case "two-device":
		cfg = tfrun.TwoDeviceConfigBytes()
	case "default":
	default:
		return usagef("--config must be two-device or default, not %q", c.String("config"))
	}
	fx, err := tfrun.LoadFixture(c.String("fixture"))
	if err != nil {
		return err
	}
	w := c.App.Writer
	if tfrun.OneDNNEnabled() {
		fmt.Fprintf(c.App.ErrWriter, "tfswap: warning: TensorFlow's oneDNN optimizations are on (%s is not 0): results may differ in the last bits between graphs\n", tfrun.OneDNNEnv)
	}
	fmt.Fprintf(w, "TensorFlow %s, %s config, %d steps\n", tfrun.Version(), c.String("config"), c.Int("steps"))
	var names []string
	for _, v := range fx.Variables {
		names = append(names, v.Name)
	}
	var first *tfrun.TrainResult
	differ := false
	for i, path := range c.Args().Slice() {
		m, err := graphdef.Load(path, graphdef.LoadOptions{})
		if err != nil {
			return err
		}
		if err := checkNodes(m); err != nil {
			return err
		}
		data, err := m.Marshal()
		if err != nil {
			return err
		}
		res, err := tfrun.Train(data, fx, c.Int("steps"), cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(w, "%s\n  loss:", path)
		for _, l := range res.LossValues {
			fmt.Fprintf(w, " %.6f", l)
		}
		fmt.Fprintln(w)
		if i == 0 {
			first = res
			continue
		}
		if diffs := first.Diff(res, names); len(diffs) > 0 {
			differ = true
			fmt.Fprintf(w, "  DIFFERS from %s:\n", c.Args().First())
			for _, d := range diffs {
				fmt.Fprintf(w, "    %s\n", d)
			}
		} else {
			fmt.Fprintf(w, "  bit-identical to %s: %d losses, %d variables before and after training\n", c.Args().First(), len(res.Losses), len(res.Final))
		}
	}
	if differ {
		return cli.Exit("", 1)
	}
	return nil
}
