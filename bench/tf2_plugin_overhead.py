"""tf2_plugin_overhead measures, on CPU, the graph-optimization time the TF2 plugin adds to
the first training step of a ResNet-50-sized Keras model (docs/TF2_PLUGIN.md).

Each run is a separate process (two logical CPU devices, the model under /CPU:1, the plugin
registered for CPU): it builds keras.applications.ResNet50 (weights=None), compiles it with
jit_compile=False and fits one step, with tfswap.enable(). The plugin records, for the train
function, the seconds its static shape inference took and the seconds tfswap (planning and
rewriting, a child process) took: the time added to the first step's graph optimization.
The first step's wall time with and without the plugin is printed too, for reference; on a
shared machine it varies more than the difference.

  .venv/bin/python bench/tf2_plugin_overhead.py [--runs 3] [--batch 8] [--budget 1GiB] [--plugin-only]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def child(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.path.insert(0, str(ROOT / "python"))
    import tfswap

    if args.plugin:
        tfswap.enable(budget=args.budget, compute_device="/device:CPU:1", device_type="CPU",
                      batch_size=args.batch)
    import keras

    keras.utils.set_random_seed(1)
    x = np.random.RandomState(0).rand(args.batch, 224, 224, 3).astype("float32")
    y = np.random.RandomState(1).randint(0, 1000, args.batch)
    with tf.device("/CPU:1"):
        model = keras.applications.ResNet50(weights=None)
        model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=False)
        start = time.monotonic()
        model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0)
        first = time.monotonic() - start
    plans = [p for p in tfswap.plan_summary() if "train" in p["graph"] or "iterator" in p["graph"]]
    print("OVERHEAD " + json.dumps({"first_step": first, "plans": plans}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--budget", default="1GiB")
    ap.add_argument("--plugin-only", action="store_true", help="skip the runs without the plugin")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--plugin", action="store_true")
    args = ap.parse_args()
    if args.child:
        return child(args)
    rows = {"shape": [], "tfswap": [], "with": [], "without": []}
    for _ in range(args.runs):
        for plugin in (True,) if args.plugin_only else (True, False):
            cmd = [sys.executable, __file__, "--child", "--batch", str(args.batch), "--budget", args.budget]
            if plugin:
                cmd.append("--plugin")
            p = subprocess.run(cmd, capture_output=True, text=True, check=True)
            sys.stderr.write("".join(l + "\n" for l in p.stderr.splitlines() if l.startswith("tfswap")))
            r = json.loads([l for l in p.stdout.splitlines() if l.startswith("OVERHEAD ")][-1][9:])
            if plugin:
                plan = r["plans"][-1]
                rows["shape"].append(plan["shape_seconds"])
                rows["tfswap"].append(plan["tfswap_seconds"])
                rows["with"].append(r["first_step"])
                print("plan: %s nodes, %s swap nodes, swapped %s; peak %s" % (
                    plan["nodes"], plan["swap_nodes"], plan["swapped"], plan["peak"]))
            else:
                rows["without"].append(r["first_step"])
    print("runs: %d, batch %d, budget %s" % (args.runs, args.batch, args.budget))
    for k, label in (("shape", "static shape inference (s)"), ("tfswap", "tfswap plan and rewrite (s)"),
                     ("with", "first step with the plugin (s)"), ("without", "first step without (s)")):
        v = rows[k]
        if not v:
            continue
        print("%-32s median %.2f  (min %.2f, max %.2f)" % (label, statistics.median(v), min(v), max(v)))


if __name__ == "__main__":
    main()
