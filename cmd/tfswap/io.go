package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/urfave/cli/v2"
)

// modelFlags are the flags every command that reads a model takes.
func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "input format: pb, pbtxt, savedmodel (default: from the path; pb for stdin)"},
		&cli.StringSliceFlag{Name: "tags", Usage: "SavedModel: the tag set of the MetaGraphDef to use (e.g. --tags train)"},
	}
}

// loadModel reads the model named by the command's single argument ("-" is stdin).
func loadModel(c *cli.Context, stdin io.Reader) (*graphdef.Model, string, error) {
	if c.NArg() != 1 {
		return nil, "", usagef("%s takes exactly one model argument (.pb, .pbtxt, SavedModel directory, or - for stdin); got %d", c.Command.Name, c.NArg())
	}
	path := c.Args().First()
	format, err := graphdef.ParseFormat(c.String("format"))
	if err != nil {
		return nil, "", usagef("--format: %v", err)
	}
	if path == "-" {
		if format == graphdef.FormatSavedModel {
			return nil, "", usagef("a SavedModel cannot be read from stdin")
		}
		if format == graphdef.FormatAuto {
			format = graphdef.FormatPB
		}
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, "", fmt.Errorf("<stdin>: cannot read: %v", err)
		}
		m, err := graphdef.Parse(data, format, "<stdin>")
		return m, path, err
	}
	m, err := graphdef.Load(path, graphdef.LoadOptions{Format: format, Tags: c.StringSlice("tags")})
	return m, path, err
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

// sameFile reports whether a and b name the same existing file or directory.
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(sa, sb)
}
