// Registers the op definitions of Grappler's swap kernels, _CopyFromGpuToHost and
// _CopyFromHostToGpu, in a CPU-only TensorFlow (the tensorflow-cpu wheel builds them only with
// CUDA). Grappler's memory optimizer inserts these ops; without their OpDefs every pass after
// the first fails to infer shapes and memory (the graph names an unknown op), so on a CPU
// wheel SWAPPING_HEURISTICS would stop after one round of swaps where a GPU build goes on
// for up to 25. Only the definitions are registered, no kernels: the benchmark never runs
// these graphs, it optimizes and analyses them. Same signature as TensorFlow's own
// registration: input T, output T, attr T: type, output shape = input shape.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"

namespace tfswap_bench {

REGISTER_OP("_CopyFromGpuToHost")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("Copies the input tensor from GPU to host (definition only).");

REGISTER_OP("_CopyFromHostToGpu")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("Copies the input tensor from host to GPU (definition only).");

}  // namespace tfswap_bench
