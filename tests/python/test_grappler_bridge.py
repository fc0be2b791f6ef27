"""Tests of the Grappler bridge (grappler_bridge/libtfswap_grappler.so) on the real runtime.

The residual-network fixture (testmodels/fixtures/resnet.pb) is trained for a few steps in a
tf.compat.v1 Session, every node placed on /device:CPU:1 of the two-device CPU emulation
(ConfigProto.device_count {CPU: 2}): CPU:1 plays the GPU, CPU:0 the host. With the bridge
switched on in rewrite_options.custom_optimizers (and every default Grappler pass still on),
training must be bit-identical to a session without it, the partition graphs must hold the
swap nodes with the _Send/_Recv pairs they imply, and each swap-in's host-side _Send must
start only after its trigger has finished. A bad parameter, a missing binary, a hanging or
misbehaving tfswap must leave the graph unchanged with exactly one warning. With variables
offloaded, every fixture and the tiny GPT-style and Transformer models of
testmodels/fixtures/large train the same way, every variable compared.

Run:  .venv/bin/python -m pytest -q tests/python/test_grappler_bridge.py

The scenarios that check TensorFlow's log run this file as a worker in a child process
(``python test_grappler_bridge.py worker SPEC``), because the log level is fixed when
TensorFlow is first imported.
"""

import ctypes
import hashlib
import json
import os
import pathlib
import re
import resource
import shutil
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2  # noqa: E402

v1 = tf.compat.v1  # graph mode through explicit tf.Graph()s: nothing global is switched

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "testmodels" / "fixtures"
LIBRARY = ROOT / "grappler_bridge" / "libtfswap_grappler.so"
HOST = "/job:localhost/replica:0/task:0/device:CPU:0"
DEVICE = "/job:localhost/replica:0/task:0/device:CPU:1"
STEPS = 5
# The fixture's activations are small (batch 8, 32x32): swap everything that is sized, with
# LMS's fixed thresholds (the fixture fits any GPU's default budget, so the default plan,
# auto for the budget, would leave it unchanged).
SWAP_PARAMS = {"compute_device": "/device:CPU:1", "min_bytes": "0", "strategy": "lms-fixed"}
WARNING = re.compile(r"^\S+ \S+: W \S+\] TFSwapOptimizer: (.*)$", re.M)
PARTITIONER_NODE = re.compile(r"/_\d+$")  # names of the nodes graph partitioning adds
# Cross-device edges: _HostSend/_HostRecv carry the outputs a kernel keeps in host memory
# (e.g. ShapeN's), _Send/_Recv the others.
SEND_OPS = ("_Send", "_HostSend")
RECV_OPS = ("_Recv", "_HostRecv")


# --------------------------------------------------------------------------------------------
# Building and running the fixture


def sidecar(model="resnet"):
    """The sidecar of a model in testmodels/fixtures ("resnet", "large/gpt-tiny", ...), with
    each feed's file resolved next to it (the large models keep theirs in large/)."""
    path = FIXTURES / (model + ".json")
    side = json.loads(path.read_text())
    for f in side["feeds"]:
        f["path"] = str(path.parent / f["file"])
    return side


def fixture_graph(path=FIXTURES / "resnet.pb"):
    """The GraphDef at path with every node placed on the emulated GPU, /device:CPU:1."""
    gd = v1.GraphDef()
    gd.ParseFromString(pathlib.Path(path).read_bytes())
    for n in gd.node:
        if not n.name.startswith("tfswap/"):
            n.device = "/device:CPU:1"
    return gd


def session_config(params=None):
    """The two-device emulation with fixed thread pools; with params, the bridge is on.

    Nothing else in rewrite_options is touched: the default Grappler passes (pruning,
    constant folding, arithmetic, dependency, layout, remapper, ...) run as in any session,
    and the custom optimizer runs after them in each meta-optimizer iteration.
    """
    c = config_pb2.ConfigProto(
        device_count={"CPU": 2},
        intra_op_parallelism_threads=2,
        inter_op_parallelism_threads=2,
    )
    if params is not None:
        opt = c.graph_options.rewrite_options.custom_optimizers.add(name="TFSwapOptimizer")
        for key, val in params.items():
            attr = opt.parameter_map[key]
            if isinstance(val, bool):
                attr.b = val
            elif isinstance(val, int):
                attr.i = val
            elif isinstance(val, float):
                attr.f = val
            elif isinstance(val, dict) and "shape" in val:  # a value no flag can take
                attr.shape.unknown_rank = True
            elif isinstance(val, (list, tuple)):
                attr.list.s.extend(str(x).encode() for x in val)
            else:
                attr.s = str(val).encode()
    return c


class Run:
    """What training produced: per-step losses and final variables as raw bytes, and the
    RunMetadata of the last (traced) step."""

    def __init__(self, losses, variables, metadata):
        self.losses = losses
        self.variables = variables
        self.metadata = metadata

    def digest(self):
        h = hashlib.sha256()
        for b in self.losses + self.variables:
            h.update(b)
        return h.hexdigest()


def train(graph_def, config, steps=STEPS, side=None):
    """Trains graph_def for steps steps with the feeds of side (the resnet fixture's sidecar
    when None) and fetches side's variables afterwards."""
    side = side or sidecar()
    feeds = {f["name"]: np.load(f["path"]) for f in side["feeds"]}
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    trace = config_pb2.RunOptions(
        trace_level=config_pb2.RunOptions.FULL_TRACE, output_partition_graphs=True
    )
    md = config_pb2.RunMetadata()
    losses = []
    with v1.Session(graph=g, config=config) as sess:
        sess.run(side["init_op"])
        for step in range(steps):
            last = step == steps - 1
            loss, _ = sess.run(
                [side["loss"], side["train_op"]],
                feed_dict=feeds,
                options=trace if last else None,
                run_metadata=md if last else None,
            )
            losses.append(np.asarray(loss).tobytes())
        variables = [np.asarray(v).tobytes() for v in sess.run([v["fetch"] for v in side["variables"]])]
    return Run(losses, variables, md)


# --------------------------------------------------------------------------------------------
# Reading partition graphs and step stats


class Partitions:
    """The partition graphs of one step, indexed."""

    def __init__(self, metadata):
        self.graphs = list(metadata.partition_graphs)
        self.nodes = {}
        for pg in self.graphs:
            for n in pg.node:
                assert n.name not in self.nodes, "node %s in two partitions" % n.name
                self.nodes[n.name] = n
        self.send = {}  # rendezvous key (tensor_name attr) -> _Send node
        self.recv = {}
        self.readers = {}  # node name -> nodes with a data input from it
        for n in self.nodes.values():
            if n.op in SEND_OPS:
                self.send[n.attr["tensor_name"].s] = n
            elif n.op in RECV_OPS:
                self.recv[n.attr["tensor_name"].s] = n
            for i in n.input:
                if not i.startswith("^"):
                    self.readers.setdefault(i.split(":")[0], []).append(n)

    def swap_nodes(self, role=None):
        out = []
        for n in self.nodes.values():
            r = n.attr.get("_tfswap_role")
            if r is not None and (role is None or r.s.decode() == role):
                out.append(n)
        return sorted(out, key=lambda n: n.name)

    def node(self, tensor):
        return self.nodes[tensor.lstrip("^").split(":")[0]]

    def origin(self, name):
        """Follows the nodes graph partitioning added back to the original node they carry
        a tensor or a control edge from: _Recv -> its _Send, a _Send or a control-edge
        Identity -> its input, the dummy Const of a cross-device control edge -> the node
        it has a control input from."""
        n = self.node(name)
        for _ in range(16):
            # A lowered while loop's own nodes end in "/_<n>" too (rnn/while/enter/_20); the
            # partitioner's other nodes are named after the node they carry from (with
            # "/ctrl" for a control edge's).
            base = PARTITIONER_NODE.sub("", n.name)
            base = base[:-len("/ctrl")] if base.endswith("/ctrl") else base
            added = n.op in SEND_OPS + RECV_OPS or base in self.nodes
            if not PARTITIONER_NODE.search(n.name) or not added:
                return n
            if n.op in RECV_OPS:
                n = self.send[n.attr["tensor_name"].s]
            else:
                assert len(n.input) == 1, "unexpected partitioner node %s %s" % (n.name, n.op)
                n = self.node(n.input[0])
        raise AssertionError("no origin for %s" % name)


def exec_times(metadata):
    """node name -> (device, start ns, end of its kernel ns) from FULL_TRACE step stats."""
    out = {}
    for dev in metadata.step_stats.dev_stats:
        for ns in dev.node_stats:
            start = ns.all_start_nanos or ns.all_start_micros * 1000
            end_rel = ns.op_end_rel_nanos or ns.op_end_rel_micros * 1000
            out[ns.node_name] = (dev.device, start, start + end_rel)
    return out


def check_after_trigger(p, times, n):
    """Checks that the host-side copy n (a swap-in or a weight copy) is gated: its one control
    input comes from a trigger on the device, or from tfswap's gate Identity of the trigger,
    the _Sends that carry it to the device read n, and n started only after the kernels of
    the gate and the trigger finished."""
    ctrl = [i for i in n.input if i.startswith("^")]
    assert len(ctrl) == 1, "%s has control inputs %s" % (n.name, ctrl)
    # The control edge comes from the trigger, or from tfswap's gate: an Identity of the
    # trigger's output on the device, which survives Grappler's rewrites of the trigger.
    gate = p.origin(ctrl[0])
    assert gate.device == DEVICE
    chain = [gate]
    if "_tfswap_role" in gate.attr and gate.attr["_tfswap_role"].s == b"gate":
        data = [i for i in gate.input if not i.startswith("^")]
        assert len(data) == 1
        chain.append(p.origin(data[0]))
    trigger = chain[-1]
    assert trigger.device == DEVICE and not trigger.name.startswith("tfswap/"), trigger.name
    sends = [r for r in p.readers.get(n.name, []) if r.op in SEND_OPS]
    assert sends and all(s.input[0] == n.name for s in sends)
    assert n.name in times
    _, start, _ = times[n.name]
    for t in chain:
        assert t.name in times, t.name
        _, _, end = times[t.name]
        assert start >= end, "%s started %d ns before %s finished" % (n.name, end - start, t.name)


# --------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def tfswap_binary(tmp_path_factory):
    """tfswap built from this checkout (bin/tfswap when Go is not installed)."""
    go = shutil.which("go")
    if go:
        out = tmp_path_factory.mktemp("bin") / "tfswap"
        subprocess.run([go, "build", "-o", str(out), "./cmd/tfswap"], cwd=ROOT, check=True)
        return str(out)
    built = ROOT / "bin" / "tfswap"
    if not built.exists():
        pytest.fail("no Go toolchain and no bin/tfswap: run scripts/setup.sh")
    return str(built)


@pytest.fixture(scope="session")
def bridge(tfswap_binary):
    """Builds (when out of date) and loads the bridge library; returns its path."""
    subprocess.run([str(ROOT / "grappler_bridge" / "build.sh")], check=True)
    tf.load_library(str(LIBRARY))
    return str(LIBRARY)


@pytest.fixture(scope="session")
def baseline():
    return train(fixture_graph(), session_config())


@pytest.fixture(scope="session")
def bridged(bridge, tfswap_binary):
    return train(fixture_graph(), session_config(dict(SWAP_PARAMS, tfswap_binary=tfswap_binary)))


def fake_tfswap(directory, name, body):
    """Writes an executable script standing in for tfswap."""
    path = pathlib.Path(directory) / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


# A stand-in that drops the first node of the GraphDef on its stdin and exits 0: a "rewrite"
# that removes a node, which the bridge must refuse. It parses the protobuf wire format by
# hand (GraphDef field 1 is the repeated node) so that it need not import TensorFlow.
DROP_NODE_SCRIPT = """#!%s
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


# --------------------------------------------------------------------------------------------
# Training with the bridge


def test_baseline_is_deterministic(baseline):
    """The premise of bit-identity: two sessions without the bridge agree bit for bit."""
    again = train(fixture_graph(), session_config())
    assert again.losses == baseline.losses
    assert again.variables == baseline.variables


def test_training_is_bit_identical(baseline, bridged):
    for step, (a, b) in enumerate(zip(baseline.losses, bridged.losses)):
        assert a == b, "loss differs at step %d" % step
    side = sidecar()
    for v, a, b in zip(side["variables"], baseline.variables, bridged.variables):
        assert a == b, "variable %s differs after %d steps" % (v["name"], STEPS)
    # The loss went down: the session really trained.
    first, last = (np.frombuffer(x, np.float32)[0] for x in (bridged.losses[0], bridged.losses[-1]))
    assert last < first


def test_reduce_gates_train_bit_identically(baseline, bridge, tfswap_binary):
    """With gate_kind=reduce (tfswap --gate-kind reduce) the bridge's rewrite gates its swap-ins
    on L2Loss nodes of 4 bytes: Grappler keeps them, on the device beside their triggers, and
    the session trains bit-identically to the unswapped one."""
    run = train(fixture_graph(), session_config(dict(SWAP_PARAMS, tfswap_binary=tfswap_binary, gate_kind="reduce")))
    assert run.losses == baseline.losses
    assert run.variables == baseline.variables
    gates = Partitions(run.metadata).swap_nodes("gate")
    assert gates and {n.op for n in gates} == {"L2Loss"}, sorted((n.name, n.op) for n in gates)
    for n in gates:
        assert n.device == DEVICE and n.attr["_grappler_do_not_remove"].b, n.name


def test_partition_graphs_hold_swap_nodes(bridged):
    p = Partitions(bridged.metadata)
    outs, ins = p.swap_nodes("swap_out"), p.swap_nodes("swap_in")
    assert len(outs) >= 10 and len(ins) >= len(outs), (len(outs), len(ins))
    for n in outs + ins:
        assert n.name.startswith("tfswap/")
        assert n.op == "Identity"
        assert n.device == HOST, "%s runs on %s" % (n.name, n.device)
        assert n.attr["_grappler_do_not_remove"].b
    for n in p.swap_nodes("gate"):
        # tfswap's gates (Identities of a trigger's output) stay with the trigger, on the device.
        assert n.device == DEVICE and n.attr["_grappler_do_not_remove"].b, n.name
    for n in outs:
        # device -> host: the producer's tensor arrives through a _Recv on the host, paired
        # with a _Send on the device.
        data = [i for i in n.input if not i.startswith("^")]
        assert len(data) == 1
        recv = p.node(data[0])
        if recv.op == "_Arg":
            # A fed placeholder: the session feeds it on the client's device, the host.
            assert recv.device == HOST
            continue
        assert recv.op in RECV_OPS and recv.device == HOST, (n.name, recv.name, recv.op)
        send = p.send[recv.attr["tensor_name"].s]
        assert send.device == DEVICE
        assert p.origin(send.input[0]).device == DEVICE
    for n in ins:
        # The swap-in reads the host copy directly, and sends it back to the device.
        data = [i for i in n.input if not i.startswith("^")]
        assert len(data) == 1 and p.node(data[0]).attr["_tfswap_role"].s == b"swap_out"
        sends = [r for r in p.readers.get(n.name, []) if r.op in SEND_OPS]
        assert sends, "swap-in %s is not sent to the device" % n.name
        for send in sends:
            assert send.device == HOST
            recv = p.recv[send.attr["tensor_name"].s]
            assert recv.device == DEVICE
            consumers = p.readers.get(recv.name, [])
            assert consumers and all(c.device == DEVICE for c in consumers), recv.name


def test_trigger_order_in_step_stats(bridged):
    """Each swap-in is gated on the host side: it runs only after its trigger's kernel (and
    the kernel of tfswap's gate Identity of the trigger, when there is one) has finished on
    the device, and the _Send that carries it back to the device reads its
    output, so the host-to-device copy cannot start earlier.

    TensorFlow records no step stats for _Send and _Recv nodes (StepStatsCollector::
    CreateNodeExecStats skips transfer nodes), so the swap-in Identity's own start time is
    the latest observable point before the copy."""
    p = Partitions(bridged.metadata)
    times = exec_times(bridged.metadata)
    checked = 0
    for n in p.swap_nodes("swap_in"):
        check_after_trigger(p, times, n)
        checked += 1
    assert checked >= 10


def test_other_grappler_passes_still_run(baseline, bridged):
    """The custom optimizer is added after the default passes, which keep running: the
    bridged session's partition graphs hold the same original nodes as the baseline's, and
    the gradient tuple Identities that Grappler's dependency optimizer removes are gone from
    both."""

    def originals(run):
        return {
            n.name
            for pg in run.metadata.partition_graphs
            for n in pg.node
            if not PARTITIONER_NODE.search(n.name) and not n.name.startswith("tfswap/")
        }

    base, swapped = originals(baseline), originals(bridged)
    assert base == swapped, sorted(base ^ swapped)[:20]
    tuples = [n.name for n in fixture_graph().node if "/tuple/control_dependency" in n.name]
    assert tuples and not set(tuples) & base


def test_parameters_are_passed_through(bridge, tfswap_binary, tmp_path, baseline):
    """Every parameter the bridge does not know becomes --key=value (underscores to
    dashes, ints in decimal, a list once per element), in sorted order."""
    log = tmp_path / "argv.txt"
    wrapper = fake_tfswap(
        tmp_path, "tfswap", '#!/bin/sh\necho "$@" >> "%s"\nexec "%s" "$@"\n' % (log, tfswap_binary)
    )
    params = {
        "tfswap_binary": wrapper,
        "compute_device": "/device:CPU:1",
        "min_bytes": 0,
        "swapin_ahead": 2,
        "exclude_op": ["ShapeN", "Shape"],
        "timeout_seconds": "30",
    }
    run = train(fixture_graph(), session_config(params))
    lines = log.read_text().splitlines()
    assert lines, "the wrapper never ran"
    assert lines[0] == (
        "rewrite - -o - --compute-device=/device:CPU:1 --exclude-op=ShapeN "
        "--exclude-op=Shape --min-bytes=0 --swapin-ahead=2"
    )
    assert Partitions(run.metadata).swap_nodes("swap_in")
    assert run.losses == baseline.losses and run.variables == baseline.variables


# --------------------------------------------------------------------------------------------
# Failures: unchanged graph, one warning, the session still trains (child processes)


def run_worker(spec, tmp_path):
    """Runs this file as a worker with TensorFlow's log on; returns (result, stderr)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")
    proc = subprocess.run(
        [sys.executable, __file__, "worker", json.dumps(spec)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail("worker failed (%d):\n%s" % (proc.returncode, proc.stderr[-4000:]))
    line = [l for l in proc.stdout.splitlines() if l.startswith("BRIDGE-RESULT ")]
    assert line, proc.stdout
    return json.loads(line[-1][len("BRIDGE-RESULT "):]), proc.stderr


FAILURES = {
    # name: (parameters, text the warning must contain)
    "unparsable min_bytes": ({"min_bytes": "banana"}, "--min-bytes"),
    "unknown strategy": ({"strategy": "no-such-strategy"}, "strategy"),
    "unparsable budget": ({"budget": "lots"}, "budget"),
    "unknown parameter type": ({"swapin_groupby": {"shape": True}}, "swapin_groupby"),
    "missing binary": ({"tfswap_binary": "/nonexistent/tfswap"}, "cannot run the tfswap binary"),
    "infinite timeout": ({"timeout_seconds": "inf"}, "finite, positive"),
    "nan timeout": ({"timeout_seconds": float("nan")}, "finite, positive"),
    "stderr flood": ({"tfswap_binary": "SHOUT"}, "standard error"),
    "garbage output": ({"tfswap_binary": "GARBAGE"}, "is not a binary GraphDef"),
    "node dropped": ({"tfswap_binary": "DROP"}, "is missing"),
    "bad bridge parameter": ({"timeout_seconds": "soon"}, "timeout_seconds"),
    "bad batch size": ({"batch_size": "0"}, "batch_size"),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_leaves_graph_unchanged_with_one_warning(name, bridge, tfswap_binary, baseline, tmp_path):
    params, needle = FAILURES[name]
    fakes = {
        "SHOUT": fake_tfswap(tmp_path, "shout", "#!/bin/sh\ncat >/dev/null\nexec head -c 100000000 /dev/zero >&2\n"),
        "GARBAGE": fake_tfswap(tmp_path, "garbage", "#!/bin/sh\ncat >/dev/null\nprintf 'not a graph'\n"),
        "DROP": fake_tfswap(tmp_path, "drop", DROP_NODE_SCRIPT),
    }
    params = dict(SWAP_PARAMS, tfswap_binary=tfswap_binary) | params
    params["tfswap_binary"] = fakes.get(params["tfswap_binary"], params["tfswap_binary"])
    result, log = run_worker({"params": params}, tmp_path)
    warnings = WARNING.findall(log)
    assert len(warnings) == 1, "expected one warning, got:\n" + "\n".join(warnings or [log[-3000:]])
    assert needle in warnings[0], warnings[0]
    assert "unchanged" in warnings[0]
    assert "TFSwapOptimizer failed" not in log  # no error from the meta-optimizer either
    assert result["swap_nodes"] == []
    assert result["digest"] == baseline.digest(), "training differs from the baseline"


# A stand-in that runs the real tfswap and then corrupts its answer in one way (KIND), the
# way a broken binary could: the bridge must refuse the answer. It reads GraphDefs with the
# wheel's generated protobuf modules without importing TensorFlow itself (seconds).
CORRUPT_SCRIPT = """#!%s
import importlib.util, os, subprocess, sys, types
root = list(importlib.util.find_spec("tensorflow").submodule_search_locations)[0]
for name, sub in [("tensorflow", ""), ("tensorflow.core", "core"), ("tensorflow.core.framework", "core/framework")]:
    m = types.ModuleType(name); m.__path__ = [os.path.join(root, sub)]; sys.modules[name] = m
from tensorflow.core.framework import graph_pb2
p = subprocess.run([REAL] + sys.argv[1:], stdin=sys.stdin, capture_output=True)
sys.stderr.buffer.write(p.stderr)
if p.returncode != 0:
    sys.exit(p.returncode)
g = graph_pb2.GraphDef()
g.ParseFromString(p.stdout)
for n in g.node:
    if KIND == "constant" and n.name == "apply_gradients/learning_rate":
        n.attr["value"].tensor.float_val[0] *= 2
    if KIND == "rewire" and n.op == "ResourceApplyMomentum":
        n.input[4] = "apply_gradients/learning_rate"
sys.stdout.buffer.write(g.SerializeToString())
"""


def corrupting_tfswap(directory, kind, real):
    body = CORRUPT_SCRIPT % sys.executable
    return fake_tfswap(directory, "corrupt-" + kind, body.replace("REAL", repr(real)).replace("KIND", repr(kind)))


@pytest.mark.parametrize("kind", ["constant", "rewire"])
def test_corrupted_answer_is_refused(kind, bridge, tfswap_binary, baseline, tmp_path):
    """Issue 11 item 11: an answer that keeps every node and op but changes a constant's
    value (the learning rate) or rewires an input (the momentum read from the learning rate)
    changed training results without a word; the bridge must keep the original graph, warn
    once and train as the baseline."""
    fake = corrupting_tfswap(tmp_path, kind, tfswap_binary)
    result, log = run_worker({"params": dict(SWAP_PARAMS, tfswap_binary=fake)}, tmp_path)
    # tfswap's own warnings (its predicted overhead on the default device) are passed on too.
    warnings = [w for w in WARNING.findall(log) if not w.startswith("tfswap warns: ")]
    assert len(warnings) == 1, warnings or log[-3000:]
    want = "changed its attr value" if kind == "constant" else "does not carry apply_gradients/momentum"
    assert "is not a rewrite of its input" in warnings[0] and want in warnings[0], warnings[0]
    assert result["swap_nodes"] == []
    assert result["digest"] == baseline.digest()


# A stand-in that counts its runs in CALLS and fails on the first with exit status STATUS
# (and tfswap's message for it); later runs run the real tfswap. It also passes on a warning
# line as tfswap writes them.
FLAKY_SCRIPT = """#!/bin/sh
echo run >> %(calls)s
if [ "$(wc -l < %(calls)s)" -eq 1 ]; then
  cat >/dev/null
  echo 'tfswap: warning: the first graph looks odd' >&2
  echo '%(message)s' >&2
  exit %(status)d
fi
exec %(real)s "$@"
"""


@pytest.mark.parametrize("status", [2, 3])
def test_internal_error_is_not_a_usage_error(status, bridge, tfswap_binary, baseline, tmp_path):
    """Issue 11 item 10: only a usage error (exit status 2) means the parameters are wrong and
    stops further runs; an internal error (3, a panic in tfswap) leaves that graph unchanged,
    says it was an internal error, and the next graphs are still rewritten. tfswap's own
    'tfswap: warning:' lines become bridge warnings."""
    calls = tmp_path / "calls"
    message = {2: "tfswap: --min-bytes: bad size", 3: "tfswap: internal error: boom (please report; -v for the stack)"}
    fake = fake_tfswap(
        tmp_path, "flaky", FLAKY_SCRIPT % dict(calls=calls, message=message[status], status=status, real=tfswap_binary)
    )
    result, log = run_worker({"params": dict(SWAP_PARAMS, tfswap_binary=fake)}, tmp_path)
    warnings = WARNING.findall(log)
    runs = len(calls.read_text().splitlines())
    assert "tfswap warns: the first graph looks odd" in warnings, warnings
    failure = [w for w in warnings if "unchanged" in w]
    assert len(failure) == 1, warnings
    if status == 2:
        assert "usage error (exit status 2)" in failure[0] and "not run with them again" in failure[0], failure
        assert runs == 1, "tfswap ran %d times after a usage error" % runs
        assert result["swap_nodes"] == []
    else:
        assert "internal error (exit status 3" in failure[0] and "boom" in failure[0], failure
        assert runs > 1
        assert result["swap_nodes"], "the graphs after the internal error were not rewritten"
    assert result["digest"] == baseline.digest()


def test_timeout_kills_process_group_and_stops(bridge, tfswap_binary, baseline, tmp_path):
    """Issue 11 item 12: a hanging tfswap behind a wrapper script: on the timeout the whole
    process group dies (the wrapper's child too, not orphaned), tfswap is not run again in
    that process (a second graph would cost the timeout again), one warning says both."""
    calls, pids = tmp_path / "calls", tmp_path / "pids"
    fake = fake_tfswap(
        tmp_path,
        "hang",
        "#!/bin/sh\necho run >> %s\nsleep 300 &\necho $! >> %s\nwait\n" % (calls, pids),
    )
    params = dict(SWAP_PARAMS, tfswap_binary=fake, timeout_seconds=1)
    started = time.monotonic()
    result, log = run_worker({"params": params}, tmp_path)
    elapsed = time.monotonic() - started
    warnings = WARNING.findall(log)
    assert len(warnings) == 1, warnings or log[-3000:]
    assert "did not finish within 1 s" in warnings[0] and "process group was killed" in warnings[0]
    assert "not run again" in warnings[0]
    assert len(calls.read_text().splitlines()) == 1
    for pid in pids.read_text().split():
        status = pathlib.Path("/proc/%s/status" % pid)
        alive = status.exists() and "\nState:\tZ" not in status.read_text()
        assert not alive, "the wrapper's child %s outlived the timeout" % pid
    assert result["swap_nodes"] == [] and result["digest"] == baseline.digest()
    assert elapsed < 300


def test_output_flood_is_capped(bridge, tfswap_binary, baseline, tmp_path):
    """Issue 11 item 12: tfswap's standard output is read up to twice the graph plus 64 MiB,
    then it is killed: a binary that writes 1.5 GB leaves the training process's memory
    where it was, not 1.5 GB higher."""
    fake = fake_tfswap(tmp_path, "flood", "#!/bin/sh\ncat >/dev/null\nexec head -c 1500000000 /dev/zero\n")
    quiet, _ = run_worker({"params": dict(SWAP_PARAMS, tfswap_binary=tfswap_binary)}, tmp_path)
    result, log = run_worker({"params": dict(SWAP_PARAMS, tfswap_binary=fake)}, tmp_path)
    warnings = WARNING.findall(log)
    assert len(warnings) == 1 and "standard output" in warnings[0] and "was killed" in warnings[0], warnings
    assert result["digest"] == baseline.digest()
    # The cap is ~64 MiB for this graph; the old bridge grew by the whole 1.5 GB.
    assert result["rss_mib"] < quiet["rss_mib"] + 300, (quiet["rss_mib"], result["rss_mib"])


# --------------------------------------------------------------------------------------------
# The answer check, called directly (tfswap_check_rewrite, the C ABI of swap_core.h) on small
# crafted graphs


@pytest.fixture(scope="module")
def check_rewrite(bridge):
    lib = ctypes.CDLL(bridge)
    fn = lib.tfswap_check_rewrite
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                   ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int

    def check(original, rewritten, keep=(), offload=False):
        a, b = original.SerializeToString(), rewritten.SerializeToString()
        why = ctypes.create_string_buffer(1024)
        rc = fn(a, len(a), b, len(b), "\n".join(keep).encode() if keep else None, int(offload), why, len(why))
        return rc, why.value.decode()

    return check


def small_graph():
    """x -> relu -> mul(relu, w) -> out, with a control edge init -> out; all on CPU:1."""
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3), name="x")
        w = tf.constant(np.full((2, 3), 0.5, np.float32), name="w")
        init = tf.no_op(name="init")
        r = tf.nn.relu(x, name="relu")
        m = tf.multiply(r, w, name="mul")
        with tf.control_dependencies([init]):
            tf.identity(m, name="out")
    gd = g.as_graph_def()
    for n in gd.node:
        n.device = "/device:CPU:1"
    return gd


def add_node(gd, name, op, inputs, role=None, device="/device:CPU:0", like=None):
    n = gd.node.add()
    if like is not None:
        n.CopyFrom(like)
    n.name, n.op, n.device = name, op, device
    del n.input[:]
    n.input.extend(inputs)
    if like is None:
        n.attr["T"].type = tf.float32.as_datatype_enum
    if role:
        n.attr["_tfswap_role"].s = role.encode()
        n.attr["_tfswap_id"].s = name.encode()
        n.attr["_grappler_do_not_remove"].b = True
    return n


def node(gd, name):
    return next(n for n in gd.node if n.name == name)


def swapped(gd):
    """relu:0 swapped out and in for mul, gated on w: what tfswap writes."""
    out = v1.GraphDef()
    out.CopyFrom(gd)
    add_node(out, "tfswap/relu_0/swap_out", "Identity", ["relu"], "swap_out")
    add_node(out, "tfswap/relu_0/swap_in", "Identity", ["tfswap/relu_0/swap_out", "^tfswap/w/gate"], "swap_in")
    add_node(out, "tfswap/w/gate", "Identity", ["w"], "gate", device="/device:CPU:1")
    node(out, "mul").input[0] = "tfswap/relu_0/swap_in"
    return out


def reduce_gated(gd):
    """gd with its gate tfswap/w/gate turned into an L2Loss of w (tfswap --gate-kind reduce)."""
    node(gd, "tfswap/w/gate").op = "L2Loss"
    return gd


def recomputed(gd):
    """relu recomputed for mul: a copy of relu with tfswap's attrs and the gate's edge."""
    out = v1.GraphDef()
    out.CopyFrom(gd)
    add_node(out, "tfswap/w/recompute_gate", "Identity", ["w"], "gate", device="/device:CPU:1")
    add_node(out, "tfswap/relu_0/recompute/relu", "Relu", ["x", "^tfswap/w/recompute_gate"], "recompute",
             device="/device:CPU:1", like=node(gd, "relu"))
    node(out, "mul").input[0] = "tfswap/relu_0/recompute/relu"
    return out


def test_check_accepts_rewrites(check_rewrite, tfswap_binary, tmp_path):
    """The check accepts what tfswap writes: crafted swaps and recomputations, and real
    rewrites of the resnet fixture (LMS swaps; the auto planner's recomputations and swaps
    under a 4 MiB budget)."""
    gd = small_graph()
    assert check_rewrite(gd, gd) == (1, "")
    assert check_rewrite(gd, swapped(gd), keep=["out", "mul:0"]) == (1, "")
    assert check_rewrite(gd, recomputed(gd)) == (1, "")
    assert check_rewrite(gd, reduce_gated(swapped(gd)), keep=["out", "mul:0"]) == (1, "")
    src = FIXTURES / "resnet.pb"
    original = v1.GraphDef()
    original.ParseFromString(src.read_bytes())
    for flags, roles in [
        (["--min-bytes=0", "--strategy=lms-fixed"], {"swap_out", "swap_in"}),
        (["--budget=4MiB", "--recompute=max"], {"recompute", "swap_in"}),
        (["--min-bytes=0", "--strategy=lms-fixed", "--gate-kind=reduce"], {"swap_out", "swap_in", "gate"}),
    ]:
        out = subprocess.run([tfswap_binary, "rewrite", str(src), "-o", "-"] + flags, check=True, capture_output=True).stdout
        rewritten = v1.GraphDef()
        rewritten.ParseFromString(out)
        got = {n.attr["_tfswap_role"].s.decode() for n in rewritten.node if "_tfswap_role" in n.attr}
        assert roles <= got, (flags, got)
        assert check_rewrite(original, rewritten) == (1, ""), flags
        gate_ops = {n.op for n in rewritten.node if n.attr["_tfswap_role"].s == b"gate"}
        assert gate_ops == ({"L2Loss"} if "--gate-kind=reduce" in flags else {"Identity"}), (flags, gate_ops)


def corrupt(kind, gd):
    """A wrong answer of each kind the check must refuse."""
    out = swapped(gd)
    if kind == "constant value":
        node(out, "w").attr["value"].tensor.tensor_content = np.full((2, 3), 0.25, np.float32).tobytes()
    elif kind == "attr dropped":
        del node(out, "mul").attr["T"]
    elif kind == "device":
        node(out, "relu").device = "/device:CPU:0"
    elif kind == "op":
        node(out, "relu").op = "Relu6"
    elif kind == "rewired":
        node(out, "mul").input[1] = "x"
    elif kind == "swap of another tensor":
        node(out, "tfswap/relu_0/swap_out").input[0] = "x"
    elif kind == "swap of another port":
        node(out, "mul").input[0] = "tfswap/relu_0/swap_in:1"
    elif kind == "dangling input":
        add_node(out, "tfswap/x_0/swap_in", "Identity", ["tfswap/x_0/swap_out"], "swap_in")
    elif kind == "added non-tfswap node":
        add_node(out, "helper", "Identity", ["x"])
    elif kind == "added node without role":
        add_node(out, "tfswap/helper", "Identity", ["x"])
    elif kind == "lost control input":
        del node(out, "out").input[1]
    elif kind == "node missing":
        out.node.remove(node(out, "init"))
    elif kind == "duplicate node":
        out.node.add().CopyFrom(node(out, "relu"))
    elif kind == "recompute copy differs":
        out = recomputed(gd)
        node(out, "tfswap/relu_0/recompute/relu").op = "Relu6"
    elif kind == "recompute copy reads another tensor":
        out = recomputed(gd)
        node(out, "tfswap/relu_0/recompute/relu").input[0] = "w"
    elif kind == "recompute of another node":
        out = recomputed(gd)
        node(out, "mul").input[1] = "tfswap/relu_0/recompute/relu"
    elif kind == "gate of another op":
        node(out, "tfswap/w/gate").op = "Shape"
    elif kind == "reads a reduction gate":
        out = reduce_gated(out)
        node(out, "mul").input[1] = "tfswap/w/gate"
    elif kind == "swap cycle":
        node(out, "tfswap/relu_0/swap_out").input[0] = "tfswap/relu_0/swap_in"
    return out


CORRUPTIONS = {
    "constant value": "node w changed its attr value",
    "attr dropped": "node mul lost its attr T",
    "device": "node relu changed its device",
    "op": "node relu changed its op",
    "rewired": "data input 1 of node mul does not carry w:0",
    "swap of another tensor": "data input 0 of node mul does not carry relu:0",
    "swap of another port": "data input 0 of node mul does not carry relu:0",
    "dangling input": "input tfswap/x_0/swap_out of node tfswap/x_0/swap_in names no node",
    "added non-tfswap node": "added node helper is not a tfswap node",
    "added node without role": "added node tfswap/helper is not a tfswap node",
    "lost control input": "node out lost its control input ^init",
    "node missing": "node init is missing",
    "duplicate node": "node relu appears twice",
    "recompute copy differs": "recompute node tfswap/relu_0/recompute/relu is not a copy of relu",
    "recompute copy reads another tensor": "recompute node tfswap/relu_0/recompute/relu is not a copy of relu",
    "recompute of another node": "data input 1 of node mul does not carry w:0",
    "swap cycle": "data input 0 of node mul does not carry relu:0",
    "gate of another op": "tfswap node tfswap/w/gate is not an Identity of one tensor",
    "reads a reduction gate": "data input 1 of node mul does not carry w:0",
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_check_refuses_wrong_answers(kind, check_rewrite):
    """Issue 11 item 11: the old check looked at names and ops only, so a changed constant,
    a rewired input or an added node with a dangling input passed. Each wrong answer is
    refused with the node named."""
    gd = small_graph()
    rc, why = check_rewrite(gd, corrupt(kind, gd))
    assert rc == 0 and CORRUPTIONS[kind] in why, (rc, why)


def test_check_offload_moves_only_to_host(check_rewrite):
    """With --offload an original node may move to the host CPU (and nowhere else); without
    it, no node may move."""
    gd = small_graph()
    to_host = swapped(gd)
    node(to_host, "w").device = "/device:CPU:0"
    to_gpu = swapped(gd)
    node(to_gpu, "w").device = "/device:GPU:0"
    assert check_rewrite(gd, to_host, offload=True) == (1, "")
    assert check_rewrite(gd, to_host)[0] == 0
    assert check_rewrite(gd, to_gpu, offload=True) == (0, "node w changed its device")
    assert check_rewrite(gd, v1.GraphDef(), offload=True)[0] == 0
    assert check_rewrite(gd, gd, keep=["nowhere:0"]) == (0, "fetched or preserved nowhere:0 is missing")


def test_rewritten_graph_is_left_alone(bridge, tfswap_binary, baseline, tmp_path):
    """A graph tfswap already rewrote (offline, here) passes through the bridge untouched and
    silently, as does the bridge's own output in Grappler's second iteration."""
    src = tmp_path / "placed.pb"
    src.write_bytes(fixture_graph().SerializeToString())
    out = tmp_path / "swapped.pb"
    subprocess.run(
        [tfswap_binary, "rewrite", str(src), "-o", str(out), "--compute-device=/device:CPU:1", "--min-bytes=0",
         "--strategy=lms-fixed"],
        check=True,
        capture_output=True,
    )
    offline = {n.name for n in fixture_graph(out).node if n.name.startswith("tfswap/")}
    assert offline
    params = dict(SWAP_PARAMS, tfswap_binary=tfswap_binary, verbose=1)
    result, log = run_worker({"params": params, "graph": str(out)}, tmp_path)
    assert WARNING.findall(log) == []
    assert result["swap_nodes"] and set(result["swap_nodes"]) <= offline
    assert result["digest"] == baseline.digest()


def test_default_plan_leaves_fitting_graph_alone(bridge, tfswap_binary, baseline, tmp_path):
    """With no planning parameters the bridge runs tfswap's default, a plan for the default
    device at its default budget: the fixture fits it, so the graph runs unchanged, without
    a warning, and tfswap says nothing was needed."""
    params = {"compute_device": "/device:CPU:1", "tfswap_binary": tfswap_binary, "verbose": 1}
    result, log = run_worker({"params": params}, tmp_path)
    assert WARNING.findall(log) == []
    assert "nothing needed" in log, log[-3000:]
    assert result["swap_nodes"] == []
    assert result["digest"] == baseline.digest()


# The models the bridge trains with every variable offloaded: the fixtures, and the GPT-style
# decoder and the Transformer encoder of testmodels/large.py at their tiny sizes (as
# tfrun/offload_test.go's offloadModels for the Go session).
OFFLOAD_MODELS = ("cnn", "lstm", "mlp", "resnet", "large/gpt-tiny", "large/transformer-tiny")


def with_all_variable_reads(model):
    """The model's GraphDef placed on the emulated GPU with a read of every variable the
    sidecar does not fetch (optimizer slots, batch-norm statistics, Adam's beta powers), and
    its sidecar fetching them all: training is compared on every variable, trainable or not."""
    side = sidecar(model)
    gd = fixture_graph(FIXTURES / (model + ".pb"))
    known = {v["name"] for v in side["variables"]}
    for n in list(gd.node):
        if n.op != "VarHandleOp" or n.name in known:
            continue
        read = gd.node.add(name="test_read/" + n.name, op="ReadVariableOp", input=[n.name], device=n.device)
        read.attr["dtype"].CopyFrom(n.attr["dtype"])
        side["variables"].append({"name": n.name, "fetch": read.name + ":0"})
    return gd, side


@pytest.fixture(scope="module")
def offload_baseline():
    """model -> (GraphDef with every variable read, its sidecar, its training without the
    bridge), each trained once per module."""
    cache = {}

    def get(model):
        if model not in cache:
            gd, side = with_all_variable_reads(model)
            cache[model] = (gd, side, train(gd, session_config(), side=side))
        return cache[model]

    return get


@pytest.mark.parametrize("model", OFFLOAD_MODELS)
def test_offload_trains_bit_identically(model, bridge, tfswap_binary, offload_baseline):
    """With offload=all the bridge passes --offload all: every session run's graph (the
    initialisation, the training steps, the final reads) has the same variables on the host,
    so they find their resources there. Every model trains bit-identically for 5 steps (the
    loss at each step and every variable, trainable or not), every variable and its update
    run on the host, and every weight reaches the device through a copy whose host side
    starts only after its gate and trigger have finished on the device."""
    gd, side, base = offload_baseline(model)
    params = {"compute_device": "/device:CPU:1", "offload": "all", "tfswap_binary": tfswap_binary}
    run = train(gd, session_config(params), side=side)
    for step, (a, b) in enumerate(zip(base.losses, run.losses)):
        assert a == b, "%s: loss differs at step %d" % (model, step)
    for v, a, b in zip(side["variables"], base.variables, run.variables):
        assert a == b, "%s: variable %s differs after %d steps" % (model, v["name"], STEPS)
    assert len(run.variables) == len(base.variables) == len(side["variables"])
    p = Partitions(run.metadata)
    handles = {n.name: n.device for n in p.nodes.values() if n.op == "VarHandleOp"}
    assert {v["name"] for v in sidecar(model)["variables"]} <= set(handles), sorted(handles)
    assert all(d == HOST for d in handles.values()), sorted(v for v, d in handles.items() if d != HOST)
    updates = [n for n in p.nodes.values() if n.op.startswith("ResourceApply")]
    assert updates and all(n.device == HOST for n in updates), [(n.name, n.device) for n in updates]
    copies = p.swap_nodes("weight_in")
    assert copies, [n.name for n in p.swap_nodes()]
    times = exec_times(run.metadata)
    for n in copies:
        assert n.device == HOST, (n.name, n.device)
        check_after_trigger(p, times, n)


def test_batch_pinned_by_constants_needs_no_batch_size(bridge, tfswap_binary, baseline, bridged, tmp_path):
    """With the fixture's placeholders made [None, ...] and no _output_shapes, the batch is
    still found at Grappler time: the hand-built graph pins it in constant shapes (the loss
    gradient's), and Grappler's symbolic shape inference carries it back to the input. The
    bridge then swaps exactly what it swaps on the fixture as written, trains
    bit-identically, and does not ask for batch_size."""
    gd = v1.GraphDef()
    gd.ParseFromString((FIXTURES / "resnet.pb").read_bytes())
    feeds = {f["name"].split(":")[0] for f in sidecar()["feeds"]}
    for n in gd.node:
        del n.attr["_output_shapes"]
        if n.name in feeds:
            n.attr["shape"].shape.dim[0].size = -1
    path = tmp_path / "resnet_none.pb"
    path.write_bytes(gd.SerializeToString())
    result, log = run_worker({"params": dict(SWAP_PARAMS, tfswap_binary=tfswap_binary), "graph": str(path)}, tmp_path)
    assert [w for w in WARNING.findall(log) if "batch_size" in w] == [], log[-3000:]
    assert result["swap_nodes"] == [n.name for n in Partitions(bridged.metadata).swap_nodes()]
    assert result["digest"] == baseline.digest()


def test_offload_auto_falls_back_to_all(bridge, tfswap_binary, baseline, tmp_path):
    """offload=auto chooses the variables to move from each graph, so the initialiser's graph
    and the training step's could place a variable differently; the bridge refuses it with
    one warning and passes --offload all instead: training is bit-identical with every
    variable on the host, as with offload=all."""
    params = {"compute_device": "/device:CPU:1", "offload": "auto", "tfswap_binary": tfswap_binary, "verbose": 1}
    result, log = run_worker({"params": params}, tmp_path)
    warnings = [w for w in WARNING.findall(log) if not w.startswith("tfswap warns: ")]
    assert len(warnings) == 1, log[-3000:]
    assert "offload=auto is not safe through the bridge" in warnings[0], warnings
    assert "offload=all is used instead" in warnings[0], warnings
    assert "offload_variables" in warnings[0], warnings
    assert result["digest"] == baseline.digest()
    assert any("weight_in" in n for n in result["swap_nodes"]), result["swap_nodes"]
    variables = [v["name"] for v in sidecar()["variables"]]
    assert set(variables) <= set(result["host_variables"]), result["host_variables"]


def test_initialiser_graph_holds_no_training_step(bridge, tfswap_binary, tmp_path):
    """Why offload=auto cannot be made consistent through the bridge: the graph Grappler
    hands it for a session run is already pruned to that run's fetches, so the first graph of
    a session, the initialiser's, holds every variable but no update and no forward op to
    choose from, and it fixes where each variable's resource lives before any training
    graph is seen. A tfswap stand-in records
    each graph the bridge passes on and runs the real binary."""
    record = tmp_path / "graphs"
    record.mkdir()
    wrapper = fake_tfswap(
        tmp_path,
        "record",
        '#!/bin/sh\nn=$(ls %s | wc -l)\ntee %s/$n.pb | exec %s "$@"\n' % (record, record, tfswap_binary),
    )
    side = sidecar("mlp")
    params = {"compute_device": "/device:CPU:1", "offload": "all", "tfswap_binary": wrapper}
    train(fixture_graph(FIXTURES / "mlp.pb"), session_config(params), steps=1, side=side)
    graphs = []
    for i in range(len(list(record.iterdir()))):
        gd = v1.GraphDef()
        gd.ParseFromString((record / ("%d.pb" % i)).read_bytes())
        graphs.append({n.op for n in gd.node} | {"handle:" + n.name for n in gd.node if n.op == "VarHandleOp"})
    assert len(graphs) >= 2, len(graphs)
    handles = {"handle:" + n.name for n in fixture_graph(FIXTURES / "mlp.pb").node if n.op == "VarHandleOp"}
    init = graphs[0]
    assert handles <= init, sorted(handles - init)
    assert not {op for op in init if op.startswith("ResourceApply") or op in ("MatMul", "BiasAdd")}, sorted(init)
    assert any("ResourceApplyGradientDescent" in g and handles <= g for g in graphs[1:])


def test_offload_variables_trains_bit_identically(bridge, tfswap_binary, baseline):
    """The parameter offload_variables (tfswap's --offload-variables) names the variables to
    keep on the host: the safe way to move only some through the bridge, where offload=auto
    falls back to all (test_offload_auto_falls_back_to_all). The choice does not depend on
    the graph, so every graph of the session (the initialiser's, the training steps', the
    final reads) places exactly the named groups on the host and the rest on the device:
    otherwise a run would not find a variable's resource. Training is bit-identical, the
    weights of the named groups reach the device through copies that each start after their
    trigger."""
    named = ["block4/b/conv/weights", "block4/a/conv/weights"]
    params = {"compute_device": "/device:CPU:1", "offload_variables": named, "tfswap_binary": tfswap_binary}
    run = train(fixture_graph(), session_config(params))
    assert run.digest() == baseline.digest()
    p = Partitions(run.metadata)
    handles = {n.name: n.device for n in p.nodes.values() if n.op == "VarHandleOp"}
    on_host = sorted(name for name, device in handles.items() if device == HOST)
    # Each group moves whole: the variable and its Momentum slot.
    assert on_host == sorted(named + [v + "/Momentum" for v in named]), on_host
    assert len(handles) == 92 and all(d == DEVICE for v, d in handles.items() if v not in on_host)
    copies = p.swap_nodes("weight_in")
    assert len(copies) >= 2, [n.name for n in p.swap_nodes()]
    times = exec_times(run.metadata)
    for n in copies:
        check_after_trigger(p, times, n)


# --------------------------------------------------------------------------------------------
# Worker (child process) entry point


def worker(spec):
    tf.load_library(str(LIBRARY))
    graph = spec.get("graph")
    gd = fixture_graph(graph) if graph else fixture_graph()
    run = train(gd, session_config(spec["params"]))
    parts = Partitions(run.metadata)
    swaps = [n.name for n in parts.swap_nodes()]
    host_vars = sorted(n.name for n in parts.nodes.values() if n.op == "VarHandleOp" and n.device == HOST)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        "BRIDGE-RESULT "
        + json.dumps({"digest": run.digest(), "swap_nodes": swaps, "host_variables": host_vars, "rss_mib": rss_mib}),
        flush=True,
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        worker(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: %s worker SPEC (the tests run with pytest)" % sys.argv[0])
