#!/usr/bin/env python3
"""Builds large training graphs (forward + gradients + optimizer updates) for
tfswap benchmarks: ResNet-50, VGG-16, Inception-v3, U-Net, a BERT-base-sized
Transformer encoder, a 2-layer LSTM language model and GPT-style decoders
from 124M to 6.7B parameters (--model gpt --gpt-size 1.5b).

    .venv/bin/python testmodels/large.py --model resnet50 --batch 32 --out R.pb
    .venv/bin/python testmodels/large.py --all [--out-dir testmodels/large]

Each graph is written as a binary GraphDef with _output_shapes on every node
(same conventions as gen.py: input/labels/loss/train/init/fetch_var names,
empty devices, resource variables, seeded initializers, no control flow) and
a NAME.json sidecar with batch, parameter count, node count and feeds. The
outputs are not committed (testmodels/large/ is git-ignored). See
testmodels/README.md for the architecture choices and their sources.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphkit as gk  # noqa: E402
from graphkit import tf, v1  # noqa: E402

SEED = 1234


def _scaled_lr(base, batch):
    """Linear learning-rate scaling from a batch-256 reference (Goyal et al.
    2017), so that short benchmark runs at small batches stay finite."""
    return base * batch / 256.0


def _feed(name, dtype, shape, hi=None):
    ph = v1.placeholder(dtype, shape, name=name)
    entry = {"name": name + ":0", "dtype": tf.as_dtype(dtype).name,
             "shape": list(shape)}
    if hi is not None:
        entry["range"] = [0, hi]  # integer feeds: values in [0, hi)
    return ph, entry


# ----------------------------------------------------------------------------
# ResNet-50 (He et al. 2016), v1.5 bottlenecks


def resnet50(net, batch):
    x, fx = _feed("input", net.dtype, [batch, 224, 224, 3])
    y, fy = _feed("labels", tf.int32, [batch], 1000)

    def bottleneck(h, width, stride, name):
        out_ch = 4 * width
        with v1.variable_scope(name):
            if stride != 1 or int(h.shape[-1]) != out_ch:
                sc = net.conv_bn_relu(h, out_ch, 1, stride, name="shortcut",
                                      relu=False)
            else:
                sc = h
            r = net.conv_bn_relu(h, width, 1, 1, name="conv1")
            r = net.conv_bn_relu(r, width, 3, stride, name="conv2")
            r = net.conv_bn_relu(r, out_ch, 1, 1, name="conv3", relu=False)
            return tf.nn.relu(r + sc, name="out")

    h = net.conv_bn_relu(x, 64, 7, 2, name="conv1")                  # 112
    h = tf.nn.max_pool2d(h, 3, 2, "SAME", name="pool1")               # 56
    for stage, (blocks, width, stride) in enumerate(
            [(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)]):
        for b in range(blocks):
            h = bottleneck(h, width, stride if b == 0 else 1,
                           "stage%d/block%d" % (stage + 2, b + 1))
    h = tf.reduce_mean(h, axis=[1, 2], name="global_pool")            # [B,2048]
    logits = net.dense(h, 1000, name="fc1000")
    loss = gk.softmax_ce_loss(logits, y)
    opt = v1.train.MomentumOptimizer(_scaled_lr(0.1, batch), momentum=0.9)
    desc = ("ResNet-50 (He et al. 2016, v1.5: stride on the 3x3 conv of the "
            "bottleneck), 224x224x3, 1000 classes. conv7x7/2 64 + BN + relu, "
            "maxpool 3x3/2, bottleneck stages [3,4,6,3] with widths "
            "64/128/256/512 (x4 out), 1x1 conv + BN projection shortcuts on "
            "the first block of each stage, identity elsewhere; global average "
            "pool, fc 1000, softmax CE. Fused BN (training) after every conv, "
            "eps 1e-5, moving averages momentum 0.9. Momentum 0.9, lr 0.1 x "
            "batch/256.")
    return loss, opt, [fx, fy], desc, {}


# ----------------------------------------------------------------------------
# VGG-16 (Simonyan & Zisserman 2015), configuration D


def vgg16(net, batch):
    x, fx = _feed("input", net.dtype, [batch, 224, 224, 3])
    y, fy = _feed("labels", tf.int32, [batch], 1000)
    cfg = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]
    h = x
    for i, (ch, n) in enumerate(cfg):
        for j in range(n):
            name = "conv%d_%d" % (i + 1, j + 1)
            h = tf.nn.relu(net.conv2d(h, ch, 3, 1, name=name, bias=True))
        h = tf.nn.max_pool2d(h, 2, 2, "VALID", name="pool%d" % (i + 1))
    h = tf.reshape(h, [batch, 7 * 7 * 512], name="flatten")
    h = net.dropout(tf.nn.relu(net.dense(h, 4096, name="fc6")), 0.5)
    h = net.dropout(tf.nn.relu(net.dense(h, 4096, name="fc7")), 0.5)
    logits = net.dense(h, 1000, name="fc8")
    loss = gk.softmax_ce_loss(logits, y)
    opt = v1.train.MomentumOptimizer(_scaled_lr(0.01, batch), momentum=0.9)
    desc = ("VGG-16 (Simonyan & Zisserman 2015, configuration D), 224x224x3, "
            "1000 classes: 13 conv3x3 (stride 1, SAME, bias, relu) in 5 "
            "groups 64x2/128x2/256x3/512x3/512x3 each followed by maxpool "
            "2x2/2; fc 4096 relu dropout 0.5, fc 4096 relu dropout 0.5, fc "
            "1000; softmax CE; no batch norm. Momentum 0.9, lr 0.01 x batch/256 "
            "(the paper: 0.01 at batch 256; its 5e-4 weight decay is not "
            "included).")
    return loss, opt, [fx, fy], desc, {}


# ----------------------------------------------------------------------------
# Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture")


def inception_v3(net, batch):
    x, fx = _feed("input", net.dtype, [batch, 299, 299, 3])
    y, fy = _feed("labels", tf.int32, [batch], 1000)

    def cbr(h, ch, k, s=1, name="conv", padding="SAME"):
        return net.conv_bn_relu(h, ch, k, s, name=name, padding=padding)

    def avg3(h):
        return tf.nn.avg_pool2d(h, 3, 1, "SAME")

    def inception_a(h, pool_ch, name):                    # 35x35 modules
        with v1.variable_scope(name):
            b0 = cbr(h, 64, 1, name="b0_1x1")
            b1 = cbr(h, 48, 1, name="b1_1x1")
            b1 = cbr(b1, 64, 5, name="b1_5x5")
            b2 = cbr(h, 64, 1, name="b2_1x1")
            b2 = cbr(b2, 96, 3, name="b2_3x3a")
            b2 = cbr(b2, 96, 3, name="b2_3x3b")
            b3 = cbr(avg3(h), pool_ch, 1, name="b3_pool_1x1")
            return tf.concat([b0, b1, b2, b3], axis=3, name="concat")

    def reduction_a(h, name):                             # 35 -> 17
        with v1.variable_scope(name):
            b0 = cbr(h, 384, 3, 2, name="b0_3x3s2", padding="VALID")
            b1 = cbr(h, 64, 1, name="b1_1x1")
            b1 = cbr(b1, 96, 3, name="b1_3x3")
            b1 = cbr(b1, 96, 3, 2, name="b1_3x3s2", padding="VALID")
            b2 = tf.nn.max_pool2d(h, 3, 2, "VALID")
            return tf.concat([b0, b1, b2], axis=3, name="concat")

    def inception_b(h, c7, name):                         # 17x17 modules
        with v1.variable_scope(name):
            b0 = cbr(h, 192, 1, name="b0_1x1")
            b1 = cbr(h, c7, 1, name="b1_1x1")
            b1 = cbr(b1, c7, (1, 7), name="b1_1x7")
            b1 = cbr(b1, 192, (7, 1), name="b1_7x1")
            b2 = cbr(h, c7, 1, name="b2_1x1")
            b2 = cbr(b2, c7, (7, 1), name="b2_7x1a")
            b2 = cbr(b2, c7, (1, 7), name="b2_1x7a")
            b2 = cbr(b2, c7, (7, 1), name="b2_7x1b")
            b2 = cbr(b2, 192, (1, 7), name="b2_1x7b")
            b3 = cbr(avg3(h), 192, 1, name="b3_pool_1x1")
            return tf.concat([b0, b1, b2, b3], axis=3, name="concat")

    def reduction_b(h, name):                             # 17 -> 8
        with v1.variable_scope(name):
            b0 = cbr(h, 192, 1, name="b0_1x1")
            b0 = cbr(b0, 320, 3, 2, name="b0_3x3s2", padding="VALID")
            b1 = cbr(h, 192, 1, name="b1_1x1")
            b1 = cbr(b1, 192, (1, 7), name="b1_1x7")
            b1 = cbr(b1, 192, (7, 1), name="b1_7x1")
            b1 = cbr(b1, 192, 3, 2, name="b1_3x3s2", padding="VALID")
            b2 = tf.nn.max_pool2d(h, 3, 2, "VALID")
            return tf.concat([b0, b1, b2], axis=3, name="concat")

    def inception_c(h, name):                             # 8x8 modules
        with v1.variable_scope(name):
            b0 = cbr(h, 320, 1, name="b0_1x1")
            b1 = cbr(h, 384, 1, name="b1_1x1")
            b1 = tf.concat([cbr(b1, 384, (1, 3), name="b1_1x3"),
                            cbr(b1, 384, (3, 1), name="b1_3x1")], axis=3)
            b2 = cbr(h, 448, 1, name="b2_1x1")
            b2 = cbr(b2, 384, 3, name="b2_3x3")
            b2 = tf.concat([cbr(b2, 384, (1, 3), name="b2_1x3"),
                            cbr(b2, 384, (3, 1), name="b2_3x1")], axis=3)
            b3 = cbr(avg3(h), 192, 1, name="b3_pool_1x1")
            return tf.concat([b0, b1, b2, b3], axis=3, name="concat")

    with v1.variable_scope("stem"):
        h = cbr(x, 32, 3, 2, name="conv1_3x3s2", padding="VALID")   # 149
        h = cbr(h, 32, 3, name="conv2_3x3", padding="VALID")        # 147
        h = cbr(h, 64, 3, name="conv3_3x3")                         # 147
        h = tf.nn.max_pool2d(h, 3, 2, "VALID")                      # 73
        h = cbr(h, 80, 1, name="conv4_1x1", padding="VALID")        # 73
        h = cbr(h, 192, 3, name="conv5_3x3", padding="VALID")       # 71
        h = tf.nn.max_pool2d(h, 3, 2, "VALID")                      # 35
    h = inception_a(h, 32, "mixed_5b")                              # 256
    h = inception_a(h, 64, "mixed_5c")                              # 288
    h = inception_a(h, 64, "mixed_5d")                              # 288
    h = reduction_a(h, "mixed_6a")                                  # 17x17x768
    h = inception_b(h, 128, "mixed_6b")
    h = inception_b(h, 160, "mixed_6c")
    h = inception_b(h, 160, "mixed_6d")
    h = inception_b(h, 192, "mixed_6e")
    h = reduction_b(h, "mixed_7a")                                  # 8x8x1280
    h = inception_c(h, "mixed_7b")                                  # 2048
    h = inception_c(h, "mixed_7c")                                  # 2048
    assert h.shape.as_list() == [batch, 8, 8, 2048], h.shape
    h = tf.reduce_mean(h, axis=[1, 2], name="global_pool")
    h = net.dropout(h, 0.2)
    logits = net.dense(h, 1000, name="logits")
    loss = gk.softmax_ce_loss(logits, y)
    opt = v1.train.MomentumOptimizer(_scaled_lr(0.045, batch), momentum=0.9)
    desc = ("Inception-v3 (Szegedy et al. 2016), 299x299x3, 1000 classes, no "
            "auxiliary head. Stem conv3x3/2 32, conv3x3 32, conv3x3 64, "
            "maxpool 3x3/2, conv1x1 80, conv3x3 192, maxpool 3x3/2 (35x35x192); "
            "3x Inception-A (35x35; 1x1 / 1x1-5x5 / 1x1-3x3-3x3 / avgpool-1x1 "
            "branches, pool proj 32,64,64); reduction 35->17 (3x3/2 384, "
            "1x1-3x3-3x3/2 96, maxpool); 4x Inception-B (17x17; factorized "
            "1x7/7x1 branches, 7x7 widths 128,160,160,192); reduction 17->8 "
            "(1x1-3x3/2 320, 1x1-1x7-7x1-3x3/2 192, maxpool); 2x Inception-C "
            "(8x8; expanded 1x3/3x1 branches) -> 8x8x2048; global average "
            "pool, dropout 0.2, fc 1000, softmax CE. Channel counts follow the "
            "TF-slim reference implementation of the paper. BN (eps 1e-3) + "
            "relu after every conv, convs without bias. Momentum 0.9, lr 0.045 x "
            "batch/256 "
            "(the paper trains with RMSProp and label smoothing; neither is "
            "used here).")
    return loss, opt, [fx, fy], desc, {}


# ----------------------------------------------------------------------------
# U-Net (Ronneberger et al. 2015), padded convs


def unet(net, batch, size=256, classes=2):
    x, fx = _feed("input", net.dtype, [batch, size, size, 1])
    y, fy = _feed("labels", tf.int32, [batch, size, size], classes)

    def double_conv(h, ch, name):
        with v1.variable_scope(name):
            h = tf.nn.relu(net.conv2d(h, ch, 3, name="conv1", bias=True))
            h = tf.nn.relu(net.conv2d(h, ch, 3, name="conv2", bias=True))
        return h

    skips = []
    h = x
    for i, ch in enumerate([64, 128, 256, 512]):
        h = double_conv(h, ch, "down%d" % (i + 1))
        skips.append(h)
        h = tf.nn.max_pool2d(h, 2, 2, "VALID", name="pool%d" % (i + 1))
    h = double_conv(h, 1024, "bottom")
    h = net.dropout(h, 0.5)
    for i, ch in enumerate([512, 256, 128, 64]):
        h = net.conv2d_transpose(h, ch, 2, 2, name="up%d/upconv" % (4 - i))
        h = tf.concat([skips[3 - i], h], axis=3, name="up%d/concat" % (4 - i))
        h = double_conv(h, ch, "up%d" % (4 - i))
    logits = net.conv2d(h, classes, 1, name="logits", bias=True)
    logits = tf.reshape(logits, [batch * size * size, classes])
    labels = tf.reshape(y, [batch * size * size])
    loss = gk.softmax_ce_loss(logits, labels)
    opt = v1.train.MomentumOptimizer(0.01, momentum=0.99)
    desc = ("2-D U-Net (Ronneberger et al. 2015), %dx%dx1 input, %d classes: "
            "4 down levels of [conv3x3+relu]x2 (64,128,256,512) + maxpool 2x2, "
            "bottom [conv3x3+relu]x2 1024 + dropout 0.5, 4 up levels of "
            "up-conv 2x2/2 (halving channels) + concat skip + [conv3x3+relu]x2, "
            "conv1x1 to %d classes, per-pixel softmax CE (mean). Convs are "
            "padded (SAME), so output size = input size and skips need no "
            "cropping (the paper uses unpadded convs, 572->388); no BN, as in "
            "the paper. Momentum 0.99, lr 0.01 as in the paper." %
            (size, size, classes, classes))
    return loss, opt, [fx, fy], desc, {}


# ----------------------------------------------------------------------------
# Transformer encoder, BERT-base size (Devlin et al. 2019), masked-LM head


def transformer(net, batch, seq=128, vocab=30522, hidden=768, layers=12,
                heads=12, ffn=3072, max_pred=20, max_pos=512, drop=0.1):
    ids, fx = _feed("input", tf.int32, [batch, seq], vocab)
    positions, fp = _feed("masked_positions", tf.int32, [batch, max_pred], seq)
    y, fy = _feed("labels", tf.int32, [batch, max_pred], vocab)
    init = v1.truncated_normal_initializer(stddev=0.02)
    head_dim = hidden // heads

    with v1.variable_scope("embeddings"):
        table = gk.variable("word_embeddings", [vocab, hidden], init)
        pos_table = gk.variable("position_embeddings", [max_pos, hidden], init)
        e = net.embedding(ids, table)                               # [B,S,H]
        e = e + net.use(tf.slice(pos_table, [0, 0], [seq, hidden]))
        e = net.dropout(net.layer_norm(e, name="ln"), drop)
    h = tf.reshape(e, [batch * seq, hidden])

    def split_heads(t):
        t = tf.reshape(t, [batch, seq, heads, head_dim])
        return tf.transpose(t, [0, 2, 1, 3])                        # [B,A,S,D]

    for layer in range(layers):
        with v1.variable_scope("layer_%d" % layer):
            with v1.variable_scope("attention"):
                q = split_heads(net.dense(h, hidden, name="query", init=init))
                k = split_heads(net.dense(h, hidden, name="key", init=init))
                v = split_heads(net.dense(h, hidden, name="value", init=init))
                scores = tf.matmul(q, k, transpose_b=True)          # [B,A,S,S]
                scores = scores * (1.0 / math.sqrt(head_dim))
                probs = net.dropout(tf.nn.softmax(scores), drop)
                ctx = tf.matmul(probs, v)                           # [B,A,S,D]
                ctx = tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]),
                                 [batch * seq, hidden])
                a = net.dense(ctx, hidden, name="output", init=init)
                h = net.layer_norm(net.dropout(a, drop) + h, name="ln")
            with v1.variable_scope("ffn"):
                f = net.gelu(net.dense(h, ffn, name="intermediate", init=init))
                f = net.dense(f, hidden, name="output", init=init)
                h = net.layer_norm(net.dropout(f, drop) + h, name="ln")

    with v1.variable_scope("mlm"):
        offsets = tf.constant(
            (np.arange(batch, dtype=np.int32) * seq).reshape(batch, 1))
        flat_pos = tf.reshape(positions + offsets, [batch * max_pred])
        g = tf.gather(h, flat_pos)                                  # [B*P,H]
        g = net.gelu(net.dense(g, hidden, name="transform", init=init))
        g = net.layer_norm(g, name="ln")
        out_bias = gk.variable("output_bias", [vocab], v1.zeros_initializer())
        logits = tf.matmul(g, net.use(table), transpose_b=True)    # tied
        logits = tf.nn.bias_add(logits, net.use(out_bias))
    loss = gk.softmax_ce_loss(logits, tf.reshape(y, [batch * max_pred]))
    opt = v1.train.AdamOptimizer(1e-4, beta1=0.9, beta2=0.999, epsilon=1e-6)
    desc = ("Transformer encoder of BERT-base size (Devlin et al. 2019): "
            "token ids [B,%d] -> word embedding gather (vocab %d, hidden %d) + "
            "learned position embeddings, LayerNorm, dropout %.1f; %d post-LN "
            "layers of %d-head self-attention (no attention mask: every token "
            "is real) and FFN %d with tanh-GELU, dropout %.1f on attention "
            "probabilities and sublayer outputs. Head: masked-LM softmax over "
            "the full vocabulary at %d positions per sequence (fed as "
            "masked_positions, int32 [B,%d] in [0,%d)), dense+GELU+LayerNorm "
            "transform, output weights tied to the word embeddings, own bias. "
            "No token-type embeddings, no pooler/next-sentence head. Adam "
            "(lr 1e-4, eps 1e-6; BERT's AdamW weight decay and warmup not "
            "included)." % (seq, vocab, hidden, drop, layers, heads, ffn,
                            drop, max_pred, max_pred, seq))
    return loss, opt, [fx, fp, fy], desc, {}


# ----------------------------------------------------------------------------
# LSTM language model (Zaremba et al. 2014, medium-model structure)


def lstm_lm(net, batch, steps=35, vocab=10000, hidden=1024, layers=2,
            drop=0.5):
    ids, fx = _feed("input", tf.int32, [batch, steps], vocab)
    y, fy = _feed("labels", tf.int32, [batch, steps], vocab)
    init = v1.random_uniform_initializer(-0.05, 0.05)
    with v1.variable_scope("embedding"):
        table = gk.variable("table", [vocab, hidden], init)
        e = net.dropout(net.embedding(ids, table), drop)            # [B,T,H]
    xs = tf.unstack(e, axis=1, name="unstack_time")
    for layer in range(layers):
        with v1.variable_scope("lstm_%d" % layer):
            w = gk.variable("kernel", [2 * hidden, 4 * hidden], init)
            b = gk.variable("bias", [4 * hidden], v1.zeros_initializer())
            wc, bc = net.use(w), net.use(b)
            h = tf.zeros([batch, hidden], dtype=net.dtype, name="h0")
            c = tf.zeros([batch, hidden], dtype=net.dtype, name="c0")
            outs = []
            for t, xt in enumerate(xs):
                with tf.name_scope("step_%d" % t):
                    z = tf.matmul(tf.concat([xt, h], axis=1), wc) + bc
                    i, g, f, o = tf.split(z, 4, axis=1)
                    c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
                    h = tf.sigmoid(o) * tf.tanh(c)
                    outs.append(net.dropout(h, drop))
            xs = outs
    hs = tf.reshape(tf.stack(xs, axis=1), [batch * steps, hidden])
    logits = net.dense(hs, vocab, name="softmax", init=init)
    loss = gk.softmax_ce_loss(logits, tf.reshape(y, [batch * steps]))
    opt = v1.train.AdamOptimizer(1e-3)
    desc = ("LSTM language model after Zaremba et al. 2014 (medium model "
            "structure, wider): word embedding gather (vocab %d, %d), dropout "
            "%.1f, %d LSTM layers of %d units statically unrolled over %d "
            "steps (hand-written cell, one fused gate matmul per step, no "
            "while loop, zero initial state), dropout %.1f on every "
            "non-recurrent connection, softmax over the vocabulary at every "
            "step (mean CE). Init uniform [-0.05, 0.05]. Gradients clipped to "
            "global norm 5 as in the paper, then Adam lr 1e-3 (the paper uses "
            "plain SGD). Zaremba's medium model has 650 units, the large 1500."
            % (vocab, hidden, drop, layers, hidden, steps, drop))
    return loss, opt, [fx, fy], desc, {"clip_norm": 5.0}



# ----------------------------------------------------------------------------
# GPT-style decoder (Radford et al. 2019, GPT-2 structure)

# name: (layers, hidden, heads, seq, vocab). GPT-2's four sizes (Radford et al.
# 2019, Table 2: 117M as published, 124M counted with tied embeddings), GPT-3's
# 2.7B, 6.7B and 13B (Brown et al. 2020, Table 2.1; 13B with 40 heads of 128,
# d_model 5120 = 40 x 128, where the table prints 5140) at GPT-2's vocabulary and
# a 1024-token context, and "tiny" for runtime tests on a CPU.
GPT_SIZES = {
    "tiny": (2, 64, 4, 16, 128),
    "124m": (12, 768, 12, 1024, 50257),
    "350m": (24, 1024, 16, 1024, 50257),
    "774m": (36, 1280, 20, 1024, 50257),
    "1.5b": (48, 1600, 25, 1024, 50257),
    "2.7b": (32, 2560, 32, 1024, 50257),
    "6.7b": (32, 4096, 32, 1024, 50257),
    "13b": (40, 5120, 40, 1024, 50257),
}


def gpt_params(size):
    """Parameter count of a GPT size (tied embeddings, biases, LayerNorms)."""
    layers, h, _, seq, vocab = GPT_SIZES[size]
    per_layer = 4 * (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h) + 4 * h
    return layers * per_layer + vocab * h + seq * h + 2 * h


def gpt(net, batch, size="124m", drop=0.1):
    layers, hidden, heads, seq, vocab = GPT_SIZES[size]
    ids, fx = _feed("input", tf.int32, [batch, seq], vocab)
    y, fy = _feed("labels", tf.int32, [batch, seq], vocab)
    init = v1.truncated_normal_initializer(stddev=0.02)
    # GPT-2 scales the residual projections' initialisation by 1/sqrt(2 L).
    init_out = v1.truncated_normal_initializer(
        stddev=0.02 / math.sqrt(2 * layers))
    head_dim = hidden // heads
    with v1.variable_scope("embeddings"):
        table = gk.variable("word_embeddings", [vocab, hidden], init)
        pos_table = gk.variable("position_embeddings", [seq, hidden], init)
        e = net.embedding(ids, table) + net.use(pos_table)          # [B,S,H]
        e = net.dropout(e, drop)
    h = tf.reshape(e, [batch * seq, hidden])
    # Causal mask, built by ops (the graph holds no [S,S] constant).
    causal = tf.linalg.band_part(tf.ones([seq, seq], dtype=net.dtype), -1, 0)
    neg = (1.0 - causal) * -1e4

    def split_heads(t):
        t = tf.reshape(t, [batch, seq, heads, head_dim])
        return tf.transpose(t, [0, 2, 1, 3])                        # [B,A,S,D]

    for layer in range(layers):
        with v1.variable_scope("layer_%d" % layer):
            with v1.variable_scope("attention"):
                x = net.layer_norm(h, name="ln", eps=1e-5)
                q = split_heads(net.dense(x, hidden, name="query", init=init))
                k = split_heads(net.dense(x, hidden, name="key", init=init))
                v = split_heads(net.dense(x, hidden, name="value", init=init))
                scores = tf.matmul(q, k, transpose_b=True)          # [B,A,S,S]
                scores = scores * (1.0 / math.sqrt(head_dim)) + neg
                probs = net.dropout(tf.nn.softmax(scores), drop)
                ctx = tf.matmul(probs, v)                           # [B,A,S,D]
                ctx = tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]),
                                 [batch * seq, hidden])
                a = net.dense(ctx, hidden, name="output", init=init_out)
                h = h + net.dropout(a, drop)
            with v1.variable_scope("ffn"):
                x = net.layer_norm(h, name="ln", eps=1e-5)
                f = net.gelu(net.dense(x, 4 * hidden, name="intermediate",
                                       init=init))
                f = net.dense(f, hidden, name="output", init=init_out)
                h = h + net.dropout(f, drop)
    h = net.layer_norm(h, name="final_ln", eps=1e-5)
    logits = tf.matmul(h, net.use(table), transpose_b=True)         # tied
    loss = gk.softmax_ce_loss(logits, tf.reshape(y, [batch * seq]))
    opt = v1.train.AdamOptimizer(1e-4, beta1=0.9, beta2=0.95, epsilon=1e-8)
    desc = ("GPT-style decoder, size %s (%d parameters; GPT-2 structure, "
            "Radford et al. 2019): token ids [B,%d] -> word embedding gather "
            "(vocab %d, hidden %d) + learned position embeddings, dropout "
            "%.1f; %d pre-LN layers of %d-head causal self-attention (mask "
            "built by ops) and FFN %d with tanh-GELU, residual dropout %.1f, "
            "residual projections initialised at 0.02/sqrt(2L); final "
            "LayerNorm; next-token softmax over the vocabulary at every "
            "position, output weights tied to the word embeddings. Adam (lr "
            "1e-4, betas 0.9/0.95). The graph holds no weight values (random "
            "initialisers), so its file stays small at any size."
            % (size, gpt_params(size), seq, vocab, hidden, drop, layers,
               heads, 4 * hidden, drop))
    return loss, opt, [fx, fy], desc, {}


MODELS = {
    "resnet50": (resnet50, 32, dict(bn_momentum=0.9, bn_epsilon=1e-5)),
    "vgg16": (vgg16, 32, {}),
    "inception_v3": (inception_v3, 32, dict(bn_momentum=0.9, bn_epsilon=1e-3)),
    "unet": (unet, 8, {}),
    "transformer": (transformer, 16, {}),
    "lstm_lm": (lstm_lm, 20, {}),
    "gpt": (gpt, 1, {}),
}


# Transformer sizes: BERT-base (the default) and "tiny" for runtime tests.
TRANSFORMER_SIZES = {
    "base": {},
    "tiny": dict(seq=16, vocab=128, hidden=64, layers=2, heads=4, ffn=256,
                 max_pred=4, max_pos=32),
}


def build(model, batch, dtype="float32", seed=SEED, lstm_hidden=None,
          gpt_size="124m", transformer_size="base"):
    fn, _, net_kw = MODELS[model]
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(seed)
        net = gk.Net(dtype=dtype, **net_kw)
        if model == "lstm_lm" and lstm_hidden:
            loss, opt, feeds, desc, fin = fn(net, batch, hidden=lstm_hidden)
        elif model == "gpt":
            loss, opt, feeds, desc, fin = fn(net, batch, size=gpt_size)
        elif model == "transformer":
            loss, opt, feeds, desc, fin = fn(
                net, batch, **TRANSFORMER_SIZES[transformer_size])
        else:
            loss, opt, feeds, desc, fin = fn(net, batch)
        tvars, fetches = gk.finish_training_graph(graph, loss, opt, **fin)
    gd, data = gk.serialize(graph)
    problems = gk.check_graph_def(gd, model)
    if problems:
        raise RuntimeError("\n".join(problems[:20]))
    side = {
        "name": output_name(model, gpt_size, transformer_size),
        "seed": seed,
        "batch": batch,
        "dtype": dtype,
        "tensorflow_version": tf.__version__,
        "feeds": feeds,
        "loss": "loss:0",
        "train_op": "train",
        "init_op": "init",
        "parameter_count": gk.param_count(tvars),
        "trainable_variables": len(tvars),
        "variables": [{"name": v.op.name, "fetch": f,
                       "dtype": v.dtype.base_dtype.name,
                       "shape": v.shape.as_list()}
                      for v, f in zip(tvars, fetches)],
        "node_count": len(gd.node),
        "graphdef_bytes": len(data),
        "unknown_shape_tensors": len(gk.unknown_shape_tensors(gd)),
        "op_counts": gk.op_counts(gd),
        "description": desc,
    }
    return graph, data, side


def output_name(model, gpt_size="124m", transformer_size="base"):
    """The file name (without .pb) and sidecar name of a built graph."""
    if model == "gpt":
        return "gpt-" + gpt_size
    if model == "transformer" and transformer_size != "base":
        return "transformer-" + transformer_size
    return model


def write_feeds(graph, side, out_dir, seed):
    """Writes the random feeds of run_steps as NAME.<feed>.npy beside the
    graph and names them in the sidecar (the fixture format of gen.py, which
    tfrun.LoadFixture reads)."""
    rng = np.random.default_rng(seed)
    for t, arr in random_feeds(graph, side, rng).items():
        fe = next(f for f in side["feeds"] if f["name"] == t.name)
        fname = "%s.%s.npy" % (side["name"], t.op.name)
        path = os.path.join(out_dir, fname)
        arr = np.ascontiguousarray(arr)
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        tmp = path + ".tmp.npy"
        np.save(tmp, arr, allow_pickle=False)
        os.replace(tmp, path)
        fe["file"] = fname


def random_feeds(graph, side, rng):
    out = {}
    for fe in side["feeds"]:
        t = graph.get_tensor_by_name(fe["name"])
        if "range" in fe:
            lo, hi = fe["range"]
            arr = rng.integers(lo, hi, size=fe["shape"]).astype(fe["dtype"])
        else:
            arr = rng.standard_normal(fe["shape"]).astype(fe["dtype"])
        out[t] = arr
    return out


def run_steps(graph, side, steps, seed):
    """Runs init and `steps` training steps on random feeds; returns losses
    and seconds per step (excluding the first)."""
    rng = np.random.default_rng(seed)
    feeds = random_feeds(graph, side, rng)
    loss = graph.get_tensor_by_name(side["loss"])
    train = graph.get_operation_by_name(side["train_op"])
    losses, times = [], []
    with v1.Session(graph=graph) as sess:
        sess.run(side["init_op"])
        for _ in range(steps):
            t0 = time.time()
            lv, _ = sess.run([loss, train], feed_dict=feeds)
            times.append(time.time() - t0)
            losses.append(float(lv))
    per_step = sum(times[1:]) / max(1, len(times) - 1)
    return losses, per_step


def generate(model, batch, out_path, dtype, seed, run, lstm_hidden,
             gpt_size="124m", transformer_size="base", feeds=False):
    t0 = time.time()
    graph, data, side = build(model, batch, dtype, seed, lstm_hidden,
                              gpt_size, transformer_size)
    secs = time.time() - t0
    gk.write_bytes(out_path, data)
    if feeds:
        write_feeds(graph, side, os.path.dirname(os.path.abspath(out_path)),
                    seed)
    json_path = os.path.splitext(out_path)[0] + ".json"
    gk.write_bytes(json_path, (json.dumps(side, indent=1) + "\n").encode())
    print("%-12s batch=%-3d nodes=%6d params=%11d pb=%6.1f MB build=%5.1fs -> %s"
          % (model, batch, side["node_count"], side["parameter_count"],
             len(data) / 1e6, secs, out_path), flush=True)
    if run:
        losses, per_step = run_steps(graph, side, run, seed)
        ok = all(np.isfinite(losses))
        print("%-12s ran %d steps, %.2fs/step, loss %s%s" % (
            model, run, per_step, " ".join("%.4f" % l for l in losses),
            "" if ok else "  NON-FINITE"), flush=True)
        if not ok:
            return 1
    return 0


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS))
    ap.add_argument("--all", action="store_true", help="build every model")
    ap.add_argument("--batch", type=int,
                    help="batch size (default per model: %s)" % ", ".join(
                        "%s %d" % (k, v[1]) for k, v in MODELS.items()))
    ap.add_argument("--out", help="output .pb (with --model)")
    ap.add_argument("--out-dir", default=os.path.join(here, "large"),
                    help="output directory for --all, or for --model without "
                    "--out (default testmodels/large)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16"],
                    help="compute dtype; float16 keeps float32 master "
                    "variables and a float32 loss (no loss scaling)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--lstm-hidden", type=int,
                    help="lstm_lm units per layer (default 1024)")
    ap.add_argument("--gpt-size", default="124m", choices=list(GPT_SIZES),
                    help="gpt: the decoder's size (default 124m; gpt is not "
                    "among --all's models)")
    ap.add_argument("--transformer-size", default="base",
                    choices=list(TRANSFORMER_SIZES),
                    help="transformer: BERT-base (default) or tiny")
    ap.add_argument("--feeds", action="store_true",
                    help="also write random feeds as .npy files named in the "
                    "sidecar (the fixture format of gen.py)")
    ap.add_argument("--run", type=int, default=0, metavar="STEPS",
                    help="after building, run init and STEPS train steps on "
                    "random feeds on this machine (use a small --batch)")
    args = ap.parse_args(argv)
    if args.all == bool(args.model):
        ap.error("give exactly one of --model or --all")
    if args.all and args.out:
        ap.error("--out is for --model; use --out-dir with --all")
    names = sorted(m for m in MODELS if m != "gpt") if args.all else [args.model]
    rc = 0
    for name in names:
        batch = args.batch or MODELS[name][1]
        base = output_name(name, args.gpt_size, args.transformer_size)
        out = args.out or os.path.join(args.out_dir, base + ".pb")
        rc |= generate(name, batch, out, args.dtype, args.seed, args.run,
                       args.lstm_hidden, args.gpt_size,
                       args.transformer_size, args.feeds)
    return rc


if __name__ == "__main__":
    sys.exit(main())
