"""Measures what the Grappler bridge adds to session start-up on a training graph.

    .venv/bin/python testmodels/large.py --model resnet50 --batch 32 --out /tmp/resnet50.pb
    .venv/bin/python grappler_bridge/bench_session.py /tmp/resnet50.pb --repeats 5

Each measurement runs in a fresh Python process, alternating a session without the bridge and
one with it (two-device emulation, every node on /device:CPU:1, compute_device=/device:CPU:1,
LMS's fixed default thresholds: strategy=lms-fixed, what tfswap did without options before it
planned by default). In TF1 sessions Grappler runs when a (feeds, fetches) signature
is first used, so the process times

    init      the first sess.run(init): Grappler + executor creation + running the initializers
    callable  creating the callable of the training step (feeds input, labels; fetches loss;
              target train) with TF_SessionMakeCallable: Grappler + executor creation, no step

each as wall time and as CPU time (this process's plus its reaped children's, so tfswap's
included), and, with the bridge, reads the bridge's own timing of the training graph (verbose=1): static
shape inference and the tfswap child process (which includes parsing, planning and writing
the GraphDef and the pipe transfer both ways). Prints a table of medians and JSON.
"""

import argparse
import json
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
KEYS = ("init", "init_cpu", "callable", "callable_cpu")
TIMING = re.compile(
    r"TFSwapOptimizer: graph (\S+) \((\d+) nodes\): (-?\d+) swap nodes added; shapes (\S+) s, tfswap (\S+) s"
)


def child(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    side = json.loads(pathlib.Path(args.sidecar).read_text())
    gd = v1.GraphDef()
    gd.ParseFromString(pathlib.Path(args.graph).read_bytes())
    for n in gd.node:
        n.device = "/device:CPU:1"
    config = config_pb2.ConfigProto(
        device_count={"CPU": 2}, intra_op_parallelism_threads=2, inter_op_parallelism_threads=2
    )
    if args.bridge:
        tf.load_library(args.library)
        opt = config.graph_options.rewrite_options.custom_optimizers.add(name="TFSwapOptimizer")
        opt.parameter_map["tfswap_binary"].s = args.tfswap.encode()
        opt.parameter_map["compute_device"].s = b"/device:CPU:1"
        opt.parameter_map["strategy"].s = b"lms-fixed"
        opt.parameter_map["verbose"].s = b"1"
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    def clocks():
        # Wall time, and the CPU time of this process and of its reaped children (tfswap):
        # CPU time is far less disturbed than wall time by other loads on a small machine.
        ch = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.perf_counter(), time.process_time() + ch.ru_utime + ch.ru_stime

    with v1.Session(graph=g, config=config) as sess:
        t0, c0 = clocks()
        sess.run(side["init_op"])
        t1, c1 = clocks()
        # make_callable() defers creating the callable to its first call; this creates it
        # (TF_SessionMakeCallable: Grappler and the executors) without running a step.
        sess._make_callable_from_options(config_pb2.CallableOptions(
            feed=[f["name"] for f in side["feeds"]], fetch=[side["loss"]], target=[side["train_op"]]))
        t2, c2 = clocks()
    print("BENCH " + json.dumps({"init": t1 - t0, "callable": t2 - t1,
                                 "init_cpu": c1 - c0, "callable_cpu": c2 - c1}), flush=True)


def run_once(args, bridge):
    cmd = [sys.executable, __file__, "--child", args.graph, "--sidecar", args.sidecar,
           "--library", args.library, "--tfswap", args.tfswap]
    if bridge:
        cmd.append("--bridge")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        sys.exit("child failed:\n" + p.stderr[-3000:])
    out = json.loads([l for l in p.stdout.splitlines() if l.startswith("BENCH ")][-1][6:])
    graphs = [
        {"id": m[0], "nodes": int(m[1]), "added": int(m[2]), "shapes": float(m[3]), "tfswap": float(m[4])}
        for m in TIMING.findall(p.stderr)
    ]
    # The training graph is the largest graph the bridge rewrote.
    rewritten = [g for g in graphs if g["added"] > 0]
    out["train_graph"] = max(rewritten, key=lambda g: g["nodes"]) if rewritten else None
    out["graphs"] = graphs
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graph", help="training GraphDef (.pb) made by testmodels/large.py or gen.py")
    ap.add_argument("--sidecar", help="its JSON sidecar (default: GRAPH with .json)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--library", default=str(HERE / "libtfswap_grappler.so"))
    ap.add_argument("--tfswap", help="tfswap binary (default: bin/tfswap, else go build)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bridge", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.sidecar = args.sidecar or str(pathlib.Path(args.graph).with_suffix(".json"))
    if args.child:
        return child(args)
    tmp = None
    if not args.tfswap:
        if (ROOT / "bin" / "tfswap").exists():
            args.tfswap = str(ROOT / "bin" / "tfswap")
        else:
            tmp = tempfile.mkdtemp()
            args.tfswap = os.path.join(tmp, "tfswap")
            subprocess.run(["go", "build", "-o", args.tfswap, "./cmd/tfswap"], cwd=ROOT, check=True)
    subprocess.run([str(HERE / "build.sh")], check=True)
    runs = {False: [], True: []}
    for i in range(args.repeats):
        for bridge in (False, True):
            r = run_once(args, bridge)
            runs[bridge].append(r)
            print("run %d %-9s init %.3f s (cpu %.3f s)  callable %.3f s (cpu %.3f s)"
                  % (i, "bridge" if bridge else "baseline", r["init"], r["init_cpu"],
                     r["callable"], r["callable_cpu"]), file=sys.stderr)
    if tmp:
        shutil.rmtree(tmp)

    def med(bridge, key):
        return statistics.median(r[key] for r in runs[bridge])

    result = {
        "graph": args.graph,
        "repeats": args.repeats,
        "baseline": {k: med(False, k) for k in KEYS},
        "bridge": {k: med(True, k) for k in KEYS},
    }
    tg = [r["train_graph"] for r in runs[True] if r["train_graph"]]
    if tg:
        result["train_graph"] = {
            "nodes": tg[0]["nodes"],
            "swap_nodes_added": tg[0]["added"],
            "shape_inference_s": statistics.median(g["shapes"] for g in tg),
            "tfswap_s": statistics.median(g["tfswap"] for g in tg),
        }
    print("median of %d    %12s %12s %12s" % (args.repeats, "baseline", "bridge", "added"))
    for k in KEYS:
        b, s = result["baseline"][k], result["bridge"][k]
        print("%-14s %10.3f s %10.3f s %+10.3f s" % (k, b, s, s - b))
    if tg:
        t = result["train_graph"]
        print("training graph: %d nodes, %d swap nodes added; shape inference %.3f s, tfswap %.3f s"
              % (t["nodes"], t["swap_nodes_added"], t["shape_inference_s"], t["tfswap_s"]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
