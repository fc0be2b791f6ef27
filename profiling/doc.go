// Package profiling measures training steps of a TensorFlow graph on the real runtime and
// turns them into a measured op profile, the file `tfswap profile` writes and the cost
// simulator reads (cost.Measured).
//
// Run (build tag "tensorflow") opens a session through the TensorFlow C API (package tfrun),
// runs the init op, warm-up steps, then measured steps with RunOptions FULL_TRACE. Collector
// reads the step stats of the measured steps: per graph node, its time in every step (the
// kernel's run time on its device: op_start to op_end of the executor's entry on a CPU, the
// summed kernel durations the device tracer recorded on a GPU), the device it ran on and
// the sizes of its outputs. Nodes that did not run get no entry; entries of nodes the runtime
// added (_SOURCE, _Send, _Recv, _Arg, nodes Grappler made) are counted, not profiled.
// Result.Measured gives the profile with each node's median time, and Result.WriteSummary
// the report: step times, the slowest ops, and the ops whose time varies by more than 20%.
//
// Feeds come from .npy files (LoadFeeds, checked against the placeholders' dtypes and
// shapes) or are random data of the placeholder's dtype and shape with a fixed seed
// (RandomFeeds). Nothing here assumes the device is a CPU: the same code path reads a GPU's
// kernel times and allocator figures (StepPeaks, AllocatorPeaks).
package profiling
