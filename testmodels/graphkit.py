"""Shared helpers for building tf.compat.v1 training graphs from raw ops.

Used by gen.py (small committed fixtures) and large.py (benchmark graphs).
Everything here runs in TF1 graph mode with resource variables; no Keras.

Conventions every generated graph follows:
  * placeholders named ``input`` and ``labels``;
  * the scalar loss is the op ``loss`` (tensor ``loss:0``);
  * ``train`` is a NoOp grouping the optimizer update and the batch-norm
    moving-statistics updates;
  * ``init`` initializes all global variables (a NoOp named ``init``);
  * ``fetch_var/<i>`` is an Identity of a fresh ReadVariableOp of the i-th
    trainable variable, off the training path;
  * node device fields are left empty;
  * every random initializer is seeded through the graph-level seed, so
    regenerating gives byte-identical GraphDefs.
"""

import collections
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")
tf.compat.v1.disable_v2_behavior()

v1 = tf.compat.v1

# Op types that mean the graph has TF1 control flow or functional control flow.
CONTROL_FLOW_OPS = frozenset([
    "Enter", "RefEnter", "Exit", "RefExit", "Merge", "RefMerge", "Switch",
    "RefSwitch", "NextIteration", "RefNextIteration", "LoopCond",
    "If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase",
    "PartitionedCall", "StatefulPartitionedCall",
])

# Random ops that must carry a non-zero seed or seed2 attribute.
RANDOM_OPS = frozenset([
    "RandomUniform", "RandomStandardNormal", "TruncatedNormal",
    "RandomUniformInt", "RandomShuffle", "Multinomial",
])


# ----------------------------------------------------------------------------
# Variables and layers


def variable(name, shape, initializer, trainable=True, dtype=tf.float32):
    """A resource variable created through get_variable (so it has a stable
    op name under the current variable scope)."""
    return v1.get_variable(name, shape=shape, dtype=dtype,
                           initializer=initializer, trainable=trainable,
                           use_resource=True)


def he_init():
    """He et al. 2015 fan-in truncated-normal initializer (seed from graph)."""
    return v1.variance_scaling_initializer(
        scale=2.0, mode="fan_in", distribution="truncated_normal")


def glorot_init():
    return v1.glorot_uniform_initializer()


def _pair(k):
    return (k, k) if isinstance(k, int) else tuple(k)


class Net:
    """Holds the compute dtype and layer helpers for one graph.

    Variables are always float32 (master weights); when the compute dtype is
    float16 they are cast on use, as mixed-precision training does.
    """

    def __init__(self, dtype=tf.float32, bn_momentum=0.9, bn_epsilon=1e-3):
        self.dtype = tf.as_dtype(dtype)
        self.bn_momentum = bn_momentum
        self.bn_epsilon = bn_epsilon

    def _use(self, v):
        if self.dtype == tf.float32:
            return v
        return tf.cast(v, self.dtype)

    def conv2d(self, x, out_ch, kernel, stride=1, name="conv", bias=False,
               padding="SAME"):
        kh, kw = _pair(kernel)
        sh, sw = _pair(stride)
        in_ch = int(x.shape[-1])
        with v1.variable_scope(name):
            w = variable("weights", [kh, kw, in_ch, out_ch], he_init())
            y = tf.nn.conv2d(x, self._use(w), strides=[1, sh, sw, 1],
                             padding=padding, data_format="NHWC")
            if bias:
                b = variable("biases", [out_ch], v1.zeros_initializer())
                y = tf.nn.bias_add(y, self._use(b))
        return y

    def conv2d_transpose(self, x, out_ch, kernel=2, stride=2, name="upconv"):
        """Up-convolution (transposed conv), with bias."""
        kh, kw = _pair(kernel)
        n, h, w_, in_ch = [int(d) for d in x.shape]
        with v1.variable_scope(name):
            w = variable("weights", [kh, kw, out_ch, in_ch], he_init())
            b = variable("biases", [out_ch], v1.zeros_initializer())
            y = tf.nn.conv2d_transpose(
                x, self._use(w), output_shape=[n, h * stride, w_ * stride, out_ch],
                strides=[1, stride, stride, 1], padding="SAME")
            y = tf.nn.bias_add(y, self._use(b))
        return y

    def batch_norm(self, x, name="bn"):
        """Fused batch norm in training mode (FusedBatchNormV3), with moving
        mean/variance variables updated by AssignSubVariableOp ops that are
        collected in UPDATE_OPS and grouped into ``train``."""
        ch = int(x.shape[-1])
        with v1.variable_scope(name):
            gamma = variable("gamma", [ch], v1.ones_initializer())
            beta = variable("beta", [ch], v1.zeros_initializer())
            mmean = variable("moving_mean", [ch], v1.zeros_initializer(),
                             trainable=False)
            mvar = variable("moving_variance", [ch], v1.ones_initializer(),
                            trainable=False)
            y, mean, var = v1.nn.fused_batch_norm(
                x, gamma, beta, epsilon=self.bn_epsilon, is_training=True,
                data_format="NHWC")
            decay = 1.0 - self.bn_momentum
            with tf.name_scope("update_moving"):
                um = mmean.assign_sub((mmean - mean) * decay, read_value=False)
                uv = mvar.assign_sub((mvar - var) * decay, read_value=False)
            v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, um)
            v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, uv)
        return y

    def conv_bn_relu(self, x, out_ch, kernel, stride=1, name="conv",
                     padding="SAME", relu=True):
        with v1.variable_scope(name):
            y = self.conv2d(x, out_ch, kernel, stride, name="conv",
                            padding=padding)
            y = self.batch_norm(y, name="bn")
            if relu:
                y = tf.nn.relu(y)
        return y

    def dense(self, x, units, name="dense", bias=True, init=None):
        in_dim = int(x.shape[-1])
        with v1.variable_scope(name):
            w = variable("weights", [in_dim, units], init or glorot_init())
            y = tf.matmul(x, self._use(w))
            if bias:
                b = variable("biases", [units], v1.zeros_initializer())
                y = tf.nn.bias_add(y, self._use(b))
        return y

    def dropout(self, x, rate):
        """Inverted dropout (seeded from the graph seed)."""
        if not rate:
            return x
        return tf.nn.dropout(x, rate=rate)

    def gelu(self, x):
        """tanh approximation of GELU (Hendrycks & Gimpel), as in BERT."""
        c = 0.7978845608028654  # sqrt(2 / pi)
        return 0.5 * x * (1.0 + tf.tanh(c * (x + 0.044715 * x * x * x)))

    def embedding(self, ids, table):
        """Row gather from a float32 table (ResourceGather), cast to the
        compute dtype."""
        return self._use(tf.gather(table, ids))

    def use(self, v):
        """The variable's value in the compute dtype."""
        return self._use(v)

    def layer_norm(self, x, name="ln", eps=1e-12):
        """Layer norm over the last axis, written out with primitive ops."""
        dim = int(x.shape[-1])
        with v1.variable_scope(name):
            gamma = variable("gamma", [dim], v1.ones_initializer())
            beta = variable("beta", [dim], v1.zeros_initializer())
            mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
            y = (x - mean) * tf.math.rsqrt(var + eps)
            y = y * self._use(gamma) + self._use(beta)
        return y


def softmax_ce_loss(logits, labels):
    """Mean sparse softmax cross-entropy as the op ``loss`` (float32)."""
    if logits.dtype != tf.float32:
        logits = tf.cast(logits, tf.float32)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits, name="xent")
    return tf.reduce_mean(ce, name="loss")


# ----------------------------------------------------------------------------
# Finishing a graph


def finish_training_graph(graph, loss, optimizer, clip_norm=None):
    """Adds gradients + optimizer update (``train``), ``init`` and the
    ``fetch_var/<i>`` reads. With clip_norm the gradients are clipped by
    their global norm first. Returns (trainable_vars, fetch_names)."""
    assert loss.op.name == "loss", loss.op.name
    tvars = v1.trainable_variables()
    grads_and_vars = optimizer.compute_gradients(loss, var_list=tvars)
    missing = [v.op.name for g, v in grads_and_vars if g is None]
    if missing:
        raise ValueError("variables without gradient: %s" % missing)
    if clip_norm:
        with tf.name_scope("clip_gradients"):
            grads, _ = tf.clip_by_global_norm(
                [g for g, _ in grads_and_vars], clip_norm)
        grads_and_vars = list(zip(grads, [v for _, v in grads_and_vars]))
    apply_op = optimizer.apply_gradients(grads_and_vars,
                                         name="apply_gradients")
    updates = v1.get_collection(v1.GraphKeys.UPDATE_OPS)
    train = tf.group(apply_op, *updates, name="train")
    assert train.name == "train", train.name
    # Same as tf.compat.v1.global_variables_initializer(), which takes no
    # name argument.
    init = v1.variables_initializer(v1.global_variables(), name="init")
    assert init.name == "init", init.name
    fetches = []
    for i, v in enumerate(tvars):
        r = tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=v.dtype,
                                      name="fetch_var/read_%d" % i)
        f = tf.identity(r, name="fetch_var/%d" % i)
        assert f.op.name == "fetch_var/%d" % i, f.op.name
        fetches.append(f.name)
    return tvars, fetches


def serialize(graph):
    """Binary GraphDef with _output_shapes on every node, deterministic.

    as_graph_def(add_shapes=True) only annotates nodes that have outputs;
    nodes with none (NoOp, Assign*VariableOp, ResourceApply*) get an empty
    _output_shapes list so that every node carries the attribute."""
    gd = graph.as_graph_def(add_shapes=True)
    for n in gd.node:
        if "_output_shapes" not in n.attr:
            if graph.get_operation_by_name(n.name).outputs:
                raise RuntimeError("node %s has outputs but no shapes" % n.name)
            n.attr["_output_shapes"].list.SetInParent()
    return gd, gd.SerializeToString(deterministic=True)


def check_graph_def(gd, name=""):
    """Structural checks shared by the generators and check_fixtures.py.
    Returns a list of problem strings (empty if fine)."""
    problems = []
    for n in gd.node:
        if n.device:
            problems.append("%s: node %s has device %r" % (name, n.name, n.device))
        if "_output_shapes" not in n.attr:
            problems.append("%s: node %s has no _output_shapes" % (name, n.name))
        if n.op in CONTROL_FLOW_OPS:
            problems.append("%s: control-flow op %s (%s)" % (name, n.name, n.op))
        if n.op in RANDOM_OPS:
            if n.attr["seed"].i == 0 and n.attr["seed2"].i == 0:
                problems.append("%s: random op %s unseeded" % (name, n.name))
    if gd.library.function:
        problems.append("%s: graph has %d library functions" %
                        (name, len(gd.library.function)))
    names = {n.name for n in gd.node}
    for required in ("input", "labels", "loss", "train", "init"):
        if required not in names:
            problems.append("%s: no node named %s" % (name, required))
    return problems


def unknown_shape_tensors(gd):
    """Tensor names whose _output_shapes entry is not fully defined. In these
    graphs that is FusedBatchNormV3's output 5 (reserve_space_3, an opaque
    buffer whose shape function is UnknownShape) and the dangling ZerosLike
    the gradient code creates for it."""
    out = []
    for n in gd.node:
        for i, s in enumerate(n.attr["_output_shapes"].list.shape):
            if s.unknown_rank or any(d.size < 0 for d in s.dim):
                out.append("%s:%d" % (n.name, i))
    return out


def op_counts(gd):
    c = collections.Counter(n.op for n in gd.node)
    return dict(sorted(c.items()))


def param_count(tvars):
    total = 0
    for v in tvars:
        n = 1
        for d in v.shape.as_list():
            n *= d
        total += n
    return total


def write_bytes(path, data):
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def warn(msg):
    print(msg, file=sys.stderr)
