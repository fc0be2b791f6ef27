#!/usr/bin/env python3
"""Generates the small training-graph fixtures in testmodels/fixtures/.

Each fixture is a tf.compat.v1 training graph (forward pass, gradients and
optimizer updates) with fixed batch shapes, written as a binary GraphDef
NAME.pb with _output_shapes on every node, a sidecar NAME.json describing
feeds / fetches / variables, and the feed arrays as NAME.<feed>.npy.

    .venv/bin/python testmodels/gen.py [--out testmodels/fixtures] [--only NAME]

Running it twice gives byte-identical files (graph-level seed + numpy seed).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphkit as gk  # noqa: E402
from graphkit import tf, v1  # noqa: E402

SEED = 1234


def _placeholders(input_shape, label_shape, input_dtype=tf.float32):
    x = v1.placeholder(input_dtype, input_shape, name="input")
    y = v1.placeholder(tf.int32, label_shape, name="labels")
    return x, y


# ----------------------------------------------------------------------------
# Models. Each returns (loss, optimizer, feeds) where feeds maps placeholder
# name -> numpy array; it runs inside a fresh graph with the seed set.


def model_mlp(rng):
    """3 dense layers (64 -> 128 -> 64 -> 10), relu, softmax CE, plain SGD."""
    batch, features, classes = 32, 64, 10
    x, y = _placeholders([batch, features], [batch])
    net = gk.Net()
    h = tf.nn.relu(net.dense(x, 128, name="fc1"))
    h = tf.nn.relu(net.dense(h, 64, name="fc2"))
    logits = net.dense(h, classes, name="logits")
    loss = gk.softmax_ce_loss(logits, y)
    opt = v1.train.GradientDescentOptimizer(0.1)
    feeds = {
        "input": rng.standard_normal((batch, features)).astype(np.float32),
        "labels": rng.integers(0, classes, size=(batch,)).astype(np.int32),
    }
    desc = ("MLP: dense 64->128 relu, 128->64 relu, 64->10, sparse softmax "
            "cross-entropy, GradientDescent lr 0.1. Batch 32.")
    return loss, opt, feeds, desc


def model_cnn(rng):
    """conv/bn/relu/maxpool x2 + conv/bn/relu, dense, softmax CE, Momentum."""
    batch, hw, classes = 8, 28, 10
    x, y = _placeholders([batch, hw, hw, 1], [batch])
    net = gk.Net()
    h = net.conv_bn_relu(x, 16, 3, name="block1")
    h = tf.nn.max_pool2d(h, ksize=2, strides=2, padding="VALID", name="pool1")
    h = net.conv_bn_relu(h, 32, 3, name="block2")
    h = tf.nn.max_pool2d(h, ksize=2, strides=2, padding="VALID", name="pool2")
    h = net.conv_bn_relu(h, 32, 3, name="block3")
    h = tf.reshape(h, [batch, -1], name="flatten")
    h = tf.nn.relu(net.dense(h, 64, name="fc1"))
    logits = net.dense(h, classes, name="logits")
    loss = gk.softmax_ce_loss(logits, y)
    opt = v1.train.MomentumOptimizer(0.05, momentum=0.9)
    feeds = {
        "input": rng.standard_normal((batch, hw, hw, 1)).astype(np.float32),
        "labels": rng.integers(0, classes, size=(batch,)).astype(np.int32),
    }
    desc = ("CNN on 28x28x1: [conv3x3 16, fused BN (training), relu, maxpool "
            "2x2] -> [conv3x3 32, BN, relu, maxpool] -> [conv3x3 32, BN, "
            "relu] -> flatten -> dense 64 relu -> dense 10, softmax CE; "
            "Momentum 0.9 lr 0.05 (slots 'Momentum'); BN moving mean/variance "
            "updated in 'train'. Batch 8.")
    return loss, opt, feeds, desc


def _basic_block(net, x, out_ch, stride, name):
    """ResNet v1 basic block: conv3x3-BN-relu-conv3x3-BN + shortcut, relu.
    Projection shortcut (conv1x1 stride s + BN) when shape changes."""
    in_ch = int(x.shape[-1])
    with v1.variable_scope(name):
        h = net.conv_bn_relu(x, out_ch, 3, stride, name="a")
        h = net.conv_bn_relu(h, out_ch, 3, 1, name="b", relu=False)
        if stride != 1 or in_ch != out_ch:
            sc = net.conv_bn_relu(x, out_ch, 1, stride, name="shortcut",
                                  relu=False)
        else:
            sc = x
        return tf.nn.relu(h + sc, name="out")


def model_resnet(rng):
    """Small ResNet: stem conv + 4 basic blocks (16,16,32s2,64s2), GAP, dense."""
    batch, hw, classes = 8, 32, 10
    x, y = _placeholders([batch, hw, hw, 3], [batch])
    net = gk.Net()
    h = net.conv_bn_relu(x, 16, 3, name="stem")
    h = _basic_block(net, h, 16, 1, "block1")
    h = _basic_block(net, h, 16, 1, "block2")
    h = _basic_block(net, h, 32, 2, "block3")
    h = _basic_block(net, h, 64, 2, "block4")
    h = tf.reduce_mean(h, axis=[1, 2], name="global_pool")
    logits = net.dense(h, classes, name="logits")
    loss = gk.softmax_ce_loss(logits, y)
    opt = v1.train.MomentumOptimizer(0.05, momentum=0.9)
    feeds = {
        "input": rng.standard_normal((batch, hw, hw, 3)).astype(np.float32),
        "labels": rng.integers(0, classes, size=(batch,)).astype(np.int32),
    }
    desc = ("Small ResNet (He et al. 2016 style, v1 basic blocks) on 32x32x3: "
            "stem conv3x3 16 + BN + relu; block1, block2: 16 ch identity "
            "shortcuts; block3: 32 ch stride 2, block4: 64 ch stride 2, both "
            "with 1x1 conv + BN projection shortcuts; global average pool; "
            "dense 10; softmax CE; Momentum 0.9 lr 0.05. Forward activations "
            "(conv/BN/relu outputs) are reused by the backward pass, so they "
            "have long lifetimes. Batch 8.")
    return loss, opt, feeds, desc


def model_lstm(rng):
    """Single-layer LSTM, hand-written cell, statically unrolled 10 steps,
    per-step projection + softmax CE, Adam."""
    batch, steps, features, hidden, classes = 8, 10, 16, 64, 20
    x, y = _placeholders([batch, steps, features], [batch, steps])
    net = gk.Net()
    with v1.variable_scope("lstm"):
        w = gk.variable("kernel", [features + hidden, 4 * hidden],
                        gk.glorot_init())
        b = gk.variable("bias", [4 * hidden], v1.zeros_initializer())
    xs = tf.unstack(x, axis=1, name="unstack_time")
    h = tf.zeros([batch, hidden], name="h0")
    c = tf.zeros([batch, hidden], name="c0")
    outs = []
    for t, xt in enumerate(xs):
        with tf.name_scope("step_%d" % t):
            z = tf.matmul(tf.concat([xt, h], axis=1), w) + b
            i, g, f, o = tf.split(z, 4, axis=1)
            # Forget-gate bias of +1 (Jozefowicz et al. 2015).
            c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            outs.append(h)
    hs = tf.stack(outs, axis=1, name="outputs")            # [B, T, H]
    flat = tf.reshape(hs, [batch * steps, hidden])
    logits = net.dense(flat, classes, name="proj")
    labels = tf.reshape(y, [batch * steps])
    loss = gk.softmax_ce_loss(logits, labels)
    opt = v1.train.AdamOptimizer(0.01)
    feeds = {
        "input": rng.standard_normal((batch, steps, features)).astype(np.float32),
        "labels": rng.integers(0, classes, size=(batch, steps)).astype(np.int32),
    }
    desc = ("LSTM without control flow: one layer, hidden 64, input 16 "
            "features, 10 time steps statically unrolled with a hand-written "
            "cell (fused gate matmul, sigmoid/tanh, forget bias +1), a dense "
            "projection to 20 classes at every step, mean softmax CE over all "
            "steps; Adam lr 0.01 (slots 'Adam', 'Adam_1', beta1_power, "
            "beta2_power). Batch 8.")
    return loss, opt, feeds, desc


MODELS = {
    "mlp": model_mlp,
    "cnn": model_cnn,
    "resnet": model_resnet,
    "lstm": model_lstm,
}


def build(name, seed=SEED):
    """Builds fixture `name`; returns (graph_def_bytes, sidecar dict, feeds)."""
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(seed)
        rng = np.random.default_rng(seed)
        loss, opt, feeds, desc = MODELS[name](rng)
        tvars, fetches = gk.finish_training_graph(graph, loss, opt)
    gd, data = gk.serialize(graph)
    problems = gk.check_graph_def(gd, name)
    if problems:
        raise RuntimeError("\n".join(problems))

    feed_entries = []
    for pname, arr in feeds.items():
        ph = graph.get_tensor_by_name(pname + ":0")
        assert list(arr.shape) == ph.shape.as_list(), (pname, arr.shape)
        assert arr.dtype == ph.dtype.as_numpy_dtype, (pname, arr.dtype)
        feed_entries.append({
            "name": pname + ":0",
            "file": "%s.%s.npy" % (name, pname),
            "dtype": arr.dtype.name,
            "shape": list(arr.shape),
        })
    variables = []
    for v, f in zip(tvars, fetches):
        variables.append({
            "name": v.op.name,
            "fetch": f,
            "dtype": v.dtype.base_dtype.name,
            "shape": v.shape.as_list(),
        })
    side = {
        "name": name,
        "seed": seed,
        "batch": feeds["input"].shape[0],
        "tensorflow_version": tf.__version__,
        "feeds": feed_entries,
        "loss": "loss:0",
        "train_op": "train",
        "init_op": "init",
        "variables": variables,
        "parameter_count": gk.param_count(tvars),
        "node_count": len(gd.node),
        "unknown_shape_tensors": gk.unknown_shape_tensors(gd),
        "op_counts": gk.op_counts(gd),
        "description": desc,
    }
    return data, side, feeds


def _save_npy(path, arr):
    arr = np.ascontiguousarray(arr)
    arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    tmp = path + ".tmp.npy"
    np.save(tmp, arr, allow_pickle=False)
    os.replace(tmp, path)


def write_fixture(name, out_dir, seed=SEED):
    data, side, feeds = build(name, seed)
    gk.write_bytes(os.path.join(out_dir, name + ".pb"), data)
    for pname, arr in feeds.items():
        _save_npy(os.path.join(out_dir, "%s.%s.npy" % (name, pname)), arr)
    text = json.dumps(side, indent=2, sort_keys=False) + "\n"
    gk.write_bytes(os.path.join(out_dir, name + ".json"), text.encode())
    return side


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "fixtures"),
                    help="output directory (default testmodels/fixtures)")
    ap.add_argument("--only", choices=sorted(MODELS),
                    help="generate only this fixture")
    ap.add_argument("--seed", type=int, default=SEED,
                    help="graph and data seed (default %d)" % SEED)
    args = ap.parse_args(argv)
    names = [args.only] if args.only else list(MODELS)
    for name in names:
        side = write_fixture(name, args.out, args.seed)
        print("%-7s nodes=%5d params=%7d -> %s" % (
            name, side["node_count"], side["parameter_count"],
            os.path.join(args.out, name + ".pb")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
