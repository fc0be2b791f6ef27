package graphdef

import (
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// DataType is TensorFlow's DataType enum.
type DataType = tpb.DataType

// refOffset is the distance TensorFlow puts between a dtype and its reference dtype.
const refOffset = 100

// dtypeBytes gives the element size in bytes of each fixed-size dtype. Dtypes missing here
// (string, resource, variant) have no fixed size: their tensors are never sized or swapped.
var dtypeBytes = map[tpb.DataType]int64{
	tpb.DataType_DT_FLOAT:         4,
	tpb.DataType_DT_DOUBLE:        8,
	tpb.DataType_DT_INT32:         4,
	tpb.DataType_DT_UINT8:         1,
	tpb.DataType_DT_INT16:         2,
	tpb.DataType_DT_INT8:          1,
	tpb.DataType_DT_COMPLEX64:     8,
	tpb.DataType_DT_INT64:         8,
	tpb.DataType_DT_BOOL:          1,
	tpb.DataType_DT_QINT8:         1,
	tpb.DataType_DT_QUINT8:        1,
	tpb.DataType_DT_QINT32:        4,
	tpb.DataType_DT_BFLOAT16:      2,
	tpb.DataType_DT_QINT16:        2,
	tpb.DataType_DT_QUINT16:       2,
	tpb.DataType_DT_UINT16:        2,
	tpb.DataType_DT_COMPLEX128:    16,
	tpb.DataType_DT_HALF:          2,
	tpb.DataType_DT_UINT32:        4,
	tpb.DataType_DT_UINT64:        8,
	tpb.DataType_DT_FLOAT8_E5M2:   1,
	tpb.DataType_DT_FLOAT8_E4M3FN: 1,
}

// knownVariableSize lists the valid dtypes whose tensors have no fixed element size.
var knownVariableSize = map[tpb.DataType]bool{
	tpb.DataType_DT_STRING:   true,
	tpb.DataType_DT_RESOURCE: true,
	tpb.DataType_DT_VARIANT:  true,
	tpb.DataType_DT_INT4:     true, // packed: sub-byte elements are not sized
	tpb.DataType_DT_UINT4:    true,
}

// IsRef reports whether dt is a reference dtype (the output of a ref variable).
func IsRef(dt DataType) bool { return dt > refOffset }

// BaseType returns dt with its reference bit removed.
func BaseType(dt DataType) DataType {
	if dt > refOffset {
		return dt - refOffset
	}
	return dt
}

// ElementBytes returns the size of one element of dtype dt, and false when the dtype has no
// fixed element size (string, resource, variant) or is not a valid dtype.
func ElementBytes(dt DataType) (int64, bool) {
	b := BaseType(dt)
	if b < 0 || int(b) >= len(dtypeSizes) {
		return 0, false
	}
	n := dtypeSizes[b]
	return n, n > 0
}

// dtypeSizes is dtypeBytes as a table by dtype, 0 for a dtype without a fixed size: the
// simulator sizes every tensor of every simulation, and the map's lookups were 3% of the CPU
// time of planning ResNet-50 at 4x its batch.
var dtypeSizes = func() (t [refOffset]int64) {
	for dt, n := range dtypeBytes {
		t[dt] = n
	}
	return t
}()

// ValidDataType reports whether dt is a dtype TensorFlow defines.
func ValidDataType(dt DataType) bool {
	b := BaseType(dt)
	if _, ok := dtypeBytes[b]; ok {
		return true
	}
	return knownVariableSize[b]
}

// DataTypeName returns TensorFlow's short name of a dtype ("float32", "int64", ...), or the
// enum name when it has no short name.
func DataTypeName(dt DataType) string {
	if n, ok := dtypeNames[BaseType(dt)]; ok {
		if IsRef(dt) {
			return n + "_ref"
		}
		return n
	}
	return dt.String()
}

// dtypeNames are the short names DataTypeName gives.
var dtypeNames = map[tpb.DataType]string{
	tpb.DataType_DT_FLOAT: "float32", tpb.DataType_DT_DOUBLE: "float64",
	tpb.DataType_DT_HALF: "float16", tpb.DataType_DT_BFLOAT16: "bfloat16",
	tpb.DataType_DT_INT8: "int8", tpb.DataType_DT_INT16: "int16",
	tpb.DataType_DT_INT32: "int32", tpb.DataType_DT_INT64: "int64",
	tpb.DataType_DT_UINT8: "uint8", tpb.DataType_DT_UINT16: "uint16",
	tpb.DataType_DT_UINT32: "uint32", tpb.DataType_DT_UINT64: "uint64",
	tpb.DataType_DT_BOOL: "bool", tpb.DataType_DT_STRING: "string",
	tpb.DataType_DT_COMPLEX64: "complex64", tpb.DataType_DT_COMPLEX128: "complex128",
	tpb.DataType_DT_RESOURCE: "resource", tpb.DataType_DT_VARIANT: "variant",
}

// IsHandle reports whether dt is a handle dtype (resource or variant): a reference to state
// held elsewhere, not data worth moving.
func IsHandle(dt DataType) bool {
	b := BaseType(dt)
	return b == tpb.DataType_DT_RESOURCE || b == tpb.DataType_DT_VARIANT
}
