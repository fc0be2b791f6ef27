package npy

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadNumPyFiles reads files written by NumPy (testdata/gen.py) and checks dtype, shape,
// values, and that Encode reproduces NumPy's version 1.0 bytes exactly.
func TestReadNumPyFiles(t *testing.T) {
	tests := []struct {
		file       string
		dtype      string
		shape      []int64
		values     any
		numpyBytes bool // Encode must reproduce the file byte for byte
	}{
		{"f4_2x3.npy", Float32, []int64{2, 3}, []float32{-1, -0.5, 0, 0.5, 1, 1.5}, true},
		{"f8_scalar.npy", Float64, []int64{}, []float64{-2.5}, true},
		{"i4_4.npy", Int32, []int64{4}, []int32{-2, -1, 0, math.MaxInt32}, true},
		{"i8_2x2.npy", Int64, []int64{2, 2}, []int64{math.MinInt64, 1, 2, math.MaxInt64}, true},
		{"b1_3.npy", Bool, []int64{3}, []bool{true, false, true}, true},
		{"u1_0x4.npy", Uint8, []int64{0, 4}, []uint8{}, true},
		{"f4_v2.npy", Float32, []int64{3}, []float32{1.5, float32(math.Copysign(0, -1)), float32(math.Inf(1))}, false},
		{"i4_v3.npy", Int32, []int64{2, 1}, []int32{7, 8}, false},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			a, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if a.DType != tc.dtype || !reflect.DeepEqual(a.Shape, tc.shape) {
				t.Fatalf("got dtype %s shape %v, want %s %v", a.DType, a.Shape, tc.dtype, tc.shape)
			}
			var got any
			switch tc.dtype {
			case Float32:
				got, err = a.Float32s()
			case Float64:
				got, err = a.Float64s()
			case Int32:
				got, err = a.Int32s()
			case Int64:
				got, err = a.Int64s()
			case Bool:
				got, err = a.Bools()
			case Uint8:
				got, err = a.Uint8s()
			}
			if err != nil {
				t.Fatal(err)
			}
			// Compare float bit patterns so that -0 and +0 differ.
			if f, ok := got.([]float32); ok {
				want := tc.values.([]float32)
				for i := range want {
					if i >= len(f) || math.Float32bits(f[i]) != math.Float32bits(want[i]) {
						t.Fatalf("values %v, want %v", f, want)
					}
				}
			}
			if !reflect.DeepEqual(got, tc.values) {
				t.Fatalf("values %v, want %v", got, tc.values)
			}
			enc, err := Encode(a)
			if err != nil {
				t.Fatal(err)
			}
			if tc.numpyBytes {
				orig, _ := os.ReadFile(path)
				if !bytes.Equal(enc, orig) {
					t.Errorf("Encode differs from NumPy's file:\n got %q\nwant %q", enc, orig)
				}
			}
			if len(enc)-len(a.Data) != 128 && len(enc)-len(a.Data) != 64 {
				t.Errorf("data starts at byte %d, not a multiple of 64", len(enc)-len(a.Data))
			}
		})
	}
}

// TestReadRejects checks that unsupported files fail with errors naming the file and the
// problem.
func TestReadRejects(t *testing.T) {
	tests := []struct {
		file, want string
	}{
		{"fortran.npy", "fortran_order"},
		{"bigendian.npy", `big-endian dtype ">f4"`},
		{"complex.npy", `unsupported dtype "<c8"`},
		{"structured.npy", "structured dtypes are not supported"},
		{"missing.npy", "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			_, err := Read(path)
			if err == nil {
				t.Fatal("Read succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q should name %s and contain %q", err, path, tc.want)
			}
		})
	}
}

// npyBytes builds a version 1.0 file from a header dict and data, without padding.
func npyBytes(major byte, dict string, data []byte) []byte {
	b := []byte(magic)
	b = append(b, major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(dict)))
	}
	b = append(b, dict...)
	return append(b, data...)
}

// TestDecodeHeaders covers header spellings NumPy (or old NumPy) produces and malformed ones.
func TestDecodeHeaders(t *testing.T) {
	four := []byte{1, 2, 3, 4}
	tests := []struct {
		name    string
		in      []byte
		dtype   string
		shape   []int64
		wantErr string
	}{
		{"plain", npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n", four), Int32, []int64{1}, ""},
		{"python2 long dims", npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1L,), }  \n", four), Float32, []int64{1}, ""},
		{"double quotes, other key order", npyBytes(1, `{"shape": (2, 2), "fortran_order": False, "descr": "|u1"}`, four), Uint8, []int64{2, 2}, ""},
		{"u1 with little-endian mark", npyBytes(1, "{'descr': '<u1', 'fortran_order': False, 'shape': (4,)}", four), Uint8, []int64{4}, ""},
		{"version 2", npyBytes(2, "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }\n", four), Bool, []int64{2, 2}, ""},
		{"version 3", npyBytes(3, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }\n", four), Bool, []int64{4}, ""},
		{"bad magic", []byte("\x93NUMPX\x01\x00"), "", nil, "bad magic"},
		{"empty", nil, "", nil, "bad magic"},
		{"version 4", npyBytes(4, "{}", nil), "", nil, "version 4.0"},
		{"version 1.1", append([]byte(magic), 1, 1, 0, 0), "", nil, "version 1.1"},
		{"header too long", append([]byte(magic), 1, 0, 0xff, 0xff, '{'), "", nil, "header length 65535"},
		{"v2 header too long", append([]byte(magic), 2, 0, 0xff, 0xff, 0xff, 0x7f, '{'), "", nil, "header length"},
		{"short data", npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", four), "", nil, "need 8 data bytes, have 4"},
		{"trailing data", npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", append(four, 0)), "", nil, "need 4 data bytes, have 5"},
		{"missing key", npyBytes(1, "{'descr': '<i4', 'shape': (1,), }", four), "", nil, "fortran_order"},
		{"extra key", npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), 'x': 1}", four), "", nil, `unexpected key "x"`},
		{"duplicate key", npyBytes(1, "{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (1,)}", four), "", nil, "duplicate key"},
		{"not a dict", npyBytes(1, "(1,)", four), "", nil, "not a dictionary"},
		{"one-tuple without comma", npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1)}", four), "", nil, "trailing comma"},
		{"negative dim", npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (-1,)}", four), "", nil, "unexpected '-'"},
		{"huge dims", npyBytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", four), "", nil, "too many elements"},
		{"dim overflow", npyBytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}", four), "", nil, "out of range"},
		{"garbage after dict", npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,)} x", four), "", nil, "after the dictionary"},
		{"unterminated string", npyBytes(1, "{'descr", four), "", nil, "unterminated string"},
		{"fortran", npyBytes(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (1,)}", four), "", nil, "fortran_order arrays are not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Decode(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.DType != tc.dtype || !reflect.DeepEqual(a.Shape, tc.shape) || !bytes.Equal(a.Data, four) {
				t.Fatalf("got %s %v %v", a.DType, a.Shape, a.Data)
			}
		})
	}
}

// TestWriteRead round-trips arrays through files, including a header long enough to need
// format version 2.0.
func TestWriteRead(t *testing.T) {
	long := make([]int64, 25000) // "1, " per dimension: a header over 65535 bytes
	for i := range long {
		long[i] = 1
	}
	tests := []struct {
		name    string
		a       *Array
		version byte
	}{
		{"float32", FromFloat32s([]int64{2, 2}, []float32{1, 2, 3, float32(math.NaN())}), 1},
		{"float64 scalar", FromFloat64s(nil, []float64{math.Pi}), 1},
		{"int32", FromInt32s([]int64{3}, []int32{-1, 0, 1}), 1},
		{"int64 empty", FromInt64s([]int64{0, 5}, nil), 1},
		{"bool", FromBools([]int64{2}, []bool{true, false}), 1},
		{"uint8", FromUint8s([]int64{1, 1, 3}, []uint8{9, 8, 7}), 1},
		{"version 2 header", FromUint8s(long, []uint8{42}), 2},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".npy")
			if err := Write(path, tc.a); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if raw[6] != tc.version {
				t.Errorf("format version %d, want %d", raw[6], tc.version)
			}
			if (len(raw)-len(tc.a.Data))%64 != 0 {
				t.Errorf("data offset %d is not a multiple of 64", len(raw)-len(tc.a.Data))
			}
			got, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			wantShape := tc.a.Shape
			if wantShape == nil {
				wantShape = []int64{}
			}
			if got.DType != tc.a.DType || !reflect.DeepEqual(got.Shape, wantShape) || !bytes.Equal(got.Data, tc.a.Data) {
				t.Fatalf("read back %s %v %v, wrote %s %v %v", got.DType, got.Shape, got.Data, tc.a.DType, tc.a.Shape, tc.a.Data)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestWriteRejects checks that invalid arrays are not written.
func TestWriteRejects(t *testing.T) {
	tests := []struct {
		name string
		a    *Array
		want string
	}{
		{"size mismatch", &Array{DType: Float32, Shape: []int64{2}, Data: make([]byte, 4)}, "need 8 data bytes, have 4"},
		{"bad dtype", &Array{DType: "<c8", Shape: []int64{1}, Data: make([]byte, 8)}, `unsupported dtype "<c8"`},
		{"negative dim", &Array{DType: Uint8, Shape: []int64{-1}}, "negative dimension"},
		{"nil", nil, "nil array"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "x.npy")
			err := Write(path, tc.a)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and containing %q", err, path, tc.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("%s exists after a failed Write", path)
			}
		})
	}
}

// TestAccessorDTypeMismatch checks that typed accessors refuse other dtypes.
func TestAccessorDTypeMismatch(t *testing.T) {
	a := FromInt32s([]int64{1}, []int32{1})
	if _, err := a.Float32s(); err == nil || !strings.Contains(err.Error(), "dtype <i4, not <f4") {
		t.Fatalf("Float32s on int32: %v", err)
	}
}

// FuzzRead checks that Decode never panics, and that whatever it accepts re-encodes to a
// file that decodes to the same array.
func FuzzRead(f *testing.F) {
	f.Add(npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", []byte{0, 0, 0x80, 0x3f}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Decode(data)
		if err != nil {
			return
		}
		enc, err := Encode(a)
		if err != nil {
			t.Fatalf("Encode of a decoded array: %v", err)
		}
		b, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode of Encode: %v", err)
		}
		if a.DType != b.DType || !reflect.DeepEqual(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("round trip changed the array: %v %v -> %v %v", a.DType, a.Shape, b.DType, b.Shape)
		}
	})
}
