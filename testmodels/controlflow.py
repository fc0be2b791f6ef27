"""Small training graphs with control flow and function calls, for tfswap's tests.

Writes, like gen.py, NAME.pb (with _output_shapes on every node), a sidecar
NAME.json (feeds, loss, train and init ops, variables) and the feed arrays as
NAME.<feed>.npy into testmodels/controlflow/. The graphs follow gen.py's
conventions (placeholders ``input`` and ``labels``, ``loss``, ``train``,
``init``, ``fetch_var/<i>``) except that they contain what gen.py's fixtures
must not: conditionals, while loops and calls of library functions.

| graph | what |
| --- | --- |
| cond_cnn | CNN whose middle block is a v1 ``tf.cond`` (Switch/Merge) on a Keras-style learning-phase placeholder ``training`` (PlaceholderWithDefault, True) |
| cond_cnn_twin | cond_cnn with the training branch only, no cond: what cond_cnn runs when ``training`` is True |
| cond_scale | cond_cnn whose other branch scales its input by a trainable variable read outside the cond, as a Keras batch norm's inference branch reads its moving statistics: the variable's gradient is a Merge of the other side's zeros and the gradient itself |
| if_cnn | cond_cnn with control flow v2: the cond is an ``If`` op, its branches library functions |
| rnn_v1 | a recurrent net over 8 steps, a v1 ``tf.while_loop`` (Enter/Merge/Switch/Exit) with TensorArrays, as ``dynamic_rnn`` builds it |
| rnn_v2 | the same loop with control flow v2: a ``While`` op with body and cond functions |
| fn_call | a v1 graph calling a ``tf.function`` (a stateless conv block): ``PartitionedCall``, and its gradient function |
| stateful_call | a ``tf.function`` that reads a captured resource variable: ``StatefulPartitionedCall`` |

    .venv/bin/python testmodels/controlflow.py            # -> testmodels/controlflow/
    .venv/bin/python testmodels/controlflow.py --only cond_cnn --out /tmp/cf

Every random initializer is seeded through the graph-level seed, so
regenerating every graph gives byte-identical files. (TensorFlow numbers the
library functions of tf.function and control flow v2 with a process-wide
counter, so --only gives the graphs with functions other function names than a
full run.)
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphkit as gk  # noqa: E402

tf = gk.tf
v1 = gk.v1

SEED = 4321
BATCH = 8


def _conv(x, w, name):
    return tf.nn.relu(tf.nn.conv2d(x, w, strides=1, padding="SAME"), name=name)


def _head(x, classes, name="head"):
    p = tf.reduce_mean(x, axis=[1, 2], name=name + "/gap")
    w = gk.variable(name + "/w", [p.shape[-1], classes], gk.glorot_init())
    return tf.matmul(p, w, name=name + "/logits")


HW = 32
WIDTH = 32


def _stem(x, layers=8):
    """`layers` 3x3 convolutions to WIDTH channels at full resolution: activations outside
    the control flow that a planner can swap."""
    h = x
    for i in range(layers):
        w = gk.variable("stem%d/w" % i, [3, 3, h.shape[-1], WIDTH], gk.he_init())
        h = _conv(h, w, "stem%d" % i)
    return h


def _tail(h, layers=2):
    for i in range(layers):
        w = gk.variable("tail%d/w" % i, [3, 3, WIDTH, WIDTH], gk.he_init())
        h = _conv(h, w, "tail%d" % i)
    return h


def _image_feeds(rng, hw=HW, ch=3, classes=10):
    return {
        "input": rng.standard_normal((BATCH, hw, hw, ch)).astype(np.float32),
        "labels": rng.integers(0, classes, size=(BATCH,)).astype(np.int32),
    }


def _cond_cnn(rng, use_cond=True, scale_var=False):
    x = v1.placeholder(tf.float32, [BATCH, HW, HW, 3], name="input")
    y = v1.placeholder(tf.int32, [BATCH], name="labels")
    training = v1.placeholder_with_default(True, [], name="training")
    h = _stem(x)
    w2 = gk.variable("block/w_a", [3, 3, WIDTH, 2 * WIDTH], gk.he_init())
    w3 = gk.variable("block/w_b", [3, 3, 2 * WIDTH, WIDTH], gk.he_init())

    def train_branch():
        a = _conv(h, w2, "block/a")
        return _conv(a, w3, "block/b") + h

    scale = None
    if scale_var:
        scale = gk.variable("block/scale", [], v1.constant_initializer(0.5))
        scale = tf.identity(scale, name="block/scale_read")

    def infer_branch():
        return h * (scale if scale is not None else 0.5)

    if use_cond:
        h2 = tf.cond(training, train_branch, infer_branch, name="cond")
    else:
        del training
        h2 = train_branch()
    logits = _head(_tail(h2), 10)
    loss = gk.softmax_ce_loss(logits, y)
    return loss, v1.train.GradientDescentOptimizer(0.05), _image_feeds(rng), (
        "CNN (eight 3x3 convolutions to 32 channels at 32x32, a block, two "
        "more convolutions, global pooling, dense) whose block is a v1 "
        "tf.cond (control flow v1) on the learning-phase placeholder "
        "'training' (True by default): the training branch is two 3x3 "
        "convolutions 32->64->32 with a residual add, the other halves its "
        "input. SGD lr 0.05, batch 8." if use_cond else
        "cond_cnn's training branch without the cond. SGD lr 0.05, batch 8.")


def model_cond_cnn(rng):
    return _cond_cnn(rng, True)


def model_cond_cnn_twin(rng):
    return _cond_cnn(rng, False)


def model_cond_scale(rng):
    loss, opt, feeds, _ = _cond_cnn(rng, True, scale_var=True)
    return loss, opt, feeds, (
        "cond_cnn whose inference branch multiplies its input by the trainable "
        "scalar block/scale (read outside the cond) instead of 0.5: the "
        "scale's gradient is a Merge of the training side's zeros and the "
        "gradient through the inference side. SGD lr 0.05, batch 8.")


def model_if_cnn(rng):
    v1.enable_control_flow_v2()
    try:
        loss, opt, feeds, _ = _cond_cnn(rng, True)
    finally:
        v1.disable_control_flow_v2()
    return loss, opt, feeds, ("cond_cnn with control flow v2: the cond is an "
                              "If op whose branches are library functions.")


def _rnn(rng, v2):
    steps, feat, hidden, classes = 8, 16, 32, 10
    x = v1.placeholder(tf.float32, [BATCH, steps, feat], name="input")
    y = v1.placeholder(tf.int32, [BATCH], name="labels")
    wx = gk.variable("rnn/wx", [feat, hidden], gk.glorot_init())
    wh = gk.variable("rnn/wh", [hidden, hidden], gk.glorot_init())
    # An input projection outside the loop: its activation is read again by its gradient,
    # after the loop's backward pass, so a rewrite has something outside the loop to swap.
    w_in = gk.variable("rnn/w_in", [feat, feat], gk.glorot_init())
    xp = tf.reshape(tf.tanh(tf.matmul(tf.reshape(x, [BATCH * steps, feat]), w_in)),
                    [BATCH, steps, feat], name="projected")
    xs = tf.transpose(xp, [1, 0, 2], name="time_major")
    if v2:
        v1.enable_control_flow_v2()
    try:
        ta = tf.TensorArray(tf.float32, size=steps, name="inputs_ta").unstack(xs)

        def body(t, h):
            xt = ta.read(t)
            h = tf.tanh(tf.matmul(xt, wx) + tf.matmul(h, wh))
            return t + 1, h

        _, hT = tf.while_loop(lambda t, h: t < steps, body,
                              [tf.constant(0), tf.zeros([BATCH, hidden])],
                              name="rnn")
    finally:
        if v2:
            v1.disable_control_flow_v2()
    w = gk.variable("out/w", [hidden, classes], gk.glorot_init())
    logits = tf.matmul(hT, w, name="logits")
    loss = gk.softmax_ce_loss(logits, y)
    feeds = {
        "input": rng.standard_normal((BATCH, steps, feat)).astype(np.float32),
        "labels": rng.integers(0, classes, size=(BATCH,)).astype(np.int32),
    }
    return loss, v1.train.GradientDescentOptimizer(0.1), feeds, (
        "Elman RNN, hidden 32, 8 steps of 16 features (after a tanh input "
        "projection outside the loop), as a %s while loop "
        "reading a TensorArray (what dynamic_rnn builds); SGD lr 0.1, batch 8."
        % ("control-flow-v2 (While op)" if v2 else "v1 (Enter/Merge/Switch/Exit)"))


def model_rnn_v1(rng):
    return _rnn(rng, False)


def model_rnn_v2(rng):
    return _rnn(rng, True)


def model_fn_call(rng):
    x = v1.placeholder(tf.float32, [BATCH, HW, HW, 3], name="input")
    y = v1.placeholder(tf.int32, [BATCH], name="labels")
    h = _stem(x)
    w2 = gk.variable("block/w_a", [3, 3, WIDTH, 2 * WIDTH], gk.he_init())
    w3 = gk.variable("block/w_b", [3, 3, 2 * WIDTH, WIDTH], gk.he_init())

    @tf.function(autograph=False)
    def block(h, wa, wb):
        a = tf.nn.relu(tf.nn.conv2d(h, wa, strides=1, padding="SAME"))
        return tf.nn.relu(tf.nn.conv2d(a, wb, strides=1, padding="SAME")) + h

    h2 = block(h, w2.read_value(), w3.read_value())
    logits = _head(_tail(h2), 10)
    loss = gk.softmax_ce_loss(logits, y)
    return loss, v1.train.GradientDescentOptimizer(0.05), _image_feeds(rng), (
        "cond_cnn's CNN whose block (3x3 convolutions 32->64->32, residual add) is "
        "a tf.function called from the v1 graph (PartitionedCall; its "
        "gradient is another call). SGD lr 0.05, batch 8.")


def model_stateful_call(rng):
    x = v1.placeholder(tf.float32, [BATCH, HW, HW, 3], name="input")
    y = v1.placeholder(tf.int32, [BATCH], name="labels")
    h = _stem(x)
    w2 = gk.variable("block/w_a", [3, 3, WIDTH, WIDTH], gk.he_init())

    @tf.function(autograph=False)
    def block(h):
        return tf.nn.relu(tf.nn.conv2d(h, w2, strides=1, padding="SAME"))

    h2 = block(h)
    logits = _head(_tail(h2), 10)
    loss = gk.softmax_ce_loss(logits, y)
    return loss, v1.train.GradientDescentOptimizer(0.05), _image_feeds(rng), (
        "cond_cnn's stem and tail around a convolution (32->32) that is a tf.function reading a "
        "captured resource variable (StatefulPartitionedCall). SGD lr 0.05, "
        "batch 8.")


MODELS = {
    "cond_cnn": model_cond_cnn,
    "cond_cnn_twin": model_cond_cnn_twin,
    "cond_scale": model_cond_scale,
    "if_cnn": model_if_cnn,
    "rnn_v1": model_rnn_v1,
    "rnn_v2": model_rnn_v2,
    "fn_call": model_fn_call,
    "stateful_call": model_stateful_call,
}


def build(name, seed=SEED):
    """Builds graph `name`; returns (graph_def_bytes, sidecar dict, feeds)."""
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(seed)
        rng = np.random.default_rng(seed)
        loss, opt, feeds, desc = MODELS[name](rng)
        tvars, fetches = gk.finish_training_graph(graph, loss, opt)
    gd, data = gk.serialize(graph)
    for n in gd.node:
        if n.device:
            raise RuntimeError("%s: node %s has a device" % (name, n.name))
    feed_entries = []
    for pname, arr in feeds.items():
        feed_entries.append({"name": pname + ":0", "file": "%s.%s.npy" % (name, pname),
                             "dtype": arr.dtype.name, "shape": list(arr.shape)})
    variables = [{"name": v.op.name, "fetch": f, "dtype": v.dtype.base_dtype.name,
                  "shape": v.shape.as_list()} for v, f in zip(tvars, fetches)]
    side = {
        "name": name, "seed": seed, "batch": BATCH,
        "tensorflow_version": tf.__version__,
        "feeds": feed_entries, "loss": "loss:0", "train_op": "train", "init_op": "init",
        "variables": variables,
        "parameter_count": gk.param_count(tvars),
        "node_count": len(gd.node),
        "library_functions": sorted(f.signature.name for f in gd.library.function),
        "op_counts": gk.op_counts(gd),
        "description": desc,
    }
    return data, side, feeds


def _save_npy(path, arr):
    arr = np.ascontiguousarray(arr)
    tmp = path + ".tmp.npy"
    np.save(tmp, arr, allow_pickle=False)
    os.replace(tmp, path)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "controlflow"))
    ap.add_argument("--only", choices=sorted(MODELS))
    args = ap.parse_args(argv)
    for name in [args.only] if args.only else list(MODELS):
        data, side, feeds = build(name)
        gk.write_bytes(os.path.join(args.out, name + ".pb"), data)
        for pname, arr in feeds.items():
            _save_npy(os.path.join(args.out, "%s.%s.npy" % (name, pname)), arr)
        gk.write_bytes(os.path.join(args.out, name + ".json"),
                       (json.dumps(side, indent=2) + "\n").encode())
        print("%-14s nodes=%4d functions=%d" % (name, side["node_count"],
                                                len(side["library_functions"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
