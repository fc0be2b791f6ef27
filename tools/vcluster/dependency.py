#!/usr/bin/env python3
"""What Grappler's dependency optimizer leaves of a graph's nodes, to check tfswap's value-dead
nodes (cost.PrunedNodes) against TensorFlow's own.

    .venv/bin/python tools/vcluster/dependency.py --fetch train GRAPH.pb [GRAPH.pb ...]

For each graph it builds a MetaGraphDef whose `train_op` collection names the fetches (what
Grappler preserves, as a session run of them would) and runs tf_optimizer.OptimizeGraph with the
dependency optimizer alone (one meta-optimizer iteration, no minimum graph size). It prints JSON:
{"graphs": [{"path": ..., "fetch": [...], "nodes": {name: op after the optimizer, or null when
the optimizer removed the node}}]}, for every node of the graph as written. A node the
optimizer turned into a NoOp (DependencyOptimizer::SafeToConvertToNoOp) is "NoOp"; one it then
removed, or an Identity it bypassed, is null.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vcluster  # noqa: E402  (tools/vcluster/vcluster.py)


def optimized_ops(path, fetch):
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
    from tensorflow.python.grappler import tf_optimizer

    gd, mg = vcluster.load_metagraph(path, fetch)
    cfg = config_pb2.ConfigProto()
    rw = cfg.graph_options.rewrite_options
    rw.optimizers[:] = ["dependency"]
    rw.min_graph_nodes = -1
    rw.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    out = tf_optimizer.OptimizeGraph(cfg, mg)
    after = {n.name: n.op for n in out.node}
    return {n.name: after.get(n.name) for n in gd.node}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fetch", action="append", default=[], required=True,
                    help="node a step runs (repeatable)")
    ap.add_argument("graphs", nargs="+")
    args = ap.parse_args(argv)
    res = [{"path": p, "fetch": args.fetch, "nodes": optimized_ops(p, args.fetch)} for p in args.graphs]
    json.dump({"graphs": res}, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
