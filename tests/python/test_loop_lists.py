"""Issue 12: what TensorFlow 2.18 allows for a lowered while loop's TensorList accumulator,
the experiment behind rewrite/accumulators.go's placing of such lists on the host.

A v1 while loop carries a TensorList as a loop variable of its own (TensorListPushBack every
iteration, as a lowered v2 While's gradient accumulator does), a second loop pops it
(TensorListPopBack, the gradient loop). Everything is placed on the emulated device CPU:1;
then only that loop variable's nodes (the EmptyTensorList, its Enter, Merge, Switch,
Identity, NextIteration and Exit in both loops, the push and the pop) are moved to the host
CPU:0 by editing their device fields, as the LMS rewrite does. The graph must run, give the
same bytes, and its partition graphs must show the push and the pop on the host with the
pushed tensor received from the device, and the loop's condition sent to the host (the
partitioner gives the host partition its own copy of the loop's control). A few seconds.
"""

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.ops import list_ops

v1 = tf.compat.v1
STEPS = 5
HOST = "/device:CPU:0"
CARRY_OPS = ("Enter", "Merge", "Switch", "Identity", "NextIteration", "Exit", "TensorListPushBack", "TensorListPopBack")


def loop_graph():
    """The two loops as a GraphDef placed on CPU:1, built with v1 control flow (as the session
    lowers a v2 While before Grappler and the bridge see it)."""
    g = tf.Graph()
    with g.as_default(), tf.device("/device:CPU:1"):
        x = v1.placeholder(tf.float32, [64, 64], name="x")
        w = tf.constant(np.random.RandomState(0).rand(64, 64).astype(np.float32) * 0.1, name="w")
        acc0 = list_ops.empty_tensor_list(element_shape=[64, 64], element_dtype=tf.float32, name="acc")

        def forward(i, h, acc):
            h2 = tf.tanh(tf.matmul(h, w))
            return i + 1, h2, list_ops.tensor_list_push_back(acc, h2, name="push")

        def backward(i, s, acc):
            acc, e = list_ops.tensor_list_pop_back(acc, element_dtype=tf.float32, name="pop")
            return i + 1, s + tf.reduce_sum(e * e), acc

        # The v1 loop builders in a TF2 process: control flow v2 off while building.
        _, h, acc = _v1_while(lambda i, h, a: i < STEPS, forward, [tf.constant(0), x, acc0], "fwd")
        _, s, _ = _v1_while(lambda i, s, a: i < STEPS, backward, [tf.constant(0), tf.constant(0.0), acc], "bwd")
        tf.identity(s + tf.reduce_sum(h), name="out")
    return g.as_graph_def()


def _v1_while(cond, body, loop_vars, name):
    from tensorflow.python.ops import control_flow_util, while_loop
    was = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        return while_loop.while_loop(cond, body, loop_vars, name=name)
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = was


def list_nodes(gd):
    """The names of the nodes carrying the list from the EmptyTensorList acc on (through both
    loops), with the push and the pop."""
    consumers = {}
    for n in gd.node:
        for i in n.input:
            if not i.startswith("^"):
                consumers.setdefault(i.split(":")[0], []).append(n)
    out, todo = set(), ["acc"]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        todo.extend(c.name for c in consumers.get(name, []) if c.op in CARRY_OPS)
    return out


def run(gd):
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    config = config_pb2.ConfigProto(device_count={"CPU": 2}, intra_op_parallelism_threads=2,
                                    inter_op_parallelism_threads=2)
    opts = config_pb2.RunOptions(output_partition_graphs=True)
    md = config_pb2.RunMetadata()
    feed = {"x:0": np.random.RandomState(1).rand(64, 64).astype(np.float32)}
    with v1.Session(graph=g, config=config) as sess:
        out = sess.run("out:0", feed, options=opts, run_metadata=md)
    return np.asarray(out).tobytes(), md


def test_list_loop_variable_runs_on_host():
    gd = loop_graph()
    moved = list_nodes(gd)
    ops = {n.op for n in gd.node if n.name in moved}
    assert {"EmptyTensorList", "TensorListPushBack", "TensorListPopBack", "Enter", "Merge", "Switch",
            "NextIteration", "Exit"} <= ops, ops
    want, _ = run(gd)
    placed = v1.GraphDef()
    placed.CopyFrom(gd)
    for n in placed.node:
        if n.name in moved:
            n.device = HOST
            n.attr.pop("_class", None)
    got, md = run(placed)
    assert got == want
    where = {}
    sends = {}
    for pg in md.partition_graphs:
        for n in pg.node:
            where[n.name] = (n.device, n)
            if n.op in ("_Send", "_HostSend"):
                sends[n.attr["tensor_name"].s] = n
    for op in ("push", "pop"):
        name = [k for k in where if k.endswith("/" + op)]
        assert len(name) == 1 and where[name[0]][0].endswith("CPU:0"), (op, name)
    push = where[[k for k in where if k.endswith("/push")][0]][1]
    recv = where[push.input[1].split(":")[0]][1]
    assert recv.op == "_Recv" and sends[recv.attr["tensor_name"].s].input[0].startswith("fwd/Tanh"), recv
    # The host partition runs its own copy of the loop's control: the condition comes from
    # the device.
    assert any(n.op == "_HostRecv" and "LoopCond" in n.name and d.endswith("CPU:0") for d, n in where.values())
