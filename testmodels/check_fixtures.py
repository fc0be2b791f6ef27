#!/usr/bin/env python3
"""Sanity-checks the committed training-graph fixtures.

For every NAME.json in the fixture directory: loads NAME.pb into a fresh
graph, checks the structural conventions (empty devices, _output_shapes on
every node matching the op's outputs, no control flow, seeded random ops,
named feeds/loss/train/init/fetch_var nodes), runs init and 5 train steps on
the .npy feeds and checks the loss is finite and decreases, and that the
fetch_var reads see the updated variables. Prints one line per fixture and
exits 1 if any fixture fails.

    .venv/bin/python testmodels/check_fixtures.py [--dir testmodels/fixtures]
"""

import argparse
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphkit as gk  # noqa: E402
from graphkit import tf, v1  # noqa: E402

STEPS = 5


def check_one(json_path):
    with open(json_path) as f:
        side = json.load(f)
    d = os.path.dirname(json_path)
    name = side["name"]
    gd = tf.compat.v1.GraphDef()
    with open(os.path.join(d, name + ".pb"), "rb") as f:
        gd.ParseFromString(f.read())
    problems = gk.check_graph_def(gd, name)
    if len(gd.node) != side["node_count"]:
        problems.append("node_count %d in json, %d in pb" %
                        (side["node_count"], len(gd.node)))

    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(gd, name="")
    # _output_shapes must list exactly one shape per output, equal to what
    # TF's shape inference gives on import.
    for n in gd.node:
        op = graph.get_operation_by_name(n.name)
        shapes = n.attr["_output_shapes"].list.shape
        if len(shapes) != len(op.outputs):
            problems.append("%s: %d _output_shapes for %d outputs" %
                            (n.name, len(shapes), len(op.outputs)))
            continue
        for s, t in zip(shapes, op.outputs):
            if tf.TensorShape(s) != t.shape:
                problems.append("%s: _output_shapes %s, TF infers %s" % (
                    t.name, tf.TensorShape(s), t.shape))
    # Only the tensors the sidecar lists may have shapes not fully defined.
    unknown = gk.unknown_shape_tensors(gd)
    if unknown != side.get("unknown_shape_tensors", []):
        problems.append("tensors with unknown shapes %s, json lists %s" % (
            unknown, side.get("unknown_shape_tensors")))
    train = graph.get_operation_by_name(side["train_op"])
    if train.type != "NoOp":
        problems.append("train op is %s, not NoOp" % train.type)
    loss_t = graph.get_tensor_by_name(side["loss"])
    if loss_t.shape.rank != 0 or loss_t.op.name != "loss":
        problems.append("loss is not a scalar op named loss")

    feeds = {}
    for fe in side["feeds"]:
        arr = np.load(os.path.join(d, fe["file"]), allow_pickle=False)
        if arr.dtype.name != fe["dtype"] or list(arr.shape) != fe["shape"]:
            problems.append("feed %s: file has %s%s, json says %s%s" % (
                fe["name"], arr.dtype, list(arr.shape), fe["dtype"], fe["shape"]))
        if arr.dtype not in (np.float32, np.int32) or arr.dtype.byteorder == ">":
            problems.append("feed %s: dtype %s" % (fe["name"], arr.dtype))
        ph = graph.get_tensor_by_name(fe["name"])
        if ph.op.type != "Placeholder" or ph.shape.as_list() != fe["shape"]:
            problems.append("feed %s is not a matching placeholder" % fe["name"])
        feeds[ph] = arr

    fetch_names = [v["fetch"] for v in side["variables"]]
    fetch_ts = [graph.get_tensor_by_name(n) for n in fetch_names]
    # The fetch reads must not feed the training step.
    train_path = set()
    stack = [train, loss_t.op]
    while stack:
        op = stack.pop()
        if op in train_path:
            continue
        train_path.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    for t in fetch_ts:
        if t.op in train_path:
            problems.append("%s is on the training path" % t.name)
    for v, t in zip(side["variables"], fetch_ts):
        if t.shape.as_list() != v["shape"]:
            problems.append("%s shape %s, json %s" % (t.name, t.shape, v["shape"]))
        if graph.get_operation_by_name(v["name"]).type != "VarHandleOp":
            problems.append("variable %s is not a VarHandleOp" % v["name"])

    losses = []
    changed = 0
    if not problems:
        config = v1.ConfigProto(inter_op_parallelism_threads=2,
                                intra_op_parallelism_threads=2)
        with v1.Session(graph=graph, config=config) as sess:
            sess.run(side["init_op"])
            before = sess.run(fetch_ts)
            for _ in range(STEPS):
                lv, _ = sess.run([loss_t, train], feed_dict=feeds)
                losses.append(float(lv))
            after = sess.run(fetch_ts)
            final = float(sess.run(loss_t, feed_dict=feeds))
        changed = sum(1 for a, b in zip(before, after) if not np.array_equal(a, b))
        if not all(np.isfinite(losses + [final])):
            problems.append("non-finite loss: %s" % losses)
        elif not final < losses[0]:
            problems.append("loss did not decrease: %s then %s" % (losses, final))
        if changed == 0:
            problems.append("no fetch_var value changed after training")
    return name, len(gd.node), losses, changed, len(fetch_ts), problems


def regen_problems(json_path):
    """Differences between the files on disk and a fresh gen.py build."""
    import io
    import gen
    with open(json_path) as f:
        side = json.load(f)
    d = os.path.dirname(json_path)
    name = side["name"]
    data, new_side, feeds = gen.build(name, side["seed"])
    out = []
    with open(os.path.join(d, name + ".pb"), "rb") as f:
        if f.read() != data:
            out.append("regenerated %s.pb differs" % name)
    if new_side != side:
        out.append("regenerated %s.json differs" % name)
    for pname, arr in feeds.items():
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        with open(os.path.join(d, "%s.%s.npy" % (name, pname)), "rb") as f:
            if f.read() != buf.getvalue():
                out.append("regenerated %s.%s.npy differs" % (name, pname))
    return out


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.path.join(here, "fixtures"))
    ap.add_argument("--regen", action="store_true",
                    help="also regenerate each fixture in memory with gen.py "
                    "and require byte-identical .pb/.json/.npy files")
    args = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(args.dir, "*.json")))
    if not paths:
        print("no fixtures in %s" % args.dir)
        return 1
    failed = 0
    for p in paths:
        try:
            name, nodes, losses, changed, nvars, problems = check_one(p)
        except Exception as e:  # report and go on with the next fixture
            name, nodes, losses, changed, nvars = os.path.basename(p), 0, [], 0, 0
            problems = ["%s: %s" % (type(e).__name__, e)]
        if args.regen and not problems:
            problems = regen_problems(p)
        status = "FAIL" if problems else "ok"
        loss_s = " ".join("%.4f" % l for l in losses)
        print("%-4s %-7s nodes=%5d vars_changed=%d/%d loss: %s" % (
            status, name, nodes, changed, nvars, loss_s))
        for pr in problems[:20]:
            print("     " + pr)
        failed += bool(problems)
    print("%d passed, %d failed" % (len(paths) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
