// Package graphdef reads and writes TensorFlow graphs and gives an indexed view of them.
//
// A Model is a graph as it was loaded from disk: a binary GraphDef (.pb), a text GraphDef
// (.pbtxt) or a SavedModel directory, together with everything needed to write it back
// unchanged except for the graph. A Graph is the indexed view the planners work on: nodes by
// name, data and control fan-in and fan-out with output ports, a topological order, parsed
// device strings, and the dtype and byte size of every tensor a node produces.
//
// The package is pure Go (no cgo): a user without the TensorFlow runtime can inspect and
// rewrite graphs. The number and dtypes of an op's outputs come from a table of TensorFlow's
// op registry that is generated from the pinned TensorFlow release and embedded
// (opreg/ops.json, made by opreg/gen_opreg.py).
package graphdef
