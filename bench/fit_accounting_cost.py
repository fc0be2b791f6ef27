#!/usr/bin/env python3
"""What requiring every accounting costs in largest batch (issue 19): for each benchmark
model on one device profile, the largest batch `tfswap rewrite --strategy auto` plans
within an overhead limit under `--fit-accounting both` (tfswap's model of the runtime and
the VirtualCluster's trace read to the nanosecond: the earlier default) and under
`--fit-accounting all` (the microsecond figure, DeterminePeakMemoryUsage's, too: the
default).

    .venv/bin/python bench/fit_accounting_cost.py [--models resnet50,vgg16] [--limit 0.5]

Each model's graph is generated at batch 2 (testmodels/large.py) and planned with
`--batch-scale S` (batch 2S; exact for the CNNs, within about 2% for the Transformer, see
docs/SIMULATOR.md); the largest S whose plan exists with a simulated overhead within the
limit is found by bisection between the model's bounds (planning is not strictly monotone
in the batch, so the result is a largest batch found, not a proof that no larger one
exists). Simulated for the profile; the rewrites run with GOMAXPROCS=1. Results go to
out/bench/fit_accounting_cost.json and a Markdown table to stdout.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Bisection bounds of the batch scale per model (batch = 2 x scale): from below B0/2 to
# above the largest batch the full benchmark found at any overhead.
BOUNDS = {"resnet50": (47, 600), "vgg16": (60, 300), "inception_v3": (42, 500), "unet": (17, 120),
          "transformer": (14, 400), "lstm_lm": (480, 2000)}
ACCOUNTINGS = ["both", "all"]


def plan(tfswap, graph, device, scale, acc):
    with tempfile.TemporaryDirectory() as d:
        rep = os.path.join(d, "r.json")
        p = subprocess.run([tfswap, "rewrite", graph, "-o", os.path.join(d, "o.pb"), "--device", device,
                            "--fetch", "train", "--batch-scale", str(scale), "--fit-accounting", acc,
                            "--strategy", "auto", "--report", rep],
                           capture_output=True, text=True, env=dict(os.environ, GOMAXPROCS="1"))
        if p.returncode == 1:
            return None
        if p.returncode != 0:
            raise SystemExit("tfswap rewrite %s: %s" % (graph, p.stderr.strip()[-2000:]))
        r = json.load(open(rep))["plan"]
        dv = r["devices"][0]
        return {"overhead": r["overhead"], "peak": dv["peak"], "grappler_peak": dv.get("grappler_peak"),
                "grappler_peak_us": dv.get("grappler_peak_us"), "budget": dv["budget"]}


def largest(tfswap, graph, device, acc, lo, hi, limit):
    def ok(r):
        return r is not None and r["overhead"] <= limit
    r = plan(tfswap, graph, device, lo, acc)
    if not ok(r):
        return None, r
    best = r
    while hi - lo > 1:
        mid = (lo + hi) // 2
        r = plan(tfswap, graph, device, mid, acc)
        if ok(r):
            lo, best = mid, r
        else:
            hi = mid
    return lo, best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(BOUNDS))
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--limit", type=float, default=0.5, help="largest simulated overhead (0.5 = 50%%)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(args.out, "fit_accounting_cost")
    os.makedirs(work, exist_ok=True)
    tfswap = os.path.join(work, "tfswap")
    subprocess.run(["go", "build", "-o", tfswap, "./cmd/tfswap"], cwd=ROOT, check=True,
                   env=dict(os.environ, CGO_ENABLED="0"))
    py = os.path.join(ROOT, ".venv", "bin", "python")
    results = {"device": args.device, "limit": args.limit, "models": {}}
    t0 = time.time()
    for model in args.models.split(","):
        graph = os.path.join(work, model + "_b2.pb")
        if not os.path.exists(graph):
            subprocess.run([py, os.path.join(ROOT, "testmodels", "large.py"), "--model", model, "--batch", "2",
                            "--out", graph], check=True, capture_output=True)
        lo, hi = BOUNDS[model]
        res = {}
        for acc in ACCOUNTINGS:
            s, r = largest(tfswap, graph, args.device, acc, lo, hi, args.limit)
            res[acc] = dict(batch=2 * s if s else None, **(r or {}))
            print("%s %s: batch %s" % (model, acc, res[acc]["batch"]), file=sys.stderr, flush=True)
        results["models"][model] = res
    results["seconds"] = round(time.time() - t0)
    with open(os.path.join(args.out, "fit_accounting_cost.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("| model | largest batch, `both` | largest batch, `all` | change | `both`'s plan there by DeterminePeakMemoryUsage |")
    print("|---|---:|---:|---:|---:|")
    for model, res in results["models"].items():
        b, a = res["both"], res["all"]
        change = "%+.0f%%" % (100.0 * (a["batch"] / b["batch"] - 1)) if a["batch"] and b["batch"] else "-"
        over = "%+.1f%% of the budget" % (100.0 * (b["grappler_peak_us"] / b["budget"] - 1)) if b.get("budget") else "-"
        print("| %s | %s | %s | %s | %s |" % (model, b["batch"], a["batch"], change, over))
    print("\n(%s, auto, simulated overhead <= %.0f%%; bench/fit_accounting_cost.py, %d s)"
          % (args.device, 100 * args.limit, results["seconds"]))


if __name__ == "__main__":
    main()
