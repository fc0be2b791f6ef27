"""The zoo on v100-16gb (issue 12): for each graph of testmodels/zoo (user-style graphs built
through Keras and TF2), the peak tfswap predicts by its accounting and by Grappler's, the
VirtualCluster's peak, and rewrite's plans for budgets of 90%, 70% and 50% of tfswap's peak.

    .venv/bin/python bench/zoo_bench.py [--tfswap BIN] [--graphs gpt,rnn_v1] [--update-docs]
        [--go-log GO.log --bridge-log BRIDGE.log --tests-commit C]

With --update-docs it writes docs/bench/zoo.json and the zoo section of docs/BENCHMARKS.md
(bench/report.py keeps that section when it regenerates the file). Every figure is simulated
for the v100-16gb profile (fetch train), except the VirtualCluster's, which is Grappler's
(tools/vcluster/vcluster.py). A few minutes on 2 cores.

The section ends with issue 12's done-means audit: for every graph, whether the peak is within
10% of the VirtualCluster's (tfswap's accounting, as `inspect` prints it; Grappler's; and
tfswap with the VirtualCluster's own conventions, VC_CONVENTIONS, which says whether the two
simulators agree on what runs and what is live), whether every budget plan fits or ends in a
diagnosis naming what is live, and, from the logs of the tests given (--go-log: `go test -v
-tags tensorflow -run 'TestZooBitIdenticalUnderGrappler|TestGPTBitIdenticalUnderGrappler'
./tfrun`; --bridge-log: `pytest -rA tests/python/test_bridge_zoo.py -k zoo`, both measured on
CPU in the two-device emulation under TensorFlow's default Grappler configuration), whether the
LMS and planned rewrites trained bit-identically through the Go session and through the bridge.
A cell the logs do not cover says so.
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
# The VirtualCluster's own conventions: every accounting rule switched to Grappler's, value-dead
# nodes run as written (the VirtualCluster does not optimize the graph), both branches of every
# conditional run, function calls timed by their bytes, and a while loop's Merge runs again when its
# NextIteration ends, holding its Enter's tensor until then (docs/SIMULATOR.md).
VC_CONVENTIONS = ("grappler-times,tie-by-name,delayed-free,recv-ops,transient-recv,unknown-dims-as-one,no-workspace,"
                  "no-forwarding,no-aliasing,no-resident-variables,run-value-dead,both-branches,calls-by-bytes,no-accumulators,"
                  "merge-reruns")
# How close a peak must be to the VirtualCluster's (issue 12's done-means).
PEAK_TOLERANCE = 0.10
# How many of the tensors live at the VirtualCluster's peak the JSON keeps (the audit's evidence
# where the VirtualCluster cannot judge the runtime's peak).
VC_LIVE = 10
# What the VirtualCluster counts that a step does not hold, by graph feature: the audit's paragraph
# for each graph with that feature, with the tensors live at the VirtualCluster's peak (vcluster_live)
# as the evidence.
VC_EVIDENCE = (
    ("v1 cond",
     "What the VirtualCluster cannot judge on `%(name)s`: the runtime runs one branch of a v1 conditional, the "
     "VirtualCluster both, and each `Merge` once per input that arrives, so that the `Merge` of a "
     "gradient holds the zero gradient of one side beside the gradient of the other until the later "
     "arrives (docs/SIMULATOR.md, `vsMerge`). Its peak (%(vc)s KiB) is not a peak a step has: its largest "
     "tensors live then (KiB, tools/vcluster/vcluster.py) are %(live)s, among them tensors of both sides of "
     "a conditional, which no step holds at once. It judges tfswap's model of the graph with both branches run, "
     "the VC's conventions figure (%(conv)s KiB); tfswap's own accounting (`inspect`, %(peak)s KiB) and Grappler's "
     "(%(grappler)s KiB) run the larger branch only."),
    ("v1 loop",
     "What the VirtualCluster counts on `%(name)s` that a step does not hold: it runs a v1 while loop's body "
     "once and each loop `Merge` on its `Enter` and again when the loop's `NextIteration` ends, so that "
     "the `Enter`'s tensor and the `Merge`'s output stay live until the body has run (docs/SIMULATOR.md, "
     "merge-reruns); TensorFlow's executor forwards the `Enter`'s buffer through the `Merge` instead. "
     "Its largest tensors live at its peak (%(vc)s KiB; KiB, tools/vcluster/vcluster.py) are %(live)s. The VC's "
     "conventions figure (%(conv)s KiB) models that; tfswap's own accounting (`inspect`, %(peak)s KiB) runs the "
     "loop's `Merge` as the runtime does and counts every iteration's accumulator elements, and "
     "Grappler's (%(grappler)s KiB) frees the `Enter`'s tensor too."),
)
# Ops the VirtualCluster cannot judge a peak through, and why (docs/SIMULATOR.md).
CALL_OPS = {"PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf", "While", "StatelessWhile", "Case",
            "StatelessCase"}


def run(args):
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    return p, time.perf_counter() - t0


def batch_args(side):
    # unknown_batch's placeholder has a None batch: give the feeds' batch.
    return ["--batch", str(side["batch"])] if side["name"] == "unknown_batch" else []


def simulate(tfswap, path, extra, grappler=False, conventions=None):
    args = [tfswap, "simulate", path, "--device", DEVICE, "--fetch", "train", "--json", "-"] + extra
    if grappler:
        args.append("--grappler")
    if conventions:
        args += ["--conventions", conventions]
    p, _ = run(args)
    if p.returncode != 0:
        raise SystemExit("tfswap simulate %s: exit %d\n%s" % (path, p.returncode, p.stderr[-2000:]))
    dev = [d for d in json.loads(p.stdout)["result"]["devices"] if d["gpu"]][0]
    return dev, p.stderr


def vcluster(paths):
    """The VirtualCluster's GPU peak of each graph and the largest tensors live at it, as "name KiB"
    ((None, []) where it fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "prof.json")
        p, _ = run([TFSWAP, "simulate", paths[0], "--device", DEVICE, "--fetch", "train", "--dump-profile", prof])
        if p.returncode != 0:
            raise SystemExit("tfswap simulate --dump-profile: exit %d\n%s" % (p.returncode, p.stderr[-2000:]))
        out = {}
        for path in paths:
            p, _ = run([sys.executable, os.path.join(ROOT, "tools", "vcluster", "vcluster.py"), "--device-file", prof,
                        "--json", "--fetch", "train", "--top", str(VC_LIVE), path])
            if p.returncode != 0:
                out[path] = (None, [])
                continue
            devs = [d for k, d in json.loads(p.stdout)["graphs"][0]["devices"].items() if "GPU" in k]
            if not devs:
                out[path] = (None, [])
                continue
            d = max(devs, key=lambda d: d["peak_bytes"])
            out[path] = (d["peak_bytes"], ["%s %.1f" % (t["tensor"], t["bytes"] / 1024.0) for t in d["live"]])
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


def graph_features(path, batch_given):
    """What in the graph the VirtualCluster models otherwise than tfswap: v1 conditionals
    (Switch outside a while loop), v1 while loops (Enter), function calls and functional
    control flow (CALL_OPS), and an unknown batch that tfswap reads with --batch
    (batch_given) while the VirtualCluster counts it as 1."""
    from tensorflow.core.framework import graph_pb2  # noqa: E402 (the venv's TensorFlow)
    gd = graph_pb2.GraphDef()
    with open(path, "rb") as f:
        gd.ParseFromString(f.read())
    ops = {n.op for n in gd.node}
    feats = []
    if "Enter" in ops:
        feats.append("v1 loop")
    elif "Switch" in ops:
        feats.append("v1 cond")
    if ops & CALL_OPS:
        feats.append("calls")
    if batch_given:
        feats.append("unknown batch")
    return feats


def parse_go_log(text):
    """Results of TestZooBitIdenticalUnderGrappler and TestGPTBitIdenticalUnderGrappler from
    `go test -v` output: {graph: {"lms"|"plan90"|"plan70": "pass"|"fail"|"no plan"|"skip"}}."""
    out = {}
    cur = None
    for line in text.splitlines():
        # The log lines of a subtest follow its "=== RUN" line (streamed) or its "--- " line.
        m = re.match(r"=== RUN\s+TestZooBitIdenticalUnderGrappler/([^/\s]+)\s*$", line)
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"\s*--- (PASS|FAIL|SKIP): (TestZooBitIdenticalUnderGrappler|TestGPTBitIdenticalUnderGrappler)/([^/\s]+)(?:/(\S+))? ", line)
        if m:
            status, test, a, b = m.groups()
            graph, case = ("gpt", a) if test.startswith("TestGPT") else (a, b)
            if case is None:
                cur = graph
                out.setdefault(graph, {})
                if status == "SKIP":
                    out[graph]["skip"] = True
                continue
            out.setdefault(graph, {})[case] = status.lower()
            continue
        m = re.search(r"no plan at (\d+)% of", line)
        if m and cur:
            out.setdefault(cur, {})["plan" + m.group(1)] = "no plan"
    return out


def parse_bridge_log(text):
    """Results of test_bridge_zoo.py from `pytest -rA` output: {graph: {"lms": status,
    "plan": status}}, the planned test's graphs from its printed summary."""
    out = {}
    for m in re.finditer(r"^(PASSED|FAILED|XFAIL|XPASS|SKIPPED|ERROR) \S*test_zoo_bit_identical_through_bridge\[([^\]]+)\]", text, re.M):
        out.setdefault(m.group(2), {})["lms"] = m.group(1).lower()
    planned = re.search(r"^(PASSED|FAILED|ERROR) \S*test_zoo_planned_bit_identical_through_bridge", text, re.M)
    summary = re.search(r"planned and trained: \[(.*?)\]; no plan fits: \[(.*?)\]", text)
    if summary:
        names = lambda s: [x.strip().strip("'\"") for x in s.split(",") if x.strip()]  # noqa: E731
        for n in names(summary.group(1)):
            out.setdefault(n, {})["plan"] = planned.group(1).lower() if planned else "?"
        for n in names(summary.group(2)):
            out.setdefault(n, {})["plan"] = "no plan"
    elif planned:
        out.setdefault("*", {})["plan"] = planned.group(1).lower()
    return out


def rel(a, b):
    return (a - b) / float(b) if a and b else None


def peak_cell(g):
    """The done-means peak cell: tfswap's accounting (inspect's peak), Grappler's, and tfswap
    with the VirtualCluster's conventions, each against the VirtualCluster's peak."""
    vc = g.get("vcluster_peak")
    if not vc:
        return "n/a (no VirtualCluster peak)", None
    if "unknown batch" in g.get("features", []):
        return "n/a: the VirtualCluster counts the unknown batch as 1", None
    parts = []
    for key, label in (("peak", "inspect"), ("grappler_peak", "Grappler's"), ("vc_conv_peak", "VC's conventions")):
        d = rel(g.get(key), vc)
        if d is not None:
            parts.append("%s %+.0f%%" % (label, 100 * d))
    d = rel(g.get("vc_conv_peak"), vc)
    verdict = d is not None and abs(d) <= PEAK_TOLERANCE
    return ("holds" if verdict else "**fails**") + ": " + ", ".join(parts), verdict


def plans_cell(g):
    ok = all(p.get("fits") or p.get("live") for p in g["plans"])
    fits = sum(1 for p in g["plans"] if p.get("fits"))
    return ("holds" if ok else "**fails**") + ": %d of %d fit, the rest name what is live" % (fits, len(g["plans"]))


def status_word(s):
    return {"pass": "bit-identical", "passed": "bit-identical", "fail": "**differs/fails**",
            "failed": "**fails**", "xfail": "**xfail** (known)", "no plan": "no plan", "skip": "skipped",
            "error": "**error**", "xpass": "xpass"}.get(s, s or "not run")


def bitid_cells(g, go, bridge):
    name = g["name"]
    r = go.get(name, {})
    go_lms = status_word(r.get("lms")) if go else "not run"
    go_plans = ", ".join("%s %s" % (c, status_word(r.get(c))) for c in ("plan90", "plan70")) if go else "not run"
    b = bridge.get(name, {})
    br_lms = status_word(b.get("lms")) if bridge else "not run"
    br_plan = status_word(b.get("plan") or bridge.get("*", {}).get("plan")) if bridge else "not run"
    return [go_lms, go_plans, br_lms, br_plan]


def audit_markdown(data):
    go, bridge = data.get("go_results") or {}, data.get("bridge_results") or {}
    out = ["### Done-means audit (issue 12)", ""]
    out.append("Peak: against the VirtualCluster's, tfswap's accounting (the peak `inspect` prints), Grappler's "
               "accounting (`simulate --grappler`) and tfswap with the VirtualCluster's own conventions "
               "(`--conventions %s`: value-dead nodes run, both branches of a conditional, calls timed by their "
               "bytes, one element per loop accumulator push, a loop's Merge run again when its NextIteration "
               "ends); the cell holds when the last is within %d%%, that is when the two simulators agree on what "
               "runs and what is live. The other two differ by design where variables and optimizer slots weigh "
               "much (tfswap keeps them resident, the VirtualCluster does not count them), where value-dead nodes, "
               "conditionals or function bodies hold memory (docs/SIMULATOR.md). Plans: the 90/70/50%% budgets "
               "above. Bit-identity, measured on CPU in the two-device emulation under TensorFlow's default Grappler "
               "configuration, 3 steps, every variable: Go session from `go test -v -tags tensorflow -run "
               "'TestZooBitIdenticalUnderGrappler|TestGPTBitIdenticalUnderGrappler' ./tfrun` (LMS at threshold 4; "
               "auto plans at 90%% and 70%% of the peak at 64 times the batch, where one fits), bridge from "
               "`pytest -rA tests/python/test_bridge_zoo.py -k zoo` (LMS every sized tensor; auto at 90%% at 64 times "
               "the batch); test logs at %s." % (VC_CONVENTIONS, int(100 * PEAK_TOLERANCE),
                                                  data.get("tests_commit") or "?"))
    out.append("")
    out.append("| graph | has | peak within 10% of the VirtualCluster's | plans at 90/70/50% | Go session: LMS | "
               "Go session: plans | bridge: LMS | bridge: plan |")
    out.append("|---|---|---|---|---|---|---|---|")
    for g in data["graphs"]:
        cells = [peak_cell(g)[0], plans_cell(g)] + bitid_cells(g, go, bridge)
        out.append("| `%s` | %s | %s |" % (g["name"], ", ".join(g.get("features") or []) or "-", " | ".join(cells)))
    out.append("")
    for feature, text in VC_EVIDENCE:
        for g in data["graphs"]:
            if feature not in (g.get("features") or []) or not g.get("vcluster_live"):
                continue
            out.append(text % dict(
                name=g["name"], vc=kib(g["vcluster_peak"]),
                live=", ".join("`%s` %s" % tuple(x.rsplit(" ", 1)) for x in g["vcluster_live"]),
                conv=kib(g.get("vc_conv_peak")), peak=kib(g["peak"]), grappler=kib(g["grappler_peak"])))
            out.append("")
    return "\n".join(out)


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
    if any("vc_conv_peak" in g for g in data["graphs"]):
        out.append(audit_markdown(data))
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
    ap.add_argument("--go-log", help="go test -v output of tfrun's zoo bit-identity tests, for the audit")
    ap.add_argument("--bridge-log", help="pytest -rA output of tests/python/test_bridge_zoo.py, for the audit")
    ap.add_argument("--tests-commit", help="the commit the test logs were made at (default: this one)")
    ap.add_argument("--from-json", metavar="FILE",
                    help="take the simulated figures from FILE (a docs/bench/zoo.json written earlier) instead of "
                         "running them again, and add the test logs' results to its audit")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
        return finish(args, data)
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
        vcc, _ = simulate(TFSWAP, paths[n], extra, conventions=VC_CONVENTIONS)
        rec = {"name": n, "nodes": side["node_count"], "batch": side["batch"], "peak": own["peak_bytes"],
               "resident": own.get("resident_bytes", 0), "grappler_peak": gr["peak_bytes"],
               "vc_conv_peak": vcc["peak_bytes"], "vcluster_peak": vc[paths[n]][0],
               "vcluster_live": vc[paths[n]][1],
               "features": graph_features(paths[n], bool(extra)), "plans": []}
        for frac in FRACTIONS:
            rec["plans"].append(dict(rewrite(TFSWAP, paths[n], int(frac * own["peak_bytes"]), extra), fraction=frac))
        print(json.dumps(rec), file=sys.stderr, flush=True)
        graphs.append(rec)
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    data = {"device": DEVICE, "graphs": graphs, "commit": p.stdout.strip(), "unknown_batch": 4}
    return finish(args, data)


def finish(args, data):
    """Adds the test logs' results to data, prints its Markdown and, with --update-docs, writes
    docs/bench/zoo.json and the zoo section of docs/BENCHMARKS.md."""
    if args.from_json:
        # The features as this version of graph_features finds them.
        for g in data["graphs"]:
            g["features"] = graph_features(os.path.join(ZOO, g["name"] + ".pb"), g["name"] == "unknown_batch")
    if args.go_log:
        with open(args.go_log) as f:
            data["go_results"] = parse_go_log(f.read())
    if args.bridge_log:
        with open(args.bridge_log) as f:
            data["bridge_results"] = parse_bridge_log(f.read())
    if args.go_log or args.bridge_log:
        data["tests_commit"] = args.tests_commit or data["commit"]
    print(markdown(data))
    if args.update_docs:
        write_json(os.path.join(ROOT, "docs", "bench", "zoo.json"), data)
        update_section(os.path.join(ROOT, "docs", "BENCHMARKS.md"), data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
