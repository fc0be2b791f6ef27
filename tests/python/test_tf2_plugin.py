"""Tests of the TF2 graph-optimizer plugin (grappler_bridge/tfswap_plugin.cc) and of the
Python package's enable() (python/tfswap), on the real runtime.

Two logical CPU devices (tf.config.set_logical_device_configuration): the model runs under
tf.device('/CPU:1'), which plays the GPU, and CPU:0 is the host; the plugin is registered for
device type CPU. Every training runs in its own child process (``python
test_tf2_plugin.py worker SPEC``): the plugin is loaded, and TensorFlow's logical devices are
fixed, once per process. With the plugin, the partition graphs of the training function must
hold tfswap's swap nodes, the swap-outs and swap-ins placed on CPU:0, and the losses and every
weight must be bit-identical, over three steps, to the same training without the plugin,
and the profiler's trace must show no swap-in before its gate. The same holds under
MirroredStrategy (three logical CPUs: the replicas on CPU:1 and CPU:2 each swap to CPU:0) and
under MultiWorkerMirroredStrategy with two local worker processes. Each
planner failure (no binary, exit status 1, 2 or 3, a timeout, garbage or an invalid graph)
leaves the function unchanged with one warning.

Run:  .venv/bin/python -m pytest -q tests/python/test_tf2_plugin.py
"""

import glob
import hashlib
import json
import os
import pathlib
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "grappler_bridge" / "libtfswap_plugin.so"
HOST = "/job:localhost/replica:0/task:0/device:CPU:0"
DEVICE = "/job:localhost/replica:0/task:0/device:CPU:1"
STEPS = 3
BATCH = 8
# The models are small: swap everything that is sized, with LMS's fixed thresholds (at the
# default budget the auto plan would rightly leave them unchanged).
SWAP = dict(strategy="lms-fixed", min_bytes=0, compute_device="/device:CPU:1", device_type="CPU",
            batch_size=BATCH)
# MirroredStrategy's replicas: the two emulated GPUs, both named to tfswap.
MIRRORED = ["/CPU:1", "/CPU:2"]
REPLICAS = ["/job:localhost/replica:0/task:0/device:CPU:1", "/job:localhost/replica:0/task:0/device:CPU:2"]
# A list: enable() passes it to the plugin as a comma list.
SWAP_MIRRORED = dict(SWAP, compute_device=["/device:CPU:1", "/device:CPU:2"])
COLLECTIVES = ("CollectiveReduceV2", "CollectiveReduceV3", "CollectiveGatherV2", "NcclAllReduce")
WARNING = re.compile(r"^tfswap: warning: (.*)$", re.M)


# --------------------------------------------------------------------------------------------
# Worker: one training in a fresh process


def _setup_tf(devices=2):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.experimental.enable_op_determinism()
    return tf


def _data(np, shape, classes):
    rs = np.random.RandomState(0)
    x = rs.rand(BATCH * STEPS, *shape).astype("float32")
    y = rs.randint(0, classes, BATCH * STEPS)
    return x, y


def _keras_model(kind, keras):
    L = keras.layers
    if kind == "cnn":
        return keras.Sequential([
            keras.Input((16, 16, 3)),
            L.Conv2D(16, 3, padding="same"), L.BatchNormalization(), L.ReLU(),
            L.Conv2D(16, 3, padding="same"), L.BatchNormalization(), L.ReLU(),
            L.MaxPooling2D(), L.Flatten(), L.Dense(10),
        ])
    # A small Transformer encoder block over token ids.
    inp = keras.Input((16,), dtype="int32")
    h = L.Embedding(50, 32)(inp)
    a = L.MultiHeadAttention(num_heads=2, key_dim=16)(h, h)
    h = L.LayerNormalization()(h + a)
    f = L.Dense(32)(L.Dense(64, activation="relu")(h))
    h = L.LayerNormalization()(h + f)
    out = L.Dense(10)(L.GlobalAveragePooling1D()(h))
    return keras.Model(inp, out)


class _Losses:
    def __init__(self):
        self.values = []


def train_keras(kind, tf, np, variables="/CPU:1"):
    import keras

    keras.utils.set_random_seed(1)
    if kind == "cnn":
        x, y = _data(np, (16, 16, 3), 10)
    else:
        rs = np.random.RandomState(0)
        x = rs.randint(0, 50, (BATCH * STEPS, 16)).astype("int32")
        y = rs.randint(0, 10, BATCH * STEPS)
    losses = _Losses()

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.values.append(float(logs["loss"]))

    # The model's variables, the optimizer's too, live on variables (the emulated GPU unless
    # a test offloads them); the step itself runs on CPU:1 either way.
    with tf.device(variables):
        model = _keras_model(kind, keras)
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=False)
        model.optimizer.build(model.trainable_variables)
    with tf.device("/CPU:1"):
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[Record()])
    return losses.values, [np.asarray(v) for v in model.variables + model.optimizer.variables]


def train_loop(tf, np, dynamic=False):
    """A custom training loop in a tf.function: a small CNN with hand-made variables. With
    dynamic, the function is traced for a batch of any size, as Keras traces its own."""
    tf.random.set_seed(1)
    with tf.device("/CPU:1"):
        init = tf.random.stateless_normal
        w1 = tf.Variable(init([3, 3, 3, 16], seed=[1, 1]) * 0.1)
        w2 = tf.Variable(init([3, 3, 16, 16], seed=[1, 2]) * 0.1)
        w3 = tf.Variable(init([16 * 16 * 16, 10], seed=[1, 3]) * 0.01)
    x, y = _data(np, (16, 16, 3), 10)
    opt = tf.keras.optimizers.SGD(0.01)
    vs = [w1, w2, w3]

    signature = None
    if dynamic:
        signature = [tf.TensorSpec([None, 16, 16, 3], tf.float32), tf.TensorSpec([None], tf.int32)]

    @tf.function(input_signature=signature)
    def step(xb, yb):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.nn.conv2d(xb, w1, 1, "SAME"))
            h = tf.nn.relu(tf.nn.conv2d(h, w2, 1, "SAME"))
            logits = tf.matmul(tf.reshape(h, [-1, 16 * 16 * 16]), w3)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, logits))
        opt.apply_gradients(zip(tape.gradient(loss, vs), vs))
        return loss

    losses = []
    with tf.device("/CPU:1"):
        for i in range(STEPS):
            s = slice(0, BATCH)  # the same batch every step: the loss must go down
            losses.append(float(step(tf.constant(x[s]), tf.constant(y[s], tf.int32)).numpy()))
    return losses, [v.numpy() for v in vs]


OFFLOAD_STEPS = 5


def train_offload(tf, np, variables):
    """A tf.function step with Adam whose variables (the optimizer's slots too) are created
    eagerly on variables ("/CPU:0", the host, or "/CPU:1", the emulated GPU) and whose
    compute runs on CPU:1, for OFFLOAD_STEPS steps on one batch. Returns the losses and every
    variable, the optimizer's included."""
    with tf.device(variables):
        init = tf.random.stateless_normal
        w1 = tf.Variable(init([3, 3, 3, 16], seed=[1, 1]) * 0.1)
        w2 = tf.Variable(init([3, 3, 16, 16], seed=[1, 2]) * 0.1)
        w3 = tf.Variable(init([16 * 16 * 16, 10], seed=[1, 3]) * 0.01)
        vs = [w1, w2, w3]
        opt = tf.keras.optimizers.Adam(0.01)
        opt.build(vs)
    x, y = _data(np, (16, 16, 3), 10)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.nn.conv2d(xb, w1, 1, "SAME"))
            h = tf.nn.relu(tf.nn.conv2d(h, w2, 1, "SAME"))
            logits = tf.matmul(tf.reshape(h, [-1, 16 * 16 * 16]), w3)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, logits))
        opt.apply_gradients(zip(tape.gradient(loss, vs), vs))
        return loss

    losses = []
    with tf.device("/CPU:1"):
        for _ in range(OFFLOAD_STEPS):
            losses.append(float(step(tf.constant(x[:BATCH]), tf.constant(y[:BATCH], tf.int32)).numpy()))
    return losses, [np.asarray(v) for v in vs + list(opt.variables)]


def train_mirrored(tf, np, collective=False):
    """MirroredStrategy over two logical devices, CPU:1 and CPU:2 (the two GPUs of the
    emulation; the worker sets up three logical CPUs, CPU:0 the host), a custom loop with
    per-replica steps. On CPUs the strategy sums gradients by copies to one device; with
    collective, it all-reduces them with collectives (CollectiveReduceV2) on the replica
    devices, as NCCL's all-reduce would run on GPUs."""
    import keras
    from tensorflow.python.distribute import cross_device_ops

    keras.utils.set_random_seed(1)
    ops = None
    if collective:
        ops = cross_device_ops.CollectiveAllReduce(
            MIRRORED, len(MIRRORED), tf.distribute.experimental.CommunicationOptions())
    strategy = tf.distribute.MirroredStrategy(MIRRORED, cross_device_ops=ops)
    x, y = _data(np, (16, 16, 3), 10)
    with strategy.scope():
        model = _keras_model("cnn", keras)
        opt = keras.optimizers.SGD(0.01)
        model.build((None, 16, 16, 3))

    @tf.function
    def step(xb, yb):
        def replica(xr, yr):
            with tf.GradientTape() as tape:
                logits = model(xr, training=True)
                loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(yr, logits)) / BATCH
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))
            return loss

        per = strategy.run(replica, args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per, axis=None)

    ds = tf.data.Dataset.from_tensor_slices((x, y.astype("int32"))).batch(BATCH)
    losses = []
    for xb, yb in strategy.experimental_distribute_dataset(ds):
        losses.append(float(step(xb, yb).numpy()))
    return losses, [np.asarray(w) for w in model.get_weights()]


def train_multi_worker(tf, np, strategy, task):
    """MultiWorkerMirroredStrategy, one replica per worker process: the replica's compute runs
    on the worker's CPU:1 (its emulated GPU), the variables and the collectives on its CPU:0.
    Each worker trains on its half of the global batch."""
    import keras

    keras.utils.set_random_seed(1)
    x, y = _data(np, (16, 16, 3), 10)
    with strategy.scope():
        model = _keras_model("cnn", keras)
        opt = keras.optimizers.SGD(0.01)
        model.build((None, 16, 16, 3))
    device = "/job:worker/task:%d/device:CPU:1" % task
    half = BATCH // 2

    @tf.function
    def step(xb, yb):
        def replica(xr, yr):
            with tf.device(device):
                with tf.GradientTape() as tape:
                    logits = model(xr, training=True)
                    loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(yr, logits)) / BATCH
                grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        per = strategy.run(replica, args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per, axis=None)

    losses = []
    for i in range(STEPS):
        s = slice(i * BATCH + task * half, i * BATCH + (task + 1) * half)
        losses.append(float(step(tf.constant(x[s]), tf.constant(y[s].astype("int32"))).numpy()))
    return losses, [np.asarray(w) for w in model.get_weights()]


def kernel_events(logdir):
    """Reads the profiler's trace: "node:op" -> sorted [(start ns, end ns)], one per run."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
    assert files, "the profiler wrote no trace under %s" % logdir
    space = xplane_pb2.XSpace()
    space.ParseFromString(pathlib.Path(files[-1]).read_bytes())
    out = {}
    for plane in space.planes:
        for line in plane.lines:
            for e in line.events:
                name = plane.event_metadata[e.metadata_id].name
                start = line.timestamp_ns + e.offset_ps // 1000
                out.setdefault(name, []).append((start, start + e.duration_ps // 1000))
    for v in out.values():
        v.sort()
    return out


def timing_probe(md, logdir, role="swap_in"):
    """The timing probe of the v1 bridge's tests, on the function graphs: every swap-in
    (host-side Identity; with role "weight_in", every copy of a host variable's read) starts
    only after its gate and the gate's trigger have finished on the device, in every step.
    Returns (nodes checked, violations)."""
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from test_grappler_bridge import Partitions

    events = kernel_events(logdir)

    def runs(node):
        return events.get("%s:%s" % (node.name, node.op), [])

    checked, violations = 0, []
    for fg in md.function_graphs:
        if not any("_tfswap_role" in n.attr for pg in fg.partition_graphs for n in pg.node):
            continue
        p = Partitions(type("MD", (), {"partition_graphs": fg.partition_graphs})())
        for n in p.swap_nodes(role):
            ctrl = [i for i in n.input if i.startswith("^")]
            assert len(ctrl) == 1, (n.name, ctrl)
            gate = p.origin(ctrl[0])
            chain = [gate]
            if gate.attr["_tfswap_role"].s == b"gate":
                chain.append(p.origin([i for i in gate.input if not i.startswith("^")][0]))
            mine = runs(n)
            assert mine, "no kernel event for swap-in %s" % n.name
            for t in chain:
                theirs = runs(t)
                assert len(theirs) == len(mine), (n.name, t.name, len(mine), len(theirs))
                for (start, _), (_, end) in zip(mine, theirs):
                    if start < end:
                        violations.append("%s started %d ns before %s finished" % (n.name, end - start, t.name))
            checked += 1
    return [checked, violations]


def worker(spec):
    # MirroredStrategy's replicas run on CPU:1 and CPU:2: three logical devices, CPU:0 the host.
    tf = _setup_tf(3 if spec["kind"].startswith("mirrored") else 2)
    import numpy as np
    from tensorflow.python.eager import context

    sys.path.insert(0, str(ROOT / "python"))
    import tfswap

    runs = spec.get("runs") or [{}]
    strategy = None
    if spec["kind"] == "multiworker":
        # Collectives must be configured before anything initializes TensorFlow's context.
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if spec.get("plugin"):
        tfswap.enable(**spec.get("options", SWAP))
    results = []
    for run in runs:
        # Each run may change the plugin's environment (the failure modes); the plugin reads
        # it at every optimization.
        if "options" in run:
            tfswap.enable(**run["options"])
        for k, v in run.get("env", {}).items():
            os.environ[k] = v
        if run.get("preserve_first_swapped"):
            # Preserve the first producer the previous run swapped (by name: the function is
            # traced again, with the same node names).
            producers = sorted(s["Producer"] for p in results[-1]["plans"] if p["report"]
                               for s in p["report"].get("swaps") or [])
            assert producers, "the previous run swapped nothing"
            os.environ["TFSWAP_PRESERVE"] = producers[0]
        if run.get("name"):
            print("tfswap-test: run %s" % run["name"], file=sys.stderr, flush=True)
        context.enable_run_metadata()
        if spec.get("probe"):
            # Every kernel traced (host_tracer_level 3 includes inexpensive ops such as
            # Identity), with its start and duration, per step.
            logdir = tempfile.mkdtemp(prefix="tfswap-probe-")
            tf.profiler.experimental.start(
                logdir, options=tf.profiler.experimental.ProfilerOptions(host_tracer_level=3))
        kind = spec["kind"]
        if kind in ("cnn", "transformer"):
            losses, weights = train_keras(kind, tf, np)
        elif kind in ("fit_offload_host", "fit_offload_device"):
            losses, weights = train_keras("cnn", tf, np,
                                          "/CPU:0" if kind == "fit_offload_host" else "/CPU:1")
        elif kind == "loop":
            losses, weights = train_loop(tf, np, dynamic=run.get("dynamic", False))
        elif kind in ("offload_host", "offload_device"):
            losses, weights = train_offload(tf, np, "/CPU:0" if kind == "offload_host" else "/CPU:1")
        elif kind in ("mirrored", "mirrored_collective"):
            losses, weights = train_mirrored(tf, np, collective=kind == "mirrored_collective")
        elif kind == "multiworker":
            losses, weights = train_multi_worker(tf, np, strategy, json.loads(os.environ["TF_CONFIG"])["task"]["index"])
        else:
            raise SystemExit("unknown kind " + kind)
        md = context.export_run_metadata()
        context.disable_run_metadata()
        seen_plans = sum(len(r["plans"]) for r in results)
        probe = None
        if spec.get("probe"):
            tf.profiler.experimental.stop()
            try:
                probe = timing_probe(md, logdir, spec.get("probe_role", "swap_in"))
            finally:
                shutil.rmtree(logdir, ignore_errors=True)
        swaps, collectives, gate_ops = [], [], []
        for fg in md.function_graphs:
            for pg in fg.partition_graphs:
                for n in pg.node:
                    if "_tfswap_role" in n.attr:
                        swaps.append([n.name, n.device, n.attr["_tfswap_role"].s.decode(),
                                      [i for i in n.input]])
                        if n.attr["_tfswap_role"].s == b"gate":
                            gate_ops.append(n.op)
                    elif n.op in COLLECTIVES:
                        collectives.append([n.name, n.device, n.op, [i for i in n.input]])
        h = hashlib.sha256()
        for w in weights:
            h.update(w.tobytes())
        results.append({
            "name": run.get("name", ""),
            "preserved": os.environ.get("TFSWAP_PRESERVE", ""),
            "losses": [float(l).hex() for l in losses],
            "weights": h.hexdigest(),
            "swaps": swaps,
            "collectives": sorted(collectives),
            # The ops of the gates (Identity, or L2Loss with TFSWAP_GATE_KIND=reduce).
            "gate_ops": sorted(gate_ops),
            # The plans of this run (plan_summary() lists every plan since enable()).
            "plans": tfswap.plan_summary()[seen_plans:] if spec.get("plugin") else [],
            "probe": probe,
        })
    print("TF2-RESULT " + json.dumps(results), flush=True)


# --------------------------------------------------------------------------------------------
# Test helpers


@pytest.fixture(scope="session")
def built():
    """Builds bin/tfswap (make setup does) and the plugin when out of date."""
    if not (ROOT / "bin" / "tfswap").exists():
        pytest.fail("no bin/tfswap: run make setup")
    subprocess.run([str(ROOT / "grappler_bridge" / "build.sh"), "plugin"], check=True,
                   stdout=subprocess.DEVNULL)
    return PLUGIN


def run_worker(spec, tmp_path=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, __file__, "worker", json.dumps(spec)],
        env=env, cwd=tmp_path or ROOT, capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail("worker failed (%d):\n%s" % (proc.returncode, proc.stderr[-4000:]))
    line = [l for l in proc.stdout.splitlines() if l.startswith("TF2-RESULT ")]
    assert line, proc.stdout
    return json.loads(line[-1][len("TF2-RESULT "):]), proc.stderr


_baselines = {}


def baseline(kind):
    if kind not in _baselines:
        _baselines[kind] = run_worker({"kind": kind, "plugin": False})[0][0]
    return _baselines[kind]


def check_swapped(result, log, min_swaps=1, host=HOST):
    outs = [s for s in result["swaps"] if s[2] == "swap_out"]
    ins = [s for s in result["swaps"] if s[2] == "swap_in"]
    assert len(outs) >= min_swaps and ins, "no swap nodes in the partition graphs:\n" + log[-3000:]
    for name, device, role, _ in outs + ins:
        assert name.startswith("tfswap/")
        assert device == host, "%s (%s) runs on %s" % (name, role, device)
    for name, device, role, inputs in ins:
        # Each swap-in waits for its trigger (a control input) before copying back.
        assert any(i.startswith("^") for i in inputs), "swap-in %s has no gate" % name
    assert WARNING.findall(log) == [], WARNING.findall(log)
    plans = [p for p in result["plans"] if p["swap_nodes"] > 0]
    assert plans, "plan_summary() lists no plan"
    # One log line per plan.
    lines = re.findall(r"^tfswap: graph (\S+): swapped", log, re.M)
    assert sorted(lines) == sorted(p["graph"] for p in plans), (lines, plans)


def check_identical(result, base):
    assert len(result["losses"]) == STEPS
    assert result["losses"] == base["losses"], (result["losses"], base["losses"])
    assert result["weights"] == base["weights"], "weights differ after %d steps" % STEPS


# --------------------------------------------------------------------------------------------
# Training with the plugin


@pytest.mark.parametrize("kind", ["cnn", "transformer", "loop"])
def test_training_swaps_and_is_bit_identical(kind, built):
    result, log = run_worker({"kind": kind, "plugin": True, "probe": True})
    result = result[0]
    check_swapped(result, log)
    check_identical(result, baseline(kind))
    # The timing probe: no swap-in (and so no copy back to the device) before its gate.
    checked, violations = result["probe"]
    assert checked >= 1 and violations == [], violations
    if kind == "loop":
        # The loop trains on one batch: the loss went down, the step really trained.
        first, last = (float.fromhex(result["losses"][i]) for i in (0, -1))
        assert last < first
        # plan_summary() has one record for the training function, with tfswap's report.
        plans = [p for p in result["plans"] if p["swap_nodes"] > 0]
        assert len(plans) == 1, result["plans"]
        p = plans[0]
        assert p["graph"].startswith("__inference_step")
        assert p["report"]["swaps"] and p["swapped"].split()[0] == str(len(p["report"]["swaps"]))
        assert p["tfswap_seconds"] > 0


def _collectives(result):
    """The collectives of a run's partition graphs, their inputs without the partitioner's
    numbering of _Recv names (sgd_1_placeholder/_228), which differs from run to run."""
    return [[name, device, op, [re.sub(r"/_\d+$", "", i) for i in inputs]]
            for name, device, op, inputs in result["collectives"]]


@pytest.mark.parametrize("compute", ["named", "default", "collective"])
def test_mirrored_strategy_is_bit_identical(compute, built):
    """MirroredStrategy over CPU:1 and CPU:2 (three logical CPUs, CPU:0 the host): EACH
    replica swaps on its own device, to CPU:0, with its swap-ins gated by its own work; the
    cross-replica reduction is untouched; losses and weights are bit-identical over three
    steps to the training without the plugin. Both replica devices are named to tfswap
    (compute_device=["/device:CPU:1", "/device:CPU:2"]), or left to the plugin's default for a
    CPU registration (every CPU of the graph but the host). With "collective", the gradients
    are all-reduced by CollectiveReduceV2 ops on the replica devices themselves (as NCCL's
    would run on GPUs): they are the same nodes, with the same inputs, as without the plugin."""
    options = dict(SWAP_MIRRORED)
    if compute == "default":
        del options["compute_device"]
    kind = "mirrored_collective" if compute == "collective" else "mirrored"
    result, log = run_worker({"kind": kind, "plugin": True, "options": options})
    result = result[0]
    check_swapped(result, log)
    # A swap-in's gate runs on its trigger's device, which is its consumers' (tfswap never
    # gates one replica's swap-in by another's work): gates on both replicas mean swap-ins
    # for both. check_swapped put every swap-out and swap-in on the host.
    gates = {}
    for name, device, role, _ in result["swaps"]:
        if role == "gate":
            gates.setdefault(device, []).append(name)
    assert set(gates) == set(REPLICAS), "gates by device: %s\n%s" % (gates, log[-3000:])
    # Each replica was planned as a device of its own, against its own budget.
    reports = [p["report"] for p in result["plans"] if p["swap_nodes"] > 0 and p["report"]]
    assert reports, result["plans"]
    for r in reports:
        planned = sorted(d["name"] for d in r["plan"]["devices"])
        assert planned == REPLICAS, planned
    base = baseline(kind)
    check_identical(result, base)
    if compute == "collective":
        on = sorted(c[1] for c in result["collectives"])
        assert on == REPLICAS, "collectives on %s, want one on each replica" % on
        assert _collectives(result) == _collectives(base)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_multi_worker(plugin):
    """Runs the two workers of a local MultiWorkerMirroredStrategy cluster (TF_CONFIG on
    localhost ports); returns each worker's (result, log)."""
    ports = free_ports(2)
    procs = []
    for i in range(2):
        cfg = {"cluster": {"worker": ["localhost:%d" % p for p in ports]}, "task": {"type": "worker", "index": i}}
        env = dict(os.environ, TF_CONFIG=json.dumps(cfg), TF_CPP_MIN_LOG_LEVEL="2")
        spec = {"kind": "multiworker", "plugin": plugin}
        procs.append(subprocess.Popen([sys.executable, __file__, "worker", json.dumps(spec)], env=env, cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=600)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0, stderr[-4000:]
        line = [l for l in stdout.splitlines() if l.startswith("TF2-RESULT ")]
        assert line, stdout
        out.append((json.loads(line[-1][len("TF2-RESULT "):])[0], stderr))
    return out


def test_multi_worker_mirrored_strategy_is_bit_identical(built):
    """MultiWorkerMirroredStrategy with two local worker processes: each worker's replica
    computes on its CPU:1 and swaps to its own CPU:0; the collectives run unchanged, and each
    worker's losses and weights are bit-identical to the same cluster without the plugin."""
    swapped = run_multi_worker(True)
    plain = run_multi_worker(False)
    for task, ((result, log), (base, _)) in enumerate(zip(swapped, plain)):
        check_swapped(result, log, host="/job:worker/replica:0/task:%d/device:CPU:0" % task)
        check_identical(result, base)


JIT_CHECK = r"""
import os, sys, warnings
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import tfswap, keras
tfswap.enable(device_type="CPU")
for jit in (True, False):
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.compile(optimizer="sgd", loss="mse", jit_compile=jit)
    print("JIT", jit, sum("jit_compile=True" in str(x.message) for x in w))
"""


def test_keras_xla_warning(built):
    """enable() makes Keras' compile warn when the model is compiled with XLA, which hides
    its graph from Grappler, and only then."""
    out = subprocess.run([sys.executable, "-c", JIT_CHECK, str(ROOT)], capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "JIT True 1" in out.stdout and "JIT False 0" in out.stdout, out.stdout


# --------------------------------------------------------------------------------------------
# Failures: unchanged graph, one warning, training proceeds


def fake(directory, name, body):
    path = pathlib.Path(directory) / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


# A stand-in that drops the first node of the input GraphDef (tfswap rewrite - -o -: the graph
# on stdin, the rewrite on stdout): a "rewrite" that removes a node, which the plugin must
# refuse. It parses the protobuf wire format by hand (GraphDef field 1 is the repeated node).
DROP_NODE = """#!%s
import sys
data = sys.stdin.buffer.read()
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7F) << s; s += 7
        if c < 0x80: return v, i
out, i, dropped = bytearray(), 0, False
while i < len(data):
    start = i
    key, i = varint(data, i)
    wt = key & 7
    if wt == 0: _, i = varint(data, i)
    elif wt == 1: i += 8
    elif wt == 5: i += 4
    elif wt == 2:
        n, i = varint(data, i); i += n
    else: sys.exit(3)
    if key >> 3 == 1 and not dropped:
        dropped = True
        continue
    out += data[start:i]
sys.stdout.buffer.write(bytes(out))
""" % sys.executable

FAILURES = {
    # name: (script or path, extra env, text the warning must contain)
    "missing binary": ("/nonexistent/tfswap", {}, "cannot run the tfswap binary"),
    "exit 1": ("#!/bin/sh\necho 'tfswap: nothing fits' >&2\nexit 1\n", {}, "exit status 1"),
    "exit 2": ("#!/bin/sh\necho 'unknown flag' >&2\nexit 2\n", {}, "exit status 2"),
    "exit 3": ("#!/bin/sh\nexit 3\n", {}, "exit status 3"),
    "timeout": ("#!/bin/sh\nexec sleep 60\n", {"TFSWAP_TIMEOUT": "1"}, "did not finish within"),
    "garbage output": ("#!/bin/sh\ncat >/dev/null\nprintf 'not a graph'\n", {}, "not a binary GraphDef"),
    "huge output": ("#!/bin/sh\ncat >/dev/null\nexec head -c 300000000 /dev/zero\n", {}, "wrote more than"),
    "invalid graph": (DROP_NODE, {}, "is not a rewrite of its input"),
    # tfswap's own warning lines are surfaced (here with the graph unchanged: nothing to swap).
    "a warning line": ("#!/bin/sh\necho 'tfswap: warning: the fake warns' >&2\nexec cat\n", {},
                       "the fake warns"),
}


def test_failures_fall_back_with_one_warning(built, tmp_path):
    """Each failure mode in turn, in one process (the plugin reads its environment at every
    optimization): the training function runs unchanged, bit-identical to the baseline, and
    the mode logs exactly one warning. The timeout comes last of the failures: after one,
    tfswap is not run again in the process."""
    runs = []
    for i, (name, (script, env, _)) in enumerate(sorted(FAILURES.items())):
        binary = script if script.startswith("/") else fake(tmp_path, "fake%d" % i, script)
        assert name != "timeout" or i == len(FAILURES) - 1
        runs.append({"name": name, "env": dict(env, TFSWAP_BINARY=binary)})
    # Last, tfswap.disable()'s switch: no plan, no warning.
    runs.append({"name": "disabled", "env": {"TFSWAP_ENABLED": "0"}})
    results, log = run_worker({"kind": "loop", "plugin": True, "runs": runs}, tmp_path)
    sections = re.split(r"^tfswap-test: run (.*)$", log, flags=re.M)[1:]
    by_name = dict(zip(sections[0::2], sections[1::2]))
    base = baseline("loop")
    assert len(results) == len(FAILURES) + 1
    for result in results:
        name = result["name"]
        warnings = WARNING.findall(by_name[name])
        if name == "disabled":
            assert warnings == [] and result["swaps"] == []
            check_identical(result, base)
            continue
        assert len(warnings) == 1, "%s: expected one warning, got %r" % (name, warnings)
        assert FAILURES[name][2] in warnings[0], (name, warnings[0])
        assert name == "a warning line" or "unchanged" in warnings[0]
        assert result["swaps"] == [], name
        check_identical(result, base)


# --------------------------------------------------------------------------------------------
# The gate kind (TFSWAP_GATE_KIND, tfswap rewrite --gate-kind)


def test_gate_kind_reduce_and_bad_value(built):
    """In one process: by default the gates are Identities; with TFSWAP_GATE_KIND=reduce the
    rewritten training function's gates are L2Loss ops (4 bytes each instead of a copy of the
    trigger's output), the swap-ins still wait for them, and the training is bit-identical
    to the one without tfswap; a bad value leaves the function unchanged (bit-identical too)
    with one warning that names TFSWAP_GATE_KIND, the value and the values allowed."""
    runs = [{"name": "identity"},
            {"name": "reduce", "env": {"TFSWAP_GATE_KIND": "reduce"}},
            {"name": "enable-reduce", "options": dict(SWAP, gate_kind="reduce")},
            {"name": "bad", "env": {"TFSWAP_GATE_KIND": "sum"}}]
    results, log = run_worker({"kind": "loop", "plugin": True, "runs": runs})
    sections = re.split(r"^tfswap-test: run (.*)$", log, flags=re.M)[1:]
    by_name = dict(zip(sections[0::2], sections[1::2]))
    identity, reduce, enabled, bad = results
    base = baseline("loop")
    for result in (identity, reduce, enabled):
        check_swapped(result, by_name[result["name"]])
        check_identical(result, base)
    assert identity["gate_ops"] and set(identity["gate_ops"]) == {"Identity"}, identity["gate_ops"]
    # The loop's triggers all have a float output: every gate is an L2Loss, whether the kind
    # comes from the environment or from enable(gate_kind="reduce").
    for result in (reduce, enabled):
        assert result["gate_ops"] and set(result["gate_ops"]) == {"L2Loss"}, result["gate_ops"]
        assert len(result["gate_ops"]) == len(identity["gate_ops"])
    # plan_summary() says which gate kind each plan was asked for.
    for result, kind in ((identity, "identity"), (reduce, "reduce"), (enabled, "reduce")):
        assert result["plans"] and {p["gate_kind"] for p in result["plans"]} == {kind}, result["plans"]
    warnings = WARNING.findall(by_name["bad"])
    assert len(warnings) == 1, warnings
    assert "TFSWAP_GATE_KIND" in warnings[0] and "'sum'" in warnings[0], warnings[0]
    assert "identity" in warnings[0] and "reduce" in warnings[0] and "unchanged" in warnings[0]
    assert bad["swaps"] == [] and bad["gate_ops"] == []
    check_identical(bad, base)


@pytest.mark.parametrize("option,env,allowed", [
    ("gate_kind", "TFSWAP_GATE_KIND", ("identity", "reduce")),
    ("recompute", "TFSWAP_RECOMPUTE", ("auto", "off", "max")),
    ("offload", "TFSWAP_OFFLOAD", ("none", "all", "auto")),
])
def test_enable_refuses_bad_choice(option, env, allowed):
    """enable() with a gate_kind, recompute or offload the plugin would refuse (leaving every
    graph unchanged, with a warning) raises ValueError naming the option, the value and the
    values allowed, before TensorFlow is imported or the plugin's environment is changed."""
    code = (
        "import os, sys; sys.path.insert(0, %r); import tfswap\n"
        "os.environ.pop(%r, None)\n"
        "try:\n"
        "    tfswap.enable(device_type='CPU', %s='sum')\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
        "print('tensorflow' in sys.modules, os.environ.get(%r),"
        " os.environ.get('TFSWAP_ENABLED'))\n" % (str(ROOT / "python"), env, option, env))
    environ = {k: v for k, v in os.environ.items() if k != "TFSWAP_ENABLED"}
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    assert out[0].startswith("refused: "), out
    for part in (option, "'sum'") + tuple(repr(a) for a in allowed):
        assert part in out[0], out[0]
    assert out[1] == "False None None", out


def test_enable_options_reach_the_plugin(built):
    """In one process: enable(device=, budget=, strategy=) reach the plan tfswap makes (its
    report names the profile, the budget and the strategy asked for), log=0 leaves only
    warnings (no plan line) and log=2 adds tfswap's own summary to the plan line."""
    runs = [{"name": "quiet", "options": dict(SWAP, device="v100-16gb", budget="1GiB", log=0)},
            {"name": "verbose", "options": dict(SWAP, log=2)}]
    results, log = run_worker({"kind": "loop", "plugin": True, "runs": runs})
    sections = re.split(r"^tfswap-test: run (.*)$", log, flags=re.M)[1:]
    by_name = dict(zip(sections[0::2], sections[1::2]))
    quiet, verbose = results
    check_swapped(verbose, by_name["verbose"])
    # check_swapped wants a plan line per plan, which log=0 leaves out.
    assert any(s[2] == "swap_in" for s in quiet["swaps"]), quiet["swaps"]
    assert WARNING.findall(by_name["quiet"]) == [], by_name["quiet"]
    plans = [p["report"]["plan"] for p in quiet["plans"] if p["report"]]
    assert plans, quiet["plans"]
    for plan in plans:
        assert (plan["device"], plan["device_source"], plan["budget"], plan["strategy"]) == \
            ("v100-16gb", "flag", 1 << 30, "lms-fixed"), plan
    # enable() again without device or budget unsets them: tfswap's defaults again.
    for plan in [p["report"]["plan"] for p in verbose["plans"] if p["report"]]:
        assert plan["device_source"] != "flag" and plan["budget"] != 1 << 30, plan
    assert not re.search(r"^tfswap: graph ", by_name["quiet"], re.M), by_name["quiet"]
    # log=2: tfswap's own summary follows the plan line.
    assert re.search(r"^  tensors swapped: ", by_name["verbose"], re.M), by_name["verbose"]
    assert "tensors swapped:" not in by_name["quiet"], by_name["quiet"]


def test_dump_dir_and_flags(built, tmp_path):
    """In one process: with TFSWAP_DUMP_DIR every graph handed to tfswap is written there as
    ID.pb (one per plan, a graph tfswap reads with as many nodes as the plan record says);
    TFSWAP_FLAGS' flags reach tfswap rewrite (--gate-kind=reduce: L2Loss gates, and the plan
    records say so)."""
    dump = tmp_path / "dump"
    dump.mkdir()
    runs = [{"name": "dump", "env": {"TFSWAP_DUMP_DIR": str(dump)}},
            {"name": "flags", "env": {"TFSWAP_DUMP_DIR": "", "TFSWAP_FLAGS": "--gate-kind=reduce"}}]
    results, log = run_worker({"kind": "loop", "plugin": True, "runs": runs})
    sections = re.split(r"^tfswap-test: run (.*)$", log, flags=re.M)[1:]
    by_name = dict(zip(sections[0::2], sections[1::2]))
    dumped, flagged = results
    for result in results:
        check_swapped(result, by_name[result["name"]])
    # Only the first run dumped: one file per plan it made.
    assert sorted(p.name for p in dump.iterdir()) == sorted(p["graph"] + ".pb" for p in dumped["plans"])
    for plan in dumped["plans"]:
        out = subprocess.run([str(ROOT / "bin" / "tfswap"), "inspect", str(dump / (plan["graph"] + ".pb"))],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        assert re.search(r"^  nodes: %d," % plan["nodes"], out, re.M), out
    assert set(dumped["gate_ops"]) == {"Identity"}, dumped["gate_ops"]
    assert flagged["gate_ops"] and set(flagged["gate_ops"]) == {"L2Loss"}, flagged["gate_ops"]
    # The plan records say the kind tfswap was given, by whichever setting.
    assert {p["gate_kind"] for p in dumped["plans"]} == {"identity"}, dumped["plans"]
    assert {p["gate_kind"] for p in flagged["plans"]} == {"reduce"}, flagged["plans"]


# --------------------------------------------------------------------------------------------
# Preserve and the unknown batch


def _swapped_producers(result):
    return sorted(s["Producer"] for p in result["plans"] if p["report"] for s in p["report"].get("swaps") or [])


def test_preserve_and_unknown_batch(built):
    """In one process: a plain run swaps (Grappler's nodes to preserve are passed as
    --preserve, and the core finds them unchanged: no warning); with its swapped producer
    preserved (TFSWAP_PRESERVE, as enable(preserve=) sets it) that node is swapped no more,
    and training stays bit-identical; a function traced for a batch of any size,
    without batch_size, says in its plan line that the batch was unknown and what to pass."""
    runs = [{"name": "plain"}, {"name": "preserve", "preserve_first_swapped": True},
            {"name": "dynamic", "dynamic": True, "env": {"TFSWAP_PRESERVE": "", "TFSWAP_BATCH_SIZE": ""}}]
    results, log = run_worker({"kind": "loop", "plugin": True, "runs": runs})
    sections = re.split(r"^tfswap-test: run (.*)$", log, flags=re.M)[1:]
    by_name = dict(zip(sections[0::2], sections[1::2]))
    plain, kept, dynamic = results
    base = baseline("loop")
    free = _swapped_producers(plain)
    assert free, "the plain run swapped nothing:\n" + log[-3000:]
    assert kept["preserved"] == free[0]
    now = _swapped_producers(kept)
    # The loop swaps one tensor: preserving its producer leaves nothing to swap (the Go
    # tests, rewrite/plan/preserve_test.go, check that the rest of a graph is still rewritten).
    assert free[0] not in now, (free[0], now)
    assert kept["swaps"] == [] and re.search(r"^tfswap: graph \S+: nothing to swap", by_name["preserve"], re.M)
    assert WARNING.findall(by_name["plain"] + by_name["preserve"]) == [], WARNING.findall(log)
    # tfswap's own warning about the unsized tensors is surfaced, once.
    warned = WARNING.findall(by_name["dynamic"])
    assert len(warned) == 1 and "are unknown" in warned[0], warned
    check_identical(plain, base)
    check_identical(kept, base)
    line = re.findall(r"^tfswap: graph \S+: .*$", by_name["dynamic"], re.M)
    assert line and "batch unknown" in line[0] and "batch_size" in line[0], by_name["dynamic"][-2000:]
    plans = [p for p in dynamic["plans"] if p["unknown_batch_tensors"] > 0]
    assert plans and all(p["batch"] is None for p in plans), dynamic["plans"]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        worker(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: %s worker SPEC (the tests run with pytest)" % sys.argv[0])


# --------------------------------------------------------------------------------------------
# Variable offload (TFSWAP_OFFLOAD, enable(offload=...))

# A planning strategy (offload is planned for the budget) with a budget the step fits.
OFFLOAD = dict(strategy="auto", budget="4MiB", compute_device="/device:CPU:1", device_type="CPU",
               batch_size=BATCH, offload="all")


def check_offloaded_identically(result, log, host_kind, device_kind, steps):
    """Checks that a run with variables offloaded trained bit-identically, for steps steps, to
    host_kind without the plugin, that the baselines of host_kind and device_kind agree (where
    the variables live changes nothing: both are CPU kernels here), and that every weight copy
    runs on the host after its gate. Returns the weight copies; fails if there are none."""
    base = baseline(host_kind)
    assert len(result["losses"]) == steps
    assert result["losses"] == base["losses"], (result["losses"], base["losses"])
    assert result["weights"] == base["weights"], "variables differ after %d steps" % steps
    assert base["weights"] == baseline(device_kind)["weights"]
    assert WARNING.findall(log) == [], WARNING.findall(log)
    copies = [s for s in result["swaps"] if s[2] == "weight_in"]
    assert copies, "no weight copies in the partition graphs:\n" + log[-3000:]
    for name, device, role, inputs in copies:
        assert device == HOST, "%s runs on %s" % (name, device)
        assert any(i.startswith("^") for i in inputs), "weight copy %s has no gate" % name
    return copies


def test_offload_gates_host_variables_and_is_bit_identical(built):
    """Variables (and Adam's slots) created on the host: with offload=all the plugin gates
    every copy of their reads to CPU:1 (weight_in nodes on CPU:0, each after its trigger in
    every step), and 5 steps train bit-identically, every variable compared, to the same
    training without the plugin and to one with the variables on the device."""
    result, log = run_worker({"kind": "offload_host", "plugin": True, "options": OFFLOAD,
                              "probe": True, "probe_role": "weight_in"})
    result = result[0]
    copies = check_offloaded_identically(result, log, "offload_host", "offload_device", OFFLOAD_STEPS)
    # The plan says what it did: every variable group on the host, with its gated copies.
    plans = [p for p in result["plans"] if p["swap_nodes"] > 0]
    assert len(plans) == 1, result["plans"]
    groups = plans[0]["report"]["offloaded"]
    # 3 variables, Adam's 2 slots each, its iteration count and learning rate.
    assert len(groups) == 11, [g["Name"] for g in groups]
    assert all(g["Host"] == HOST and "created on the host" in g["Reason"] for g in groups), groups
    assert sum(g["Copies"] for g in groups) == len(copies)
    assert plans[0]["offloaded"].startswith("11 variable groups") and plans[0]["offload_pinned"] == []
    assert re.search(r"^tfswap: graph \S+: swapped 0 .*; offloaded 11 variable groups", log, re.M), log[-2000:]
    checked, violations = result["probe"]
    assert checked == len(copies) and violations == [], violations


def test_offload_device_variables_stay_with_one_warning(built):
    """Variables created on the emulated GPU: no function graph can move them (TensorFlow
    runs every op on a resource where it lives, and Grappler preserves those ops), so
    offload=all leaves them there with one warning and lists them in the plan log;
    training is unchanged."""
    result, log = run_worker({"kind": "offload_device", "plugin": True, "options": OFFLOAD})
    result = result[0]
    base = baseline("offload_device")
    assert result["losses"] == base["losses"] and result["weights"] == base["weights"]
    assert [s for s in result["swaps"] if s[2] == "weight_in"] == []
    warnings = WARNING.findall(log)
    assert len(warnings) == 1 and "live on the compute device" in warnings[0], warnings
    assert 'tf.device("/CPU:0")' in warnings[0]
    plans = result["plans"]
    assert len(plans) == 1 and len(plans[0]["offload_pinned"]) == 11, plans
    assert "11 variables stay on the compute device" in log



def test_offload_model_fit_is_bit_identical(built):
    """Keras model.fit, the model and Adam built on the host: with offload=all the plugin
    gates the copies of the variables' reads into the step Keras traces, and one epoch trains
    bit-identically, every variable compared (the model's, BatchNormalization's moving
    statistics and Adam's slots), to the same fit without the plugin."""
    result, log = run_worker({"kind": "fit_offload_host", "plugin": True, "options": OFFLOAD})
    result = result[0]
    copies = check_offloaded_identically(result, log, "fit_offload_host", "fit_offload_device", STEPS)
    plans = [p for p in result["plans"] if p["report"] and p["report"].get("offloaded")]
    assert plans, result["plans"]
    groups = [g for p in plans for g in p["report"]["offloaded"]]
    assert all(g["Host"] == HOST for g in groups), groups
    assert sum(g["Copies"] for g in groups) == len(copies)
