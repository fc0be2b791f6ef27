//go:build tensorflow

package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/profiling"
	"github.com/tfswap/tfswap/tfrun"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "profile",
		Usage:     "measure training steps in a TensorFlow session and write per-op times",
		UsageText: "tfswap profile [options] MODEL [--feed NAME=FILE.npy ...] [--target OP] [-o MODEL.profile]",
		Description: "Runs MODEL in a Go session of the TensorFlow C runtime: the init op once (--init; by default\n" +
			"the node named \"init\", what tf.compat.v1.global_variables_initializer() names its op, when\n" +
			"the graph has one), --warmup untraced steps, then --iterations steps traced with FULL_TRACE.\n" +
			"A step runs --target ops and --fetch tensors (neither given: the op named \"train\"). Placeholders\n" +
			"the step needs are fed from --feed files (.npy, checked against the placeholder's dtype and\n" +
			"shape) or, when not given, with random data of the placeholder's dtype and shape (seed\n" +
			"--seed; floats uniform in [0, 1), integers 0 or 1), which needs a fully known shape.\n\n" +
			"Writes the profile (-o, default MODEL.profile) in the measured-profile format that\n" +
			"`tfswap simulate --profile` reads: per node that ran, the median of its time over the traced\n" +
			"steps, the device it ran on and the sizes of its outputs; and the machine and TensorFlow\n" +
			"version. Prints a summary: step time median/min/max, the slowest ops, and the ops whose time\n" +
			"varies by more than 20% across steps. Progress goes to stderr.\n\n" +
			"A node's time is its kernel's run time on its device: on a CPU the executor's op start to\n" +
			"op end; on a GPU the summed duration of its kernels as the device tracer recorded them.\n" +
			"With --config two-device the session has /device:CPU:0 and /device:CPU:1 (place the graph\n" +
			"on CPU:1 first with tfswap place to emulate a GPU).",
		Flags: append(append(modelFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "where to write the profile (default: MODEL with extension .profile)"},
			&cli.IntFlag{Name: "iterations", Value: 20, Usage: "traced steps to measure"},
			&cli.IntFlag{Name: "warmup", Value: 3, Usage: "untraced steps before the measured ones"},
			&cli.StringFlag{Name: "config", Value: "default", Usage: "session config: default (TensorFlow's), or two-device (/device:CPU:0 + /device:CPU:1, fixed thread pools)"},
			&cli.StringFlag{Name: "device-profile", Usage: "the tfswap device profile the compute device corresponds to (recorded in the profile; see simulate --list-devices)"},
			&cli.IntFlag{Name: "top", Value: 10, Usage: "how many slowest and unstable ops the summary lists"},
		), stepCLIFlags()...),
		Action: profileAction,
	})
}

// sessionConfig returns the serialized ConfigProto a --config value names.
func sessionConfig(name string) ([]byte, error) {
	switch name {
	case "two-device":
		return tfrun.TwoDeviceConfigBytes(), nil
	case "default":
		return nil, nil
	}
	return nil, usagef("--config must be two-device or default, not %q", name)
}

// defaultProfileOutput names the profile of a model: "model.profile" for "model.pb".
func defaultProfileOutput(path string) string {
	clean := strings.TrimSuffix(path, "/")
	return strings.TrimSuffix(clean, filepath.Ext(clean)) + ".profile"
}

// stepCLIFlags are the flags that say what a step runs and feeds (profile, tune).
func stepCLIFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "feed", Usage: "NAME=FILE.npy: feed tensor NAME (node or node:port) from a .npy file (repeatable)"},
		&cli.Uint64Flag{Name: "seed", Value: profiling.DefaultSeed, Usage: "seed of the random data fed to placeholders without --feed"},
		&cli.StringSliceFlag{Name: "target", Usage: "op a step runs (repeatable; when neither --target nor --fetch is given: the node named \"train\")"},
		&cli.StringSliceFlag{Name: "fetch", Usage: "tensor a step fetches (repeatable)"},
		&cli.StringFlag{Name: "init", Usage: "op run once before the steps to initialise variables (default: \"init\" when the graph has it)"},
		&cli.BoolFlag{Name: "no-init", Usage: "run no initialisation op"},
	}
}

// feedArgs are the .npy files of --feed, as inputs (malformed flags are left to stepFlags).
func feedArgs(c *cli.Context) []pathArg {
	var args []pathArg
	for _, f := range c.StringSlice("feed") {
		if ff, err := profiling.ParseFeedFlag(f); err == nil {
			args = append(args, pathArg{opt: "--feed", path: ff.Path})
		}
	}
	return args
}

// stepSpec is what a step of a profiled or tuned graph runs, with its feeds.
type stepSpec struct {
	Init             string
	Targets, Fetches []string
	Feeds            map[string]*tfrun.Tensor
}

// stepFlags reads --init, --no-init, --target, --fetch, --feed and --seed for graph g.
func stepFlags(c *cli.Context, g *graphdef.Graph) (*stepSpec, error) {
	if c.Bool("no-init") && c.String("init") != "" {
		return nil, usagef("give either --init or --no-init, not both")
	}
	var files []profiling.FeedFile
	for _, f := range c.StringSlice("feed") {
		ff, err := profiling.ParseFeedFlag(f)
		if err != nil {
			return nil, usagef("--feed: %v", err)
		}
		files = append(files, ff)
	}
	sp := &stepSpec{}
	var err error
	if !c.Bool("no-init") {
		if sp.Init, err = profiling.InitOp(g, c.String("init")); err != nil {
			return nil, err
		}
	}
	if sp.Targets, sp.Fetches, err = profiling.StepTargets(g, c.StringSlice("target"), c.StringSlice("fetch")); err != nil {
		return nil, err
	}
	if sp.Feeds, err = profiling.LoadFeeds(g, files); err != nil {
		return nil, err
	}
	mark, err := profiling.FanIn(g, append(append([]string{}, sp.Targets...), sp.Fetches...))
	if err != nil {
		return nil, err
	}
	ps, err := profiling.Placeholders(g, mark)
	if err != nil {
		return nil, err
	}
	random, err := profiling.RandomFeeds(ps, sp.Feeds, c.Uint64("seed"))
	if err != nil {
		return nil, err
	}
	for k, v := range random {
		sp.Feeds[k] = v
	}
	return sp, nil
}

func profileAction(c *cli.Context) error {
	if c.Int("iterations") < 1 {
		return usagef("--iterations must be at least 1")
	}
	if c.Int("warmup") < 0 {
		return usagef("--warmup must not be negative")
	}
	cfg, err := sessionConfig(c.String("config"))
	if err != nil {
		return err
	}
	if p := c.String("device-profile"); p != "" {
		if _, err := cost.LookupProfile(p); err != nil {
			return usagef("--device-profile: %v", err)
		}
	}
	m, in, err := loadModel(c, c.App.Reader)
	if err != nil {
		return err
	}
	out := c.String("output")
	if out == "" {
		if in == "-" {
			return usagef("give -o when the model comes from stdin")
		}
		out = defaultProfileOutput(in)
	}
	if err := checkPaths(append([]pathArg{modelArg(m, in)}, feedArgs(c)...), []pathArg{{opt: "-o", path: out}}); err != nil {
		return err
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		return err
	}
	sp, err := stepFlags(c, g)
	if err != nil {
		return err
	}
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	progress := newProgress(c)
	w := c.App.Writer
	fmt.Fprintf(w, "%s: TensorFlow %s, %s config, %d warm-up + %d traced steps; step runs %s\n", in, tfrun.Version(),
		c.String("config"), c.Int("warmup"), c.Int("iterations"), describeStep(sp))
	res, err := profiling.Run(data, g, profiling.Options{
		Init: sp.Init, Targets: sp.Targets, Fetches: sp.Fetches, Feeds: sp.Feeds,
		Warmup: c.Int("warmup"), Iterations: c.Int("iterations"), Config: cfg, Progress: progress,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	machine := profiling.Machine(tfrun.OneDNNEnabled())
	prof := res.Measured(profiling.Info{
		Graph: filepath.Base(in), TensorFlowVersion: tfrun.Version(), Machine: machine,
		DeviceModel: profiling.DeviceModel(machine, res.ComputeDevice), DeviceProfile: c.String("device-profile"),
	})
	buf, err := prof.Marshal()
	if err != nil {
		return err
	}
	if err := graphdef.WriteFileAtomic(out, buf, 0o644); err != nil {
		return err
	}
	res.WriteSummary(w, c.Int("top"))
	fmt.Fprintf(w, "profile: %s (%d nodes; compute device %s)\n", out, len(prof.Nodes), profiling.ShortDevice(prof.Device.Name))
	return nil
}

// describeStep says what a step runs, for the header line.
func describeStep(sp *stepSpec) string {
	var parts []string
	if len(sp.Targets) > 0 {
		parts = append(parts, "targets "+strings.Join(sp.Targets, ", "))
	}
	if len(sp.Fetches) > 0 {
		parts = append(parts, "fetches "+strings.Join(sp.Fetches, ", "))
	}
	parts = append(parts, fmt.Sprintf("%d feed(s)", len(sp.Feeds)))
	if sp.Init != "" {
		parts = append(parts, "init "+sp.Init)
	}
	return strings.Join(parts, ", ")
}
