"""Generates the zoo: training graphs built the way users build them.

Unlike gen.py and large.py, which write every op by hand, each zoo graph is
built through the real Keras and TensorFlow code paths that user code goes
through: tf_keras applications in TF1 graph mode with the
control_dependencies(model.updates) training idiom, a GPT-style decoder from
Keras MultiHeadAttention with a causal mask and Adam, a Keras learning-phase
tf.cond (v1 Switch/Merge and v2 If), dynamic_rnn with v1 and v2 control flow,
a v1 graph calling a tf.function, a TF2 concrete function's graph, a graph
written without _output_shapes and one with an unknown batch dimension.

Each graph NAME is written to the output directory (default testmodels/zoo/)
as NAME.pb (binary GraphDef), NAME.json (sidecar: feeds, loss, train and init
ops, variables with their fetch tensors, what the graph exercises) and one
NAME.<feed>.npy per fed placeholder, in the layout of testmodels/fixtures.

  .venv/bin/python testmodels/zoo.py                     # all, -> testmodels/zoo/
  .venv/bin/python testmodels/zoo.py --only gpt --out /tmp/zoo
  .venv/bin/python testmodels/zoo.py --batch 32 --out /tmp/zoo32   # bigger batches
  .venv/bin/python testmodels/zoo.py --check             # regenerate, compare bytes
  .venv/bin/python testmodels/zoo.py --run 3             # also run 3 training steps

Every graph is built in its own Python process (Keras keeps global state,
and the TF2 concrete function needs eager mode while the rest use TF1 graph
mode). The Keras in use is tf_keras (TF_USE_LEGACY_KERAS=1), pinned in
requirements.txt to the TensorFlow release.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# tf.keras and tf.compat.v1.nn.rnn_cell are tf_keras (Keras 2), as in user
# code that runs TF1-style training on TensorFlow 2.16 and later.
os.environ["TF_USE_LEGACY_KERAS"] = "1"

SEED = 1234
HERE = os.path.dirname(os.path.abspath(__file__))

# MODELS maps each zoo graph to (default batch, builder name, one-line
# description). The builders are the functions named build_<builder>.
MODELS = {
    "mobilenetv2": (4, "app", "tf_keras.applications.MobileNetV2, 32x32x3, 10 classes, "
                    "Momentum; v1 graph mode, set_learning_phase(1), "
                    "control_dependencies(model.updates)"),
    "densenet121": (2, "app", "tf_keras.applications.DenseNet121, 32x32x3, 10 classes, "
                    "Momentum; same idiom as mobilenetv2"),
    "efficientnetb0": (2, "app", "tf_keras.applications.EfficientNetB0, 32x32x3, 10 classes, "
                       "Momentum; same idiom as mobilenetv2"),
    "gpt": (4, "gpt", "GPT-style decoder from Keras layers (Embedding, MultiHeadAttention "
            "with use_causal_mask, LayerNormalization, Dense), 2 blocks, d=64, 4 heads, "
            "T=32, vocabulary 128, Adam"),
    "cond_v1": (4, "cond", "small Keras CNN (Conv2D, BatchNormalization, Dropout) called with "
                "training=keras_learning_phase, a placeholder: v1 tf.cond (Switch/Merge)"),
    "cond_v2": (4, "cond", "cond_v1 with control flow v2: the learning-phase conds are "
                "If/StatelessIf with branch functions"),
    "rnn_v1": (4, "rnn", "tf.compat.v1.nn.dynamic_rnn over an LSTMCell (T=12, 64 units), "
               "v1 control flow (Enter/Exit/Merge/Switch/NextIteration), Adam"),
    "rnn_v2": (4, "rnn", "rnn_v1 with control flow v2: StatelessWhile ops with function bodies"),
    "tffunction": (8, "tffunction", "v1 graph whose layers call a tf.function "
                   "(StatefulPartitionedCall / PartitionedCall and its gradient functions), "
                   "Momentum"),
    "concrete": (8, "concrete", "TF2 concrete function of a tf.function training step "
                 "(Keras Sequential MLP, GradientTape, SGD) built eagerly; captured variable "
                 "handles turned into VarHandleOps so the graph runs in a v1 session"),
    "noshapes": (4, "app", "mobilenetv2 written without _output_shapes "
                 "(as_graph_def() with add_shapes=False)"),
    "unknown_batch": (4, "app", "mobilenetv2 whose input placeholder has shape [None,32,32,3]: "
                      "_output_shapes carry -1 leading dimensions"),
}

# BIG are the graphs too large to commit (20 MB and 9 MB at batch 2: the
# control_dependencies(model.updates) idiom puts every batch-norm update on each
# gradient op's control inputs). `make zoo` generates them into testmodels/zoo/,
# where .gitignore keeps them out of git; the default run, --check included,
# covers the committed graphs only, --only or --all the big ones too.
BIG = ("densenet121", "efficientnetb0")

APP_CLASSES = {"mobilenetv2": "MobileNetV2", "densenet121": "DenseNet121",
               "efficientnetb0": "EfficientNetB0", "noshapes": "MobileNetV2",
               "unknown_batch": "MobileNetV2"}


# ----------------------------------------------------------------------------
# In the child process: building one graph


def _tf(v1_mode, cf_v2=False):
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    if v1_mode:
        tf.compat.v1.disable_v2_behavior()
        # Resource variables, as Keras and every other tfswap graph use.
        tf.compat.v1.enable_resource_variables()
        if cf_v2:
            tf.compat.v1.enable_control_flow_v2()
        else:
            tf.compat.v1.disable_control_flow_v2()
    return tf


def _placeholders(tf, name, batch, shape, label_shape, classes, rng, input_dtype="float32",
                  unknown_batch=False):
    """Placeholders input and labels and their feed arrays."""
    import numpy as np
    v1 = tf.compat.v1
    bd = None if unknown_batch else batch
    x = v1.placeholder(input_dtype, [bd] + list(shape), name="input")
    y = v1.placeholder(tf.int32, [bd] + list(label_shape), name="labels")
    if input_dtype == "float32":
        xa = rng.standard_normal([batch] + list(shape)).astype(np.float32)
    else:
        xa = rng.integers(0, classes, [batch] + list(shape)).astype(np.int32)
    ya = rng.integers(0, classes, [batch] + list(label_shape)).astype(np.int32)
    return x, y, {"input": xa, "labels": ya}


def _loss(tf, logits, labels):
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                        name="xent")
    return tf.reduce_mean(ce, name="loss")


def _finish(tf, loss, opt, updates):
    """The usual TF1 Keras training step: the optimizer's update under
    control_dependencies(model.updates), grouped as the NoOp train; init runs
    all global variables' initializers; fetch_var/<i> reads trainable
    variable i off the training path."""
    v1 = tf.compat.v1
    tvars = v1.trainable_variables()
    with tf.control_dependencies(updates):
        step = opt.minimize(loss, var_list=tvars)
    train = tf.group(step, name="train")
    assert train.name == "train", train.name
    init = v1.variables_initializer(v1.global_variables(), name="init")
    assert init.name == "init", init.name
    fetches = []
    for i, v in enumerate(tvars):
        r = tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=v.dtype,
                                      name="fetch_var/read_%d" % i)
        fetches.append(tf.identity(r, name="fetch_var/%d" % i).name)
    variables = [{"name": v.op.name, "fetch": f, "dtype": v.dtype.base_dtype.name,
                  "shape": v.shape.as_list()} for v, f in zip(tvars, fetches)]
    return variables


def build_app(name, batch, rng):
    tf = _tf(True)
    import tf_keras
    v1 = tf.compat.v1
    v1.set_random_seed(SEED)
    tf_keras.backend.set_learning_phase(1)
    x, y, feeds = _placeholders(tf, name, batch, [32, 32, 3], [], 10, rng,
                                unknown_batch=name == "unknown_batch")
    app = getattr(tf_keras.applications, APP_CLASSES[name])
    model = app(input_tensor=x, weights=None, classes=10, classifier_activation=None)
    loss = _loss(tf, model.output, y)
    opt = v1.train.MomentumOptimizer(0.01, 0.9)
    variables = _finish(tf, loss, opt, model.updates)
    return variables, feeds, {"add_shapes": name != "noshapes"}


def build_gpt(name, batch, rng):
    tf = _tf(True)
    import tf_keras
    L = tf_keras.layers
    v1 = tf.compat.v1
    v1.set_random_seed(SEED)
    tf_keras.backend.set_learning_phase(1)
    T, V, D, H, blocks = 32, 128, 64, 4, 2
    x, y, feeds = _placeholders(tf, name, batch, [T], [T], V, rng, input_dtype="int32")
    h = L.Embedding(V, D, name="tok_emb")(x)
    h = h + L.Embedding(T, D, name="pos_emb")(tf.range(T))
    for b in range(blocks):
        a = L.LayerNormalization(epsilon=1e-5, name="ln1_%d" % b)(h)
        a = L.MultiHeadAttention(num_heads=H, key_dim=D // H, name="mha_%d" % b)(
            a, a, use_causal_mask=True)
        h = h + a
        f = L.LayerNormalization(epsilon=1e-5, name="ln2_%d" % b)(h)
        f = L.Dense(4 * D, activation="gelu", name="fc_%d" % b)(f)
        h = h + L.Dense(D, name="proj_%d" % b)(f)
    h = L.LayerNormalization(epsilon=1e-5, name="ln_f")(h)
    logits = L.Dense(V, name="lm_head")(h)
    loss = _loss(tf, logits, y)
    opt = v1.train.AdamOptimizer(1e-3)
    variables = _finish(tf, loss, opt, [])
    return variables, feeds, {}


def build_cond(name, batch, rng):
    tf = _tf(True, cf_v2=name == "cond_v2")
    import tf_keras
    L = tf_keras.layers
    v1 = tf.compat.v1
    v1.set_random_seed(SEED)
    x, y, feeds = _placeholders(tf, name, batch, [16, 16, 3], [], 10, rng)
    # Keras' learning phase as a placeholder: every layer whose behaviour depends on it
    # (BatchNormalization, Dropout) builds a tf.cond on it.
    training = tf_keras.backend.learning_phase()
    model = tf_keras.Sequential([
        L.Conv2D(16, 3, padding="same", use_bias=False, input_shape=(16, 16, 3)),
        L.BatchNormalization(), L.ReLU(),
        L.Conv2D(32, 3, strides=2, padding="same", use_bias=False),
        L.BatchNormalization(), L.ReLU(),
        L.GlobalAveragePooling2D(), L.Dropout(0.25, seed=7), L.Dense(10),
    ], name="cnn")
    logits = model(x, training=training)
    loss = _loss(tf, logits, y)
    opt = v1.train.MomentumOptimizer(0.01, 0.9)
    variables = _finish(tf, loss, opt, model.get_updates_for(x))
    return variables, feeds, {"learning_phase": training.op.name}


def build_rnn(name, batch, rng):
    tf = _tf(True, cf_v2=name == "rnn_v2")
    v1 = tf.compat.v1
    v1.set_random_seed(SEED)
    T, F, U = 12, 16, 64
    x, y, feeds = _placeholders(tf, name, batch, [T, F], [], 10, rng)
    cell = v1.nn.rnn_cell.LSTMCell(U, name="lstm")
    out, _ = v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    w = v1.get_variable("head/kernel", [U, 10], initializer=v1.glorot_uniform_initializer(),
                        use_resource=True)
    b = v1.get_variable("head/bias", [10], initializer=v1.zeros_initializer(),
                        use_resource=True)
    logits = tf.matmul(out[:, -1, :], w) + b
    loss = _loss(tf, logits, y)
    opt = v1.train.AdamOptimizer(1e-3)
    variables = _finish(tf, loss, opt, [])
    return variables, feeds, {}


def build_tffunction(name, batch, rng):
    tf = _tf(True)
    v1 = tf.compat.v1
    v1.set_random_seed(SEED)
    x, y, feeds = _placeholders(tf, name, batch, [64], [], 10, rng)

    @tf.function
    def dense_relu(h, w, b):
        return tf.nn.relu(tf.matmul(h, w) + b)

    h = x
    for i, units in enumerate([128, 128]):
        with v1.variable_scope("layer%d" % i):
            w = v1.get_variable("kernel", [int(h.shape[-1]), units],
                                initializer=v1.glorot_uniform_initializer(), use_resource=True)
            b = v1.get_variable("bias", [units], initializer=v1.zeros_initializer(),
                                use_resource=True)
            h = dense_relu(h, w, b)
    with v1.variable_scope("head"):
        w = v1.get_variable("kernel", [128, 10], initializer=v1.glorot_uniform_initializer(),
                            use_resource=True)
        logits = tf.matmul(h, w)
    loss = _loss(tf, logits, y)
    opt = v1.train.MomentumOptimizer(0.01, 0.9)
    variables = _finish(tf, loss, opt, [])
    return variables, feeds, {}


def build_concrete(name, batch, rng):
    """A TF2 training step traced to a concrete function, its graph made runnable in
    a v1 session: each captured variable handle (a resource Placeholder inside
    the function graph) becomes a VarHandleOp of the same shared name, with an
    AssignVariableOp of the variable's initial value grouped into init."""
    tf = _tf(False)
    import numpy as np
    import tf_keras
    L = tf_keras.layers
    tf.random.set_seed(SEED)
    tf_keras.utils.set_random_seed(SEED)
    xa = rng.standard_normal([batch, 64]).astype(np.float32)
    ya = rng.integers(0, 10, [batch]).astype(np.int32)
    model = tf_keras.Sequential([L.Dense(128, activation="relu", input_shape=(64,)),
                                 L.Dense(128, activation="relu"), L.Dense(10)])
    opt = tf.keras.optimizers.SGD(0.01, momentum=0.9)
    opt.build(model.trainable_variables)
    lossf = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(input_signature=[tf.TensorSpec([batch, 64], tf.float32, name="input"),
                                  tf.TensorSpec([batch], tf.int32, name="labels")])
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = lossf(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    cf = train_step.get_concrete_function()
    g = cf.graph
    gd = g.as_graph_def(add_shapes=True)
    by_handle = {}
    # The optimizer's learning rate is a variable outside opt.variables.
    hyper = [v for v in vars(opt).values() if isinstance(v, tf.Variable)]
    for v in model.variables + opt.variables + hyper:
        by_handle[id(v.handle)] = v
    captured = {}
    for ext, internal in g.captures:
        v = by_handle.get(id(ext))
        if v is None:
            raise RuntimeError("capture %s is not a known variable" % internal.name)
        captured[internal.op.name] = v
    names, values, used = {}, {}, set()
    for n in gd.node:
        v = captured.get(n.name)
        if v is None:
            continue
        shared = v.name.split(":")[0]
        while shared in used:
            shared += "_"
        used.add(shared)
        values[n.name] = v.numpy()
        names[n.name] = (v, shared)
        shape = n.attr["_output_shapes"]
        n.op = "VarHandleOp"
        n.ClearField("input")
        keep = {"_output_shapes": shape}
        n.ClearField("attr")
        n.attr["_output_shapes"].CopyFrom(keep["_output_shapes"])
        n.attr["dtype"].type = v.dtype.as_datatype_enum
        n.attr["shape"].shape.CopyFrom(tf.TensorShape(v.shape).as_proto())
        n.attr["shared_name"].s = shared.encode()
        n.attr["container"].s = b""
        n.attr["allowed_devices"].list.SetInParent()
    # The function's output: Identity of the loss, with control inputs on the updates.
    out = cf.outputs[0].op.name
    extra = tf.Graph()
    with extra.as_default():
        v1 = tf.compat.v1
        src = v1.placeholder(tf.float32, [], name=out)
        loss = tf.identity(src, name="loss")
        with tf.control_dependencies([loss]):
            tf.no_op(name="train")
        inits, variables = [], []
        tvars = {id(v) for v in model.trainable_variables}
        order = sorted(names.items())
        # One stand-in per captured handle, named like the node it stands for, so that the
        # merge below drops it for the VarHandleOp: the initialiser and the variable fetch
        # must use the same one (a second placeholder of that name would be renamed
        # NAME_1, kept, and left unfed).
        handles = {}
        for i, (node, (v, shared)) in enumerate(order):
            h = handles[node] = v1.placeholder(tf.resource, [], name=node)
            a = tf.raw_ops.AssignVariableOp(
                resource=h, value=tf.constant(values[node], name="init/value_%d" % i),
                name="init/assign_%d" % i)
            inits.append(a)
        tf.group(*inits, name="init")
        k = 0
        for node, (v, shared) in order:
            if id(v) not in tvars:
                continue
            r = tf.raw_ops.ReadVariableOp(resource=handles[node], dtype=v.dtype,
                                          name="fetch_var/read_%d" % k)
            f = tf.identity(r, name="fetch_var/%d" % k)
            variables.append({"name": shared, "fetch": f.name,
                              "dtype": v.dtype.name, "shape": v.shape.as_list()})
            k += 1
    egd = extra.as_graph_def(add_shapes=True)
    have = {n.name for n in gd.node}
    for n in egd.node:
        if n.name in have:
            continue
        gd.node.add().CopyFrom(n)
    feeds = {"input": xa, "labels": ya}
    return gd, variables, feeds, {"function_output": out}


def _feed_entries(name, graph_def, feeds):
    import numpy as np
    entries = []
    nodes = {n.name: n for n in graph_def.node}
    for pname, arr in feeds.items():
        n = nodes[pname]
        assert n.op == "Placeholder", (pname, n.op)
        entries.append({"name": pname + ":0", "file": "%s.%s.npy" % (name, pname),
                        "dtype": np.dtype(arr.dtype).name, "shape": list(arr.shape)})
    return entries


def _save_npy(path, arr):
    import numpy as np
    arr = np.ascontiguousarray(arr)
    arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    tmp = path + ".tmp.npy"
    np.save(tmp, arr, allow_pickle=False)
    os.replace(tmp, path)


def _write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def build_one(name, batch, out_dir):
    """Builds zoo graph name in this process and writes its files."""
    import collections
    import numpy as np
    rng = np.random.default_rng(SEED)
    kind = MODELS[name][1]
    if kind == "concrete":
        gd, variables, feeds, extra = build_concrete(name, batch, rng)
        import tensorflow as tf
    else:
        variables, feeds, extra = globals()["build_" + kind](name, batch, rng)
        import tensorflow as tf
        add_shapes = extra.pop("add_shapes", True)
        gd = tf.compat.v1.get_default_graph().as_graph_def(add_shapes=add_shapes)
    shaped = sum(1 for n in gd.node if "_output_shapes" in n.attr)
    unknown = 0
    for n in gd.node:
        if "_output_shapes" not in n.attr:
            continue
        for s in n.attr["_output_shapes"].list.shape:
            if s.unknown_rank or any(d.size < 0 for d in s.dim):
                unknown += 1
    ops = collections.Counter(n.op for n in gd.node)
    side = {
        "name": name,
        "seed": SEED,
        "batch": batch,
        "tensorflow_version": tf.__version__,
        "feeds": _feed_entries(name, gd, feeds),
        "loss": "loss:0",
        "train_op": "train",
        "init_op": "init",
        "variables": variables,
        "node_count": len(gd.node),
        "function_count": len(gd.library.function),
        "nodes_with_output_shapes": shaped,
        "outputs_with_unknown_shape": unknown,
        "op_counts": dict(sorted(ops.items())),
        "description": MODELS[name][2],
    }
    side.update(extra)
    os.makedirs(out_dir, exist_ok=True)
    _write(os.path.join(out_dir, name + ".pb"), gd.SerializeToString(deterministic=True))
    for pname, arr in feeds.items():
        _save_npy(os.path.join(out_dir, "%s.%s.npy" % (name, pname)), arr)
    _write(os.path.join(out_dir, name + ".json"),
           (json.dumps(side, indent=2) + "\n").encode())
    return side


def run_steps(name, out_dir, steps):
    """Runs init and steps training steps of out_dir/name.pb in a v1 session;
    returns the losses."""
    import numpy as np
    tf = _tf(True)
    v1 = tf.compat.v1
    with open(os.path.join(out_dir, name + ".json")) as f:
        side = json.load(f)
    gd = v1.GraphDef()
    with open(os.path.join(out_dir, name + ".pb"), "rb") as f:
        gd.ParseFromString(f.read())
    g = tf.Graph()
    with g.as_default():
        v1.import_graph_def(gd, name="")
    feeds = {fe["name"]: np.load(os.path.join(out_dir, fe["file"])) for fe in side["feeds"]}
    losses = []
    with v1.Session(graph=g) as s:
        s.run(side["init_op"])
        for _ in range(steps):
            loss, _ = s.run([side["loss"], side["train_op"]], feeds)
            losses.append(float(loss))
    if not all(np.isfinite(losses)):
        raise RuntimeError("%s: non-finite loss %s" % (name, losses))
    return losses


# ----------------------------------------------------------------------------
# In the parent process


def _child(args):
    cmd = [sys.executable, os.path.abspath(__file__)] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit("zoo: %s failed (exit %d)" % (" ".join(args), r.returncode))
    return r.stdout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "zoo"),
                    help="output directory (default testmodels/zoo)")
    ap.add_argument("--only", action="append", choices=sorted(MODELS),
                    help="generate only this graph (repeatable)")
    ap.add_argument("--all", action="store_true",
                    help="also generate the graphs too large to commit (%s)" % ", ".join(BIG))
    ap.add_argument("--batch", type=int, help="batch size instead of each graph's default")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and compare with --out "
                         "byte for byte; exit 1 on a difference")
    ap.add_argument("--run", type=int, default=0, metavar="STEPS",
                    help="after writing, run STEPS training steps of each graph")
    ap.add_argument("--_one", help=argparse.SUPPRESS)
    ap.add_argument("--_run_one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._one:
        side = build_one(args._one, args.batch or MODELS[args._one][0], args.out)
        print(json.dumps({"nodes": side["node_count"], "functions": side["function_count"]}))
        return 0
    if args._run_one:
        print(json.dumps(run_steps(args._run_one, args.out, args.run)))
        return 0
    names = args.only or [n for n in MODELS if args.all or n not in BIG]
    out = args.out
    tmp = None
    if args.check:
        tmp = tempfile.mkdtemp(prefix="zoo-check-")
        out = tmp
    for name in names:
        extra = ["--batch", str(args.batch)] if args.batch else []
        info = json.loads(_child(["--_one", name, "--out", out] + extra).strip().splitlines()[-1])
        size = os.path.getsize(os.path.join(out, name + ".pb"))
        msg = "%-14s nodes=%6d functions=%3d %8d B" % (name, info["nodes"], info["functions"],
                                                      size)
        if args.run:
            losses = json.loads(_child(["--_run_one", name, "--out", out,
                                        "--run", str(args.run)]).strip().splitlines()[-1])
            msg += "  losses " + " ".join("%.4f" % l for l in losses)
        print(msg, flush=True)
    if args.check:
        bad = []
        for f in sorted(os.listdir(tmp)):
            if not any(f.startswith(n + ".") for n in names):
                continue
            with open(os.path.join(tmp, f), "rb") as a:
                da = a.read()
            try:
                with open(os.path.join(args.out, f), "rb") as b:
                    db = b.read()
            except OSError:
                db = None
            if da != db:
                bad.append(f)
        if bad:
            print("zoo: regenerated files differ from %s: %s" % (args.out, " ".join(bad)))
            return 1
        print("zoo: regenerated files are byte-identical to %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
