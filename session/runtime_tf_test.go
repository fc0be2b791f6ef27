//go:build tensorflow

package session

// haveRuntime says whether this build has the TensorFlow runtime.
const haveRuntime = true
