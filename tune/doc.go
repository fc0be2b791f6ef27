// Package tune tunes the ops that trigger swap-ins from real training steps, as Kim et al.
// ("Efficient Multi-GPU Memory Management for Deep Learning Acceleration") tune theirs from
// the early iterations of training.
//
// A Problem is a graph, a set of tensors to swap (a plan from a planner of package rewrite,
// whose triggers are replaced) and, for every swap-in, the chain of ops that may trigger it:
// the eligible ops on the critical path back from its first consumer, nearest first.
// Positions pick one op of each chain; position 0 is "right before the use".
//
// Tune works in two steps. EarliestSafe moves every trigger earlier, round robin, while the
// compute device's peak, predicted by the cost simulator (Predictor), stays within the
// budget: the earliest safe triggers. Then the triggers are moved later again while the
// step time measured on the real runtime (a Runner; TFRunner, build tag "tensorflow",
// opens TensorFlow sessions) does not grow against the earliest safe plan's: the latest
// triggers without a stall. The pure search logic is separate from the runtime, so that it
// can be tested with a fake Runner.
//
// On CPU-only machines the runtime is the two-device emulation (/device:CPU:1 stands for the
// GPU, /device:CPU:0 is the host): there the memory side is predicted only, since both
// devices share one allocator, and the time side is measured. On a GPU the sessions also
// report the allocator's peak (PeakSession), and plans measured over the budget are
// rejected.
package tune
