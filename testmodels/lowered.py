"""The zoo's rnn_v2 training step as Grappler sees it, for tfswap's tests of TensorList
accumulators.

Before Grappler runs, a session lowers each v2 ``While`` to v1 control flow
(Enter/Merge/Switch/NextIteration/Exit, TensorFlow's LowerFunctionalOpsPass), places the
graph and runs its first optimizers; the Grappler bridge hands that graph to tfswap. The
tensors the gradient loop needs are then kept in TensorList accumulators: loop variables
pushed by TensorListPushBack in the forward loop and popped by TensorListPopBack in the
gradient loop. This script trains one step of testmodels/zoo/rnn_v2.pb through the bridge
(two-device emulation, device_count CPU 2, the compute device CPU:1) with a stand-in tfswap
that writes the graph it is given and returns it unchanged, keeps the training step's graph
(the largest) and writes it as it is, Grappler's _output_shapes included, to
testmodels/controlflow/rnn_v2_lowered.pb. There is no sidecar: it is not a training fixture
(the session feeds and fetches it itself), and TensorFlow's Python import refuses it
(Grappler's symbolic dimensions, colocation with nodes Grappler removed).

Needs the bridge (grappler_bridge/build.sh):

    .venv/bin/python testmodels/lowered.py      # -> testmodels/controlflow/rnn_v2_lowered.pb
"""

import json
import os
import pathlib
import stat
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "testmodels" / "controlflow" / "rnn_v2_lowered.pb"
ZOO = ROOT / "testmodels" / "zoo"


def main():
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2

    v1 = tf.compat.v1
    tf.load_library(str(ROOT / "grappler_bridge" / "libtfswap_grappler.so"))
    with tempfile.TemporaryDirectory() as tmp:
        stand_in = pathlib.Path(tmp) / "tfswap"
        stand_in.write_text('#!/bin/sh\nf=$(mktemp "%s/graph.XXXXXX")\ntee "$f"\n' % tmp)
        stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
        side = json.loads((ZOO / "rnn_v2.json").read_text())
        feeds = {f["name"]: np.load(ZOO / f["file"]) for f in side["feeds"]}
        gd = v1.GraphDef()
        gd.ParseFromString((ZOO / "rnn_v2.pb").read_bytes())
        for n in gd.node:  # as tests/python/test_grappler_bridge.py's fixture_graph places it
            n.device = "/device:CPU:1"
        g = tf.Graph()
        with g.as_default():
            tf.graph_util.import_graph_def(gd, name="")
        c = config_pb2.ConfigProto(device_count={"CPU": 2}, intra_op_parallelism_threads=1,
                                   inter_op_parallelism_threads=1)
        opt = c.graph_options.rewrite_options.custom_optimizers.add(name="TFSwapOptimizer")
        params = {"compute_device": "/device:CPU:1", "tfswap_binary": str(stand_in)}
        for key, val in params.items():
            opt.parameter_map[key].s = val.encode()
        with v1.Session(graph=g, config=c) as sess:
            sess.run(side["init_op"])
            sess.run([side["loss"], side["train_op"]], feed_dict=feeds)
        graphs = sorted(pathlib.Path(tmp).glob("graph.*"), key=lambda p: (p.stat().st_size, p.name))
        if not graphs:
            sys.exit("lowered.py: the bridge handed no graph to the stand-in tfswap")
        step = v1.GraphDef()
        step.ParseFromString(graphs[-1].read_bytes())
    if not any(n.op == "TensorListPushBack" for n in step.node):
        sys.exit("lowered.py: the training step's graph holds no TensorListPushBack: not lowered?")
    # As the bridge gives it, with Grappler's _output_shapes (which know the loop's tensors,
    # where TensorFlow's import leaves them unknown; -8 and the like are dimensions Grappler
    # tracks symbolically) and the colocation attrs of nodes Grappler removed.
    data = step.SerializeToString(deterministic=True)
    tmp = OUT.with_suffix(".pb.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, OUT)
    print("%s: %d nodes, %d bytes" % (OUT, len(step.node), len(data)))


if __name__ == "__main__":
    main()
