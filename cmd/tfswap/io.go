package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/graphdef"
	"github.com/urfave/cli/v2"
)

// modelFlags are the flags every command that reads a model takes.
func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "input format: pb, pbtxt, savedmodel (default: from the path; pb for stdin)"},
		&cli.StringSliceFlag{Name: "tags", Usage: "SavedModel: the tag set of the MetaGraphDef to use (e.g. --tags train)"},
		&cli.Int64Flag{Name: "batch", Usage: "the batch size of an unknown (None) leading dimension of the graph's placeholders, for shape inference"},
	}
}

// loadModel reads the model named by the command's single argument ("-" is stdin), as
// loadFacadeModel does, in the graphdef package's form.
func loadModel(c *cli.Context, stdin io.Reader) (*graphdef.Model, string, error) {
	m, in, err := loadFacadeModel(c, stdin)
	if err != nil {
		return nil, "", err
	}
	return m.Graph(), in, nil
}

// loadFacadeModel reads the model named by the command's single argument ("-" is stdin)
// with tfswap.LoadWithOptions or tfswap.Read, which refuse an empty input and a graph
// without nodes.
func loadFacadeModel(c *cli.Context, stdin io.Reader) (*tfswap.Model, string, error) {
	if c.NArg() != 1 {
		return nil, "", usagef("%s takes exactly one model argument (.pb, .pbtxt, SavedModel directory, or - for stdin); got %d", c.Command.Name, c.NArg())
	}
	path := c.Args().First()
	format, err := graphdef.ParseFormat(c.String("format"))
	if err != nil {
		return nil, "", usagef("--format: %v", err)
	}
	batch := c.Int64("batch")
	if batch < 0 || (c.IsSet("batch") && batch == 0) {
		return nil, "", usagef("--batch must be a positive batch size, not %d", batch)
	}
	opts := tfswap.LoadOptions{Format: format, Tags: c.StringSlice("tags"), Batch: batch}
	var m *tfswap.Model
	if path == "-" {
		m, err = tfswap.Read(stdin, opts)
	} else {
		m, err = tfswap.LoadWithOptions(path, opts)
	}
	if err != nil {
		return nil, "", err
	}
	if w := m.ShapeWarning(); w != "" {
		fmt.Fprintf(c.App.ErrWriter, "tfswap: warning: %s: %s\n", m.Source(), w)
	}
	return m, path, nil
}

// checkNodes refuses a graph without nodes: there is nothing to rewrite or simulate, and it
// is most likely not the file meant.
func checkNodes(m *graphdef.Model) error {
	if len(m.Graph.GetNode()) == 0 {
		return &graphdef.Error{File: m.Source, Msg: "the graph has no nodes"}
	}
	return nil
}

// pathArg is a file or directory a command reads or writes, with the option that names it.
type pathArg struct {
	// opt names the path in messages: "MODEL", "-o", "--report".
	opt  string
	path string
	// dir is set for a SavedModel directory.
	dir bool
	// mayBeModel is set for the graph output of --in-place, which is the model input.
	mayBeModel bool
	// stdout is set for an output that "-" writes to stdout; elsewhere "-" is refused.
	stdout bool
}

// modelArg is the model input of a command: a file, or a SavedModel's directory (also when
// it was named by its saved_model.pb).
func modelArg(m *graphdef.Model, in string) pathArg {
	if m.Format == graphdef.FormatSavedModel {
		return pathArg{opt: "MODEL", path: m.Source, dir: true}
	}
	return pathArg{opt: "MODEL", path: in}
}

// stdoutArgs are fileArgs for outputs that "-" writes to stdout.
func stdoutArgs(c *cli.Context, opts ...string) []pathArg {
	args := fileArgs(c, opts...)
	for i := range args {
		args[i].stdout = true
	}
	return args
}

// fileArgs are the non-empty paths of some options, as file inputs or outputs.
func fileArgs(c *cli.Context, opts ...string) []pathArg {
	var args []pathArg
	for _, o := range opts {
		if p := c.String(o); p != "" {
			args = append(args, pathArg{opt: "--" + o, path: p})
		}
	}
	return args
}

// checkPaths refuses, with an *graphdef.OutputError (exit status 2), outputs that name an
// input or another output (compared as resolved files, so that links, "./x" and hard links are
// seen through), outputs inside an input SavedModel directory, a SavedModel output that
// contains an input, "-" where stdout is not an output, two outputs on stdout, and outputs that cannot be written
// (graphdef.CheckFileOutput, graphdef.CheckSavedModelOutput). Character devices (/dev/null, a
// terminal) are written through and never replaced, so several outputs may share one.
// Every output is checked before any work is done.
func checkPaths(inputs, outputs []pathArg) error {
	refuse := func(o pathArg, format string, args ...any) error {
		return &graphdef.OutputError{Path: o.opt + " " + o.path, Msg: fmt.Sprintf(format, args...)}
	}
	stdout := ""
	for i, o := range outputs {
		if o.path == "-" {
			if !o.stdout {
				return usagef("%s writes a file: - (stdout) is not supported there", o.opt)
			}
			if stdout != "" {
				return usagef("%s and %s both write to stdout (-); give one of them a file", stdout, o.opt)
			}
			stdout = o.opt
			continue
		}
		stream := graphdef.IsStream(o.path) && !isFIFO(o.path)
		for _, in := range inputs {
			if in.path == "" || in.path == "-" || (o.mayBeModel && in.opt == "MODEL") {
				continue
			}
			if !stream && graphdef.SamePath(o.path, in.path) {
				return refuse(o, "is the same file as the input %s %s: refusing to overwrite an input", in.opt, in.path)
			}
			if in.dir && graphdef.Within(o.path, in.path) {
				return refuse(o, "lies inside the input SavedModel %s %s: refusing to write into an input", in.opt, in.path)
			}
			if o.dir && graphdef.Within(in.path, o.path) {
				return refuse(o, "contains the input %s %s: name a new directory", in.opt, in.path)
			}
		}
		for _, p := range outputs[:i] {
			if p.path == "-" {
				continue
			}
			if !stream && graphdef.SamePath(o.path, p.path) {
				return refuse(o, "is the same file as the output %s %s: give each output its own file", p.opt, p.path)
			}
			if p.dir && graphdef.Within(o.path, p.path) || o.dir && graphdef.Within(p.path, o.path) {
				return refuse(o, "overlaps the output %s %s", p.opt, p.path)
			}
		}
		var err error
		switch {
		case o.mayBeModel:
		case o.dir:
			err = graphdef.CheckSavedModelOutput(o.path)
		default:
			err = graphdef.CheckFileOutput(o.path)
		}
		if err != nil {
			var oe *graphdef.OutputError
			if errors.As(err, &oe) {
				return refuse(o, "%s", oe.Msg)
			}
			return err
		}
	}
	return nil
}

// isFIFO reports whether path is a FIFO (after following links).
func isFIFO(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&os.ModeNamedPipe != 0
}

// defaultOutput names the output of rewriting path: "model.swap.pb" for "model.pb", and
// "model.swap" for a SavedModel directory "model".
func defaultOutput(path string) string {
	clean := strings.TrimSuffix(path, "/")
	if st, err := os.Stat(clean); err == nil && st.IsDir() {
		return clean + ".swap"
	}
	ext := filepath.Ext(clean)
	return strings.TrimSuffix(clean, ext) + ".swap" + ext
}
