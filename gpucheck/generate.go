package gpucheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/tfswap/tfswap/graphdef"
)

// Graph is a generated training graph at one batch size and what a training step of it
// needs, from its sidecar.
type Graph struct {
	// Model and Batch are what was generated; Path is the GraphDef file.
	Model string
	Batch int
	Path  string
	Def   *graphdef.Model
	// Graph is Def indexed.
	Graph *graphdef.Graph
	Side  Sidecar
}

// Sidecar is the part of a generated graph's sidecar JSON (testmodels/large.py's NAME.json)
// a training step needs.
type Sidecar struct {
	Name        string     `json:"name"`
	Batch       int        `json:"batch"`
	Loss        string     `json:"loss"`
	TrainOp     string     `json:"train_op"`
	InitOp      string     `json:"init_op"`
	Variables   []Variable `json:"variables"`
	Description string     `json:"description,omitempty"`
}

// Variable is a trainable variable and the tensor that reads its value.
type Variable struct {
	Name  string `json:"name"`
	Fetch string `json:"fetch"`
}

// Generator makes the training graph of a model at a batch size.
type Generator interface {
	Generate(model string, batch int) (*Graph, error)
}

// PythonGenerator generates graphs with testmodels/large.py into Dir, reusing a graph it
// made before when its file is newer than the generator's sources.
type PythonGenerator struct {
	// Python runs Script (testmodels/large.py); Dir receives MODEL_bBATCH.pb and .json.
	Python, Script, Dir string
	// Log receives the generator's output; nil discards it.
	Log io.Writer
}

// Generate returns model's graph at batch, generating it when needed.
func (p *PythonGenerator) Generate(model string, batch int) (*Graph, error) {
	if batch < 1 {
		return nil, fmt.Errorf("gpucheck: batch %d of %s: want at least 1", batch, model)
	}
	out := filepath.Join(p.Dir, fmt.Sprintf("%s_b%d.pb", model, batch))
	if !p.fresh(out) {
		if err := os.MkdirAll(p.Dir, 0o755); err != nil {
			return nil, err
		}
		cmd := exec.Command(p.Python, p.Script, "--model", model, "--batch", fmt.Sprint(batch), "--out", out)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err := cmd.Run()
		if p.Log != nil {
			p.Log.Write(buf.Bytes())
		}
		if err != nil {
			tail := buf.Bytes()
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			return nil, fmt.Errorf("gpucheck: generating %s at batch %d with %s: %v\n%s", model, batch, p.Script, err, tail)
		}
	}
	return LoadGraph(out, model, batch)
}

// fresh reports whether out and its sidecar exist and are newer than the generator's sources
// (the script and the graphkit.py beside it).
func (p *PythonGenerator) fresh(out string) bool {
	st, err := os.Stat(out)
	if err != nil {
		return false
	}
	if _, err := os.Stat(sidecarPath(out)); err != nil {
		return false
	}
	for _, src := range []string{p.Script, filepath.Join(filepath.Dir(p.Script), "graphkit.py")} {
		if s, err := os.Stat(src); err == nil && s.ModTime().After(st.ModTime()) {
			return false
		}
	}
	return true
}

func sidecarPath(pb string) string { return pb[:len(pb)-len(filepath.Ext(pb))] + ".json" }

// LoadGraph reads a generated graph and its sidecar (the .json beside it) and checks that
// they are model's graph at batch.
func LoadGraph(path, model string, batch int) (*Graph, error) {
	data, err := os.ReadFile(sidecarPath(path))
	if err != nil {
		return nil, fmt.Errorf("gpucheck: %w", err)
	}
	var side Sidecar
	if err := json.Unmarshal(data, &side); err != nil {
		return nil, fmt.Errorf("gpucheck: %s: %v", sidecarPath(path), err)
	}
	if side.Batch != batch || (model != "" && side.Name != model) {
		return nil, fmt.Errorf("gpucheck: %s holds %s at batch %d, not %s at batch %d", sidecarPath(path), side.Name, side.Batch, model, batch)
	}
	if side.Loss == "" || side.TrainOp == "" || side.InitOp == "" {
		return nil, fmt.Errorf("gpucheck: %s: loss, train_op and init_op are required", sidecarPath(path))
	}
	m, err := graphdef.Load(path, graphdef.LoadOptions{})
	if err != nil {
		return nil, err
	}
	g, err := graphdef.NewGraph(m.Graph, m.Source)
	if err != nil {
		return nil, err
	}
	return &Graph{Model: side.Name, Batch: batch, Path: path, Def: m, Graph: g, Side: side}, nil
}
