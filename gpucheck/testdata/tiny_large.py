#!/usr/bin/env python3
"""A stand-in for testmodels/large.py in the tests of `tfswap gpu-check`: large.py's command
line, graphs and sidecars, with one more model, "mlp", small enough to generate and train
on a CPU in seconds (6 dense layers of 256 units with ReLU, softmax cross-entropy over 10
classes, plain SGD)."""

import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "testmodels"))
import graphkit as gk  # noqa: E402
import large  # noqa: E402
from graphkit import tf, v1  # noqa: E402


def mlp(net, batch, width=256, layers=6, classes=10):
    x, fx = large._feed("input", net.dtype, [batch, width])
    y, fy = large._feed("labels", tf.int32, [batch], classes)
    h = x
    for i in range(layers):
        h = tf.nn.relu(net.dense(h, width, name="fc%d" % i), name="relu%d" % i)
    loss = gk.softmax_ce_loss(net.dense(h, classes, name="logits"), y)
    opt = v1.train.GradientDescentOptimizer(0.01)
    return loss, opt, [fx, fy], "test MLP: %d dense layers of %d units" % (layers, width), {}


large.MODELS["mlp"] = (mlp, 32, {})

if __name__ == "__main__":
    sys.exit(large.main())
