package npy

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FromFloat32s returns a '<f4' array of the given shape holding v.
func FromFloat32s(shape []int64, v []float32) *Array {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return &Array{DType: Float32, Shape: append([]int64{}, shape...), Data: b}
}

// FromFloat64s returns a '<f8' array of the given shape holding v.
func FromFloat64s(shape []int64, v []float64) *Array {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return &Array{DType: Float64, Shape: append([]int64{}, shape...), Data: b}
}

// FromInt32s returns a '<i4' array of the given shape holding v.
func FromInt32s(shape []int64, v []int32) *Array {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return &Array{DType: Int32, Shape: append([]int64{}, shape...), Data: b}
}

// FromInt64s returns a '<i8' array of the given shape holding v.
func FromInt64s(shape []int64, v []int64) *Array {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return &Array{DType: Int64, Shape: append([]int64{}, shape...), Data: b}
}

// FromBools returns a '|b1' array of the given shape holding v.
func FromBools(shape []int64, v []bool) *Array {
	b := make([]byte, len(v))
	for i, x := range v {
		if x {
			b[i] = 1
		}
	}
	return &Array{DType: Bool, Shape: append([]int64{}, shape...), Data: b}
}

// FromUint8s returns a '|u1' array of the given shape holding a copy of v.
func FromUint8s(shape []int64, v []uint8) *Array {
	return &Array{DType: Uint8, Shape: append([]int64{}, shape...), Data: append([]byte{}, v...)}
}

// check fails unless the array has the wanted dtype and a consistent size.
func (a *Array) check(dtype string) error {
	if a.DType != dtype {
		return fmt.Errorf("npy: array has dtype %s, not %s", a.DType, dtype)
	}
	return a.Validate()
}

// Float32s returns the elements of a '<f4' array.
func (a *Array) Float32s() ([]float32, error) {
	if err := a.check(Float32); err != nil {
		return nil, err
	}
	v := make([]float32, len(a.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:]))
	}
	return v, nil
}

// Float64s returns the elements of a '<f8' array.
func (a *Array) Float64s() ([]float64, error) {
	if err := a.check(Float64); err != nil {
		return nil, err
	}
	v := make([]float64, len(a.Data)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(a.Data[8*i:]))
	}
	return v, nil
}

// Int32s returns the elements of a '<i4' array.
func (a *Array) Int32s() ([]int32, error) {
	if err := a.check(Int32); err != nil {
		return nil, err
	}
	v := make([]int32, len(a.Data)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(a.Data[4*i:]))
	}
	return v, nil
}

// Int64s returns the elements of a '<i8' array.
func (a *Array) Int64s() ([]int64, error) {
	if err := a.check(Int64); err != nil {
		return nil, err
	}
	v := make([]int64, len(a.Data)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(a.Data[8*i:]))
	}
	return v, nil
}

// Bools returns the elements of a '|b1' array; any non-zero byte is true.
func (a *Array) Bools() ([]bool, error) {
	if err := a.check(Bool); err != nil {
		return nil, err
	}
	v := make([]bool, len(a.Data))
	for i, x := range a.Data {
		v[i] = x != 0
	}
	return v, nil
}

// Uint8s returns a copy of the elements of a '|u1' array.
func (a *Array) Uint8s() ([]uint8, error) {
	if err := a.check(Uint8); err != nil {
		return nil, err
	}
	return append([]uint8{}, a.Data...), nil
}
