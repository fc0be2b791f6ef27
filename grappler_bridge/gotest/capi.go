//go:build tensorflow

package gotest

/*
#cgo LDFLAGS: -ltensorflow
#include <stdlib.h>
#include <string.h>
#include "tensorflow/c/c_api.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

// This file is a minimal TensorFlow C API harness: the Go bindings (graft) have no way to
// pass RunOptions or read RunMetadata, which the partition-graph and step-stats checks need.

type status struct{ c *C.TF_Status }

func newStatus() status { return status{C.TF_NewStatus()} }
func (s status) free()  { C.TF_DeleteStatus(s.c) }
func (s status) err(what string) error {
	if C.TF_GetCode(s.c) == C.TF_OK {
		return nil
	}
	return fmt.Errorf("%s: %s", what, C.GoString(C.TF_Message(s.c)))
}

// LoadLibrary loads a TensorFlow plugin library (TF_LoadLibrary) for the life of the
// process.
func LoadLibrary(path string) error {
	st := newStatus()
	defer st.free()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lib := C.TF_LoadLibrary(cpath, st.c)
	if err := st.err("TF_LoadLibrary " + path); err != nil {
		return err
	}
	_ = lib // never unloaded: the registered optimizer must outlive every session
	return nil
}

// buffer copies b into a new TF_Buffer; free it with TF_DeleteBuffer.
func buffer(b []byte) *C.TF_Buffer {
	if len(b) == 0 {
		return C.TF_NewBuffer()
	}
	p := C.CBytes(b)
	defer C.free(p)
	return C.TF_NewBufferFromString(p, C.size_t(len(b)))
}

// Session is a session on its own graph.
type Session struct {
	graph *C.TF_Graph
	sess  *C.TF_Session
}

// NewSession imports graphDef into a new graph and opens a session on it with the
// serialized ConfigProto config.
func NewSession(graphDef, config []byte) (*Session, error) {
	st := newStatus()
	defer st.free()
	g := C.TF_NewGraph()
	gd := buffer(graphDef)
	defer C.TF_DeleteBuffer(gd)
	opts := C.TF_NewImportGraphDefOptions()
	defer C.TF_DeleteImportGraphDefOptions(opts)
	C.TF_GraphImportGraphDef(g, gd, opts, st.c)
	if err := st.err("import graph"); err != nil {
		C.TF_DeleteGraph(g)
		return nil, err
	}
	so := C.TF_NewSessionOptions()
	defer C.TF_DeleteSessionOptions(so)
	if len(config) > 0 {
		p := C.CBytes(config)
		defer C.free(p)
		C.TF_SetConfig(so, p, C.size_t(len(config)), st.c)
		if err := st.err("set config"); err != nil {
			C.TF_DeleteGraph(g)
			return nil, err
		}
	}
	sess := C.TF_NewSession(g, so, st.c)
	if err := st.err("new session"); err != nil {
		C.TF_DeleteGraph(g)
		return nil, err
	}
	return &Session{graph: g, sess: sess}, nil
}

// Close closes the session and frees it and its graph.
func (s *Session) Close() error {
	st := newStatus()
	defer st.free()
	C.TF_CloseSession(s.sess, st.c)
	err := st.err("close session")
	C.TF_DeleteSession(s.sess, st.c)
	C.TF_DeleteGraph(s.graph)
	return err
}

// Tensor is a dense tensor: its dtype (TF_DataType), shape and raw little-endian bytes.
type Tensor struct {
	DType int
	Shape []int64
	Data  []byte
}

func (s *Session) output(name string) (C.TF_Output, error) {
	op, port := name, 0
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		p, err := strconv.Atoi(name[i+1:])
		if err != nil {
			return C.TF_Output{}, fmt.Errorf("bad tensor name %q", name)
		}
		op, port = name[:i], p
	}
	o := s.operation(op)
	if o == nil {
		return C.TF_Output{}, fmt.Errorf("no operation %q", op)
	}
	return C.TF_Output{oper: o, index: C.int(port)}, nil
}

func (s *Session) operation(name string) *C.TF_Operation {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.TF_GraphOperationByName(s.graph, cname)
}

// Run feeds feeds, fetches fetches (tensor names) and runs targets (operation names). With
// runOptions (a serialized RunOptions) it returns the serialized RunMetadata.
func (s *Session) Run(feeds map[string]*Tensor, fetches, targets []string, runOptions []byte) ([]*Tensor, []byte, error) {
	st := newStatus()
	defer st.free()
	var inputs []C.TF_Output
	var values []*C.TF_Tensor
	defer func() {
		for _, v := range values {
			C.TF_DeleteTensor(v)
		}
	}()
	for name, t := range feeds {
		o, err := s.output(name)
		if err != nil {
			return nil, nil, err
		}
		var dims *C.int64_t
		if len(t.Shape) > 0 {
			dims = (*C.int64_t)(unsafe.Pointer(&t.Shape[0]))
		}
		ct := C.TF_AllocateTensor(C.TF_DataType(t.DType), dims, C.int(len(t.Shape)), C.size_t(len(t.Data)))
		if len(t.Data) > 0 {
			C.memcpy(C.TF_TensorData(ct), unsafe.Pointer(&t.Data[0]), C.size_t(len(t.Data)))
		}
		inputs = append(inputs, o)
		values = append(values, ct)
	}
	var outputs []C.TF_Output
	for _, name := range fetches {
		o, err := s.output(name)
		if err != nil {
			return nil, nil, err
		}
		outputs = append(outputs, o)
	}
	var ops []*C.TF_Operation
	for _, name := range targets {
		o := s.operation(name)
		if o == nil {
			return nil, nil, fmt.Errorf("no operation %q", name)
		}
		ops = append(ops, o)
	}
	// The C API reads these arrays during the call: keep them in C memory, not Go's.
	cInputs := cArray(inputs)
	defer C.free(cInputs)
	cValues := cArray(values)
	defer C.free(cValues)
	cOutputs := cArray(outputs)
	defer C.free(cOutputs)
	cOps := cArray(ops)
	defer C.free(cOps)
	results := C.calloc(C.size_t(len(outputs)+1), C.size_t(unsafe.Sizeof((*C.TF_Tensor)(nil))))
	defer C.free(results)
	var opts, meta *C.TF_Buffer
	if runOptions != nil {
		opts = buffer(runOptions)
		defer C.TF_DeleteBuffer(opts)
		meta = C.TF_NewBuffer()
		defer C.TF_DeleteBuffer(meta)
	}
	C.TF_SessionRun(s.sess, opts,
		(*C.TF_Output)(cInputs), (**C.TF_Tensor)(cValues), C.int(len(inputs)),
		(*C.TF_Output)(cOutputs), (**C.TF_Tensor)(results), C.int(len(outputs)),
		(**C.TF_Operation)(cOps), C.int(len(ops)), meta, st.c)
	if err := st.err("run"); err != nil {
		return nil, nil, err
	}
	out := make([]*Tensor, len(outputs))
	res := unsafe.Slice((**C.TF_Tensor)(results), len(outputs))
	for i, ct := range res {
		t := &Tensor{DType: int(C.TF_TensorType(ct))}
		for d := 0; d < int(C.TF_NumDims(ct)); d++ {
			t.Shape = append(t.Shape, int64(C.TF_Dim(ct, C.int(d))))
		}
		t.Data = C.GoBytes(C.TF_TensorData(ct), C.int(C.TF_TensorByteSize(ct)))
		C.TF_DeleteTensor(ct)
		out[i] = t
	}
	var md []byte
	if meta != nil {
		md = C.GoBytes(meta.data, C.int(meta.length))
	}
	return out, md, nil
}

// cArray copies a Go slice of C values (structs or pointers) into C memory.
func cArray[T any](s []T) unsafe.Pointer {
	var zero T
	size := C.size_t(unsafe.Sizeof(zero)) * C.size_t(len(s)+1)
	p := C.malloc(size)
	C.memset(p, 0, size)
	if len(s) > 0 {
		C.memcpy(p, unsafe.Pointer(&s[0]), C.size_t(unsafe.Sizeof(zero))*C.size_t(len(s)))
	}
	return p
}
