package tfrun

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/npy"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// DataType is TensorFlow's DataType enum; its values are those of the C API's TF_DataType.
type DataType = tpb.DataType

// Tensor is a dense tensor of a fixed-size dtype: Data holds the elements in row-major order
// as raw little-endian bytes, exactly as TensorFlow stores them on this (little-endian)
// machine. Two tensors are bit-identical when Equal says so.
type Tensor struct {
	DType DataType
	Shape []int64
	Data  []byte
}

// NewTensor returns a tensor after checking that data has the size dtype and shape require.
func NewTensor(dtype DataType, shape []int64, data []byte) (*Tensor, error) {
	t := &Tensor{DType: dtype, Shape: append([]int64{}, shape...), Data: data}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// NumElements returns the number of elements of the shape (1 for a scalar).
func NumElements(shape []int64) (int64, error) { return npy.NumElements(shape) }

// Validate checks that the dtype has a fixed element size and that Data holds exactly the
// bytes the shape needs.
func (t *Tensor) Validate() error {
	if t == nil {
		return fmt.Errorf("tfrun: nil tensor")
	}
	size, ok := graphdef.ElementBytes(t.DType)
	if !ok || graphdef.IsRef(t.DType) {
		return fmt.Errorf("tfrun: dtype %s has no fixed element size; only fixed-size dtypes are supported", graphdef.DataTypeName(t.DType))
	}
	n, err := NumElements(t.Shape)
	if err != nil {
		return fmt.Errorf("tfrun: %w", err)
	}
	if n > math.MaxInt64/size || int64(len(t.Data)) != n*size {
		return fmt.Errorf("tfrun: %s tensor of shape %v needs %d bytes, has %d", graphdef.DataTypeName(t.DType), t.Shape, n*size, len(t.Data))
	}
	return nil
}

// String describes the tensor's dtype and shape, e.g. "float32(8, 32, 32, 3)".
func (t *Tensor) String() string {
	return graphdef.DataTypeName(t.DType) + graphdef.FormatShape(t.Shape)
}

// Equal reports whether t and o have the same dtype, shape and bytes: bit-identical values,
// so that NaNs with equal payloads are equal and -0 differs from +0.
func (t *Tensor) Equal(o *Tensor) bool {
	if t == nil || o == nil {
		return t == o
	}
	if t.DType != o.DType || len(t.Shape) != len(o.Shape) {
		return false
	}
	for i := range t.Shape {
		if t.Shape[i] != o.Shape[i] {
			return false
		}
	}
	return bytes.Equal(t.Data, o.Data)
}

// Float32Tensor returns a float32 tensor of the given shape holding v.
func Float32Tensor(shape []int64, v ...float32) *Tensor {
	a := npy.FromFloat32s(shape, v)
	return &Tensor{DType: tpb.DataType_DT_FLOAT, Shape: a.Shape, Data: a.Data}
}

// Int32Tensor returns an int32 tensor of the given shape holding v.
func Int32Tensor(shape []int64, v ...int32) *Tensor {
	a := npy.FromInt32s(shape, v)
	return &Tensor{DType: tpb.DataType_DT_INT32, Shape: a.Shape, Data: a.Data}
}

// Float64s returns the elements of a float32, float64, int32 or int64 tensor as float64
// (exact for float32 and int32). It is meant for reporting, not for bit comparisons.
func (t *Tensor) Float64s() ([]float64, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	var v []float64
	switch t.DType {
	case tpb.DataType_DT_FLOAT:
		for i := 0; i+4 <= len(t.Data); i += 4 {
			v = append(v, float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i:]))))
		}
	case tpb.DataType_DT_DOUBLE:
		for i := 0; i+8 <= len(t.Data); i += 8 {
			v = append(v, math.Float64frombits(binary.LittleEndian.Uint64(t.Data[i:])))
		}
	case tpb.DataType_DT_INT32:
		for i := 0; i+4 <= len(t.Data); i += 4 {
			v = append(v, float64(int32(binary.LittleEndian.Uint32(t.Data[i:]))))
		}
	case tpb.DataType_DT_INT64:
		for i := 0; i+8 <= len(t.Data); i += 8 {
			v = append(v, float64(int64(binary.LittleEndian.Uint64(t.Data[i:]))))
		}
	default:
		return nil, fmt.Errorf("tfrun: cannot read %s as numbers", t)
	}
	return v, nil
}

// Scalar returns the value of a one-element numeric tensor as float64.
func (t *Tensor) Scalar() (float64, error) {
	v, err := t.Float64s()
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("tfrun: %s tensor is not a scalar", t)
	}
	return v[0], nil
}

// npyDTypes maps the dtypes .npy files can hold to TensorFlow's.
var npyDTypes = map[string]DataType{
	npy.Float32: tpb.DataType_DT_FLOAT,
	npy.Float64: tpb.DataType_DT_DOUBLE,
	npy.Int32:   tpb.DataType_DT_INT32,
	npy.Int64:   tpb.DataType_DT_INT64,
	npy.Bool:    tpb.DataType_DT_BOOL,
	npy.Uint8:   tpb.DataType_DT_UINT8,
}

// TensorFromNpy returns a tensor holding a's values. Data is shared, not copied.
func TensorFromNpy(a *npy.Array) (*Tensor, error) {
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("tfrun: %w", err)
	}
	dt, ok := npyDTypes[a.DType]
	if !ok {
		return nil, fmt.Errorf("tfrun: npy dtype %s has no TensorFlow equivalent", a.DType)
	}
	return &Tensor{DType: dt, Shape: append([]int64{}, a.Shape...), Data: a.Data}, nil
}

// Npy returns the tensor as an npy.Array sharing its data. It fails for dtypes .npy files
// written by this project cannot hold.
func (t *Tensor) Npy() (*npy.Array, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	for d, dt := range npyDTypes {
		if dt == t.DType {
			return &npy.Array{DType: d, Shape: append([]int64{}, t.Shape...), Data: t.Data}, nil
		}
	}
	return nil, fmt.Errorf("tfrun: %s tensors cannot be stored as .npy", graphdef.DataTypeName(t.DType))
}

// ParseDataType returns the dtype for a NumPy/TensorFlow dtype name such as "float32".
func ParseDataType(name string) (DataType, error) {
	for dt := range tpb.DataType_name {
		d := DataType(dt)
		if dt != 0 && !graphdef.IsRef(d) && graphdef.DataTypeName(d) == name {
			return d, nil
		}
	}
	return 0, fmt.Errorf("tfrun: unknown dtype %q", name)
}
