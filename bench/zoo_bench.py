"""The zoo on v100-16gb (issue 12): for each graph of testmodels/zoo (user-style graphs built
through Keras and TF2), the peak tfswap predicts by its accounting and by Grappler's, the
VirtualCluster's peak, and rewrite's plans for budgets of 90%, 70% and 50% of tfswap's peak.

    .venv/bin/python bench/zoo_bench.py [--tfswap BIN] [--graphs gpt,rnn_v1] [--update-docs]

With --update-docs it writes docs/bench/zoo.json and the zoo section of docs/BENCHMARKS.md
(bench/report.py keeps that section when it regenerates the file). Every figure is simulated
for the v100-16gb profile (fetch train), except the VirtualCluster's, which is Grappler's
(tools/vcluster/vcluster.py). A few minutes on 2 cores.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.path.join(ROOT, "testmodels", "zoo")
DEVICE = "v100-16gb"
FRACTIONS = (0.9, 0.7, 0.5)
TITLE = "## The zoo: user-style graphs on `v100-16gb` (issue 12)"


def run(args):
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    return p, time.perf_counter() - t0


def batch_args(side):
    # unknown_batch's placeholder has a None batch: give the feeds' batch.
    return ["--batch", str(side["batch"])] if side["name"] == "unknown_batch" else []


def simulate(tfswap, path, extra, grappler=False):
    args = [tfswap, "simulate", path, "--device", DEVICE, "--fetch", "train", "--json", "-"] + extra
    if grappler:
        args.append("--grappler")
    p, _ = run(args)
    if p.returncode != 0:
        raise SystemExit("tfswap simulate %s: exit %d\n%s" % (path, p.returncode, p.stderr[-2000:]))
    dev = [d for d in json.loads(p.stdout)["result"]["devices"] if d["gpu"]][0]
    return dev, p.stderr


def vcluster(paths):
    """The VirtualCluster's GPU peak of each graph (None where it fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "prof.json")
        p, _ = run([TFSWAP, "simulate", paths[0], "--device", DEVICE, "--fetch", "train", "--dump-profile", prof])
        if p.returncode != 0:
            raise SystemExit("tfswap simulate --dump-profile: exit %d\n%s" % (p.returncode, p.stderr[-2000:]))
        out = {}
        for path in paths:
            p, _ = run([sys.executable, os.path.join(ROOT, "tools", "vcluster", "vcluster.py"), "--device-file", prof,
                        "--json", "--fetch", "train", path])
            if p.returncode != 0:
                out[path] = None
                continue
            devs = json.loads(p.stdout)["graphs"][0]["devices"]
            out[path] = max((d["peak_bytes"] for k, d in devs.items() if "GPU" in k), default=None)
        return out


def rewrite(tfswap, src, budget, extra):
    with tempfile.TemporaryDirectory() as tmp:
        rep = os.path.join(tmp, "r.json")
        p, secs = run([tfswap, "rewrite", src, "-o", os.path.join(tmp, "o.pb"), "--device", DEVICE, "--fetch", "train",
                       "--budget", str(budget), "--report", rep] + extra)
        rec = {"budget": budget, "seconds": round(secs, 1), "exit": p.returncode}
        if p.returncode == 0:
            with open(rep) as f:
                r = json.load(f)
            plan = r["plan"]
            dev = [d for d in plan["devices"] if d["name"].endswith("GPU:0")][0]
            rec.update(fits=bool(plan["fits"]), strategy=plan.get("plan_strategy", ""), overhead=plan["overhead"],
                       peak=dev["peak"], grappler_peak=dev.get("grappler_peak", 0),
                       swaps=len(r.get("swaps") or []), recomputes=len(r.get("recomputes") or []))
        else:
            rec["fits"] = False
            m = re.search(r"largest activations live then:\n((?:    .*\n){1,3})", p.stderr)
            rec["live"] = [" ".join(x.split()[:2]) for x in m.group(1).splitlines()] if m else []
            if not m:
                rec["error"] = p.stderr.strip().splitlines()[-1][:300] if p.stderr.strip() else ""
        return rec


def kib(n):
    return "%.1f" % (n / 1024.0) if n else "-"


def markdown(data):
    out = []
    out.append("Graphs of `testmodels/zoo` (see testmodels/README.md), built through `tf_keras`, Keras layers and "
               "TF2 at small batches. Simulated for `%s` (fetch `train`), except the VirtualCluster's peak "
               "(Grappler's `VirtualCluster` through tools/vcluster/vcluster.py); `unknown_batch` is read with "
               "`--batch %s`, `noshapes` with inferred shapes (the VirtualCluster reads both as written: it counts `unknown_batch`'s unknown batch as 1, so it cannot judge that graph). At these small batches variables and optimizer slots weigh much of the peak, so low budgets often cannot fit. Peaks in KiB. Plans: `tfswap rewrite --budget` at "
               "90/70/50%% of tfswap's peak (default fit accounting: tfswap's and Grappler's); a cell gives the "
               "overhead and the plan's peak, or why nothing fits. Generated by `bench/zoo_bench.py --update-docs` at %s.\n"
               % (DEVICE, data.get("unknown_batch", 4), data.get("commit", "?")))
    out.append("| graph | nodes | tfswap peak | Grappler-accounting peak | VirtualCluster peak | "
               + " | ".join("plan at %d%%" % (100 * f) for f in FRACTIONS) + " |")
    out.append("|---|---|---|---|---|" + "---|" * len(FRACTIONS))
    for g in data["graphs"]:
        cells = []
        for p in g["plans"]:
            if p.get("fits"):
                cells.append("%+.1f%%, %s KiB (%d swaps%s)" % (100 * p["overhead"], kib(p["peak"]), p["swaps"],
                                                            ", %d recomputes" % p["recomputes"] if p["recomputes"] else ""))
            elif p.get("exit") == 0:
                cells.append("no fit: %s KiB" % kib(p.get("peak")))
            elif p.get("live"):
                cells.append("no fit; live: " + ", ".join("`%s`" % x.split()[0] for x in p["live"][:2]))
            else:
                cells.append("no fit (%s)" % (p.get("error") or "exit %d" % p["exit"]))
        vc = g.get("vcluster_peak")
        out.append("| `%s` | %d | %s | %s | %s | %s |" % (
            g["name"], g["nodes"], kib(g["peak"]), kib(g["grappler_peak"]), kib(vc) if vc else "n/a",
            " | ".join(cells)))
    out.append("")
    return "\n".join(out)


def update_section(md, data):
    """Replaces (or appends) the zoo section of docs/BENCHMARKS.md."""
    with open(md) as f:
        text = f.read()
    new = TITLE + "\n\n" + markdown(data)
    i = text.find(TITLE + "\n")
    if i < 0:
        text = text.rstrip() + "\n\n" + new
    else:
        j = text.find("\n## ", i + len(TITLE))
        text = text[:i] + new + ("\n" + text[j + 1:] if j >= 0 else "")
    text = text.rstrip() + "\n"
    with open(md + ".tmp", "w") as f:
        f.write(text)
    os.replace(md + ".tmp", md)


def write_json(path, data):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


TFSWAP = None


def main():
    global TFSWAP
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tfswap", help="the tfswap binary (default: built from this checkout, CGO_ENABLED=0)")
    ap.add_argument("--graphs", help="comma-separated zoo graphs (default: every committed one)")
    ap.add_argument("--update-docs", action="store_true",
                    help="write docs/bench/zoo.json and the zoo section of docs/BENCHMARKS.md")
    args = ap.parse_args()
    tmpdir = tempfile.mkdtemp(prefix="zoo-bench-")
    TFSWAP = args.tfswap
    if not TFSWAP:
        TFSWAP = os.path.join(tmpdir, "tfswap")
        subprocess.run(["go", "build", "-o", TFSWAP, "./cmd/tfswap"], cwd=ROOT, check=True,
                       env=dict(os.environ, CGO_ENABLED="0"))
    sys.path.insert(0, os.path.join(ROOT, "testmodels"))
    import zoo  # testmodels/zoo.py
    names = args.graphs.split(",") if args.graphs else [n for n in zoo.MODELS if n not in zoo.BIG]
    paths = {n: os.path.join(ZOO, n + ".pb") for n in names}
    vc = vcluster([paths[n] for n in names])
    graphs = []
    for n in names:
        with open(os.path.join(ZOO, n + ".json")) as f:
            side = json.load(f)
        extra = batch_args(side)
        own, _ = simulate(TFSWAP, paths[n], extra)
        gr, _ = simulate(TFSWAP, paths[n], extra, grappler=True)
        rec = {"name": n, "nodes": side["node_count"], "batch": side["batch"], "peak": own["peak_bytes"],
               "grappler_peak": gr["peak_bytes"], "vcluster_peak": vc.get(paths[n]), "plans": []}
        for frac in FRACTIONS:
            rec["plans"].append(dict(rewrite(TFSWAP, paths[n], int(frac * own["peak_bytes"]), extra), fraction=frac))
        print(json.dumps(rec), file=sys.stderr, flush=True)
        graphs.append(rec)
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    data = {"device": DEVICE, "graphs": graphs, "commit": p.stdout.strip(), "unknown_batch": 4}
    print(markdown(data))
    if args.update_docs:
        write_json(os.path.join(ROOT, "docs", "bench", "zoo.json"), data)
        update_section(os.path.join(ROOT, "docs", "BENCHMARKS.md"), data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
