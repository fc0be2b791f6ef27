package tfswap

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"weak"

	"github.com/tfswap/tfswap/graphdef"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// Format is a file format a graph is read from and written to.
type Format = graphdef.Format

// The formats. FormatAuto takes the format from the path: a directory, a path ending in "/"
// or a file named saved_model.pb is a SavedModel; ".pbtxt", ".pbtx", ".txt" and ".prototxt"
// are text GraphDefs; anything else is a binary GraphDef.
const (
	FormatAuto       = graphdef.FormatAuto
	FormatPB         = graphdef.FormatPB
	FormatPBTXT      = graphdef.FormatPBTXT
	FormatSavedModel = graphdef.FormatSavedModel
)

// ParseFormat parses a format name: "pb", "pbtxt", "savedmodel", or "auto" (or "").
func ParseFormat(name string) (Format, error) {
	f, err := graphdef.ParseFormat(name)
	if err != nil {
		return f, &Error{Kind: ErrBadOptions, Err: err}
	}
	return f, nil
}

// Model is a TensorFlow training graph as read from a file, with what is needed to write it
// back exactly: the SavedModel around it, if any, and the bytes of every node as read, so
// that the nodes a rewrite leaves alone are written back byte for byte. A Model is not
// changed by Plan, which returns a new one; it is safe for concurrent reads.
type Model struct {
	gm *graphdef.Model
	// path is the path it was read from as given ("-" for a stream).
	path string
	// shapes says how completely the graph's tensor sizes are known (after inference).
	shapes graphdef.ShapeStats
	// index is the index of gm's graph that shape inference built, held weakly so that a
	// model only inspected does not keep it: Plan takes it (takeIndex) rather than index
	// the graph again, unless the collector has reclaimed it.
	index struct {
		sync.Mutex
		p weak.Pointer[graphdef.Graph]
	}
}

// takeIndex returns the index of m's graph that shape inference built, or nil when the
// collector has reclaimed it or a caller took it already. Each index is handed out once:
// the planner may change its memos, and concurrent Plans of one model must not share it.
func (m *Model) takeIndex() *graphdef.Graph {
	m.index.Lock()
	defer m.index.Unlock()
	g := m.index.p.Value()
	m.index.p = weak.Pointer[graphdef.Graph]{}
	return g
}

// LoadOptions say how to read a model. The zero value reads any format by its path and takes
// a SavedModel's only MetaGraphDef.
type LoadOptions struct {
	// Format is the format to read; FormatAuto (the zero value) takes it from the path, and
	// reads a binary GraphDef from a stream.
	Format Format
	// Tags choose the MetaGraphDef of a SavedModel whose tag set equals them; with no tags
	// a SavedModel must have exactly one.
	Tags []string
	// Batch, when positive, is the size of an unknown leading (batch) dimension of the
	// graph's placeholders, for shape inference.
	Batch int64
}

// Load reads a model from path: a binary GraphDef (.pb), a text GraphDef (.pbtxt), or a
// SavedModel directory (or its saved_model.pb), as the tfswap command reads it. An empty
// file, a graph without nodes and a node name TensorFlow would reject are bad input
// (ErrBadInput), with the file and node named.
func Load(path string) (*Model, error) { return LoadWithOptions(path, LoadOptions{}) }

// LoadWithOptions is Load with the format or the SavedModel tags given.
func LoadWithOptions(path string, opts LoadOptions) (*Model, error) {
	if path == "" {
		return nil, badOptions("no model path given")
	}
	m, err := graphdef.Load(path, graphdef.LoadOptions{Format: opts.Format, Tags: opts.Tags})
	if err != nil {
		return nil, classify(err)
	}
	return newModel(m, path, opts)
}

// Read reads a GraphDef from r: binary unless opts.Format is FormatPBTXT (a SavedModel is a
// directory and cannot be read from a stream). Errors name it "<stdin>", and Path returns "-",
// as for the tfswap command's standard input.
func Read(r io.Reader, opts LoadOptions) (*Model, error) {
	format := opts.Format
	switch format {
	case FormatSavedModel:
		return nil, badOptions("a SavedModel cannot be read from stdin")
	case FormatAuto:
		format = FormatPB
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &Error{Kind: ErrBadInput, Err: fmt.Errorf("<stdin>: cannot read: %v", err)}
	}
	m, err := graphdef.Parse(data, format, "<stdin>")
	if err != nil {
		return nil, classify(err)
	}
	return newModel(m, "-", opts)
}

// newModel wraps m, refusing a graph without nodes: there is nothing to rewrite, and it is
// most likely not the file meant. It infers the shapes the graph lacks
// (graphdef.InferShapes), with opts.Batch for an unknown batch dimension.
func newModel(m *graphdef.Model, path string, opts LoadOptions) (*Model, error) {
	if len(m.Graph.GetNode()) == 0 {
		return nil, &Error{Kind: ErrBadInput, Err: &graphdef.Error{File: m.Source, Msg: "the graph has no nodes"}}
	}
	if opts.Batch < 0 {
		return nil, badOptions("the batch must be positive, not %d", opts.Batch)
	}
	// A graph that cannot be indexed gets no inference: the command's own checks name
	// what is wrong with it.
	st, g, _ := graphdef.InferShapesIndexed(m, graphdef.InferOptions{Batch: opts.Batch})
	model := &Model{gm: m, path: path, shapes: st}
	if g != nil {
		model.index.p = weak.Make(g)
	}
	return model, nil
}

// Shapes says how completely the sizes of the graph's tensors are known, after the shape
// inference Load and Read run: tensors of unknown size count as 0 bytes in every prediction.
func (m *Model) Shapes() graphdef.ShapeStats { return m.shapes }

// ShapeWarning returns the warning to give when more than 5% of the graph's tensor sizes
// stay unknown, with the share and the fixes; "" otherwise.
func (m *Model) ShapeWarning() string { return m.shapes.Warning() }

// Path returns the path the model was read from, as given to Load ("-" for Read).
func (m *Model) Path() string { return m.path }

// Source returns the file or directory the model was read from, as errors name it: a
// SavedModel's directory, "<stdin>" for Read.
func (m *Model) Source() string { return m.gm.Source }

// Format returns the format the model was read in.
func (m *Model) Format() Format { return m.gm.Format }

// Nodes returns the number of nodes of the graph.
func (m *Model) Nodes() int { return len(m.gm.Graph.GetNode()) }

// Graph returns the model's graph in the graphdef package's form, for the packages below the
// facade. It must not be changed.
func (m *Model) Graph() *graphdef.Model { return m.gm }

// Marshal serialises the model's graph as a GraphDef in format (FormatPB for FormatAuto;
// a SavedModel cannot be serialised to one stream). Nodes left as they were read keep their
// bytes. A graph over protobuf's 2 GiB limit, which TensorFlow could not read back, is
// ErrBadInput.
func (m *Model) Marshal(format Format) ([]byte, error) {
	var b []byte
	var err error
	switch format {
	case FormatPBTXT:
		b, err = m.gm.MarshalText()
	case FormatSavedModel:
		return nil, badOptions("a SavedModel cannot be written to stdout")
	default:
		b, err = m.gm.Marshal()
	}
	if err != nil {
		return nil, &Error{Kind: ErrBadInput, Err: err}
	}
	return b, nil
}

// WriteOptions say how to write a model. The zero value writes in the format the path names
// (a SavedModel stays one) and never replaces the model's input.
type WriteOptions struct {
	// Format is the format to write; FormatAuto (the zero value) writes a model read from a
	// SavedModel as a SavedModel and any other by the output path's name. FormatPB or
	// FormatPBTXT write a SavedModel's graph alone as a GraphDef.
	Format Format
	// InPlace allows the output to be the input the model was read from: the file, or for a
	// SavedModel its saved_model.pb (its variables stay). Without it, writing over the input
	// is refused.
	InPlace bool
}

// Write writes the model to path by tfswap's output rules: a file is written to a temporary
// file beside it and renamed into place (through a symbolic link to its target; a FIFO or a
// character device is written through), so that a failure leaves the old file as it was; a
// SavedModel goes only to a new or empty directory, built beside it and renamed into place,
// with the input's variables and assets copied. An output that is the input (unless
// opts.InPlace), lies inside the input SavedModel, or cannot be written (a directory where a
// file is expected, a directory that is not empty for a SavedModel) is refused with
// ErrRefusedOutput; a format that does not fit the model or the path (OutputFormat) is
// ErrBadOptions; a failed write is ErrWriteFailed.
func (m *Model) Write(path string, opts WriteOptions) error {
	format, err := m.OutputFormat(path, opts.Format)
	if err != nil {
		return err
	}
	switch path {
	case "":
		return &Error{Kind: ErrRefusedOutput, Err: &graphdef.OutputError{Path: path, Msg: "no output path given"}}
	case "-":
		return &Error{Kind: ErrRefusedOutput, Err: &graphdef.OutputError{Path: path, Msg: "is standard output, not a file: write the bytes of Marshal there"}}
	}
	if !opts.InPlace && m.path != "-" && graphdef.SamePath(path, m.inputPath()) {
		return &Error{Kind: ErrRefusedOutput, Err: &graphdef.OutputError{Path: path,
			Msg: "is the same file as the input " + m.inputPath() + ": refusing to overwrite an input (WriteOptions.InPlace replaces it)"}}
	}
	if format == FormatSavedModel && !opts.InPlace && graphdef.SamePath(path, m.gm.Source) {
		return &Error{Kind: ErrRefusedOutput, Err: &graphdef.OutputError{Path: path,
			Msg: "is the input SavedModel: refusing to overwrite an input (WriteOptions.InPlace replaces its saved_model.pb)"}}
	}
	return writeError(m.gm.Save(path, graphdef.SaveOptions{Format: format}))
}

// inputPath is the file the model was read from: a SavedModel's saved_model.pb.
func (m *Model) inputPath() string {
	if m.gm.Format == FormatSavedModel {
		return filepath.Join(m.gm.Source, "saved_model.pb")
	}
	return m.path
}

// graphFileExts are the extensions of GraphDef files (graphdef.FormatOf).
var graphFileExts = map[string]bool{".pb": true, ".pbtxt": true, ".pbtx": true, ".txt": true, ".prototxt": true}

// OutputFormat returns the format Write writes the model to path in, given the format asked
// for (FormatAuto: from the path): the format asked for; else a binary GraphDef for "-"
// (standard output); a SavedModel for a model read from one; for a GraphDef the format of
// the path's name (a GraphDef is written as a file, whatever its name). A SavedModel whose
// output is named like a GraphDef file (out.pb) is refused, since it would be written as a
// directory of that name, and so is FormatSavedModel for a model not read from a SavedModel
// (ErrBadOptions).
func (m *Model) OutputFormat(path string, format Format) (Format, error) {
	if format == FormatSavedModel && m.gm.Format != FormatSavedModel {
		return 0, badOptions("--output-format savedmodel: %s is not a SavedModel; a SavedModel is written only from one", m.gm.Source)
	}
	switch {
	case format != FormatAuto:
		return format, nil
	case path == "-":
		return FormatPB, nil
	case m.gm.Format != FormatSavedModel:
		if f := graphdef.FormatOf(path); f != FormatSavedModel {
			return f, nil
		}
		return FormatPB, nil
	}
	if graphFileExts[strings.ToLower(filepath.Ext(path))] && filepath.Base(path) != "saved_model.pb" {
		return 0, badOptions("%s is a SavedModel, which is written as a directory, but the output %s is named like a GraphDef file: "+
			"give --output-format pb (or pbtxt) to write only the graph, or a directory name for the SavedModel", m.gm.Source, path)
	}
	return FormatSavedModel, nil
}

// Place returns a copy of the model with every node that has no device placed on device,
// such as "/device:CPU:1" for the two-device CPU emulation (package session), where CPU:1
// stands for the GPU. The model itself is not changed.
func (m *Model) Place(device string) (*Model, error) {
	d, err := graphdef.ParseDevice(device)
	if err != nil || d.Type == "" {
		return nil, badOptions("place: want a device such as /device:GPU:0, got %q", device)
	}
	placed := m.gm.Clone()
	for i, nd := range placed.Graph.Node {
		if nd.GetDevice() != "" {
			continue
		}
		cp := proto.Clone(nd).(*npb.NodeDef)
		cp.Device = d.String()
		placed.Graph.Node[i] = cp
	}
	return &Model{gm: placed, path: m.path}, nil
}
