package main

import (
	"fmt"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/urfave/cli/v2"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

func init() {
	register(&cli.Command{
		Name:      "place",
		Usage:     "set the device of a graph's nodes (e.g. to emulate a GPU with /device:CPU:1)",
		UsageText: "tfswap place [options] MODEL --device DEVICE -o OUTPUT",
		Description: "Writes MODEL with every node that has no device placed on DEVICE (with --all, every\n" +
			"node). On a CPU-only machine, /device:CPU:1 of a session with device_count {CPU: 2} stands\n" +
			"in for the GPU, so that swaps to /device:CPU:0 cross a real device boundary.",
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "device", Required: true, Usage: "the device to place nodes on"},
			&cli.BoolFlag{Name: "all", Usage: "place every node, not only those without a device"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "where to write the placed model (- for stdout)"},
			&cli.StringFlag{Name: "output-format", Usage: "pb, pbtxt or savedmodel (default: from the output path; a SavedModel stays one)"},
		),
		Action: func(c *cli.Context) error {
			dev, err := graphdef.ParseDevice(c.String("device"))
			if err != nil || dev.Type == "" {
				return usagef("--device: want a device such as /device:GPU:0, got %q", c.String("device"))
			}
			fm, in, err := loadFacadeModel(c, c.App.Reader)
			if err != nil {
				return err
			}
			m := fm.Graph()
			out := c.String("output")
			format, err := graphdef.ParseFormat(c.String("output-format"))
			if err != nil {
				return usagef("--output-format: %v", err)
			}
			if format, err = fm.OutputFormat(out, format); err != nil {
				return err
			}
			if err := checkPaths([]pathArg{modelArg(m, in)}, []pathArg{{opt: "-o", path: out, dir: format == graphdef.FormatSavedModel, stdout: true}}); err != nil {
				return err
			}
			if _, err := graphdef.NewGraph(m.Graph, m.Source); err != nil {
				return err
			}
			placed := m.Clone()
			n := 0
			for i, nd := range placed.Graph.Node {
				if nd.GetDevice() != "" && !c.Bool("all") {
					continue
				}
				if nd.GetDevice() == dev.String() {
					continue
				}
				cp := proto.Clone(nd).(*npb.NodeDef)
				cp.Device = dev.String()
				placed.Graph.Node[i] = cp
				n++
			}
			if out == "-" {
				data, err := marshalFor(placed, format)
				if err != nil {
					return err
				}
				_, err = c.App.Writer.Write(data)
				return err
			}
			if err := placed.Save(out, graphdef.SaveOptions{Format: format}); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s -> %s: %d of %d nodes placed on %s\n", in, out, n, len(placed.Graph.Node), dev)
			return nil
		},
	})
}
