// Package gpucheck measures on a real GPU what tfswap's simulator predicts, for `tfswap
// gpu-check`: it picks the built-in device profile nearest the GPU (MatchProfile), finds B0,
// the largest batch whose unswapped graph fits the budget by the simulator (FindB0), trains
// the unswapped graph and tfswap's auto plan at multiples of B0, each in a worker process of
// its own (ProcessRunner, Work), compares a swapped graph with the unswapped one bit for bit
// under TF_DETERMINISTIC_OPS=1, and reports predicted against measured peaks and overheads
// (Report, as JSON and Markdown).
//
// Everything but Work is pure Go and works through two seams, a Generator of training graphs
// and a Runner of training runs, so that the check is tested without a GPU: on a fake GPU
// whose runs are step stats constructed by profiling/fakegpu. Work, which runs a graph in a
// session of the TensorFlow C runtime, needs the build tag "tensorflow".
package gpucheck
