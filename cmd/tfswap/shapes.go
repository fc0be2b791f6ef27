package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/urfave/cli/v2"
)

// The hidden shapes command prints, as JSON, the output shapes TensorFlow's shape functions
// infer for a graph (graphdef.TensorFlowShapes). A pure tfswap runs it in tfswap-runtime
// (runtimeShapes) when its own inference leaves too many sizes unknown.
func init() {
	register(&cli.Command{
		Name:      "shapes",
		Hidden:    true,
		Usage:     "print the output shapes TensorFlow infers for a binary GraphDef, as JSON (tfswap-runtime; used by tfswap)",
		ArgsUsage: "model.pb|-",
		Flags:     []cli.Flag{&cli.Int64Flag{Name: "batch", Usage: "the size of an unknown leading dimension of the placeholders"}},
		Action:    shapesAction,
	})
	if !haveRuntime {
		runtimeCommands["shapes"] = true
		graphdef.DelegatedInference = runtimeShapes
	}
}

// shapesOutput is the shapes command's JSON: each node's output shapes (null for an unknown
// rank, -1 for an unknown dimension).
type shapesOutput struct {
	Shapes map[string][][]int64 `json:"shapes"`
}

func shapesAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("shapes takes exactly one model argument (a binary GraphDef, or - for stdin)")
	}
	if !graphdef.HaveTensorFlowInference() {
		return fmt.Errorf("shapes needs the TensorFlow runtime (tfswap-runtime)")
	}
	path := c.Args().First()
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(c.App.Reader)
		path = "<stdin>"
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return fmt.Errorf("%s: cannot read: %v", path, err)
	}
	m, err := graphdef.Parse(data, graphdef.FormatPB, path)
	if err != nil {
		return err
	}
	shapes, err := graphdef.TensorFlowShapes(m, c.Int64("batch"))
	if err != nil {
		return err
	}
	return json.NewEncoder(c.App.Writer).Encode(shapesOutput{Shapes: shapes})
}

// runtimeShapes runs tfswap-runtime's shapes command on m (graphdef.DelegatedInference); an
// error when there is no runtime binary or it fails.
func runtimeShapes(m *graphdef.Model, batch int64) (map[string][][]int64, error) {
	if os.Getenv(delegatedEnv) != "" {
		return nil, fmt.Errorf("already delegated")
	}
	bin, err := runtimeBinary()
	if err != nil || bin == "" {
		return nil, fmt.Errorf("no tfswap-runtime")
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "shapes", "--batch", fmt.Sprint(batch), "-")
	cmd.Env = append(os.Environ(), delegatedEnv+"=1")
	if _, set := os.LookupEnv("TF_CPP_MIN_LOG_LEVEL"); !set {
		cmd.Env = append(cmd.Env, "TF_CPP_MIN_LOG_LEVEL=3")
	}
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s shapes: %v: %s", bin, err, stderr.String())
	}
	var res shapesOutput
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("%s shapes: %v", bin, err)
	}
	return res.Shapes, nil
}
