// Package cost predicts what a TensorFlow training step costs on a GPU: how long each op and
// each host transfer takes, and how much device memory is live at every moment, with and
// without tfswap's swap nodes.
//
// The pieces are:
//
//   - Profile: a device's memory size, peak throughput, memory bandwidth, host link and
//     launch latency. Built-in profiles (Profiles, LookupProfile) carry the vendor figures they
//     were taken from; users pass their own with LoadProfileFile (the --device-file format).
//   - OpCost: an analytical estimate of an op's floating-point operations and bytes touched from
//     its shapes and attrs; time = max(FLOPs / peak, bytes / memory bandwidth) + launch latency.
//   - Measured: per-node compute times measured on real iterations (the format `tfswap profile`
//     writes), which override the estimates.
//   - Simulate: replays a graph as TensorFlow's executor would, with one compute stream per
//     device and one queue per copy engine, and reports per device the peak memory (when, and
//     which tensors were live), the step time and the time the compute stream stalled waiting
//     for swap-ins.
//
// The package is pure Go and reads graphs through package graphdef.
package cost
