// Package npy reads and writes NumPy .npy files holding plain numeric arrays.
//
// It supports format versions 1.0, 2.0 and 3.0, little-endian fixed-size dtypes ('<f4',
// '<f8', '<i4', '<i8') and the single-byte dtypes '|b1' and '|u1', in C (row-major) order.
// Fortran-order, big-endian, structured and object arrays are rejected with an error that
// names the file. The data is kept as raw little-endian bytes, so arrays can be compared bit
// for bit and handed to TensorFlow without conversion.
package npy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The dtypes this package reads and writes, spelled as NumPy's descr strings.
const (
	Float32 = "<f4"
	Float64 = "<f8"
	Int32   = "<i4"
	Int64   = "<i8"
	Bool    = "|b1"
	Uint8   = "|u1"
)

// magic is the first six bytes of every .npy file.
const magic = "\x93NUMPY"

// elemSizes maps each supported descr to its element size in bytes.
var elemSizes = map[string]int{
	Float32: 4,
	Float64: 8,
	Int32:   4,
	Int64:   8,
	Bool:    1,
	Uint8:   1,
}

// Array is an n-dimensional array in C order: DType is a NumPy descr string (one of the
// constants above), Shape the dimensions (empty for a scalar), and Data the elements as raw
// little-endian bytes, len(Data) == NumElements() * ElemSize(DType).
type Array struct {
	DType string
	Shape []int64
	Data  []byte
}

// ElemSize returns the element size in bytes of a supported dtype, and false for any other.
func ElemSize(dtype string) (int, bool) {
	n, ok := elemSizes[dtype]
	return n, ok
}

// NumElements returns the number of elements the shape describes (1 for a scalar), or an
// error when a dimension is negative or the product overflows int64.
func NumElements(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in shape %v", d, shape)
		}
		if d != 0 && n > math.MaxInt64/d {
			return 0, fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= d
	}
	return n, nil
}

// Validate checks that the array's dtype is supported, its shape valid, and that Data holds
// exactly as many bytes as the dtype and shape require.
func (a *Array) Validate() error {
	if a == nil {
		return errors.New("nil array")
	}
	size, ok := elemSizes[a.DType]
	if !ok {
		return fmt.Errorf("unsupported dtype %q (supported: %s)", a.DType, supportedList())
	}
	n, err := NumElements(a.Shape)
	if err != nil {
		return err
	}
	if n > math.MaxInt64/int64(size) {
		return fmt.Errorf("shape %v has too many elements", a.Shape)
	}
	if want := n * int64(size); int64(len(a.Data)) != want {
		return fmt.Errorf("dtype %s and shape %v need %d data bytes, have %d", a.DType, a.Shape, want, len(a.Data))
	}
	return nil
}

// supportedList returns the supported dtypes for error messages.
func supportedList() string {
	return strings.Join([]string{Float32, Float64, Int32, Int64, Bool, Uint8}, ", ")
}

// Read reads the .npy file at path. Errors name the file.
func Read(path string) (*Array, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	a, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("npy: %s: %w", path, err)
	}
	return a, nil
}

// Decode parses the contents of a .npy file. The returned array's Data aliases data.
// Errors do not name a file; Read adds the path.
func Decode(data []byte) (*Array, error) {
	if len(data) < len(magic)+2 || string(data[:len(magic)]) != magic {
		return nil, errors.New("not a .npy file (bad magic string)")
	}
	major, minor := data[6], data[7]
	var headerLen, start int
	switch major {
	case 1:
		if len(data) < 10 {
			return nil, errors.New("truncated header length")
		}
		headerLen = int(binary.LittleEndian.Uint16(data[8:10]))
		start = 10
	case 2, 3:
		if len(data) < 12 {
			return nil, errors.New("truncated header length")
		}
		l := binary.LittleEndian.Uint32(data[8:12])
		if uint64(l) > uint64(len(data)) {
			return nil, fmt.Errorf("header length %d exceeds the file size %d", l, len(data))
		}
		headerLen = int(l)
		start = 12
	default:
		return nil, fmt.Errorf("unsupported format version %d.%d", major, minor)
	}
	if minor != 0 {
		return nil, fmt.Errorf("unsupported format version %d.%d", major, minor)
	}
	if len(data)-start < headerLen {
		return nil, fmt.Errorf("header length %d exceeds the %d bytes after the preamble", headerLen, len(data)-start)
	}
	h, err := parseHeader(string(data[start : start+headerLen]))
	if err != nil {
		return nil, err
	}
	a := &Array{DType: h.descr, Shape: h.shape, Data: data[start+headerLen:]}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return a, nil
}

// header holds the three keys of a .npy header dictionary.
type header struct {
	descr string
	shape []int64
}

// parseHeader parses the Python dict literal of a .npy header, for example
// "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".
func parseHeader(s string) (*header, error) {
	p := &litParser{s: s}
	v, err := p.value()
	if err != nil {
		return nil, fmt.Errorf("header %q: %w", clip(s), err)
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, fmt.Errorf("header %q: unexpected %q after the dictionary", clip(s), clip(p.s[p.pos:]))
	}
	d, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("header %q is not a dictionary", clip(s))
	}
	for k := range d {
		if k != "descr" && k != "fortran_order" && k != "shape" {
			return nil, fmt.Errorf("header has unexpected key %q", k)
		}
	}
	h := &header{}
	descr, ok := d["descr"].(string)
	if !ok {
		if _, present := d["descr"]; present {
			return nil, fmt.Errorf("descr %v is not a plain dtype string (structured dtypes are not supported)", d["descr"])
		}
		return nil, errors.New("header has no 'descr'")
	}
	if h.descr, err = normalizeDescr(descr); err != nil {
		return nil, err
	}
	fortran, ok := d["fortran_order"].(bool)
	if !ok {
		return nil, errors.New("header has no boolean 'fortran_order'")
	}
	if fortran {
		return nil, errors.New("fortran_order arrays are not supported (only C order); save the array with np.ascontiguousarray")
	}
	shape, ok := d["shape"].([]any)
	if !ok {
		return nil, errors.New("header has no tuple 'shape'")
	}
	h.shape = make([]int64, len(shape))
	for i, x := range shape {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return nil, fmt.Errorf("shape %v: dimension %d is not a non-negative integer", shape, i)
		}
		h.shape[i] = n
	}
	return h, nil
}

// normalizeDescr maps a NumPy descr to one of the supported constants: single-byte types
// may carry any byte-order character, wider types must be little-endian.
func normalizeDescr(d string) (string, error) {
	if len(d) == 3 && (d[1:] == "b1" || d[1:] == "u1") && strings.ContainsRune("<>|=", rune(d[0])) {
		return "|" + d[1:], nil
	}
	if _, ok := elemSizes[d]; ok {
		return d, nil
	}
	if len(d) == 3 && d[0] == '>' {
		if _, ok := elemSizes["<"+d[1:]]; ok {
			return "", fmt.Errorf("big-endian dtype %q is not supported (only little-endian)", d)
		}
	}
	return "", fmt.Errorf("unsupported dtype %q (supported: %s)", d, supportedList())
}

// clip shortens s for error messages.
func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// litParser parses the subset of Python literals .npy headers use: dicts with string keys,
// strings, True/False, integers (with Python 2's optional L suffix) and tuples.
type litParser struct {
	s   string
	pos int
	// depth bounds nesting so hostile headers cannot exhaust the stack.
	depth int
}

func (p *litParser) skipSpace() {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *litParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

// value parses one literal: a map[string]any, []any (tuple), string, bool or int64.
func (p *litParser) value() (any, error) {
	p.skipSpace()
	if p.pos >= len(p.s) {
		return nil, p.errorf("unexpected end of header")
	}
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > 16 {
		return nil, p.errorf("literal nested too deeply")
	}
	switch c := p.s[p.pos]; {
	case c == '{':
		return p.dict()
	case c == '(':
		return p.tuple()
	case c == '\'' || c == '"':
		return p.str()
	case c >= '0' && c <= '9':
		return p.integer()
	case strings.HasPrefix(p.s[p.pos:], "True"):
		p.pos += 4
		return true, nil
	case strings.HasPrefix(p.s[p.pos:], "False"):
		p.pos += 5
		return false, nil
	case c == '[':
		return nil, p.errorf("lists are not supported (structured dtypes are not supported)")
	default:
		return nil, p.errorf("unexpected %q", c)
	}
}

func (p *litParser) dict() (any, error) {
	p.pos++ // '{'
	d := map[string]any{}
	for {
		p.skipSpace()
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			p.pos++
			return d, nil
		}
		k, err := p.value()
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, p.errorf("dictionary key %v is not a string", k)
		}
		if _, dup := d[key]; dup {
			return nil, p.errorf("duplicate key %q", key)
		}
		p.skipSpace()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			return nil, p.errorf("expected ':' after key %q", key)
		}
		p.pos++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		d[key] = v
		p.skipSpace()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			p.pos++
			return d, nil
		}
		return nil, p.errorf("expected ',' or '}' in dictionary")
	}
}

func (p *litParser) tuple() (any, error) {
	p.pos++ // '('
	var t []any
	for {
		p.skipSpace()
		if p.pos < len(p.s) && p.s[p.pos] == ')' {
			p.pos++
			if t == nil {
				t = []any{}
			}
			return t, nil
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		t = append(t, v)
		p.skipSpace()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == ')' {
			if len(t) == 1 {
				// "(5)" is an int in Python, not a tuple; NumPy never writes it.
				return nil, p.errorf("one-element tuple without a trailing comma")
			}
			p.pos++
			return t, nil
		}
		return nil, p.errorf("expected ',' or ')' in tuple")
	}
}

func (p *litParser) str() (any, error) {
	q := p.s[p.pos]
	end := strings.IndexByte(p.s[p.pos+1:], q)
	if end < 0 {
		return nil, p.errorf("unterminated string")
	}
	v := p.s[p.pos+1 : p.pos+1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return nil, p.errorf("escape sequences in strings are not supported")
	}
	p.pos += end + 2
	return v, nil
}

func (p *litParser) integer() (any, error) {
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
	}
	n, err := strconv.ParseInt(p.s[start:p.pos], 10, 64)
	if err != nil {
		return nil, p.errorf("integer %q out of range", p.s[start:p.pos])
	}
	if p.pos < len(p.s) && p.s[p.pos] == 'L' { // Python 2 long literal, as old NumPy wrote shapes.
		p.pos++
	}
	return n, nil
}

// Encode returns the .npy encoding of a: format version 1.0 when the header fits its 16-bit
// length field, else 2.0, with the header padded so that the data starts at a multiple of
// 64 bytes, as NumPy writes it.
func Encode(a *Array) ([]byte, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	dims := make([]string, len(a.Shape))
	for i, d := range a.Shape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	shape := "(" + strings.Join(dims, ", ") + ")"
	if len(dims) == 1 {
		shape = "(" + dims[0] + ",)"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", a.DType, shape)
	major, prefix := byte(1), 10
	if pad(prefix, len(dict)) > math.MaxUint16 {
		major, prefix = 2, 12
	}
	hlen := pad(prefix, len(dict))
	out := make([]byte, 0, prefix+hlen+len(a.Data))
	out = append(out, magic...)
	out = append(out, major, 0)
	if major == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(hlen))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(hlen))
	}
	out = append(out, dict...)
	for i := len(dict); i < hlen-1; i++ {
		out = append(out, ' ')
	}
	out = append(out, '\n')
	return append(out, a.Data...), nil
}

// pad returns the header length (dict, spaces and the final newline) that makes
// prefix+length a multiple of 64.
func pad(prefix, dictLen int) int {
	total := prefix + dictLen + 1
	return (total+63)/64*64 - prefix
}

// Write writes a to path as a .npy file, atomically: the file is written under a
// temporary name in the same directory and renamed into place.
func Write(path string, a *Array) error {
	data, err := Encode(a)
	if err != nil {
		return fmt.Errorf("npy: %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("npy: %s: %w", path, werr)
	}
	return nil
}
