package tfrun

import (
	"fmt"
	"regexp"
)

// codeNames are the names of TensorFlow's status codes (TF_Code, error_codes.proto).
var codeNames = []string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}

// CodeName returns the name of a TensorFlow status code, e.g. "INVALID_ARGUMENT".
func CodeName(code int) string {
	if code >= 0 && code < len(codeNames) {
		return codeNames[code]
	}
	return fmt.Sprintf("CODE_%d", code)
}

// Error is a failure reported by TensorFlow. Message is TensorFlow's own status message,
// unchanged; Node is the node it complains about, when the message names one.
type Error struct {
	// Op is what tfrun was doing: "import graph", "new session", "run", "close session".
	Op string
	// Code is the TF_Code of the status.
	Code int
	// Message is TF_Message of the status.
	Message string
	// Node is the node named in Message ("{{node X}}", "operation X", "node 'X'"), or "".
	Node string
}

// Error returns "tfrun: OP: CODE: MESSAGE", with the node first when it is known.
func (e *Error) Error() string {
	if e.Node != "" {
		return fmt.Sprintf("tfrun: %s: node %s: %s: %s", e.Op, e.Node, CodeName(e.Code), e.Message)
	}
	return fmt.Sprintf("tfrun: %s: %s: %s", e.Op, CodeName(e.Code), e.Message)
}

// nodePatterns find the node a TensorFlow message is about, most specific first.
var nodePatterns = []*regexp.Regexp{
	regexp.MustCompile(`\{\{node ([^}\s]+)\}\}`),
	regexp.MustCompile(`[Oo]peration '?([A-Za-z0-9_.][A-Za-z0-9_./>-]*?)'?[:\s]`),
	regexp.MustCompile(`[Nn]ode '([^']+)'`),
	regexp.MustCompile(`[Nn]ode ([A-Za-z0-9_.][A-Za-z0-9_./>-]*):`),
	regexp.MustCompile(`placeholder tensor '([^']+)'`),
}

// nodeInMessage returns the node a TensorFlow status message names, or "".
func nodeInMessage(msg string) string {
	for _, re := range nodePatterns {
		if m := re.FindStringSubmatch(msg); m != nil {
			return m[1]
		}
	}
	return ""
}

// newError builds an Error from a TensorFlow status code and message.
func newError(op string, code int, msg string) *Error {
	return &Error{Op: op, Code: code, Message: msg, Node: nodeInMessage(msg)}
}
