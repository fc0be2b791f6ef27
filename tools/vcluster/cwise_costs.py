#!/usr/bin/env python3
"""Measures the per-element operation counts Grappler's OpLevelCostEstimator gives
elementwise ops (its elementwise_ops_ table: Eigen's functor_traits<...>::Cost as
compiled into this TensorFlow), from the VirtualCluster itself.

    .venv/bin/python tools/vcluster/cwise_costs.py      # prints {"Add": 1, "Exp": 34, ...}

Each op runs on 1000 float32 elements (bool for the logical ops) on a virtual CPU
of 1 GOP/s (one core at 1000 MHz) whose memory bandwidth is 10^9 GB/s, so that the
op's time, ceil(1000 x cost / 1) + ceil(bytes / 10^9) ns, gives its cost:
(time - 1) / 1000. cost/grappler_time.go's table is checked against this by
TestGrapplerEigenCosts (go test ./cost).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

N = 1000
UNARY = ["Acos", "Asin", "Atan", "Cast", "Ceil", "Cos", "Erf", "Erfc", "Exp", "Expm1", "Floor",
         "Inv", "Lgamma", "Log", "Log1p", "Neg", "Reciprocal", "Relu", "Relu6", "Rint", "Round",
         "Rsqrt", "Sigmoid", "Sign", "Sin", "Sqrt", "Square", "Tan", "Tanh"]
BINARY = ["Add", "AddV2", "ApproximateEqual", "Atan2", "BiasAdd", "Div", "Equal", "FloorDiv",
          "FloorMod", "Greater", "GreaterEqual", "InvGrad", "Less", "LessEqual", "Maximum",
          "Minimum", "Mod", "Mul", "NotEqual", "RealDiv", "ReluGrad", "SquaredDifference", "Sub",
          "TruncateDiv", "TruncateMod"]
OTHER = ["LogicalAnd", "LogicalOr", "LogicalNot", "Select", "SelectV2", "Sum", "Max", "Min",
         "Prod", "All", "ArgMax", "TopKV2", "Where"]


def build(tf, op):
    """A graph computing op on N elements; returns (graph_def, name of op's node)."""
    v1 = tf.compat.v1
    raw = tf.raw_ops
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [N], name="x")
        y = v1.placeholder(tf.float32, [N], name="y")
        b = v1.placeholder(tf.bool, [N], name="b")
        ax = tf.constant([0], name="ax")
        if op == "Cast":
            out = raw.Cast(x=x, DstT=tf.int16)
        elif op in ("Relu", "Relu6"):
            out = getattr(raw, op)(features=x)
        elif op in UNARY:
            out = getattr(raw, op)(x=x)
        elif op == "BiasAdd":
            out = raw.BiasAdd(value=tf.reshape(x, [N // 10, 10]), bias=tf.slice(y, [0], [10]))
        elif op == "InvGrad":
            out = raw.InvGrad(y=x, dy=y)
        elif op == "ReluGrad":
            out = raw.ReluGrad(gradients=x, features=y)
        elif op in BINARY:
            out = getattr(raw, op)(x=x, y=y)
        elif op in ("LogicalAnd", "LogicalOr"):
            out = getattr(raw, op)(x=b, y=b)
        elif op == "LogicalNot":
            out = raw.LogicalNot(x=b)
        elif op == "Select":
            out = raw.Select(condition=b, x=x, y=y)
        elif op == "SelectV2":
            out = raw.SelectV2(condition=b, t=x, e=y)
        elif op in ("Sum", "Max", "Min", "Prod"):
            out = getattr(raw, op)(input=x, axis=ax)
        elif op == "All":
            out = raw.All(input=b, axis=ax)
        elif op == "ArgMax":
            out = raw.ArgMax(input=x, dimension=tf.constant(0))
        elif op == "TopKV2":
            out = raw.TopKV2(input=x, k=tf.constant(5))[0]
        elif op == "Where":
            out = raw.Where(condition=b)
        else:
            raise KeyError(op)
        with tf.control_dependencies([out]):
            tf.no_op(name="train")
    return g.as_graph_def(), out.op.name


def main():
    import tensorflow as tf
    from tensorflow.core.protobuf import device_properties_pb2 as dp
    from tensorflow.core.protobuf import meta_graph_pb2
    from tensorflow.python.grappler import cluster as gcluster
    from tensorflow.python.grappler import item as gitem

    cpu_name = "/job:localhost/replica:0/task:0/device:CPU:0"
    cpu = dp.DeviceProperties(type="CPU", frequency=1000, num_cores=1, bandwidth=10**15)
    costs = {}
    for op in UNARY + BINARY + OTHER:
        gd, name = build(tf, op)
        for n in gd.node:
            n.device = cpu_name
        mg = meta_graph_pb2.MetaGraphDef()
        mg.graph_def.CopyFrom(gd)
        mg.collection_def["train_op"].node_list.value.append("train")
        c = gcluster.Cluster(devices=[dp.NamedDevice(name=cpu_name, properties=cpu)],
                             disable_timeline=False)
        try:
            _, _, stats = c.MeasureCosts(gitem.Item(mg))
        finally:
            c.Shutdown()
        for ds in stats.dev_stats:
            for ns in ds.node_stats:
                if ns.node_name == name:
                    t = ns.op_end_rel_nanos
                    if (t - 1) % N:
                        raise SystemExit("%s took %d ns on %d elements: not ceil(%d x cost) + 1"
                                         % (op, t, N, N))
                    costs[op] = (t - 1) // N
        if op not in costs:
            raise SystemExit("%s: the VirtualCluster did not run it" % op)
    json.dump({"tensorflow_version": tf.__version__, "costs": costs}, sys.stdout, indent=1,
              sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
