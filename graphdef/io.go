package graphdef

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Format is a file format a graph can be read from and written to.
type Format int

const (
	// FormatAuto picks the format from the path: a directory is a SavedModel, ".pbtxt"
	// (or ".pbtx", ".txt", ".prototxt") is a text GraphDef, anything else a binary GraphDef.
	FormatAuto Format = iota
	// FormatPB is a binary-serialized GraphDef.
	FormatPB
	// FormatPBTXT is a GraphDef in protobuf text format.
	FormatPBTXT
	// FormatSavedModel is a SavedModel directory (saved_model.pb plus variables/ and assets/).
	FormatSavedModel
)

// String returns the format's name as ParseFormat reads it: "pb", "pbtxt", "savedmodel" or "auto".
func (f Format) String() string {
	switch f {
	case FormatPB:
		return "pb"
	case FormatPBTXT:
		return "pbtxt"
	case FormatSavedModel:
		return "savedmodel"
	}
	return "auto"
}

// ParseFormat parses a format name as given to --format: "pb", "pbtxt", "savedmodel" or "auto".
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return FormatAuto, nil
	case "pb", "binary":
		return FormatPB, nil
	case "pbtxt", "text", "txt":
		return FormatPBTXT, nil
	case "savedmodel", "saved_model", "saved-model":
		return FormatSavedModel, nil
	}
	return FormatAuto, fmt.Errorf("unknown format %q (want pb, pbtxt or savedmodel)", s)
}

// FormatOf returns the format a path names: a directory or a path ending in "/" or named
// saved_model.pb is a SavedModel; text extensions are pbtxt; anything else is pb.
func FormatOf(path string) Format {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return FormatSavedModel
	}
	if strings.HasSuffix(path, "/") || filepath.Base(path) == savedModelFile {
		return FormatSavedModel
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".pbtxt", ".pbtx", ".txt", ".prototxt":
		return FormatPBTXT
	}
	return FormatPB
}

const savedModelFile = "saved_model.pb"

// LoadOptions say how to read a model.
type LoadOptions struct {
	// Format overrides the format FormatOf would pick.
	Format Format
	// Tags choose the MetaGraphDef of a SavedModel: the one whose tag set equals Tags. With no
	// tags, a SavedModel with exactly one MetaGraphDef gives that one.
	Tags []string
}

// Model is a graph as read from disk, with what is needed to write it back: the surrounding
// SavedModel, and the exact bytes of every node as it was read, so that nodes a rewrite does
// not touch are written back byte for byte.
//
// Graph may be changed in place by a rewrite, under one rule: a NodeDef that is changed is
// replaced by a new message (proto.Clone it first), never mutated. Nodes as parsed share
// their attr values, and nodes of the same attrs one Attr map, so a NodeDef's Attr map is
// never changed in place either: a changed node gets its own (maps.Clone). Save writes every NodeDef
// that is still the very message that was loaded from its original bytes.
type Model struct {
	// Source is the path the model was read from ("" for one built in memory).
	Source string
	// Format is the format it was read in.
	Format Format
	// Graph is the GraphDef.
	Graph *gpb.GraphDef

	raw        *rawIndex       // the bytes of every node as read (binary input only)
	rawRest    []byte          // the GraphDef's fields other than node, as read
	restProtos []proto.Message // pristine copies of those fields, to detect changes
	saved      *cpb.SavedModel // the SavedModel, for FormatSavedModel
	metaIndex  int             // which MetaGraphDef of saved holds Graph
}

// Load reads a model from path.
func Load(path string, opts LoadOptions) (*Model, error) {
	format := opts.Format
	if format == FormatAuto {
		format = FormatOf(path)
	}
	if format == FormatSavedModel {
		return loadSavedModel(path, opts.Tags)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read", Err: unwrapPathError(err)}
	}
	return Parse(data, format, path)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse reads a GraphDef from data in the given format (FormatPB or FormatPBTXT); source names
// the data in errors. Empty data is refused: an empty file is not a graph.
func Parse(data []byte, format Format, source string) (*Model, error) {
	if len(data) == 0 {
		return nil, &Error{File: source, Msg: "is empty: no graph to read"}
	}
	m := &Model{Source: source, Format: format}
	switch format {
	case FormatPB, FormatAuto:
		m.Format = FormatPB
		if m.parseNodes(data) {
			break
		}
		m.raw, m.rawRest, m.restProtos = nil, nil, nil
		g := new(gpb.GraphDef)
		if err := (proto.UnmarshalOptions{}).Unmarshal(data, g); err != nil {
			return nil, &Error{File: source, Msg: "not a binary GraphDef (truncated or corrupt?)", Err: err}
		}
		m.Graph = g
		if err := m.indexRaw(data); err != nil {
			return nil, &Error{File: source, Msg: "not a binary GraphDef", Err: err}
		}
		m.raw.shareAttrs()
	case FormatPBTXT:
		g := new(gpb.GraphDef)
		if err := (prototext.UnmarshalOptions{}).Unmarshal(data, g); err != nil {
			return nil, &Error{File: source, Msg: "not a text GraphDef", Err: err}
		}
		m.Graph = g
	default:
		return nil, &Error{File: source, Msg: fmt.Sprintf("cannot parse %s data as a single GraphDef", format)}
	}
	return m, nil
}

// rawIndex holds the bytes of every node field of a binary GraphDef as it was read: node i of
// the graph as loaded (defs[i]) was read from data[start[i]:start[i+1]]. It costs 12 bytes a
// node (a map from message to bytes cost several times that at a million nodes); a node that
// is not at its loaded position is found through a map built on first need.
type rawIndex struct {
	data  []byte
	defs  []*npb.NodeDef // the node messages as loaded, in order
	start []uint32       // start[i] is node i's first byte in data; start[len(defs)] its end
	once  sync.Once      // builds byDef; clones of a model share its index, and may write at once
	byDef map[*npb.NodeDef]int32
}

// bytesOf returns the bytes n was read from, n being the node at position i of the graph
// now, or nil when n is not a message as loaded.
func (r *rawIndex) bytesOf(i int, n *npb.NodeDef) []byte {
	if r == nil {
		return nil
	}
	if i >= len(r.defs) || r.defs[i] != n {
		r.once.Do(func() {
			r.byDef = make(map[*npb.NodeDef]int32, len(r.defs))
			for j, d := range r.defs {
				r.byDef[d] = int32(j)
			}
		})
		j, ok := r.byDef[n]
		if !ok {
			return nil
		}
		i = int(j)
	}
	return r.data[r.start[i]:r.start[i+1]]
}

// parseNodes parses the binary GraphDef data node by node: each node field is unmarshalled
// alone and its attr values shared at once with the nodes before it (see shareAttrs), so that
// the parse never holds a large graph's unshared attrs (a million-node graph's whole parse
// held about 2 GB before sharing), and the fields other than node are unmarshalled together
// after. It sets m's graph and raw index as Parse and indexRaw do, and reports false, having
// set nothing reliable, on data it cannot read this way (bad wire format, a node or field
// that does not unmarshal, data of 4 GiB or more): Parse then unmarshals the whole message,
// for the same error as before.
func (m *Model) parseNodes(data []byte) bool {
	if len(data) > math.MaxUint32 {
		return false
	}
	g := new(gpb.GraphDef)
	spans := newNodeSpans(0)
	var rest []byte
	seen := make(map[string]*apb.AttrValue)
	share := newAttrSharer(seen)
	dec := nodeDecoder{seen: seen, keys: map[string]string{}, ids: map[*apb.AttrValue]uint32{}, maps: map[string]map[string]*apb.AttrValue{}}
	for off := 0; off < len(data); {
		b := data[off:]
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		fieldLen := protowire.ConsumeFieldValue(num, typ, b[n:])
		if fieldLen < 0 {
			return false
		}
		if num == 1 && typ == protowire.BytesType {
			payload, k := protowire.ConsumeBytes(b[n:])
			if k < 0 {
				return false
			}
			nd, ok, err := dec.decode(payload)
			if err != nil {
				return false
			}
			if !ok {
				nd = new(npb.NodeDef)
				if err := (proto.UnmarshalOptions{}).Unmarshal(payload, nd); err != nil {
					return false
				}
				share(nd, b[:n+fieldLen])
			}
			g.Node = append(g.Node, nd)
			spans.add(off, off+n+fieldLen)
		} else {
			rest = append(rest, b[:n+fieldLen]...)
		}
		off += n + fieldLen
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(rest, g); err != nil || len(g.Node) != len(spans.start) {
		return false
	}
	m.Graph = g
	m.rawRest = rest
	m.restProtos = m.restSnapshot()
	m.raw = newRawIndex(data, g.Node, spans)
	return true
}

// nodeDecoder unmarshals NodeDefs whose attr values are shared (see shareAttrs) without
// unmarshalling a value met before: most of a large graph's attr values repeat, and each
// unmarshalled copy, dropped at once for the shared one, cost a million-node parse about a
// gigabyte of allocations and a third of its time.
type nodeDecoder struct {
	// seen holds the attr values met so far by their bytes, as newAttrSharer's.
	seen map[string]*apb.AttrValue
	// keys holds the attr keys met so far, each string allocated once for all nodes.
	keys map[string]string
	// rest is the node's fields other than attr, reused from node to node.
	rest    []byte
	entries []attrEntry
	// ids numbers the values of seen, and maps holds the attr maps made so far by their
	// entries (each key and its value's number, in the node's order; see attrSet): nodes
	// whose attrs are the same keys with the same values share one map, which a million
	// nodes of a few kinds of op would otherwise each hold a copy of.
	ids  map[*apb.AttrValue]uint32
	maps map[string]map[string]*apb.AttrValue
	set  []byte
}

// attrEntry is one attr map entry of a node's bytes: its key and its value's bytes, and the
// value once decode has found it.
type attrEntry struct {
	key string
	val []byte
	v   *apb.AttrValue
}

// decode unmarshals the NodeDef payload (a node field's contents) as proto.Unmarshal would,
// its attrs taking the values in d.seen read from the same bytes and adding those it meets
// first, and reports true. It reports false, having unmarshalled nothing, for a node whose
// attr entries are not each one key and one value, with a repeated or not UTF-8 key, or bad
// wire format: the caller unmarshals it whole (and shares its attrs as it can). An error is
// one of unmarshalling: the node would not unmarshal whole either.
func (d *nodeDecoder) decode(payload []byte) (*npb.NodeDef, bool, error) {
	d.rest, d.entries = d.rest[:0], d.entries[:0]
	for b := payload; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false, nil
		}
		k := protowire.ConsumeFieldValue(num, typ, b[n:])
		if k < 0 {
			return nil, false, nil
		}
		if num != 5 || typ != protowire.BytesType { // not NodeDef.attr
			d.rest = append(d.rest, b[:n+k]...)
			b = b[n+k:]
			continue
		}
		ent, _ := protowire.ConsumeBytes(b[n:])
		b = b[n+k:]
		key, val, ok := plainEntryBytes(ent)
		if !ok {
			return nil, false, nil
		}
		ks, has := d.keys[string(key)]
		if !has {
			if !utf8.Valid(key) {
				return nil, false, nil
			}
			ks = string(key)
			d.keys[ks] = ks
		}
		e := attrEntry{key: ks, val: val}
		for _, o := range d.entries {
			if o.key == e.key {
				return nil, false, nil
			}
		}
		d.entries = append(d.entries, e)
	}
	nd := new(npb.NodeDef)
	if err := (proto.UnmarshalOptions{}).Unmarshal(d.rest, nd); err != nil {
		return nil, false, err
	}
	if len(d.entries) == 0 {
		return nd, true, nil
	}
	d.set = d.set[:0]
	for i, e := range d.entries {
		v, has := d.seen[string(e.val)]
		if !has {
			v = new(apb.AttrValue)
			if err := (proto.UnmarshalOptions{}).Unmarshal(e.val, v); err != nil {
				return nil, false, err
			}
			d.seen[string(e.val)] = v
		}
		id, has := d.ids[v]
		if !has {
			id = uint32(len(d.ids))
			d.ids[v] = id
		}
		d.entries[i].v = v
		d.set = protowire.AppendString(d.set, e.key)
		d.set = protowire.AppendVarint(d.set, uint64(id))
	}
	if m, ok := d.maps[string(d.set)]; ok {
		nd.Attr = m
		return nd, true, nil
	}
	nd.Attr = make(map[string]*apb.AttrValue, len(d.entries))
	for _, e := range d.entries {
		nd.Attr[e.key] = e.v
	}
	d.maps[string(d.set)] = nd.Attr
	return nd, true, nil
}

// plainEntry returns the key and value bytes of the attr map entry ent and whether it has
// exactly one key and one value field and nothing else.
func plainEntry(ent []byte) (attrEntry, bool) {
	key, val, ok := plainEntryBytes(ent)
	return attrEntry{key: string(key), val: val}, ok
}

// plainEntryBytes is plainEntry, the key as bytes.
func plainEntryBytes(ent []byte) (key, val []byte, ok bool) {
	keys, vals := 0, 0
	for len(ent) > 0 {
		num, typ, n := protowire.ConsumeTag(ent)
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2) {
			return nil, nil, false
		}
		v, k := protowire.ConsumeBytes(ent[n:])
		if k < 0 {
			return nil, nil, false
		}
		ent = ent[n+k:]
		if num == 1 {
			key, keys = v, keys+1
		} else {
			val, vals = v, vals+1
		}
	}
	if keys != 1 || vals != 1 {
		return nil, nil, false
	}
	return key, val, true
}

// nodeSpans records where each node field of a binary GraphDef starts and ends, as the two
// parse paths (parseNodes and indexRaw) meet them in order. start[i] and end[i] are node field
// i's bounds in the data. When the node fields follow each other (as TensorFlow writes them)
// end[i] == start[i+1] and end stays nil; prevEnd is the end of the last field recorded, -1
// before the first.
type nodeSpans struct {
	start, end []uint32
	prevEnd    int
}

// newNodeSpans returns empty spans with room for n node fields.
func newNodeSpans(n int) nodeSpans {
	var start []uint32
	if n > 0 {
		start = make([]uint32, 0, n)
	}
	return nodeSpans{start: start, prevEnd: -1}
}

// add records the next node field, from off to fieldEnd. The first field that does not start
// where the previous one ended switches the spans to keeping every end.
func (s *nodeSpans) add(off, fieldEnd int) {
	if s.end == nil && s.prevEnd >= 0 && s.prevEnd != off {
		s.end = make([]uint32, len(s.start), cap(s.start))
		copy(s.end, s.start[1:])
		s.end[len(s.start)-1] = uint32(s.prevEnd)
	}
	s.start = append(s.start, uint32(off))
	s.prevEnd = fieldEnd
	if s.end != nil {
		s.end = append(s.end, uint32(fieldEnd))
	}
}

// newRawIndex returns the raw index of the nodes defs read from data, node i's field
// starting at spans.start[i] and, when spans.end is not nil, ending at spans.end[i] (else at
// spans.start[i+1], the last at spans.prevEnd).
func newRawIndex(data []byte, defs []*npb.NodeDef, spans nodeSpans) *rawIndex {
	start, end, prevEnd := spans.start, spans.end, spans.prevEnd
	r := &rawIndex{data: data, defs: append([]*npb.NodeDef(nil), defs...)}
	if end == nil {
		if prevEnd < 0 {
			prevEnd = 0
		}
		r.start = append(start, uint32(prevEnd))
		return r
	}
	// Interleaved: copy the node bytes together so that one offset a node suffices.
	var nodes []byte
	r.start = make([]uint32, 0, len(start)+1)
	for i := range start {
		r.start = append(r.start, uint32(len(nodes)))
		nodes = append(nodes, data[start[i]:end[i]]...)
	}
	r.data, r.start = nodes, append(r.start, uint32(len(nodes)))
	return r
}

// newAttrSharer returns the function that makes node n, read from the node field b (tag
// and length included), share its attr values with the nodes passed before it, seen holding
// the values met so far by their bytes (see shareAttrs).
func newAttrSharer(seen map[string]*apb.AttrValue) func(n *npb.NodeDef, b []byte) {
	type entry struct {
		key string
		val []byte
	}
	var entries []entry
	return func(n *npb.NodeDef, b []byte) {
		if len(n.Attr) == 0 {
			return
		}
		entries = entries[:0]
		if !attrEntries(b, func(key string, val []byte) { entries = append(entries, entry{key, val}) }) || len(entries) != len(n.Attr) {
			return // a repeated key or an entry not in the plain form
		}
		for _, e := range entries {
			if _, has := n.Attr[e.key]; !has {
				return
			}
		}
		for _, e := range entries {
			if v, has := seen[string(e.val)]; has {
				n.Attr[e.key] = v
			} else {
				seen[string(e.val)] = n.Attr[e.key]
			}
		}
	}
}

// shareAttrs makes the nodes as loaded share one AttrValue message for each distinct attr
// value they were read with: a value read from the same bytes as one seen before is replaced
// by that one. Most of a large graph's attrs repeat (dtypes, strides, padding, the same
// output shapes), and each parsed copy costs hundreds of bytes (a million-node graph's
// parse held several GB); shared, the nodes keep their content and their bytes. Model's
// messages are never mutated in place (see Model), so sharing them is safe. A node whose
// attr entries are not each one key and one value, or that repeats a key, is left as
// parsed.
func (r *rawIndex) shareAttrs() {
	if r == nil {
		return
	}
	share := newAttrSharer(make(map[string]*apb.AttrValue))
	for i, n := range r.defs {
		share(n, r.data[r.start[i]:r.start[i+1]])
	}
}

// attrEntries calls f with the key and the value bytes of each attr map entry of the node
// field b (a GraphDef's field 1, tag and length included) and reports whether every entry has
// exactly one key and one value field and nothing else; on false, f may have been called for
// some entries.
func attrEntries(b []byte, f func(key string, val []byte)) bool {
	_, _, n := protowire.ConsumeTag(b)
	if n < 0 {
		return false
	}
	node, m := protowire.ConsumeBytes(b[n:])
	if m < 0 {
		return false
	}
	for len(node) > 0 {
		num, typ, n := protowire.ConsumeTag(node)
		if n < 0 {
			return false
		}
		node = node[n:]
		if num != 5 || typ != protowire.BytesType { // NodeDef.attr
			k := protowire.ConsumeFieldValue(num, typ, node)
			if k < 0 {
				return false
			}
			node = node[k:]
			continue
		}
		ent, k := protowire.ConsumeBytes(node)
		if k < 0 {
			return false
		}
		node = node[k:]
		e, ok := plainEntry(ent)
		if !ok {
			return false
		}
		f(e.key, e.val)
	}
	return true
}

// indexRaw records the bytes of each node field (field 1) of a binary GraphDef, in order, and
// the bytes of every other field.
func (m *Model) indexRaw(data []byte) error {
	if len(data) > math.MaxUint32 {
		// Beyond what protobuf writes: no offsets to keep; every node is re-serialised.
		return nil
	}
	m.restProtos = m.restSnapshot()
	spans := newNodeSpans(len(m.Graph.Node) + 1)
	for off := 0; off < len(data); {
		b := data[off:]
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		fieldLen := protowire.ConsumeFieldValue(num, typ, b[n:])
		if fieldLen < 0 {
			return protowire.ParseError(fieldLen)
		}
		if num == 1 && typ == protowire.BytesType {
			if len(spans.start) >= len(m.Graph.Node) {
				return fmt.Errorf("more node fields than nodes")
			}
			spans.add(off, off+n+fieldLen)
		} else {
			m.rawRest = append(m.rawRest, b[:n+fieldLen]...)
		}
		off += n + fieldLen
	}
	if len(spans.start) != len(m.Graph.Node) {
		// Merged (split) node messages: fall back to re-serialising every node.
		return nil
	}
	m.raw = newRawIndex(data, m.Graph.Node, spans)
	return nil
}

// restSnapshot copies the non-node fields of the graph, to tell at write time whether they
// were changed.
func (m *Model) restSnapshot() []proto.Message {
	g := m.Graph
	snap := &gpb.GraphDef{Library: g.Library, Versions: g.Versions, Version: g.Version, DebugInfo: g.DebugInfo}
	return []proto.Message{proto.Clone(snap)}
}

// Marshal serialises the model's graph as a binary GraphDef. Nodes still holding the message
// they were loaded as are written with their original bytes; every other node, and the rest
// of the graph when it was changed, is serialised deterministically. A graph over protobuf's
// 2 GiB limit, which TensorFlow could not read back, is an error.
func (m *Model) Marshal() ([]byte, error) {
	e, err := m.encoder()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, e.size)
	if err := e.encode(func(b []byte) error { out = append(out, b...); return nil }); err != nil {
		return nil, err
	}
	return out, nil
}

// graphEncoder writes a model's graph as a binary GraphDef piece by piece (WriteTo, Marshal),
// without holding the whole serialised graph: what Marshal would return for a graph of a
// million nodes is hundreds of megabytes.
type graphEncoder struct {
	g     *gpb.GraphDef
	raw   *rawIndex
	rest  []byte  // the fields other than node, serialised
	size  int     // the whole GraphDef's size in bytes
	sizes []int32 // sizes[i] is node i's serialised size when it is re-serialised, else -1
}

var det = proto.MarshalOptions{Deterministic: true}

// detSized is det for a message whose size det.Size has just computed: it marshals with the
// sizes that call cached rather than computing them again.
var detSized = proto.MarshalOptions{Deterministic: true, UseCachedSize: true}

// encoder returns the encoder of m's graph, its size computed and checked against protobuf's
// limit.
func (m *Model) encoder() (*graphEncoder, error) {
	g := m.Graph
	e := &graphEncoder{g: g, raw: m.raw}
	rest := &gpb.GraphDef{Library: g.Library, Versions: g.Versions, Version: g.Version, DebugInfo: g.DebugInfo}
	rest.ProtoReflect().SetUnknown(g.ProtoReflect().GetUnknown())
	if m.restProtos != nil && proto.Equal(rest, m.restProtos[0]) {
		e.rest = m.rawRest
	} else {
		b, err := det.Marshal(rest)
		if err != nil {
			return nil, err
		}
		e.rest = b
	}
	size := len(e.rest)
	e.sizes = make([]int32, len(g.Node))
	for i, n := range g.Node {
		if raw := e.raw.bytesOf(i, n); raw != nil {
			size += len(raw)
			e.sizes[i] = -1
			continue
		}
		k := det.Size(n)
		size += protowire.SizeTag(1) + protowire.SizeBytes(k)
		if size > maxProtoBytes {
			break
		}
		e.sizes[i] = int32(k)
	}
	if err := checkSize(size, "the GraphDef"); err != nil {
		return nil, err
	}
	e.size = size
	return e, nil
}

// encode passes the serialised graph to emit in pieces, in order. A piece is valid only until
// emit returns.
func (e *graphEncoder) encode(emit func([]byte) error) error {
	var buf []byte
	written := 0
	for i, n := range e.g.Node {
		if e.sizes[i] < 0 {
			raw := e.raw.bytesOf(i, n)
			if err := emit(raw); err != nil {
				return err
			}
			written += len(raw)
			continue
		}
		// The size encoder computed and det.Size cached in the message: the node has not
		// changed since (the graph is not changed while it is written).
		k := int(e.sizes[i])
		buf = protowire.AppendTag(buf[:0], 1, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(k))
		head := len(buf)
		var err error
		if buf, err = detSized.MarshalAppend(buf, n); err != nil {
			return fmt.Errorf("node %q: %v", n.GetName(), err)
		}
		if len(buf)-head != k {
			return fmt.Errorf("node %q: serialised to %d bytes, sized at %d", n.GetName(), len(buf)-head, k)
		}
		if err := emit(buf); err != nil {
			return err
		}
		written += len(buf)
	}
	if err := emit(e.rest); err != nil {
		return err
	}
	if written+len(e.rest) != e.size {
		return fmt.Errorf("the GraphDef: wrote %d bytes, sized at %d", written+len(e.rest), e.size)
	}
	return nil
}

// maxProtoBytes is the largest serialised message protobuf, and so TensorFlow, reads back
// (2^31 - 1 bytes). It is a variable so that tests can lower it.
var maxProtoBytes = 1<<31 - 1

// checkSize fails when a serialised message of n bytes (what names it) is too large for
// protobuf to read back.
func checkSize(n int, what string) error {
	if n <= maxProtoBytes {
		return nil
	}
	return fmt.Errorf("%s would be %d bytes, over protobuf's limit of %d bytes (2 GiB): TensorFlow could not read it back; "+
		"keep the large constants in variables and save a SavedModel, whose variables are stored beside the graph", what, n, maxProtoBytes)
}

// MarshalText serialises the model's graph as a text GraphDef. The output is the same for
// the same graph (map entries are sorted; field order is the proto's).
func (m *Model) MarshalText() ([]byte, error) {
	if err := checkSize(proto.Size(m.Graph), "the GraphDef"); err != nil {
		return nil, err
	}
	return prototext.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m.Graph)
}

// SaveOptions say how to write a model.
type SaveOptions struct {
	// Format overrides the format FormatOf would pick from the output path. A SavedModel can
	// only be written as a SavedModel (and is written as one by default).
	Format Format
}

// Save writes the model to path: a GraphDef by the rules of WriteFileAtomic, a SavedModel by
// those of saveSavedModel (a new or empty directory, built beside it and renamed into place,
// the input SavedModel's other files — variables/, assets/, ... — copied). A failure or an
// interruption never leaves a half-written graph, and nothing but the file asked for is
// replaced. A path that may not be written gives an *OutputError; a graph over protobuf's
// 2 GiB limit an *Error.
func (m *Model) Save(path string, opts SaveOptions) error {
	format := opts.Format
	if format == FormatAuto {
		if m.Format == FormatSavedModel {
			format = FormatSavedModel
		} else {
			format = FormatOf(path)
		}
	}
	switch format {
	case FormatSavedModel:
		if m.saved == nil {
			return refuse(path, "cannot write a SavedModel: the graph was not read from one")
		}
		return m.saveSavedModel(path)
	case FormatPBTXT:
		b, err := m.MarshalText()
		if err != nil {
			return &Error{File: path, Msg: "cannot serialise graph", Err: err}
		}
		return WriteFileAtomic(path, b, 0o644)
	default:
		e, err := m.encoder()
		if err != nil {
			return &Error{File: path, Msg: "cannot serialise graph", Err: err}
		}
		return writeAtomic(path, 0o644, func(w io.Writer) error {
			bw := bufio.NewWriterSize(w, 1<<20)
			if err := e.encode(func(b []byte) error { _, err := bw.Write(b); return err }); err != nil {
				return err
			}
			return bw.Flush()
		})
	}
}

// WriteFileAtomic writes data to the output path by tfswap's output rules:
//
//   - a regular file, or a path that does not exist, is written to a temporary file in the
//     same directory, which is synced and then renamed over path, so that a failure never
//     leaves a half-written file; an existing file keeps its permission bits, a new one gets
//     perm;
//   - a symbolic link is followed and its target written by these rules; the link is kept;
//   - a FIFO or a character device (/dev/null, a terminal) is opened and written through,
//     never replaced;
//   - anything else (a directory, a socket, a block device) is refused with an *OutputError.
//
// While the temporary file exists, SIGINT, SIGTERM and SIGHUP remove it before the process
// dies of the signal.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeAtomic is WriteFileAtomic with the data written by write, piece by piece: the file is
// never held whole in memory. An error from write leaves no file behind (the temporary one is
// removed), as a failed write does.
func writeAtomic(path string, perm os.FileMode, write func(io.Writer) error) error {
	target, kind, err := fileOutput(path)
	if err != nil {
		return err
	}
	if kind == outStream {
		return writeThrough(path, write)
	}
	if st, err := os.Stat(target); err == nil {
		perm = st.Mode().Perm()
	}
	register, done := watchSignals()
	defer done()
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return &Error{File: path, Msg: "cannot create output", Err: unwrapPathError(err)}
	}
	tmp := f.Name()
	register(tmp)
	if testHookTempCreated != nil {
		testHookTempCreated(tmp)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return &Error{File: path, Msg: "cannot write output", Err: unwrapPathError(err)}
	}
	if err := write(f); err != nil {
		return fail(err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return &Error{File: path, Msg: "cannot write output", Err: err}
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return &Error{File: path, Msg: "cannot write output", Err: unwrapPathError(err)}
	}
	return nil
}

// writeThrough writes to a FIFO or a character device what write writes.
func writeThrough(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return &Error{File: path, Msg: "cannot open output", Err: unwrapPathError(err)}
	}
	if err := write(f); err != nil {
		f.Close()
		return &Error{File: path, Msg: "cannot write output", Err: unwrapPathError(err)}
	}
	if err := f.Close(); err != nil {
		return &Error{File: path, Msg: "cannot write output", Err: unwrapPathError(err)}
	}
	return nil
}

func loadSavedModel(path string, tags []string) (*Model, error) {
	dir := path
	if filepath.Base(path) == savedModelFile {
		dir = filepath.Dir(path)
	}
	file := filepath.Join(dir, savedModelFile)
	data, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{File: dir, Msg: "not a SavedModel directory: no " + savedModelFile}
		}
		return nil, &Error{File: file, Msg: "cannot read", Err: unwrapPathError(err)}
	}
	sm := new(cpb.SavedModel)
	if err := proto.Unmarshal(data, sm); err != nil {
		return nil, &Error{File: file, Msg: "not a SavedModel (truncated or corrupt?)", Err: err}
	}
	if len(sm.MetaGraphs) == 0 {
		return nil, &Error{File: file, Msg: "the SavedModel has no MetaGraphDef"}
	}
	idx := -1
	var available []string
	for i, mg := range sm.MetaGraphs {
		have := mg.GetMetaInfoDef().GetTags()
		available = append(available, "["+strings.Join(have, ",")+"]")
		if len(tags) > 0 && sameSet(have, tags) {
			idx = i
			break
		}
	}
	if len(tags) == 0 {
		if len(sm.MetaGraphs) != 1 {
			return nil, &Error{File: file, Msg: fmt.Sprintf("the SavedModel has %d MetaGraphDefs (tag sets %s): choose one with --tags", len(sm.MetaGraphs), strings.Join(available, " "))}
		}
		idx = 0
	}
	if idx < 0 {
		return nil, &Error{File: file, Msg: fmt.Sprintf("no MetaGraphDef has tags [%s] (tag sets: %s)", strings.Join(tags, ","), strings.Join(available, " "))}
	}
	g := sm.MetaGraphs[idx].GraphDef
	if g == nil {
		g = new(gpb.GraphDef)
		sm.MetaGraphs[idx].GraphDef = g
	}
	return &Model{Source: dir, Format: FormatSavedModel, Graph: g, saved: sm, metaIndex: idx}, nil
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// saveSavedModel writes the SavedModel to dir. When dir is the directory the model was read
// from, only saved_model.pb is replaced (atomically). Otherwise dir must not exist or be an
// empty directory, and must neither contain nor lie inside the input SavedModel (an
// *OutputError otherwise): the whole SavedModel is built in a temporary directory beside dir,
// with the input's other files copied, and renamed to dir once complete. Nothing already in
// place is ever deleted. While the temporary directory exists, SIGINT, SIGTERM and SIGHUP
// remove it before the process dies of the signal.
func (m *Model) saveSavedModel(dir string) error {
	if filepath.Base(dir) == savedModelFile {
		dir = filepath.Dir(dir)
	}
	sm := proto.Clone(m.saved).(*cpb.SavedModel)
	sm.MetaGraphs[m.metaIndex].GraphDef = m.Graph
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(sm)
	if err != nil {
		return &Error{File: dir, Msg: "cannot serialise SavedModel", Err: err}
	}
	if err := checkSize(len(data), "the SavedModel's saved_model.pb"); err != nil {
		return &Error{File: dir, Err: err}
	}
	if SamePath(dir, m.Source) {
		return WriteFileAtomic(filepath.Join(dir, savedModelFile), data, 0o644)
	}
	if Within(m.Source, dir) {
		return refuse(dir, "contains the input SavedModel %s; name a new directory", m.Source)
	}
	if Within(dir, m.Source) {
		return refuse(dir, "lies inside the input SavedModel %s; name a directory outside it", m.Source)
	}
	target, err := savedModelTarget(dir)
	if err != nil {
		return err
	}
	register, done := watchSignals()
	defer done()
	tmp, err := os.MkdirTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return &Error{File: dir, Msg: "cannot create output", Err: unwrapPathError(err)}
	}
	register(tmp)
	if testHookTempCreated != nil {
		testHookTempCreated(tmp)
	}
	cleanup := func(err error) error {
		os.RemoveAll(tmp)
		return err
	}
	if err := copyTree(m.Source, tmp, func(rel string) bool { return rel == savedModelFile }); err != nil {
		return cleanup(&Error{File: dir, Msg: "cannot copy SavedModel files from " + m.Source, Err: err})
	}
	if err := os.WriteFile(filepath.Join(tmp, savedModelFile), data, 0o644); err != nil {
		return cleanup(&Error{File: dir, Msg: "cannot write output", Err: unwrapPathError(err)})
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return cleanup(&Error{File: dir, Msg: "cannot write output", Err: err})
	}
	// rename(2) of a directory replaces target only when it is missing or an empty directory
	// (os.Rename refuses every existing directory): should a file have appeared in it since
	// it was checked, the rename fails and nothing is lost.
	if err := syscall.Rename(tmp, target); err != nil {
		return cleanup(&Error{File: dir, Msg: "cannot write output", Err: err})
	}
	return nil
}

// copyTree copies the regular files and directories under src into dst, skipping the
// relative paths skip reports.
func copyTree(src, dst string, skip func(rel string) bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		if skip(rel) {
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// Clone returns a model sharing m's original bytes and SavedModel but with its own copy of
// the GraphDef's node list (the NodeDef messages are shared, and must not be mutated).
func (m *Model) Clone() *Model {
	c := *m
	g := &gpb.GraphDef{
		Node: append([]*npb.NodeDef(nil), m.Graph.Node...), Library: m.Graph.Library,
		Versions: m.Graph.Versions, Version: m.Graph.Version, DebugInfo: m.Graph.DebugInfo,
	}
	g.ProtoReflect().SetUnknown(m.Graph.ProtoReflect().GetUnknown())
	c.Graph = g
	return &c
}

// NewModel wraps a GraphDef built in memory.
func NewModel(g *gpb.GraphDef) *Model { return &Model{Format: FormatPB, Graph: g} }
