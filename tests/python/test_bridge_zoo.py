"""Every zoo graph (testmodels/zoo/, listed, not named), and each control-flow graph of
testmodels/controlflow, trains bit-identically for 3 steps,
losses and every variable, with the v1 Grappler bridge on (lms-fixed, every sized tensor) and
off, under TensorFlow's default Grappler configuration on the two-device emulation; the
bridged step's partition graphs must hold swap nodes (a run that swapped nothing fails).
A graph whose input has an unknown batch gets the bridge's batch_size parameter. Where auto
finds a plan at 90% of the simulated peak at 64 times the batch, that plan trains
bit-identically through the bridge too.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from test_grappler_bridge import LIBRARY, WARNING, Partitions, bridge, fixture_graph, session_config, tfswap_binary  # noqa: F401

import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2  # noqa: E402

v1 = tf.compat.v1
ZOO = pathlib.Path(__file__).resolve().parents[2] / "testmodels" / "zoo"
STEPS = 3
SWAP_PARAMS = {"compute_device": "/device:CPU:1", "min_bytes": "0", "strategy": "lms-fixed"}
# Zoo graphs not trained here, with the reason (none at present).
SKIPS = {}

# The dynamic_rnn graphs: before Grappler runs, the session lowers the v2 While to v1
# Enter/Exit/Switch/Merge (LowerFunctionalOpsPass; rnn_v1 is v1 control flow already), and
# Grappler prunes the Identity chains. What the forward pass keeps for the backward pass then
# lives inside the loop frames, in accumulators, and leaves the forward loop only through
# Exit nodes read by the gradient loop's Enter nodes, which tfswap never swaps (an edge into
# or out of a frame must go through Enter/Exit). On rnn_v1 the accumulators are v1 stacks
# (StackV2, pushed by StackPushV2 in the forward loop, popped by StackPopV2 in the gradient
# loop), and the LMS rewrite places them on the host (rewrite/accumulators.go): every
# iteration's pushed tensor is copied to the host and popped back, which the test below
# checks in the partition graphs (check_stacks_on_host).
# On rnn_v2 the accumulators are TensorLists: a DT_VARIANT loop variable carried by Enter,
# Merge, Switch, NextIteration and Exit into the gradient loop, pushed by TensorListPushBack
# and popped by TensorListPopBack. The LMS rewrite places each list's own loop plumbing (that
# loop variable's Enter..Exit only), its pushes and its pops on the host; TensorFlow's
# partitioner gives the host partition its own copy of the loop's control, so the pushes
# run there from tensors received from the compute device (check_stacks_on_host, both kinds).

# Known failures, open, marked strict xfail so that a fix shows up as an unexpected pass
# (none at present).
XFAILS = {}


def unknown_batch(name, directory=ZOO):
    """Whether a placeholder of the graph has an unknown (None) leading dimension: the
    session optimizes the graph before any feed, so the bridge needs the batch_size
    parameter to size the tensors downstream."""
    gd = v1.GraphDef()
    gd.ParseFromString((directory / (name + ".pb")).read_bytes())
    for n in gd.node:
        if n.op == "Placeholder" and "shape" in n.attr:
            s = n.attr["shape"].shape
            if not s.unknown_rank and s.dim and s.dim[0].size < 0:
                return True
    return False


def _cases():
    for p in sorted(ZOO.glob("*.json")):
        marks = [pytest.mark.xfail(reason=XFAILS[p.stem], strict=True)] if p.stem in XFAILS else []
        yield pytest.param(p.stem, marks=marks)


def train(name, config, directory=ZOO):
    side = json.loads((directory / (name + ".json")).read_text())
    feeds = {f["name"]: np.load(directory / f["file"]) for f in side["feeds"]}
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(fixture_graph(directory / (name + ".pb")), name="")
    trace = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE, output_partition_graphs=True)
    md = config_pb2.RunMetadata()
    losses = []
    with v1.Session(graph=g, config=config) as sess:
        sess.run(side["init_op"])
        for step in range(STEPS):
            last = step == STEPS - 1
            loss, _ = sess.run([side["loss"], side["train_op"]], feed_dict=feeds,
                               options=trace if last else None, run_metadata=md if last else None)
            losses.append(np.asarray(loss).tobytes())
        variables = [np.asarray(v).tobytes() for v in sess.run([v["fetch"] for v in side["variables"]])]
    return side, losses, variables, md


def check_bit_identical(name, directory, swap_params, tfswap_binary, stacks=False):  # noqa: F811
    """Trains the graph with the bridge off and on (swap_params) and requires swap nodes in
    the bridged step, then the same losses and variables, byte for byte; returns the bridged
    step's Partitions. With lms-fixed, or stacks, the loops' accumulators must be on the host
    (check_stacks_on_host)."""
    side, want_losses, want_vars, _ = train(name, session_config(), directory)
    params = dict(swap_params, tfswap_binary=tfswap_binary)
    if unknown_batch(name, directory):
        params["batch_size"] = side["batch"]
    _, got_losses, got_vars, md = train(name, session_config(params), directory)
    parts = Partitions(md)
    assert parts.swap_nodes(), "the bridged step holds no swap node: nothing to check"
    if stacks or swap_params.get("strategy") == "lms-fixed":
        check_stacks_on_host(directory / (name + ".pb"), parts)
    for step, (a, b) in enumerate(zip(want_losses, got_losses)):
        assert a == b, "loss differs at step %d" % step
    for v, a, b in zip(side["variables"], want_vars, got_vars):
        assert a == b, "variable %s differs after %d steps" % (v["name"], STEPS)
    return Partitions(md)


# The accumulators' push and pop ops, and the port of the pop that gives the tensor back.
PUSH_OPS = ("StackPushV2", "TensorListPushBack")
POP_PORTS = {"StackPopV2": 0, "TensorListPopBack": 1}


def check_stacks_on_host(path, parts):
    """Where the graph has loop accumulators (v1 stacks, StackPushV2, or, once the session
    lowered a v2 While, TensorLists, TensorListPushBack), the LMS rewrite placed them on the
    host: the step pushes on the host partition a tensor received from the compute device
    through a stack_out node, and every stack_in node reads a pop on the host."""
    gd = v1.GraphDef()
    gd.ParseFromString(path.read_bytes())
    ops = {n.op for n in gd.node}
    for f in gd.library.function:
        ops.update(n.op for n in f.node_def)
    if not ops.intersection(PUSH_OPS):
        return
    outs, ins = parts.swap_nodes("stack_out"), parts.swap_nodes("stack_in")
    assert outs and ins, "the graph's stack accumulators were not placed on the host"
    for n in outs:
        assert n.device.endswith("CPU:0"), "%s runs on %s, not the host" % (n.name, n.device)
        src = parts.origin(n.input[0])
        assert src.device.endswith("CPU:1"), "%s copies %s of %s, not of the compute device" % (n.name, src.name, src.device)
        pushes = [r for r in parts.readers.get(n.name, []) if r.op in PUSH_OPS]
        assert pushes and all(p.device.endswith("CPU:0") for p in pushes), "%s feeds no push on the host" % n.name
    for n in ins:
        assert n.device.endswith("CPU:1"), "%s runs on %s" % (n.name, n.device)
        pop = parts.origin(n.input[0])
        assert pop.op in POP_PORTS and pop.device.endswith("CPU:0"), "%s reads %s %s on %s" % (n.name, pop.op, pop.name, pop.device)
    print("%s: %d pushes and %d pops through the host" % (path.stem, len(outs), len(ins)))


@pytest.mark.parametrize("name", list(_cases()))
def test_zoo_bit_identical_through_bridge(name, bridge, tfswap_binary):  # noqa: F811
    if name in SKIPS:
        pytest.skip(SKIPS[name])
    check_bit_identical(name, ZOO, SWAP_PARAMS, tfswap_binary)


# The BERT-style transformer-tiny (testmodels/fixtures/large, testmodels/large.py), whose GELU
# and softmax gradients hold products Grappler's constant push-down rotates, with tfrun's
# TestPushDownRelaysBitIdenticalUnderGrappler thresholds.
LARGE = ZOO.parent / "fixtures" / "large"
PUSHDOWN_PARAMS = dict(SWAP_PARAMS, swapout_threshold="4", swapin_ahead="1")
PRODUCT_OPS = ("Mul", "Div", "RealDiv")


def test_pushdown_relays_bit_identical_through_bridge(bridge, tfswap_binary):  # noqa: F811
    """Issue 12: a product Grappler's constant push-down may rotate reads a swap-in through a
    relay on its device (rewrite/grappler_fanout.go). The bridge rewrites the graph of
    Grappler's first meta-optimizer iteration, whose second iteration then runs on the
    rewrite, so the rule must hold there too (a4fee95 looked one rotation up only and broke
    the zoo GPT here, not in the Go session). transformer-tiny trains bit-identically through
    the bridge, 3 steps, with products reading relays in the bridged step."""
    parts = check_bit_identical("transformer-tiny", LARGE, PUSHDOWN_PARAMS, tfswap_binary)
    relayed = sorted(r.name for n in parts.swap_nodes("swap_relay")
                     for r in parts.readers.get(n.name, []) if r.op in PRODUCT_OPS)
    assert relayed, "no product reads a relay in the bridged step: the case this test guards is gone"


# Planned rewrites: auto under a budget of 90% of tfswap's simulated peak of the graph at 64 times
# its batch (the profile's compute against the small graph's memory would leave nothing to plan at
# the committed batch), as tfrun's TestZooBitIdenticalUnderGrappler plans them. The planning is
# simulated for v100-16gb; the step runs at the committed batch.
PLAN_SCALE = 64
PLAN_FRACTION = 0.9


def planned_params(name, tfswap_binary):  # noqa: F811
    """The bridge parameters of auto's plan for the zoo graph, or None when the CLI finds no
    plan that fits (exit 1, a no-fit diagnosis) on the graph as committed."""
    side = json.loads((ZOO / (name + ".json")).read_text())
    path = str(ZOO / (name + ".pb"))
    common = ["--device", "v100-16gb", "--batch-scale", str(PLAN_SCALE), "--compute-device", "/device:CPU:1"]
    if unknown_batch(name):
        common += ["--batch", str(side["batch"])]
    sim = subprocess.run([tfswap_binary, "simulate", *common, "--json", "-", path],
                         capture_output=True, text=True, timeout=600)
    assert sim.returncode == 0, sim.stderr[-2000:]
    devices = json.loads(sim.stdout)["result"]["devices"]
    peak = next(d["peak_bytes"] for d in devices if d["name"].endswith("CPU:1"))
    budget = int(peak * PLAN_FRACTION)
    cli = subprocess.run([tfswap_binary, "rewrite", *common, "--budget", str(budget), "-o", os.devnull, path],
                         capture_output=True, text=True, timeout=600)
    if cli.returncode == 1 and "no plan" in (cli.stdout + cli.stderr).lower():
        return None
    assert cli.returncode == 0, cli.stderr[-2000:]
    return {"compute_device": "/device:CPU:1", "device": "v100-16gb", "strategy": "auto",
            "budget": str(budget), "batch_scale": str(PLAN_SCALE)}


def test_zoo_planned_bit_identical_through_bridge(bridge, tfswap_binary):  # noqa: F811
    """Every zoo graph (but the known failures) for which tfswap's CLI finds auto's plan at
    90% of the simulated peak at 64 times the batch trains bit-identically through the bridge
    with that plan (planned again by the bridge on Grappler's graph), 3 steps, losses and every
    variable, with swap nodes in the step. Graphs with no fitting plan are listed; the test
    fails when no graph had one (it would check nothing)."""
    trained, no_fit = [], []
    for p in sorted(ZOO.glob("*.json")):
        name = p.stem
        if name in XFAILS or name in SKIPS:
            continue
        params = planned_params(name, tfswap_binary)
        if params is None:
            no_fit.append(name)
            continue
        check_bit_identical(name, ZOO, params, tfswap_binary)
        trained.append(name)
    print("planned and trained: %s; no plan fits: %s" % (trained, no_fit))
    assert trained, "no zoo graph had a fitting plan: nothing was checked (no fit: %s)" % no_fit


# The control-flow graphs (testmodels/controlflow: v1 cond, If, function calls, dynamic_rnn),
# small enough that LMS's default thresholds find little: the thresholds are lowered as in tfrun's
# TestControlFlowBitIdentical (swap-out threshold 3, swap-in 1 level ahead).
CONTROLFLOW = ZOO.parent / "controlflow"
CONTROLFLOW_GRAPHS = ["cond_cnn", "if_cnn", "fn_call", "stateful_call", "rnn_v1", "rnn_v2"]
CONTROLFLOW_PARAMS = dict(SWAP_PARAMS, swapout_threshold="3", swapin_ahead="1")


@pytest.mark.parametrize("name", CONTROLFLOW_GRAPHS)
def test_controlflow_bit_identical_through_bridge(name, bridge, tfswap_binary):  # noqa: F811
    """The control-flow graphs train bit-identically through the bridge under TensorFlow's
    default Grappler configuration, 3 steps, losses and every variable. Unlike the zoo's
    dynamic_rnn graphs, the control-flow rnn_v1 and rnn_v2 project their input before the
    loop, and the bridge swaps those projections (outside the lowered loop) for the
    backward pass."""
    check_bit_identical(name, CONTROLFLOW, CONTROLFLOW_PARAMS, tfswap_binary)


# Planned rewrites that place the loops' accumulators on the host (rewrite's accumulators pass):
# auto at 70% of tfswap's simulated peak by its own accounting, which on the control-flow
# rnn_v1 only placing its stacks on the host fits. (The control-flow rnn_v2, its While lowered
# by the session before the bridge plans it, gets no swap node at 70% of the peak of the graph
# as committed: not looked into yet.)
ACCUMULATOR_FRACTION = 0.7


@pytest.mark.parametrize("name", ["rnn_v1"])
def test_controlflow_planned_accumulators_through_bridge(name, bridge, tfswap_binary):  # noqa: F811
    """auto's plan at 70% of the simulated peak (tfswap's accounting) places the loop's
    accumulators on the host through the bridge (pushes and pops on the host partition,
    check_stacks_on_host) and trains bit-identically, 3 steps, losses and every variable."""
    side = json.loads((CONTROLFLOW / (name + ".json")).read_text())
    simulated = CONTROLFLOW / (name + ".pb")
    common = ["--device", "v100-16gb", "--compute-device", "/device:CPU:1", "--fetch", side["train_op"]]
    sim = subprocess.run([tfswap_binary, "simulate", *common, "--json", "-", str(simulated)],
                         capture_output=True, text=True, timeout=600)
    assert sim.returncode == 0, sim.stderr[-2000:]
    devices = json.loads(sim.stdout)["result"]["devices"]
    peak = next(d["peak_bytes"] for d in devices if d["name"].endswith("CPU:1"))
    params = {"compute_device": "/device:CPU:1", "device": "v100-16gb", "strategy": "auto",
              "budget": str(int(peak * ACCUMULATOR_FRACTION)), "fit_accounting": "tfswap"}
    check_bit_identical(name, CONTROLFLOW, params, tfswap_binary, stacks=True)


def test_unknown_batch_without_batch_size_warns(bridge, tfswap_binary):  # noqa: F811
    """Without batch_size, the unknown-batch graph (whose batch no constant pins) gets one
    bridge warning naming the placeholder and the parameter; it still trains (one step, in
    a child process with TensorFlow's log on)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")
    proc = subprocess.run([sys.executable, __file__, "worker", "unknown_batch", tfswap_binary],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    hints = [w for w in WARNING.findall(proc.stderr) if "batch_size" in w]
    assert len(hints) == 1 and any("placeholder %s " % f in hints[0] for f in ("input", "labels")), proc.stderr[-3000:]


def worker(name, binary):
    """Runs one step of the zoo graph through the bridge without batch_size."""
    tf.load_library(str(LIBRARY))
    side = json.loads((ZOO / (name + ".json")).read_text())
    feeds = {f["name"]: np.load(ZOO / f["file"]) for f in side["feeds"]}
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(fixture_graph(ZOO / (name + ".pb")), name="")
    with v1.Session(graph=g, config=session_config(dict(SWAP_PARAMS, tfswap_binary=binary))) as sess:
        sess.run(side["init_op"])
        sess.run(side["train_op"], feed_dict=feeds)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: %s worker NAME TFSWAP (the tests run with pytest)" % sys.argv[0])
