package graphdef

import "fmt"

// Error is a problem with a user's graph: it names the file and, where there is one, the
// node (and input) at fault. Every error this package returns for bad input is an *Error.
type Error struct {
	File string // the file or directory read, or "" for a graph built in memory
	Node string // the node at fault, or ""
	Msg  string
	Err  error // an underlying error, or nil
}

// Error returns "FILE: node \"NODE\": MSG: ERR", leaving out the parts that are empty.
func (e *Error) Error() string {
	s := ""
	if e.File != "" {
		s = e.File + ": "
	}
	if e.Node != "" {
		s += fmt.Sprintf("node %q: ", e.Node)
	}
	s += e.Msg
	if e.Err != nil {
		if e.Msg != "" {
			s += ": "
		}
		s += e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func errorf(file, node, format string, args ...any) *Error {
	return &Error{File: file, Node: node, Msg: fmt.Sprintf(format, args...)}
}
