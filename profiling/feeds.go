package profiling

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/npy"
	"github.com/tfswap/tfswap/tfrun"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// DefaultSeed is the seed of random feeds unless another is given.
const DefaultSeed = 1234

// FeedFile is a --feed flag: the tensor to feed ("node" or "node:port") and the .npy file
// holding its value.
type FeedFile struct {
	Tensor, Path string
}

// ParseFeedFlag parses "name=file.npy".
func ParseFeedFlag(s string) (FeedFile, error) {
	i := strings.IndexByte(s, '=')
	if i <= 0 || i == len(s)-1 {
		return FeedFile{}, fmt.Errorf("want NAME=FILE.npy, got %q", s)
	}
	return FeedFile{Tensor: s[:i], Path: s[i+1:]}, nil
}

// Placeholder is a node a step needs fed: its tensor name ("input:0"), dtype, and shape
// (nil when even the rank is unknown; -1 for a dimension of unknown size).
type Placeholder struct {
	Node  *graphdef.Node
	DType tfrun.DataType
	Shape []int64
}

// Tensor returns the placeholder's tensor name, "node:0".
func (p Placeholder) Tensor() string { return p.Node.Name + ":0" }

// ShapeString formats the shape, "(?, 28, 28, 1)", or "<unknown rank>".
func (p Placeholder) ShapeString() string {
	if p.Shape == nil {
		return "<unknown rank>"
	}
	return graphdef.FormatShape(p.Shape)
}

// Describe formats dtype and shape, "float32(?, 28, 28, 1)".
func (p Placeholder) Describe() string {
	return graphdef.DataTypeName(p.DType) + p.ShapeString()
}

// FanIn returns the nodes a step that fetches fetches and runs targets executes (their
// transitive data and control inputs, themselves included), marked by node index. Names
// may be tensor names ("node:port"); an unknown node is an error.
func FanIn(g *graphdef.Graph, names []string) ([]bool, error) {
	var roots []*graphdef.Node
	for _, name := range names {
		node, _, _, err := graphdef.ParseInput(name)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", name, err)
		}
		n := g.Node(node)
		if n == nil {
			return nil, fmt.Errorf("no node %q in the graph", node)
		}
		roots = append(roots, n)
	}
	return g.FanIn(roots), nil
}

// Placeholders returns the Placeholder nodes among the marked ones (see FanIn), in
// GraphDef order, with the dtype and shape their attrs give: the "shape" attr when it knows
// the rank, otherwise _output_shapes. PlaceholderWithDefault is left out: it needs no feed.
func Placeholders(g *graphdef.Graph, mark []bool) ([]Placeholder, error) {
	var out []Placeholder
	for _, n := range g.Nodes {
		if n.Op != "Placeholder" || (mark != nil && !mark[n.Index]) {
			continue
		}
		p := Placeholder{Node: n}
		dt, ok := n.Def.GetAttr()["dtype"]
		if !ok {
			return nil, &graphdef.Error{File: g.Source, Node: n.Name, Msg: "placeholder has no dtype attr"}
		}
		p.DType = dt.GetType()
		if sh, ok := n.Def.GetAttr()["shape"]; ok && sh.GetShape() != nil && !sh.GetShape().GetUnknownRank() {
			p.Shape = []int64{}
			for _, d := range sh.GetShape().GetDim() {
				p.Shape = append(p.Shape, d.GetSize())
			}
		} else if s := (graphdef.Tensor{Node: n, Port: 0}).Shape(); s != nil {
			p.Shape = append([]int64{}, s...)
		}
		out = append(out, p)
	}
	return out, nil
}

// CheckFeed checks that value fits the tensor it feeds: the dtype the graph gives it, and
// its shape where the graph knows it. Errors name the node.
func CheckFeed(g *graphdef.Graph, tensor string, value *tfrun.Tensor, source string) error {
	node, port, _, err := graphdef.ParseInput(tensor)
	if err != nil {
		return fmt.Errorf("feed %q: %v", tensor, err)
	}
	n := g.Node(node)
	if n == nil {
		return fmt.Errorf("feed %s: no node %q in the graph", tensor, node)
	}
	t := graphdef.Tensor{Node: n, Port: port}
	var want Placeholder
	if n.Op == "Placeholder" && port == 0 {
		ps, err := Placeholders(g, nil)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Node == n {
				want = p
			}
		}
	} else {
		if port >= len(n.OutputTypes) && n.OutputTypes != nil {
			return fmt.Errorf("feed %s: node %q has %d output(s)", tensor, node, len(n.OutputTypes))
		}
		want.Node = n
		if dt, ok := t.DataType(); ok {
			want.DType = dt
		}
		want.Shape = t.Shape()
	}
	if want.DType != 0 && value.DType != want.DType {
		return fmt.Errorf("feed %s: node %q (%s) takes %s, %s holds %s", tensor, node, n.Op, want.Describe(), source, value)
	}
	if want.Shape != nil {
		ok := len(want.Shape) == len(value.Shape)
		for i := 0; ok && i < len(want.Shape); i++ {
			ok = want.Shape[i] < 0 || want.Shape[i] == value.Shape[i]
		}
		if !ok {
			return fmt.Errorf("feed %s: node %q (%s) takes shape %s, %s holds %s", tensor, node, n.Op, want.ShapeString(), source, value)
		}
	}
	return nil
}

// LoadFeeds reads the given feed files and checks each against the graph (CheckFeed). The
// result is keyed by canonical tensor name ("node:port").
func LoadFeeds(g *graphdef.Graph, files []FeedFile) (map[string]*tfrun.Tensor, error) {
	out := map[string]*tfrun.Tensor{}
	for _, f := range files {
		node, port, _, err := graphdef.ParseInput(f.Tensor)
		if err != nil {
			return nil, fmt.Errorf("feed %q: %v", f.Tensor, err)
		}
		name := fmt.Sprintf("%s:%d", node, port)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("feed %s is given twice", name)
		}
		a, err := npy.Read(f.Path)
		if err != nil {
			return nil, fmt.Errorf("feed %s: %w", name, err)
		}
		t, err := tfrun.TensorFromNpy(a)
		if err != nil {
			return nil, fmt.Errorf("feed %s (%s): %w", name, f.Path, err)
		}
		if err := CheckFeed(g, name, t, f.Path); err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// RandomFeeds returns a value for every placeholder in ps that feeds lacks: random data of
// the placeholder's dtype and shape, from a generator seeded with seed and the placeholder's
// name (so a placeholder's value does not depend on which others there are). Floats are
// uniform in [0, 1); integers are 0 or 1, valid as class labels and indices for any model
// with at least two classes; bools are random. A placeholder whose shape is not fully known,
// or whose dtype has no generator, is an error naming the node: it needs a --feed.
func RandomFeeds(ps []Placeholder, feeds map[string]*tfrun.Tensor, seed uint64) (map[string]*tfrun.Tensor, error) {
	out := map[string]*tfrun.Tensor{}
	var missing []string
	for _, p := range ps {
		if _, ok := feeds[p.Tensor()]; ok {
			continue
		}
		known := p.Shape != nil
		for _, d := range p.Shape {
			known = known && d >= 0
		}
		if !known {
			missing = append(missing, fmt.Sprintf("placeholder %q (%s) has no feed, and random data needs a fully known shape: give --feed %s=FILE.npy", p.Node.Name, p.Describe(), p.Node.Name))
			continue
		}
		t, err := randomTensor(p, seed)
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		out[p.Tensor()] = t
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("%s", strings.Join(missing, "\n"))
	}
	return out, nil
}

// randomTensor makes the random value of a placeholder of known shape.
func randomTensor(p Placeholder, seed uint64) (*tfrun.Tensor, error) {
	h := fnv.New64a()
	h.Write([]byte(p.Node.Name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	n, err := tfrun.NumElements(p.Shape)
	if err != nil {
		return nil, fmt.Errorf("placeholder %q: %v", p.Node.Name, err)
	}
	elem, ok := graphdef.ElementBytes(p.DType)
	if !ok {
		return nil, fmt.Errorf("placeholder %q (%s): cannot make random %s values: give --feed %s=FILE.npy", p.Node.Name, p.Describe(), graphdef.DataTypeName(p.DType), p.Node.Name)
	}
	data := make([]byte, n*elem)
	for i := int64(0); i < n; i++ {
		b := data[i*elem : (i+1)*elem]
		switch p.DType {
		case tpb.DataType_DT_FLOAT:
			binary.LittleEndian.PutUint32(b, math.Float32bits(rng.Float32()))
		case tpb.DataType_DT_DOUBLE:
			binary.LittleEndian.PutUint64(b, math.Float64bits(rng.Float64()))
		case tpb.DataType_DT_INT32, tpb.DataType_DT_INT64, tpb.DataType_DT_INT16, tpb.DataType_DT_INT8,
			tpb.DataType_DT_UINT8, tpb.DataType_DT_UINT16, tpb.DataType_DT_UINT32, tpb.DataType_DT_UINT64, tpb.DataType_DT_BOOL:
			b[0] = byte(rng.IntN(2)) // little endian: the low byte holds 0 or 1, the rest stay 0
		default:
			return nil, fmt.Errorf("placeholder %q (%s): cannot make random %s values: give --feed %s=FILE.npy", p.Node.Name, p.Describe(), graphdef.DataTypeName(p.DType), p.Node.Name)
		}
	}
	return tfrun.NewTensor(p.DType, p.Shape, data)
}
