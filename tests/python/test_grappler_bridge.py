"""Tests of the Grappler bridge (grappler_bridge/libtfswap_grappler.so) on the real runtime.

The residual-network fixture (testmodels/fixtures/resnet.pb) is trained for a few steps in a
tf.compat.v1 Session, every node placed on /device:CPU:1 of the two-device CPU emulation
(ConfigProto.device_count {CPU: 2}): CPU:1 plays the GPU, CPU:0 the host. With the bridge
switched on in rewrite_options.custom_optimizers (and every default Grappler pass still on),
training must be bit-identical to a session without it, the partition graphs must hold the
swap nodes with the _Send/_Recv pairs they imply, and each swap-in's host-side _Send must
start only after its trigger has finished. A bad parameter, a missing binary, a hanging or
misbehaving tfswap must leave the graph unchanged with exactly one warning.

Run:  .venv/bin/python -m pytest -q tests/python/test_grappler_bridge.py

The scenarios that check TensorFlow's log run this file as a worker in a child process
(``python test_grappler_bridge.py worker SPEC``), because the log level is fixed when
TensorFlow is first imported.
"""

import hashlib
import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys

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


def sidecar():
    return json.loads((FIXTURES / "resnet.json").read_text())


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


def train(graph_def, config, steps=STEPS):
    side = sidecar()
    feeds = {f["name"]: np.load(FIXTURES / f["file"]) for f in side["feeds"]}
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
            if not PARTITIONER_NODE.search(n.name):
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
        ctrl = [i for i in n.input if i.startswith("^")]
        assert len(ctrl) == 1, "swap-in %s has control inputs %s" % (n.name, ctrl)
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
        _, swap_in_start, _ = times[n.name]
        for t in chain:
            assert t.name in times, t.name
            _, _, end = times[t.name]
            assert swap_in_start >= end, (
                "swap-in %s started %d ns before %s finished" % (n.name, end - swap_in_start, t.name)
            )
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
    "timeout": ({"tfswap_binary": "SLEEP", "timeout_seconds": "1"}, "did not finish within 1 s"),
    "garbage output": ({"tfswap_binary": "GARBAGE"}, "is not a binary GraphDef"),
    "node dropped": ({"tfswap_binary": "DROP"}, "is missing"),
    "bad bridge parameter": ({"timeout_seconds": "soon"}, "timeout_seconds"),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_leaves_graph_unchanged_with_one_warning(name, bridge, tfswap_binary, baseline, tmp_path):
    params, needle = FAILURES[name]
    fakes = {
        "SLEEP": fake_tfswap(tmp_path, "sleeper", "#!/bin/sh\nexec sleep 60\n"),
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


def test_offload_trains_bit_identically(bridge, tfswap_binary, baseline, tmp_path):
    """With offload=all the bridge passes --offload all: every session run's graph (the
    initialisation, the training steps, the final reads) has the same variables on the host,
    so they find their resources there; training is bit-identical, the variables run on the
    host and the weights reach the device through gated copies."""
    params = {"compute_device": "/device:CPU:1", "offload": "all", "tfswap_binary": tfswap_binary, "verbose": 1}
    result, log = run_worker({"params": params}, tmp_path)
    assert WARNING.findall(log) == [], log[-3000:]
    assert result["digest"] == baseline.digest()
    assert any("weight_in" in n for n in result["swap_nodes"]), result["swap_nodes"]
    variables = [v["name"] for v in sidecar()["variables"]]
    assert set(variables) <= set(result["host_variables"]), result["host_variables"]


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
    print("BRIDGE-RESULT " + json.dumps({"digest": run.digest(), "swap_nodes": swaps, "host_variables": host_vars}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        worker(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: %s worker SPEC (the tests run with pytest)" % sys.argv[0])
