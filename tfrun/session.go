//go:build tensorflow

package tfrun

/*
#cgo LDFLAGS: -ltensorflow
#include <stdlib.h>
#include <string.h>
#include "tensorflow/c/c_api.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/proto"
)

// Version returns the version of the TensorFlow C library.
func Version() string { return C.GoString(C.TF_Version()) }

// Session is a TensorFlow session on its own graph, created through the C API. It is safe
// for concurrent use; Close must be called to free it.
type Session struct {
	mu     sync.RWMutex // Run holds it for reading, Close for writing.
	graph  *C.TF_Graph
	sess   *C.TF_Session
	closed bool
}

// status wraps a TF_Status.
type status struct{ c *C.TF_Status }

func newStatus() status   { return status{C.TF_NewStatus()} }
func (s status) free()    { C.TF_DeleteStatus(s.c) }
func (s status) ok() bool { return C.TF_GetCode(s.c) == C.TF_OK }
func (s status) err(op string) error {
	if s.ok() {
		return nil
	}
	return newError(op, int(C.TF_GetCode(s.c)), C.GoString(C.TF_Message(s.c)))
}

// newBuffer returns a TF_Buffer holding a copy of b.
func newBuffer(b []byte) *C.TF_Buffer {
	if len(b) == 0 {
		return C.TF_NewBuffer()
	}
	return C.TF_NewBufferFromString(unsafe.Pointer(&b[0]), C.size_t(len(b)))
}

// bufferBytes copies a TF_Buffer's contents into Go memory.
func bufferBytes(b *C.TF_Buffer) []byte {
	if b == nil || b.data == nil || b.length == 0 {
		return nil
	}
	return C.GoBytes(b.data, C.int(b.length))
}

// NewSession imports graphDef (a serialized GraphDef) into a new graph and creates a session
// on it with config (a serialized ConfigProto; nil for TensorFlow's defaults).
func NewSession(graphDef []byte, config []byte) (*Session, error) {
	st := newStatus()
	defer st.free()
	graph := C.TF_NewGraph()
	buf := newBuffer(graphDef)
	opts := C.TF_NewImportGraphDefOptions()
	C.TF_GraphImportGraphDef(graph, buf, opts, st.c)
	C.TF_DeleteImportGraphDefOptions(opts)
	C.TF_DeleteBuffer(buf)
	if err := st.err("import graph"); err != nil {
		C.TF_DeleteGraph(graph)
		return nil, err
	}
	sopts := C.TF_NewSessionOptions()
	defer C.TF_DeleteSessionOptions(sopts)
	if len(config) > 0 {
		C.TF_SetConfig(sopts, unsafe.Pointer(&config[0]), C.size_t(len(config)), st.c)
		if err := st.err("set config"); err != nil {
			C.TF_DeleteGraph(graph)
			return nil, err
		}
	}
	sess := C.TF_NewSession(graph, sopts, st.c)
	if err := st.err("new session"); err != nil {
		C.TF_DeleteGraph(graph)
		return nil, err
	}
	return &Session{graph: graph, sess: sess}, nil
}

// Close closes the session and frees it and its graph. Closing twice is a no-op.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	st := newStatus()
	defer st.free()
	C.TF_CloseSession(s.sess, st.c)
	cerr := st.err("close session")
	C.TF_DeleteSession(s.sess, st.c)
	derr := st.err("delete session")
	C.TF_DeleteGraph(s.graph)
	if cerr != nil {
		return cerr
	}
	return derr
}

// ParseTensorName splits "node:port" (or "node", port 0) into the node name and port.
func ParseTensorName(name string) (string, int, error) {
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		p, err := strconv.Atoi(name[i+1:])
		if err != nil || p < 0 || i == 0 {
			return "", 0, fmt.Errorf("tfrun: bad tensor name %q (want node:port)", name)
		}
		return name[:i], p, nil
	}
	if name == "" {
		return "", 0, fmt.Errorf("tfrun: empty tensor name")
	}
	return name, 0, nil
}

// operation looks up a node of the session's graph.
func (s *Session) operation(name string) *C.TF_Operation {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.TF_GraphOperationByName(s.graph, cname)
}

// output resolves a tensor name to a TF_Output; what says which argument it was, for errors.
func (s *Session) output(name, what string) (C.TF_Output, error) {
	node, port, err := ParseTensorName(name)
	if err != nil {
		return C.TF_Output{}, err
	}
	op := s.operation(node)
	if op == nil {
		return C.TF_Output{}, fmt.Errorf("tfrun: %s %q: no node %q in the graph", what, name, node)
	}
	if n := int(C.TF_OperationNumOutputs(op)); port >= n {
		return C.TF_Output{}, fmt.Errorf("tfrun: %s %q: node %q has %d output(s)", what, name, node, n)
	}
	return C.TF_Output{oper: op, index: C.int(port)}, nil
}

// newCTensor copies t into a new TF_Tensor, which the caller must delete.
func newCTensor(t *Tensor) (*C.TF_Tensor, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	var dims *C.int64_t
	if len(t.Shape) > 0 {
		dims = (*C.int64_t)(unsafe.Pointer(&t.Shape[0]))
	}
	ct := C.TF_AllocateTensor(C.TF_DataType(t.DType), dims, C.int(len(t.Shape)), C.size_t(len(t.Data)))
	if ct == nil {
		return nil, fmt.Errorf("tfrun: cannot allocate a %s tensor", t)
	}
	if len(t.Data) > 0 {
		C.memcpy(C.TF_TensorData(ct), unsafe.Pointer(&t.Data[0]), C.size_t(len(t.Data)))
	}
	return ct, nil
}

// goTensor copies a TF_Tensor into a Tensor.
func goTensor(ct *C.TF_Tensor) (*Tensor, error) {
	t := &Tensor{DType: DataType(C.TF_TensorType(ct))}
	n := int(C.TF_NumDims(ct))
	t.Shape = make([]int64, n)
	for i := 0; i < n; i++ {
		t.Shape[i] = int64(C.TF_Dim(ct, C.int(i)))
	}
	size := int(C.TF_TensorByteSize(ct))
	t.Data = make([]byte, size)
	if size > 0 {
		copy(t.Data, unsafe.Slice((*byte)(C.TF_TensorData(ct)), size))
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// Run runs one step: it feeds feeds (by tensor name, "node:port"), computes fetches and runs
// targets (node names). With opts non-nil the step runs with those RunOptions and its
// RunMetadata is returned; with opts nil the metadata is nil. A failure reported by
// TensorFlow is an *Error holding TensorFlow's message and the node it names.
func (s *Session) Run(feeds map[string]*Tensor, fetches []string, targets []string, opts *RunOptions) ([]*Tensor, *RunMetadata, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, nil, fmt.Errorf("tfrun: run on a closed session")
	}
	feedNames := make([]string, 0, len(feeds))
	for name := range feeds {
		feedNames = append(feedNames, name)
	}
	sort.Strings(feedNames)
	inputs := make([]C.TF_Output, len(feedNames))
	inputValues := make([]*C.TF_Tensor, len(feedNames))
	defer func() {
		for _, ct := range inputValues {
			if ct != nil {
				C.TF_DeleteTensor(ct)
			}
		}
	}()
	for i, name := range feedNames {
		out, err := s.output(name, "feed")
		if err != nil {
			return nil, nil, err
		}
		inputs[i] = out
		ct, err := newCTensor(feeds[name])
		if err != nil {
			return nil, nil, fmt.Errorf("tfrun: feed %q: %w", name, err)
		}
		inputValues[i] = ct
	}
	outputs := make([]C.TF_Output, len(fetches))
	for i, name := range fetches {
		out, err := s.output(name, "fetch")
		if err != nil {
			return nil, nil, err
		}
		outputs[i] = out
	}
	targetOps := make([]*C.TF_Operation, len(targets))
	for i, name := range targets {
		op := s.operation(name)
		if op == nil {
			return nil, nil, fmt.Errorf("tfrun: target %q: no node %q in the graph", name, name)
		}
		targetOps[i] = op
	}

	var runOpts, meta *C.TF_Buffer
	if opts != nil {
		b, err := proto.Marshal(opts)
		if err != nil {
			return nil, nil, fmt.Errorf("tfrun: marshal RunOptions: %w", err)
		}
		runOpts = newBuffer(b)
		defer C.TF_DeleteBuffer(runOpts)
		meta = C.TF_NewBuffer()
		defer C.TF_DeleteBuffer(meta)
	}
	outputValues := make([]*C.TF_Tensor, len(fetches))
	st := newStatus()
	defer st.free()
	C.TF_SessionRun(s.sess, runOpts,
		ptr(inputs), ptr(inputValues), C.int(len(inputs)),
		ptr(outputs), ptr(outputValues), C.int(len(outputs)),
		ptr(targetOps), C.int(len(targetOps)),
		meta, st.c)
	defer func() {
		for _, ct := range outputValues {
			if ct != nil {
				C.TF_DeleteTensor(ct)
			}
		}
	}()
	if err := st.err("run"); err != nil {
		return nil, nil, err
	}
	result := make([]*Tensor, len(outputValues))
	for i, ct := range outputValues {
		t, err := goTensor(ct)
		if err != nil {
			return nil, nil, fmt.Errorf("tfrun: fetch %q: %w", fetches[i], err)
		}
		result[i] = t
	}
	var md *RunMetadata
	if meta != nil {
		md = &RunMetadata{}
		if err := proto.Unmarshal(bufferBytes(meta), md); err != nil {
			return nil, nil, fmt.Errorf("tfrun: parse RunMetadata: %w", err)
		}
	}
	return result, md, nil
}

// ptr returns a pointer to the first element of s, or nil when s is empty.
func ptr[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}
