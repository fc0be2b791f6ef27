package session

import "github.com/tfswap/tfswap/tfrun"

// Tensor is a dense tensor: its dtype, its shape and its elements as raw little-endian bytes
// in row-major order, as TensorFlow stores them. Equal compares two to the bit; Scalar and
// Float64s read numbers; Float32Tensor and Int32Tensor make one.
type Tensor = tfrun.Tensor

// DataType is TensorFlow's DataType enum.
type DataType = tfrun.DataType

// Error is a failure TensorFlow reported: what the session was doing (Op), TensorFlow's
// status code and message, and the node the message names. IsOutOfMemory tells whether it
// is TensorFlow running out of device memory.
type Error = tfrun.Error

// Float32Tensor returns a float32 tensor of the given shape holding v.
func Float32Tensor(shape []int64, v ...float32) *Tensor { return tfrun.Float32Tensor(shape, v...) }

// Int32Tensor returns an int32 tensor of the given shape holding v.
func Int32Tensor(shape []int64, v ...int32) *Tensor { return tfrun.Int32Tensor(shape, v...) }

// NewTensor returns a tensor of dtype and shape holding data (little-endian bytes), after
// checking that data has the size they need.
func NewTensor(dtype DataType, shape []int64, data []byte) (*Tensor, error) {
	return tfrun.NewTensor(dtype, shape, data)
}
