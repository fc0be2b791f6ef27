#!/usr/bin/env python3
"""The ResNet-50 ceiling on v100-16gb (issue 14 item 5): how far past the largest batch that
trains without swapping (B0) `tfswap rewrite` finds a plan, at what simulated overhead, and
what bounds the batch.

    .venv/bin/python bench/ceiling.py [--tfswap BIN] [--cache out/ceiling] [--b0 185]
                                      [--multiples 1,2,4,5,6,8,10] [--json out.json]
                                      [--device v100-16gb] [--compare other.json]
                                      [--from-json run.json] [--merge saved.json] [--update-docs]

The documented run: `--device v100-16gb-nvlink --multiples 4,6,8 --json nvlink.json` (the
anchor paper's class of machine), then `--compare nvlink.json --update-docs`; `--from-json`
renders a saved run instead of running again. `--merge docs/bench/ceiling.json --multiples 8` runs
only the rungs given and puts their rows in place of those of a saved run (each row keeps the commit it
was planned at; the section's header names both).

It builds tfswap from this checkout without cgo, checks B0 on the default budget of
`v100-16gb` (14.97 GiB: the unswapped step at B0 fits by tfswap's accounting and by both of Grappler's,
as `rewrite` judges by default, and at B0+1 it does not), generates ResNet-50
(testmodels/large.py) at each multiple of B0 and plans it with `tfswap rewrite --fetch train
--device v100-16gb` twice: fitting by tfswap's model of the runtime alone
(`--fit-accounting tfswap`) and by every accounting (`all`, the default, which adds the
VirtualCluster's figures). It prints a Markdown table: per batch and accounting, whether a plan
fits, its peaks, simulated overhead, bytes over the host link and the rewrite's wall time; when
nothing fits, the lowest peak any plan reached (from the no-fit message) and, by every
accounting, the least excess over the budget among the plans judged by it (Grappler's figures
are computed only for plans that fit tfswap's accounting, so its least excess is of other plans
than the lowest peak's). Where a plan fits by
tfswap's accounting but not by the VirtualCluster's, it lists the buffers live at the
VirtualCluster's peaks (`tfswap simulate --grappler` of the plan's rewrite).

What bounds the batch, in three figures:

* the op bound: no plan can run an op without its data inputs and outputs on the device at
  once (beside the variables, which stay resident). For every op of the training step on the
  GPU it adds the bytes of its distinct activation inputs and of its outputs, less one output
  where TensorFlow's kernel may write it into an input's buffer (element-wise ops, AddN,
  FusedBatchNorm's y over x; not FusedBatchNormGrad, whose kernel always allocates x_backprop).
  Activations scale with the batch, so the largest batch whose largest op fits the budget is
  computed from the graph at B0;
* the plans themselves: the largest ladder batch with a fitting plan, per accounting;
* the host link, for the target: from the unswapped 8x step's simulated peak, peak time and step
  time and the profile's link rates, how much of the excess over the budget a plan within +82%
  may swap at most (bench/report.py's swap_bound), so how much it must recompute at least.

Every figure is simulated for the profile v100-16gb (12.8 GB/s each way over PCIe 3.0);
the rewrite times are measured on this machine's CPU. Not part of `make test` (about 10
minutes on two loaded cores).
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
DEVICE = "v100-16gb"
ACCOUNTINGS = ["tfswap", "all"]
# Ops whose kernels may write their output into an input's buffer
# (forward_input_or_allocate_output), as cost/ops.go's elementwiseOps marks them, plus
# FusedBatchNorm's y over x (tensorflow/core/kernels/fused_batch_norm_op.cc).
FORWARDING = {
    "Add", "AddV2", "Sub", "Mul", "Neg", "Abs", "Maximum", "Minimum", "Relu", "Relu6", "ReluGrad",
    "Relu6Grad", "Square", "SquaredDifference", "Sign", "Floor", "Ceil", "Round", "Rint", "LeakyRelu",
    "LeakyReluGrad", "Elu", "EluGrad", "Selu", "SeluGrad", "Softsign", "SoftsignGrad", "RealDiv", "Div",
    "DivNoNan", "FloorDiv", "FloorMod", "TruncateDiv", "Sqrt", "Rsqrt", "SqrtGrad", "RsqrtGrad",
    "Reciprocal", "ReciprocalGrad", "Inv", "Exp", "Expm1", "Log", "Log1p", "Tanh", "Sigmoid", "TanhGrad",
    "SigmoidGrad", "Softplus", "SoftplusGrad", "Erf", "Erfc", "Sin", "Cos", "Pow", "BiasAdd",
    "ClipByValue", "Gelu", "GeluGrad", "Xlogy", "Xdivy", "MulNoNan", "AddN",
    "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
}
RESIDENT = {"VarHandleOp", "ReadVariableOp", "VariableV2", "Variable", "Const", "HostConst"}
ALIASES = {"Identity", "Reshape", "Squeeze", "ExpandDims", "Snapshot", "StopGradient"}


# GATE_KIND is the gate kind every planned rewrite of the ladder asks for (--gate-kind).
GATE_KIND = "identity"


def set_gate_kind(kind):
    """Plans with gates of kind ("identity" or "reduce") instead of GATE_KIND."""
    global GATE_KIND
    GATE_KIND = kind


def set_device(name):
    """Plans and simulates for the device profile name instead of DEVICE."""
    global DEVICE
    DEVICE = name


def gib(n):
    return "%.2f" % (n / float(1 << 30))


def run(args):
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    return p, time.perf_counter() - t0


def graph(cache, batch):
    path = os.path.join(cache, "resnet50_b%d.pb" % batch)
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "testmodels", "large.py"), "--model", "resnet50",
                        "--batch", str(batch), "--out", path], check=True, cwd=ROOT, capture_output=True)
    return path


def simulate(tfswap, path, grappler=False):
    args = [tfswap, "simulate", path, "--device", DEVICE, "--fetch", "train", "--json", "-"]
    if grappler:
        args.append("--grappler")
    p, _ = run(args)
    if p.returncode != 0:
        raise SystemExit("tfswap simulate %s: exit %d\n%s" % (path, p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout)["result"]["devices"][0]


def unswapped(tfswap, path):
    """The unswapped step by tfswap's accounting: its peak bytes, when it peaks and how long it
    takes (ns)."""
    p, _ = run([tfswap, "simulate", path, "--device", DEVICE, "--fetch", "train", "--json", "-"])
    if p.returncode != 0:
        raise SystemExit("tfswap simulate %s: exit %d\n%s" % (path, p.returncode, p.stderr[-2000:]))
    res = json.loads(p.stdout)["result"]
    d = res["devices"][0]
    return {"peak": d["peak_bytes"], "peak_time_ns": d["peak_time_ns"], "step_ns": res["step_time_ns"]}


def link_rates(tfswap):
    """The device profile's host link, bytes per second device-to-host and host-to-device."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "profile.json")
        p, _ = run([tfswap, "simulate", "--device", DEVICE, "--dump-profile", path])
        if p.returncode != 0:
            raise SystemExit("tfswap simulate --dump-profile: exit %d\n%s" % (p.returncode, p.stderr[-2000:]))
        with open(path) as f:
            prof = json.load(f)
    return prof["d2h_bytes_per_s"], prof["h2d_bytes_per_s"]


def swappable(base, budget, d2h, h2d, target):
    """The most bytes of the excess over budget at the unswapped peak that a plan within
    (1 + target) x the unswapped step may move over the host link, and the excess.

    The bound is bench/report.py's swap_bound: E bytes absent at the peak crossed the link
    device-to-host before it and come back after it, so the step takes at least
    max(t_peak, E / d2h) + max(step - t_peak, E / h2d); the rest of the excess must be
    recomputed, whose own time this ignores. None when the step itself is unknown."""
    if not base or not base.get("step_ns"):
        return None
    excess = max(0, base["peak"] - budget)
    tp, step = base["peak_time_ns"] / 1e9, base["step_ns"] / 1e9
    limit = (1 + target) * step

    def least(e):
        return max(tp, e / d2h) + max(step - tp, e / h2d)

    lo, hi = 0.0, float(excess)
    if least(hi) <= limit:
        return excess, excess
    for _ in range(100):
        mid = (lo + hi) / 2
        if least(mid) <= limit:
            lo = mid
        else:
            hi = mid
    return int(lo), excess


def default_budget(tfswap, path):
    """The budget rewrite plans for by default, from a rewrite's report of a graph that fits."""
    with tempfile.TemporaryDirectory() as tmp:
        rep = os.path.join(tmp, "r.json")
        p, _ = run([tfswap, "rewrite", path, "-o", os.path.join(tmp, "o.pb"), "--device", DEVICE, "--fetch", "train",
                    "--report", rep])
        if p.returncode != 0:
            raise SystemExit("tfswap rewrite %s: exit %d\n%s" % (path, p.returncode, p.stderr[-2000:]))
        with open(rep) as f:
            return json.load(f)["plan"]["budget"]


def op_bound(path):
    """The largest bytes any op of the training step needs on the device at once (its
    activation inputs and its outputs, less a forwarded output), and that op."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from tensorflow.core.framework import graph_pb2, types_pb2  # noqa: E402

    g = graph_pb2.GraphDef()
    with open(path, "rb") as f:
        g.ParseFromString(f.read())
    nodes = {n.name: n for n in g.node}
    size = {types_pb2.DT_FLOAT: 4, types_pb2.DT_HALF: 2, types_pb2.DT_INT32: 4, types_pb2.DT_INT64: 8,
            types_pb2.DT_DOUBLE: 8, types_pb2.DT_BOOL: 1}

    def out_bytes(n, port):
        shapes = n.attr["_output_shapes"].list.shape
        if port >= len(shapes) or shapes[port].unknown_rank:
            return 0
        elems = 1
        for d in shapes[port].dim:
            if d.size < 0:
                return 0
            elems *= d.size
        dt = None
        for key in ("T", "dtype", "out_type"):
            if key in n.attr and n.attr[key].type:
                dt = n.attr[key].type
                break
        if n.op.startswith("FusedBatchNorm") and port > 0:
            dt = n.attr["U"].type if "U" in n.attr else types_pb2.DT_FLOAT
        return elems * size.get(dt, 4)

    def source(name):
        """The node whose buffer a tensor is (through aliases)."""
        n, port = parse(name)
        while n.op in ALIASES and n.input:
            n, port = parse(n.input[0])
        return n, port

    def parse(inp):
        name, _, port = inp.lstrip("^").partition(":")
        return nodes[name], int(port or 0)

    # The fan-in of train.
    keep, stack = set(), ["train"]
    while stack:
        x = stack.pop()
        if x in keep:
            continue
        keep.add(x)
        for i in nodes[x].input:
            stack.append(i.lstrip("^").partition(":")[0])
    best, best_op = 0, ""
    for name in sorted(keep):  # sorted: the first of equal ops by name, the same every run
        n = nodes[name]
        if n.op in RESIDENT or n.op in ALIASES or n.op in ("NoOp", "Placeholder"):
            continue
        ins = {}
        for i in n.input:
            if i.startswith("^"):
                continue
            src, port = source(i)
            if src.op in RESIDENT:
                continue
            ins[(src.name, port)] = out_bytes(src, port)
        outs = [out_bytes(n, p) for p in range(len(n.attr["_output_shapes"].list.shape))]
        total = sum(ins.values()) + sum(outs)
        if n.op in FORWARDING and outs and outs[0] in ins.values():
            total -= outs[0]
        if total > best:
            best, best_op = total, "%s (%s)" % (n.name, n.op)
    return best, best_op


def grappler_live(tfswap, path):
    """What the VirtualCluster's accounting holds at its peaks of the planned graph: for the
    nanosecond and the microsecond figure, the peak, when, and the largest buffers live then
    (name, op, bytes)."""
    g = simulate(tfswap, path, True)
    out = {}
    for key, peak, at, live in (("ns", "peak_bytes", "peak_time_ns", "live"),
                                ("us", "peak_bytes_us", "peak_time_us_ns", "live_us")):
        bufs = sorted(g.get(live) or [], key=lambda x: -x["Bytes"])
        out[key] = {"peak": g.get(peak, 0), "at_ns": g.get(at, 0),
                    "live": [[x["Name"], x["Op"], x["Bytes"]] for x in bufs[:10]]}
    return out


def live_entry(line):
    """One line of the no-fit message's largest activations ("name  3.32 GiB  Op") as
    "name 3.32 Op", the size in GiB."""
    f = line.split()
    if len(f) < 3:
        return " ".join(f)
    scale = {"B": 2**-30, "KiB": 2**-20, "MiB": 2**-10, "GiB": 1.0, "TiB": 1024.0}.get(f[2])
    size = "%.2f" % (float(f[1]) * scale) if scale else f[1]
    return " ".join([f[0], size] + f[3:4])


def lowest_by_accounting(stderr):
    """The no-fit message's per-accounting line as {accounting: [excess GiB, plans]}, the
    excess negative where a plan fits by that accounting and None where no plan was judged by
    it; {} when the message has no such line (tfswap's accounting alone)."""
    m = re.search(r"lowest excess over the budget by each accounting[^\n]*?required\): ([^\n]*)", stderr)
    if not m:
        return {}
    scale = {"B": 2**-30, "KiB": 2**-20, "MiB": 2**-10, "GiB": 1.0, "TiB": 1024.0}
    out = {}
    for part in m.group(1).split("; "):
        e = re.match(r"([a-z-]+): ([0-9.]+) ([KMGT]?i?B) (over|under) \((\d+) plans?\)", part)
        if e:
            gib = float(e.group(2)) * scale[e.group(3)]
            out[e.group(1)] = [round(gib if e.group(4) == "over" else -gib, 4), int(e.group(5))]
        elif part.endswith(": no plan judged by it"):
            out[part.split(":")[0]] = None
    return out


def excess_text(by, sep=", "):
    """The per-accounting excess of a row (lowest_excess_gib), e.g. "tfswap -0.49, VC ns +7.20"."""
    names = {"tfswap": "tfswap", "grappler-ns": "VC ns", "grappler-us": "VC us"}
    return sep.join("%s %s" % (names.get(a, a), "%+.2f" % v[0] if v else "not judged") for a, v in by.items())


def rewrite(tfswap, src, acc):
    with tempfile.TemporaryDirectory() as tmp:
        rep = os.path.join(tmp, "r.json")
        p, secs = run([tfswap, "rewrite", src, "-o", os.path.join(tmp, "o.pb"), "--device", DEVICE, "--fetch", "train",
                       "--fit-accounting", acc, "--report", rep, "--gate-kind", GATE_KIND])
        rec = {"accounting": acc, "seconds": round(secs, 1), "exit": p.returncode, "gate_kind": GATE_KIND}
        if p.returncode == 0:
            with open(rep) as f:
                plan = json.load(f)["plan"]
            dev = plan["devices"][0]
            rec.update(fits=bool(plan["fits"]), strategy=plan.get("plan_strategy", ""), overhead=plan["overhead"],
                       peak=dev["peak"], grappler_peak=dev.get("grappler_peak", 0),
                       grappler_peak_us=dev.get("grappler_peak_us", 0), budget=dev["budget"],
                       to_host=plan.get("bytes_to_host", 0), from_host=plan.get("bytes_to_device", 0))
            if rec["fits"] and max(rec["grappler_peak"], rec["grappler_peak_us"]) > rec["budget"]:
                rec["grappler_live"] = grappler_live(tfswap, os.path.join(tmp, "o.pb"))
        else:
            rec["fits"] = False
            # The no-fit message: the lowest plan's peak by tfswap's accounting, or, when
            # Grappler's is the one over, its three figures; then when the peak falls and the
            # largest activations live then (by the accounting that is over).
            m = re.search(r"the smallest peak any plan reached is ([0-9.]+) GiB at ([0-9.]+ ?[a-zµ]*s) into", p.stderr)
            g = re.search(r"the best plan's peak is ([0-9.]+) GiB by tfswap's model of the runtime but ([0-9.]+) GiB "
                          r"by Grappler's VirtualCluster \(([0-9.]+) GiB from its trace's microseconds.*?\), at "
                          r"([0-9.]+ ?[a-zµ]*s) into", p.stderr)
            if m:
                rec.update(lowest_peak_gib=float(m.group(1)), lowest_over="tfswap", lowest_at=m.group(2))
            elif g:
                rec.update(lowest_peak_gib=max(float(g.group(2)), float(g.group(3))), lowest_over="VirtualCluster",
                           lowest_tfswap_gib=float(g.group(1)), lowest_vc_gib=[float(g.group(2)), float(g.group(3))],
                           lowest_at=g.group(4))
            else:
                rec["lowest_peak_gib"] = None
            # How far each accounting alone is from fitting: the smallest excess over the budget by
            # its figure among the plans judged by it (Grappler's are judged only where tfswap's
            # fits), which may be other plans than the lowest one above.
            by = lowest_by_accounting(p.stderr)
            if by:
                rec["lowest_excess_gib"] = by
            m = re.search(r"largest activations live then:\n((?:    .*\n?){1,3})", p.stderr)
            # "name size" (GiB, as the rows of earlier runs have it) and, when the message gives
            # it, the op.
            rec["live"] = [live_entry(x) for x in m.group(1).splitlines() if x.strip()] if m else []
            if not m and "no plan fits" not in p.stderr:
                rec["error"] = p.stderr[-1500:]
        return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tfswap", help="the tfswap binary (default: built from this checkout, CGO_ENABLED=0)")
    ap.add_argument("--cache", default=os.path.join(ROOT, "out", "ceiling"), help="where the generated graphs are kept")
    ap.add_argument("--b0", type=int, default=185, help="the largest batch without swapping on v100-16gb (checked)")
    ap.add_argument("--multiples", default="1,2,4,5,6,8,10", help="the ladder, as multiples of B0")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    ap.add_argument("--compare", help="a --json file of a run on another device (v100-16gb-nvlink), summarised in the notes")
    ap.add_argument("--from-json", help="render (and with --update-docs write) a saved --json run instead of running")
    ap.add_argument("--merge", help="a saved --json run whose rows for the rungs run now are replaced (the others "
                    "are kept, with the commit they were planned at)")
    ap.add_argument("--device", default=DEVICE,
                    help="the device profile (default %s; --update-docs only with it)" % DEVICE)
    ap.add_argument("--gate-kind", default="identity", choices=["identity", "reduce"],
                    help="the gates the planned rewrites build (tfswap rewrite --gate-kind; default %(default)s)")
    ap.add_argument("--update-docs", action="store_true",
                    help="write docs/bench/ceiling.json and the ceiling section of docs/BENCHMARKS.md")
    args = ap.parse_args()
    if args.device != DEVICE and args.update_docs:
        raise SystemExit("--update-docs writes the %s section; run other devices with --json" % DEVICE)
    set_device(args.device)
    set_gate_kind(args.gate_kind)
    compare = None
    if args.compare:
        with open(args.compare) as f:
            compare = json.load(f)
    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
        if compare is not None:
            data["compare"] = compare  # else the saved run's own comparison, if any
        print(markdown(data))
        if args.update_docs:
            write_json(os.path.join(ROOT, "docs", "bench", "ceiling.json"), data)
            update_section(os.path.join(ROOT, "docs", "BENCHMARKS.md"), data)
        return 0
    os.makedirs(args.cache, exist_ok=True)
    tfswap = args.tfswap
    if not tfswap:
        tfswap = os.path.join(args.cache, "tfswap")
        subprocess.run(["go", "build", "-o", tfswap, "./cmd/tfswap"], cwd=ROOT, check=True,
                       env=dict(os.environ, CGO_ENABLED="0"))
    b0 = args.b0
    src0 = graph(args.cache, b0)
    budget = default_budget(tfswap, src0)
    # B0 as `rewrite` judges a fit by default (--fit-accounting all): tfswap's peak and the
    # VirtualCluster's, read to the nanosecond and to the microsecond.
    peaks = []
    for b in (b0, b0 + 1):
        t, g = simulate(tfswap, graph(args.cache, b)), simulate(tfswap, graph(args.cache, b), True)
        peaks.append(max(t["peak_bytes"], g["peak_bytes"], g.get("peak_bytes_us", 0)))
    b0_ok = peaks[0] <= budget < peaks[1]
    resident = simulate(tfswap, src0)["resident_bytes"]
    opmax, opname = op_bound(src0)
    bound = int(b0 * (budget - resident) / opmax)
    rows = []
    bases = {}
    for m in [float(x) for x in args.multiples.split(",")]:
        batch = int(round(m * b0))
        src = graph(args.cache, batch)
        bases[str(batch)] = unswapped(tfswap, src)
        for acc in ACCOUNTINGS:
            rec = rewrite(tfswap, src, acc)
            rec.update(multiple=m, batch=batch)
            rows.append(rec)
            print("batch %d (%gx) %s: %s" % (batch, m, acc, json.dumps(rec)), file=sys.stderr, flush=True)

    data = {"device": DEVICE, "b0": b0, "b0_checked": b0_ok, "budget": budget, "resident": resident, "op_bound_bytes": opmax,
            "op_bound_op": opname, "bound_batch": bound, "rows": rows, "commit": git_commit(), "compare": compare,
            "unswapped": bases, "link": list(link_rates(tfswap))}
    if args.merge:
        with open(args.merge) as f:
            data = merge(json.load(f), data)
    print(markdown(data))
    if args.json:
        write_json(args.json, data)
    if args.update_docs:
        write_json(os.path.join(ROOT, "docs", "bench", "ceiling.json"), data)
        update_section(os.path.join(ROOT, "docs", "BENCHMARKS.md"), data)
    return 0


def merge(saved, new):
    """The saved run with the rows of the rungs in new replaced by new's: every row carries the
    commit it was planned at ("commit"; the saved run's for its own rows), the rows are ordered
    by batch and accounting, and the run-wide figures (budget, B0 check, op bound, link) are
    new's, which recomputed them; the comparison run is the saved one unless new has one."""
    if saved.get("device") != new["device"] or saved.get("b0") != new["b0"]:
        raise SystemExit("--merge: the saved run is for %s B0 %s, not %s B0 %s" % (
            saved.get("device"), saved.get("b0"), new["device"], new["b0"]))
    order = {a: i for i, a in enumerate(ACCOUNTINGS)}
    run = {(r["batch"], r["accounting"]) for r in new["rows"]}
    rows = [dict(r, commit=r.get("commit", saved.get("commit", "?"))) for r in saved["rows"]
            if (r["batch"], r["accounting"]) not in run]
    rows += [dict(r, commit=new["commit"]) for r in new["rows"]]
    rows.sort(key=lambda r: (r["batch"], order.get(r["accounting"], len(order))))
    out = dict(new, rows=rows)
    out["unswapped"] = dict(saved.get("unswapped", {}), **new.get("unswapped", {}))
    out["commit"] = new["commit"]
    out["compare"] = new.get("compare") or saved.get("compare")
    return out


def row_commits(data):
    """The commits the rows were planned at, the run's own first, as the header names them."""
    seen = []
    for r in data["rows"]:
        c = r.get("commit", data.get("commit", "?"))
        if c not in seen:
            seen.append(c)
    return seen


def write_json(path, data):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def git_commit():
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return p.stdout.strip()


TITLE = "## The ResNet-50 ceiling on `v100-16gb` (issue 14 item 5)"

NOTES = """What bounds the batch by tfswap's accounting: the op bound. `FusedBatchNormGradV3` holds its output
gradient's input, its `x` and the `x_backprop` it allocates (TensorFlow's kernel never forwards a buffer there,
unlike `FusedBatchNorm`, whose `y` may take `x`'s buffer and is modelled so): three tensors of the block's
activation size at once, so no plan of any strategy trains ResNet-50 above about 9x B0 on a 16 GB V100; 10x is
out of reach. Below it, what a plan reaches depends on the order of the backward pass's independent branches
(in a projection block the shortcut's and the main branch's batch-norm gradients both read the block's output
gradient). tfswap swaps gradients that wait between their production and their first read, with a trigger off
the producer's descent that waits for the swap-out, and repairs the peak by re-triggering copies that wait at
it from an op that runs after it: that is what made 8x fit by tfswap's accounting at 9cf352e (+1298.5%). Since
cf7d69a (Grappler's fan-out decisions kept, issue 12; found by planning 8x with the binaries of 9cf352e, cf7d69a
and a6ace77) no such plan is found: at 8x the lowest plan peaked at 19.00 GiB at `stage2/block1`'s gradient (a
projection block), where the main branch's and the shortcut's batch-norm gradients and the ReLU gradient that both
read (4.43 GiB each) were live with a 4.43 GiB swapped-in copy. Since 67b8bb4 `auto`'s reorder pass (issue 14
item 5; rewrite/plan/reorder.go) adds, when nothing fits, a control edge from each reader that was ready and alone keeps
a buffer live to the op at the lowest plan's peak, and plans the graph again: here the shortcut's filter gradient
before the main branch's batch-norm gradient. The lowest peak at 8x falls from 19.00 to 15.68 GiB (10x: 23.71 to
19.56) and moves to `stage3/block1`'s gradient: the main branch's and the shortcut's input gradients (4.43 GiB
each), both waiting for the `AddN` that sums them into `stage2/block3`'s output gradient, beside the main
branch's batch-norm gradient (2.21 GiB). Swapping those two was blocked until 120386f: each reaches the `AddN` only through its
`tf.gradients` tuple Identity (`.../Conv2D_grad/tuple/control_dependency`, which waits for the filter gradient
through `tuple/group_deps`), and the Grappler fan-out rules kept such an Identity on the original. Since
120386f (issue 12) a tuple Identity with one reader may read a swap-in, so they are candidates; checked at
ea58096 (8x, tfswap's accounting, simulated v100-16gb), and the same as bypassing the 32 such Identities by hand at
c5809f9: `auto`'s fallback plans swap waiting gradients, but the lowest peak stays 15.68 GiB at the same op
(`stage3/block1/conv1`'s filter gradient) with the same tensors live. The waits are too short to hide the link:
in the unswapped step the shortcut's input gradient waits 134 ms for the `AddN` and the main branch's 22 ms,
and moving 4.43 GiB over PCIe 3.0 (12.8 GB/s) takes 0.37 s each way. The swap-out is not done when the next
block-sized tensor is allocated, and no pass yet holds the main branch back until it is (a stall that would fit).
Running the two
input gradients into one accumulator is the other way (not built). At 73a1048 (simulated v100-16gb) 8x fits by
tfswap's accounting again, at +1369.6% (+1379.9% at 65bb28a; +1382.0% with `L2Loss` gates at c3ff82c, +1276.0% since the tuple-order pass at d808eec, +479.7% since 5cd9d74, the table above): `auto`'s peak repair on its lowest-memory plan reaches
13.47 GiB with 135 ops held until a swap-out reaches the host and 279 GiB to the host, 372 GiB back a step,
31.4 s of the 52.8 s step stalled on swap-ins; the stall-accepting plan exists, its overhead is the host link's.
10x's lowest peak fell from 19.56 to 16.79 GiB (`stage2/block3`'s batch-norm gradient and ReLU gradient,
5.53 GiB each). 8x by all accountings was no verdict at 73a1048: `rewrite` failed with an internal error, a cycle through a
swap-in's relay of a `tf.gradients` tuple Identity. Since d5a82c7 (peak repair judges descent in the plan's
graph) it is a no-fit verdict; at 65bb28a (and with `L2Loss` gates at c3ff82c) the lowest plan any strategy found under the three
accountings peaks at 17.90 GiB by tfswap's own, at `stage2/block1`'s main-branch batch-norm gradient: its
output and the ReLU gradient it reads (4.43 GiB each) with two swapped-in copies of the block's size (8.85 GiB;
the no-fit message), 4 x 4.43 + 0.19 = 17.90 GiB. The plans that reach lower by tfswap's accounting (the
`tfswap` row, 13.47 GiB) read 17.71 and 30.98 GiB by the VirtualCluster's nanosecond and microsecond figures
(26.56 GiB at eb7b499, with the same overhead and host traffic; the rewrite is byte-identical at 5f6305d and
5c8aeef; what raised the microsecond figure between eb7b499 and 5f6305d was not traced).

A bound at 8x (simulated v100-16gb, tfswap's accounting; worked out from `tfswap simulate` and the no-fit
message at 0f1299b): 15.68 GiB is a bound, not a search failure, for every plan that keeps those tensors on the device. Take
whichever of `stage3/block1`'s two input gradients is made second. The first waits for the `AddN`. The block's
input, `stage2/block3/out` (4.43 GiB), is read by both filter gradients and again by `stage2/block3`'s ReLU
gradient after the `AddN`. The second gradient's output (4.43 GiB) and its batch-norm gradient input (2.21 GiB)
must be there too. With the variables and slots (0.19 GiB) that is 3 x 4.43 + 2.21 + 0.19 = 15.68 GiB in any
order. Going below it needs the waiting gradient or the block input off the device for the 20-130 ms between,
swapped or (the block input) recomputed. A swap moves 4.43 GiB each way at 12.8 GB/s, 0.37 s per direction,
so it stalls the step by about 0.6 s or more. How much must be recomputed to meet the +82% target at all: the
host-link line of the list above.

What bounds it by all accountings: the VirtualCluster's. It forwards no buffer and counts every op output,
Identities included, as its own buffer; its microsecond figure also counts together everything allocated or
freed within one microsecond, and the ops between a ReLU gradient and the next batch-norm gradient (the
`tuple/control_dependency` Identities of `tf.gradients`, tfswap's gates and swap-in receives) take nanoseconds.
The list above shows the result: at a residual block's gradient the microsecond figure holds the summed
output gradient (`AddN`), the ReLU gradient and its two tuple Identities, the batch-norm gradient's output and
`x`, and any gate or swap-in there, each of the block's activation size, six to eight such tensors where
TensorFlow keeps three. That is why the 5x and 6x plans that fit by tfswap's accounting read 22 and 27 GiB by
the microsecond figure at 73a1048 (the 6x one 24.07 GiB now). A gate reads its trigger's output, which this accounting counts as a copy: a gate on a
gradient adds a block-sized tensor. Held to plans the VirtualCluster accepts, the search found none from 5x
on at 73a1048: its lowest plans were over by tfswap's own accounting, 15.41 GiB at 5x (a main-branch input
gradient, the ReLU gradient and a recomputed batch-norm output of `stage2`, 2.77 GiB each) and 15.13 GiB at 6x,
a few hundred MiB over the budget. 5x fitted at 6a32992 (chains apart, below) and has not since 7861305 (below); 6x does not. At 6x the peak is `stage2/block1`'s main-branch batch-norm gradient: it reads the ReLU
gradient and the recomputed convolution and allocates its output (3.32 GiB each) while the shortcut branch's
batch-norm gradient (3.32 GiB), whose input gradient is already made, still waits for its filter gradient
(the live list above and `tfswap rewrite`'s full no-fit message). The reorder pass finds that edge (the
shortcut's filter gradient before the main branch's batch-norm gradient) and plans the graph with it again, but
the lowest plan found there peaks higher (16.25 GiB, at `stage3/block1`'s first convolution in the forward pass,
where no reader waits), so the no-fit message keeps 15.13 GiB. Tried by hand at 013d8f0 with four such edges
(one per projection block), the lowest peak was 15.13 GiB too, in the forward pass at 2.38 s (`stage2/block3`:
the outputs of `stage2/block2` and `block3` and `block3`'s last convolution live, 3.32 GiB each, none swapped
out yet).

Recomputation chains apart (the `recompute-apart` pass, since 3af81c5). A recomputation chain that runs
early used to serve the later reads of every other target it makes: the chain of a block's output, released
for the next block's gradients, re-makes the block's convolution and batch-norm outputs on the way, and those
copies stayed on the device until the block's own gradients read them, across the next block's backward pass.
Where no plan fits, or the best is slower than moving the whole excess over the host link, `auto` now plans the
recomputations again with every target made by its own chain just before its reads (more compute, shorter
lifetimes) and keeps the better plan. 5x by all accountings went from no plan (15.41 GiB, 73a1048) and +383.1%
(65bb28a, swapping alone, 61.7 GiB each way; `--batch-scale 5` of the B0 graph) to +41.1% (at 6a32992: 8.1 GiB
each way, the VirtualCluster's figures 14.52 GiB), and 5x by tfswap's accounting from +379.7% (73a1048) to +41.1%. At 8x
by all accountings the lowest peak fell from 17.90 to 16.79 GiB (`stage2/block1`: the ReLU gradient, the
shortcut's batch-norm gradient and a recomputed convolution, 4.43 GiB each); 6x is unchanged (15.13 GiB), and
so are 6x and 8x by tfswap's accounting, whose swap-only plans the pass does not beat. How far recomputation
alone gets at 8x (simulated v100-16gb, tfswap's accounting, a throwaway probe of the planner at 65bb28a, not a
bench figure): every candidate recomputed is 86.2 GiB by 28 chains (0.77 s of compute), and that step, unswapped,
peaks at 35.33 GiB at +21.6%; with chains apart 32.85 GiB at +41.1%. Swapping on top of the latter reaches the
15.68 GiB bound of `stage3/block1` above and no lower: the remaining lever is the waiting input gradient held
off the device at that op (a stall of about 0.37 s each way at 12.8 GB/s), or an accumulator for the two input
gradients.

The 6x cliff by tfswap's accounting (+1001.7% at 65bb28a with 146 GiB to the host against +41.1% at 5x;
found with `tfswap rewrite --debug-pass all --pass-time` at 5f6305d, simulated v100-16gb). Without
recomputation no strategy auto requires fits at 6x: the window plan is the nearest, 0.16 GiB over at 15.13 GiB,
in the forward pass at 2.38 s (`stage2/block2/out`, `stage2/block3`'s last convolution and its output, 3.32 GiB
each, with `stage3/block1`'s first convolution: none of them off the device yet), so the plan
that fits is auto's lowest-memory fallback (every gap of every tensor, 256 swaps). The recompute passes plan
the recomputed graph with the strategies of the two best fitting plans only, and that set named auto alone:
none of the required strategies ran on the recomputed graphs, which only auto's greedy and fallbacks planned.
At 5x the window plan fitted without recomputation, was run again on the graph with every chain recomputed
apart, and fitted there at +41.1%. Since 5c8aeef the passes run every required strategy again when neither of
the two best fitting plans is one of theirs. At 6x, on the graph with the chains apart, the window plan still
misses by 0.16 GiB at the same forward-pass point (+23.3% of that graph's step there), LMS's plan fits, and auto
improves it to +273.0% (35.0 GiB to the host, 75.7 GiB back, 6.2 s of the 10.0 s step stalled on swap-ins;
+273.7% with `L2Loss` gates, the table). Holding the window plan's forward ops until their swap-outs reach the host (the fast model's
throttle, which auto applies to its lowest-memory plan) was tried at 5c8aeef and not landed: in three rounds
of lower targets the simulator's peak stayed at 15.13 GiB or rose to 15.54 GiB. A 6x plan at 5x's cost per
byte needs `stage2`'s block outputs off the device before `stage3` starts, which the link (0.28 s per
3.32 GiB) does not do in that stage's forward time without a stall; by all accountings 6x is still bound by
the backward pass (the list above).

5x by all accountings since 7861305 (no plan, lowest 15.41 GiB by tfswap's accounting, where 6a32992
planned +41.1%; with `Identity` gates, e2fc491's row). Found by building tfswap at commits between 6a32992 and 5f6305d that touched
`rewrite/` or `cost/` and planning 5x with `--fit-accounting all` (simulated v100-16gb): 7861305^ plans
+41.1%, 7861305 finds no plan. That commit runs tfswap's gates as Identities reading their trigger's output
(Grappler keeps every node marked `_grappler_do_not_remove`, so none is run as a value-dead NoOp), and under
Grappler's rules each gate's output is a buffer of its own, so gated plans weigh more by the VirtualCluster's
figures, and the search finds none within the budget by all three. The model is the more faithful one (TensorFlow runs the
gates, tfrun's TestGatesRunUnderGrappler); the plan of 6a32992 was accepted by a VirtualCluster figure that
left them out. 5c8aeef leaves 5x alone (its rewrites by both accountings are byte-identical to
5f6305d's).

What the VirtualCluster does with a gate (checked in TensorFlow 2.18's source). The VirtualScheduler's
`GenerateRunMetadata` (`virtual_scheduler.cc`) writes every output of every op it ran into the step stats
with its `CalculateOutputSize`, read or not, and `GraphMemory::InferFromTrace` keeps each from its op's start
to the end of its last data reader, control edges skipped: a gate, read through control edges only, holds a
buffer of its output's size for its own nanosecond, and the microsecond figure adds it to everything else in
that microsecond. tfswap's Grappler conventions count it so; no zero-byte or aliased output is counted that
the VirtualCluster leaves out. Checked with `tools/vcluster/vcluster.py --trace` (TensorFlow 2.18) on the residual-network
fixture's `auto` plan at a 6 MiB budget: the VirtualScheduler runs each gate as a 1 ns Identity whose output has
the shape Grappler infers, `[8, 32, 32, 16]` for the two on `FusedBatchNormGradV3` with `GateSmallestOutput` off and `[16]`
with it on (bd7b41e). The size was avoidable: every output of an op exists once it has run, so since
bd7b41e a planned rewrite's gate reads its trigger's smallest output of known, non-zero size
(`rewrite.SmallestGatePort`: a batch normalisation's statistics or scale gradient; `Rewrite` and `lms-fixed`
keep the first data output, byte for byte). At 5x (simulated v100-16gb) the rewrite 7861305^ planned reads
20.06 GiB by the microsecond figure at 3.043 s, 5.54 GiB of it the swap-in gate and the recompute gate on
`gradients/stage2/block2/conv3/bn/FusedBatchNormV3_grad/FusedBatchNormGradV3:0` (2.77 GiB each); with those
two moved to its output 1 (1 KiB) by hand, 17.29 GiB at 3.019 s, where the recompute gate on
`gradients/stage2/block2/out_grad/ReluGrad` (one output, 2.77 GiB) remains beside the `AddN` of the block's
output gradient, its two tuple Identities, the ReLU gradient and the recomputed block output (2.77 GiB each).
The `tfswap` row's 5x plan reads 18.50 GiB by the microsecond figure at 622c4dd (21.27 before; the
same recompute gate is left, the list above). 5x by all accountings still finds no plan (lowest 15.41 GiB
by tfswap's accounting, as before). A gate of a few bytes on a trigger with one output needs an op that
reads the output, writes little, and that Grappler neither folds nor bypasses: `--gate-kind reduce` (below)
builds it as an `L2Loss`. `Shape` is not one: constant folding's `MaterializeShapes` turns a
`Shape` of a known shape into a `Const` with a control edge on the trigger whatever the nodes to preserve,
the edge the gate exists to avoid.

Does the search miss plans the VirtualCluster would accept? (issue 14 item 5 (a); simulated v100-16gb at
e2fc491, by `tfswap rewrite --fit-accounting tfswap --budget B` on the 5x graph, B = 95, 90, 85, 80 and 75% of
14.97 GiB; each rewrite reports all three figures.) The planners screen with
tfswap's own accounting, and `auto`'s tighter pass already plans at 95% and 90% of the budget; going tighter
does not bring the VirtualCluster's figures under: those five plans peak at 14.02, 13.33, 12.64, 11.78 and
10.56 GiB by tfswap's accounting (+41.1%, +41.9%, +68.0%, +272.9%, +327.4%) and at 15.22, 14.52, 14.52, 15.22,
13.83 GiB by the nanosecond figure, but 17.98, 20.06, 23.51, 18.67 and 20.75 GiB by the microsecond one. The
microsecond figure is the one no plan gets under. Each of the five holds, at a residual block's backward `AddN`
in `stage2`, the `AddN`'s output and its inputs' tuple Identities (2.77 GiB each). Four of them also hold
the ReLU gradient and one to three gates on it or on the `AddN` (`gate`, `recompute_gate`: 2.77 GiB each;
`tfswap simulate --grappler` of each plan). The 80% plan holds a swapped-in ReLU gradient and the
`Conv2DBackpropInput` its tuple Identity passes on instead. A gate on an op with one output still weighs a
whole block by this accounting (the note on bd7b41e's gates above). Measured by hand on the 85% plan, with each float gate on a convolution, ReLU, ReLU gradient,
`AddN`, `AddV2`, input gradient or batch normalisation turned from an `Identity` into an `L2Loss` of the same tensor (a 4-byte scalar that
still waits for the trigger, is not constant-folded, and has one data input; a throwaway script, not
committed; `tfswap simulate` with and without `--grappler`): 12.64 GiB by tfswap's accounting, 14.52 GiB by the nanosecond figure and 14.52 GiB by the
microsecond one. All three fit, at +69.5% (3.786 s against 2.234 s unswapped; +68.0% with the `Identity`
gates). That would be a 5x plan by all accountings within the +82% target's overhead. The same
check at 4x (e2fc491, the same recipe at 95, 90 and 85%) finds that no Identity-gated plan fits by the microsecond figure
(17.57, 19.23, 18.26 GiB). With `L2Loss` gates the 85% plan reads 12.36 / 14.39 / 14.39 GiB (tfswap / VC ns / VC
us) at +38.9% (2.483 s against 1.788 s), where the 4x row by all accountings with `Identity` gates was +137.0% (622c4dd). The same edit on 6x
plans (tfswap's accounting at 90, 85 and 80% of the budget) leaves the microsecond figure at 20.75 to 22.41 GiB.
There a tuple Identity that reads a swap-in is the second block-sized buffer of one tensor (`stage3/block1`'s
two input gradients, each swapped in and passed through its `tuple/control_dependency`, beside the `AddN`).
Built since as `tfswap rewrite --gate-kind reduce` (`rewrite.GateReduce`; `gate_kind` for the Grappler bridge,
`TFSWAP_GATE_KIND` for the TF2 plugin): each gate whose trigger has a half, bfloat16, float or double output is
an `L2Loss` of the smallest such output (a 4-byte scalar; TensorFlow 2.18 has CPU and GPU kernels for the four),
the others stay `Identity` gates. Grappler keeps it: its input is no constant, and the dependency optimizer's
`SafeToConvertToNoOp` returns false for the nodes to preserve, which the gate's `_grappler_do_not_remove` makes
it. `rewrite.Verify`, `offload.go`'s check and the bridge's answer check (`swap_core.cc`) accept an `L2Loss` gate
of one tensor, whose value carries no original tensor; tfrun's `reduce-gates` variant trains the four fixtures
with such gates to the unswapped graph's losses and variables in the two-device emulation, its swap nodes in
the partition graphs and every swap-in after its gate. The ladder's `reduce` rows (the table) are planned with
it. The default stays `identity`: with `reduce`, every planned rewrite's gates change, and so would every
plan compared byte for byte against earlier binaries. The tighter pass asks a tighter plan to fit Grappler's figures at the tighter budget too
(`planTighter`), although only the budget asked for matters to them. No 5x plan above falls between the two,
so that rule costs nothing here. Hand-made ordering edges (each projection block's shortcut filter and input
gradient before its main branch's batch-norm gradient, the reorder pass's edge) bring 5x by all accountings
to 13.33 / 14.52 / 15.22 GiB. The microsecond figure stays over, at `stage2/block2`'s `AddN`.

What changed at 4x (all accountings: +352.5% before, +136.0% at 73a1048, +137.0% at 622c4dd;
by tfswap's +21.4% and +21.6%: not bd7b41e's gates, the same figures with them off, checked). The plan that fits by tfswap's accounting
at +21.6% recomputes a residual block's output through a chain Conv2D, FusedBatchNormV3, AddV2, Relu: two
buffers at runtime, four block-sized tensors by the VirtualCluster's accounting (its nanosecond figure above,
16.46 GiB). When Grappler's accounting is what keeps a faster plan from fitting, auto now plans recomputations
again with chains of one large output each (re-run a ReLU from its kept batch-norm output, a batch
normalisation from its kept convolution) and keeps the better plan: 30.6 GiB recomputed by 53 single-op
copies (0.43 s of compute) and 14.5 GiB swapped each way.

What limits the overhead. At 4x by all accountings the step is 4.25 s against 1.80 s unswapped: 0.43 s of
recomputation, 0.95 s of compute stalled on swap-ins and about 1.1 s of forward ops held until their swap-outs
reach the host. The swapped tensors are the first blocks' (stage 2), made in the first 0.2 s of the forward
pass and read last in the backward pass: 14.5 GiB take 1.2 s each way over PCIe 3.0 (12.8 GB/s), which neither
the forward nor the backward pass of those blocks can hide. By tfswap's accounting 5x fits by swapping alone
(window, 61.7 GiB each way, +379.7%) and 6x only by swapping far more (146 GiB out and 211 GiB back a step,
+994.1% at 73a1048 with recomputations, +1028.6% at 062b71d; at 9cf352e, 6x and 8x fit at +1218% and +1298% by
tfswap's lowest-memory plan; at 5c8aeef, 6x fits at +273.0% with 35.0 GiB to the host: the 6x cliff above); a swap-only plan
cannot be faster than moving the excess both ways (at least +376% at 8x, section "How close to the link's
limit"), so +82% at 8x needs most of the excess recomputed, including convolutions, which tfswap's
recomputation takes only from chains whose inputs stay on the device.

`L2Loss` gates (`--gate-kind reduce`, c3ff82c; simulated v100-16gb, planned with the binary of c3ff82c; the
table's `reduce` rows, re-planned at d808eec, read the same but for 8x, the note on the 6x cliff below). With each float gate a 4-byte `L2Loss`, the VirtualCluster no longer counts a
block-sized buffer per gate, and plans fit by all accountings up to 6x: 4x at +22.4% (+137.0% with `Identity`
gates at 622c4dd; 14.02 / 14.95 / 14.95 GiB by tfswap's accounting / the nanosecond / the microsecond figure), 5x
at +42.7% (no plan with `Identity` gates since 7861305; 14.02 / 14.52 / 14.52 GiB) and 6x at +339.1% (no plan
before, lowest 15.13 GiB; 14.30 / 14.11 / 14.94 GiB, 58.6 GiB to the host and 81.9 GiB back a step). At 4x and
5x a plan by all accountings now costs what tfswap's accounting alone asks (+22.2% and +42.7%); at 6x it costs
+65 points more than the +273.7% of tfswap's accounting alone, whose plan still reads 22.41 GiB by the
microsecond figure (tuple Identities and recomputed block outputs, the list above; the 6x rows no longer fail on
a tuple Identity reading a swap-in). The gates cost time: an `L2Loss` reads its whole input on the device, so at
2x, where the plan is the same, the step is +9.5% against +8.6% with `Identity` gates. 8x and 10x were unchanged:
no plan by all accountings, lowest 16.79 GiB by tfswap's own accounting (at 8x `stage2/block1`'s ReLU gradient,
the shortcut's batch-norm gradient and a recomputed convolution, 4.43 GiB each), so above 6x the gates no longer
bound the batch: tfswap's accounting of the backward pass does.

The 6x cliff, counted (simulated v100-16gb, `--gate-kind reduce`, tfswap's accounting, probes of the planner at
2add593 and d808eec, not committed). Call B a `stage2` block's activation (56x56x256 floats a sample: 3.32 GiB
at 6x, 2.77 GiB at 5x), Q a quarter of it (the block's inner 64-channel tensors, 0.83 GiB at 6x) and W the
variables and slots (0.19 GiB). Every lowest plan of the 6x rows by all accountings that misses the budget
peaks at 15.13 GiB = 4B + 2Q + W, and so does every variant tried (every recomputation level, chains apart,
`--recompute max`, hand-made ordering edges): four block-sized and two quarter-sized tensors live at one op.
At 5x the same moments hold 12.65 GiB, 2.3 GiB under the budget; at 6x they are 0.16 GiB over. So 5x needs
no swap that stalls, and 6x needs one at each such moment, which the link (0.28 s per 3.32 GiB at 12.8 GB/s)
does not hide: hence +42.7% to +339.1%. The moments found, each removed in turn: (1) the forward pass at
`stage2/block3` without recomputation (the window plan's 15.13 GiB, the 6x cliff note above); (2) with every
recomputation target made by its own chain, `stage2/block1`'s gradient (the main branch's batch-norm gradient,
the ReLU gradient, the shortcut's batch-norm gradient waiting for its filter gradient, the recomputed last
convolution): the reorder pass's edge; (3) with that edge, `stage2/block3`'s gradient while the chain that
remakes `stage2/block2/out` runs: `block3`'s ReLU gradient and `conv1` input gradient (B each) wait for the
`AddN` of `block2`'s output gradient, which waits through the `tf.gradients` tuple for `conv1`'s filter
gradient, which reads the block output being remade from a swapped-in `block1/out` and a recomputed
convolution (B each). Grappler's dependency optimizer keeps that wait (bypassing the tuple `Identity`, it moves
its control inputs to the `AddN`; `dependency_optimizer.cc`, TensorFlow 2.18), so bypassing the tuple
Identities would lower only the VirtualCluster's count, not tfswap's; making the input gradient after the filter
gradient removes the moment. That is the tuple-order pass (d808eec; docs/PLANNING.md): where the best plan does
not fit or costs more than +50%, each tuple's largest member is ordered after the others and the graph
planned again. (4) With those edges the lowest 6x plan of the chains-apart graph peaks at `stage2/block3`'s last
batch-norm gradient: its three block-sized operands beside 4.98 GiB of swapped-in copies. The
6x rows are unchanged by the pass (its plans are not faster there); it takes 8x by tfswap's accounting from
+1382.0% to +1276.0% (at d808eec) and 8x by all accountings from a lowest peak of 16.79 GiB in the backward
pass to 15.13 GiB in the forward pass (14.94 GiB of activations and no swapped-in copy, the largest `stage4`'s
saved block outputs and last convolutions, 1.11 GiB each). The ladder's rewrites now take 1 to 8 s
on this machine (the table; 14 to 115 s at c3ff82c), so the rungs are cheap to re-plan.

Chains apart where the plan is costly (3a1765b; simulated v100-16gb, `--gate-kind reduce`, the 6x, 8x and
10x rows planned at d717b4f, rewrite times at load 9 to 12 on the two shared cores). The recompute-apart pass
ran only where nothing fits or the best plan is bound by the host link. On the tuple-order pass's graph at 6x
by tfswap's accounting the best plan with served chains (+317.8%) is neither, so chains apart were never tried
there, and its window plans at +72.7% missed the budget by 158.5 MiB: the chain that remakes
`stage2/block2/out` for `block3`'s filter gradient also served `stage2/block2/conv3`'s recomputed output
(3.32 GiB) to that tensor's own reader, after `block3`'s gradient, so the copy waited beside `block3/conv1`'s
input gradient (4B + 2Q + W, moment (3) above). The pass now also runs where the best plan fits at more than
+50% (the tuple-order pass's gate), and there, each target remade by its own chain, a window plan fits: 6x by
tfswap's accounting goes from +273.7% to +72.0% (7 swaps, 76 recomputations, 10.58 GiB to the host and 12.24
GiB back a step), under the +82% target. The 8x and 10x rows and 6x by all accountings are unchanged. That
plan reads 16.60 GiB by the VirtualCluster's nanosecond figure and 17.43 GiB by its microsecond one
(TensorFlow 2.18's own VirtualCluster, `tools/vcluster/vcluster.py` on the rewrite, gives 17,823,427,732 and
18,714,556,572 bytes, 16 bytes more than tfswap's model of it): five block-sized buffers at `stage2/block3`'s
last batch-norm gradient where tfswap's accounting has three, because the two tuple Identities of
`block3/add_grad` and the batch-norm gradient's tuple Identity count as buffers of their own there (Grappler's
no-aliasing rule, docs/SIMULATOR.md), which TensorFlow's executor forwards. The same accounting holds 8x back.
Every plan of the 8x run by all accountings that fit tfswap's accounting (31 evaluations, 13.47 to 14.58 GiB by
it, window, lms and auto plans at tighter budgets included) reads 13.28 to 22.13 GiB by the nanosecond figure
and 22.13 to 28.77 GiB by the microsecond one (a probe of the planner printing each accounting's peak, not
committed), at least 7.2 GiB over the budget. The 15.13 GiB the table gives for 8x by all accountings is the
lowest peak by tfswap's accounting of a plan that misses it, whose Grappler figures are never computed; by the
VirtualCluster's accounting 8x is several GiB further off.

Each accounting's least excess (ea67228; simulated v100-16gb, `--gate-kind reduce`, the 6x, 8x and 10x rows
re-planned at ea67228, rewrite times at load 8.5 to 9.5 on the two shared cores). The no-fit message now
also gives, per accounting required, the least excess over the budget among the plans judged by it (the table's
"least excess" and the notes above). At 8x by all accountings: tfswap's -1.51 GiB (28 plans, a plan fits it at
13.47 GiB), the nanosecond figure's -1.69 GiB (a plan fits it at 13.28 GiB) and the microsecond figure's
+7.16 GiB (22.13 GiB), Grappler's figures of 3 plans (those that fit tfswap's accounting): no plan evaluated fits every accounting, and the microsecond figure, 7.16 GiB over, is
the one furthest off. At 10x no plan fits tfswap's accounting (+1.81 GiB), so Grappler's figures are judged
for none.

Do the tuple Identities reach the real step? (2026-11-29; TensorFlow 2.18 in the venv, on the 6x +72.0% rewrite
by tfswap's accounting at 0766a0d, fetch `train`.) `tf_optimizer.OptimizeGraph` with the default
`ConfigProto` (the default RewriterConfig a session runs before a step), given the VirtualCluster's v100-16gb
devices (16 GiB) as its cluster or the local one, removes all 301 `tf.gradients` tuple Identities
(`.../tuple/control_dependency*`; 478 Identities before, 16 after: tfswap's swap copies) and keeps all 350 of
tfswap's nodes (swaps, recomputations and `L2Loss` gates); the dependency optimizer alone removes them too. So
the two extra 3.32 GiB buffers the VirtualCluster counts at `stage2/block3`'s last batch-norm gradient are not
in the graph TensorFlow runs. The VirtualCluster (`tools/vcluster/vcluster.py`) on the optimized graph
still reads 17,823,140,888 bytes (16.60 GiB) by the nanosecond figure, 286,844 bytes below the graph as written
(17,823,427,732), and the same by the microsecond figure (18,714,556,572 as written, 17.43 GiB: the 1 ns
Identities' microsecond is gone). The peak moves to `stage2/block3/conv1`'s input gradient at 3.60 s, with
five 3.32 GiB buffers again: the `AddN` of block3's input gradient, its two addends (`conv1`'s
`Conv2DBackpropInput`, `block3/out`'s `ReluGrad`), `block2/out`'s `ReluGrad` and the recomputed
`stage2/block2/out` (the `ReluGrad`'s inputs). The VirtualCluster never forwards a buffer (docs/SIMULATOR.md);
whether TensorFlow's kernels forward these in a real step was not measured here. So removing the Identities lowers the microsecond figure by 0.83 GiB but
leaves the nanosecond one; by the VirtualCluster's accounting the 6x plan stays 1.62 GiB over the budget
after the default passes. `tools/vcluster/vcluster.py --default-passes` checks a graph this way (it gives
these figures on this rewrite: 2,015 of 5,467 nodes left, 462 Identities removed). The bench's judge is
unchanged (it judges the graph as written).

Tuple Identities bypassed (c783d79, landed as dba0319; simulated v100-16gb, `--gate-kind reduce`, the 6x and
8x rows by all accountings re-planned at dba0319, rewrite wall times at load 7 to 11). `auto`'s tuple-bypass pass (docs/PLANNING.md) runs where Grappler's accountings
bind: it adds the tuple ordering edges, turns every `tf.gradients` tuple Identity that may go into a `NoOp` with
the Identity's name, device and control inputs (its readers read the Identity's input and wait for the `NoOp`,
so nothing computes anything else or runs earlier), and plans again. At 6x by all accountings it bypasses 300
Identities and the plan goes from +339.1% (auto+recompute+order) to +60.6% (window+recompute+bypass: 7 swaps,
76 recomputations, 10.58 GiB to the host and 13.90 GiB back a step), 14.51 / 14.11 / 14.11 GiB by tfswap's
accounting and the nanosecond and microsecond figures; cheaper than the plan by tfswap's accounting alone
(+72.0%), where the pass does not run. TensorFlow 2.18's VirtualCluster (`tools/vcluster/vcluster.py` on that
rewrite) reads 15,149,894,712 bytes by the nanosecond trace and 15,150,051,488 by `DeterminePeakMemoryUsage`,
16 bytes more than tfswap's model of it, and 15,406,186,756 by both after TensorFlow's default Grappler passes
(`--default-passes`, 2,013 of 5,465 nodes left): within the 14.97 GiB either way. At 8x by all accountings the
pass runs and is not kept: on the bypassed graph the least excess is tfswap's -0.40 GiB (31 plans), the
nanosecond figure's +0.52 and the microsecond figure's +2.83 GiB (one plan judged by Grappler), against -1.51,
-1.69 and +7.16 without (the planner's `TFSWAP_DEBUG_ORDER=1` print); no plan fits all three. The pass costs
CPU time: `tfswap rewrite --fit-accounting all` 5.5 to 8.3 s at 6x and 5.2 to 7.6 s at 8x (measured on CPU,
user time, one core, GOMAXPROCS=1, nice, 87a2957 against dba0319, load 8 to 11). A plan with the pass trains
bit-identically to the original (the ResNet fixture within 3 MiB by all accountings, where no plan fits
without it; two-device emulation, 5 steps, every variable; `TestTupleBypassInRuntime`).

Ordering edges and every strategy again where the plan is costly (6702e11 and 5cd9d74; simulated v100-16gb,
`--gate-kind reduce`, tfswap's accounting; the 6x, 8x and 10x rows re-planned at 55419d8, rewrite wall times at
load 6.5 to 8; the run took 30.3 s user, 1:09 wall). At 8x every recomputing plan missed the budget. The recompute pass screens two levels there:
half the excess (41 targets, 51.9 GiB; the unswapped step with them still peaks at 65.07 GiB) and every
candidate (76 targets, 86.17 GiB; 32.83 GiB at 1.79 s, a 5.09 s step with chains apart). With served chains the
lowest plan peaked at 19.00 GiB at `stage2/block3`'s input gradient while the chain remaking `stage2/block2/out`
ran; with chains apart at 16.79 GiB at `stage2/block1`'s main-branch batch-norm gradient, where the shortcut's
batch-norm gradient (4.43 GiB) waited for its filter gradient, itself waiting for `pool1`'s swap-in, beside the
ReLU gradient and the recomputed conv3 output (4.43 GiB each). That is the reorder pass's edge, but the pass ran
only where nothing fits, and `auto`'s fallback fitted at +1276.0%. It now also runs where the best plan fits at
more than +50% and a recompute pass's lowest plan missed, with the edges at that plan's peak (here the shortcut's
filter gradient before the main branch's batch-norm gradient): window+order then fits at +503.7% (104.29 GiB to
the host, 131.96 GiB back a step), and on the graph with every candidate recomputed a plan fits. There only
window, the strategy of the best plan so far, was run again (+925.9%); where the best plan that fits is costly,
`auto` now runs every strategy again on a recomputed graph and fits at +479.7% (the table; 14.02 / 22.13 / 27.66
GiB by tfswap's accounting and the nanosecond and microsecond figures). The same edge added by hand in all four
projection blocks gives +502.2% (at c786bd7): more rounds of the pass change little. 7x (batch 1295, not a rung) plans at
+98.5% before and after (window+recompute+order, 13.31 GiB to the host and 20.09 GiB back a step): the cost
explodes between 7x and 8x, where a `stage2` block's activation grows from 3.87 to 4.43 GiB and the room beside
three of them from 3.16 to 1.50 GiB.

Spacers (d5095b6; simulated v100-16gb, `--gate-kind reduce`, the 8x rows re-planned at d5095b6, the run took
15.8 s user and 0:59 wall at load 7.5 to 8.6). On the bypassed graph one plan of the 8x run by all accountings
fitted tfswap's accounting (14.58 GiB, +820%) and missed the VirtualCluster's by +0.52 GiB (nanosecond figure:
`gradients/AddN_12` starts the nanosecond `stage3/block1/conv1`'s input gradient ends, so that op's freed
batch-norm gradient, 2.21 GiB, counts beside the `AddN` and its two addends, 4.43 GiB each) and +2.83 GiB
(microsecond figure: each of `stage2`'s residual adds starts within the microsecond its batch-norm ends, so the
convolution output the batch norm has just freed counts beside the add's output, the batch-norm output and the
block input, 4 x 4.43 GiB). TensorFlow's executor frees an op's inputs before the next op allocates. The
tuple-bypass pass now spaces that plan (`spaceForGrappler`, docs/PLANNING.md): the op that starts last at the
Grappler peak over by more waits for a spacer, an `L2Loss` of one of its inputs (so nothing lives longer), one at a
time until the plan fits. Five spacers (the three residual adds of `stage2`, `stage2/block1/out`'s `Relu` and
`gradients/AddN_12`) give 14.58 / 14.39 / 14.48 GiB at +820.3% (the table): the first plan that fits 8x B0 by
all three accountings. TensorFlow 2.18's VirtualCluster (`tools/vcluster/vcluster.py` on the rewrite) reads
15,446,454,424 bytes by the nanosecond trace and 15,548,635,988 by `DeterminePeakMemoryUsage`, both within the
budget. Each spacer reads a 4.43 GiB tensor, about 5 ms of the step each. The overhead is that plan's, the
only one the bypassed run found within tfswap's accounting; the +479.7% plan by tfswap's accounting (+286.2% since 03b6f88, +160.8% since b3ba9c4, the same figures) reads
22.13 / 27.66 GiB by the VirtualCluster, mostly tuple Identities (the list above), which spacers do not remove
(spaced by hand, 5 spacers: 22.13 / 23.24 GiB).

The written bypass (9c3baa1; simulated v100-16gb, `--gate-kind reduce`, all accountings; the 8x rows
re-planned at 9c3baa1, the run took 54.6 s user, 3:52 wall at load 8 to 11). Where every accounting is required
and the plan costs more than +50%, `auto` now plans by tfswap's accounting alone and writes that plan with its
300 tuple Identities bypassed in the written graph (`rewrite.BypassWritten`; `Verify` checks each against the graph
planned), then changes the rewrite a step at a time at the Grappler peak over by more (docs/PLANNING.md,
`written-bypass`): 15 spacers (a recomputed copy of `stage5/block3` among them, and `gradients/AddN_13`'s reading
its swapped-in addend), 2 `L2Loss` gates widened to their trigger's largest output (`stage2/block1/conv3`'s and
`stage3/block1/conv1`'s batch-norm gradients: the VirtualCluster copies a swap-in in a nanosecond, so a gate of a
few bytes landed `stage2/block3/out`'s copy in the microsecond the trigger freed two 2.21 GiB inputs), and one
swap-in triggered later (`stage2/block3/out`'s copy, landed before `gradients/AddN_12` and its two 4.43 GiB
addends, now triggered by that `AddN`). The +160.8% plan by tfswap's accounting then reads 14.85 / 14.89 / 14.90
GiB at +164.6% (the table), where the best plan by all accountings was +820.3%. TensorFlow 2.18's VirtualCluster
(`bench/tfside.check` on the rewrite, as the benchmark judges) reads 15,985,980,020 bytes by the nanosecond trace
and 15,994,204,288 by `DeterminePeakMemoryUsage`, both within 16,078,864,384. What bounds the row is the plan
tfswap's accounting chooses (below): the written bypass adds 3.8 points (the spacers' `L2Loss`es, about 5 ms each,
the widened gates and the later trigger).

Merged swap-ins (03b6f88; simulated v100-16gb, `--gate-kind reduce`, tfswap's accounting; the 6x, 8x and 10x
rows re-planned at f53415c, the run took 34.6 s user, 1:38 wall at load 8.5 to 10.5). The +479.7% plan
recomputed 86.17 GiB by 251 op copies (1.47 s of compute in the unswapped step) and swapped 39 tensors by 127
swap-ins: 54.91 GiB to the host and 163.50 GiB back a step, the host-to-device link busy 13.7 s of the 20.7 s
step and 15.5 s stalled on swap-ins. The block outputs kept as checkpoints came back again and again:
`stage2/block1/out`, `stage2/block3/out`, `stage3/block3/out` and three `stage4` outputs 6 times each,
`stage5/block1/out` 11 times, `pool1` 6; 72 of the 113 swap-ins of forward tensors fed recomputation chains only,
each chain made apart reading its input itself (from `tfswap rewrite -v`). Where a plan still costs more than +50%
after pruning, `auto`'s improvement now merges each swap-in with the next of the same tensor wherever the plan
still fits and is faster (docs/PLANNING.md): 50 swap-ins, 83.13 GiB back, 13.79 s, +286.2% (the table).

Pruning on while drops are kept (7746d61), first swap-ins dropped (618265c) and merging again (b3ba9c4, bounded by
7b7f250; simulated v100-16gb, `--gate-kind reduce`, tfswap's accounting; the 8x rows re-planned at 9c3baa1, the
table, and at 138233f, the same plans). `auto`'s pruning spent its eight simulations on eight kept drops and
stopped with the +479.7% plan still holding needless swaps; only rejected drops count now (up to 64 kept ones), and the same start is pruned from 47 units to
11 tensors before merging: +176.1%. Merging then first tries each tensor's first swap-in dropped, its reads
reading the original, where the fast model says the plan still fits (`stage4/block5/out` and `stage5/block1`'s
first convolution output keep their original for their first reads): +171.2%; and a second merging pass, after
the first changed the timeline, merges two swap-ins of `stage2/block3/out`: +160.8% (the table), 11 tensors
swapped by 19 swap-ins, 22.41 GiB to the host and 45.65 GiB back a step. The `all` row (+164.6%) is this plan
written with the written bypass (above).

The link's recomputation level (f3df7b3, reverted in e7c84df, back in a71cc78; simulated v100-16gb, `--gate-kind
reduce`; the 8x rows re-planned at 2db1a22 by `bench/ceiling.py --cache <copy of the cache> --gate-kind reduce
--multiples 8 --merge docs/bench/ceiling.json --update-docs`, 113.1 s user and 22.5 min wall at load 15 to 28,
beside the full benchmark and four other planners, so the table's rewrite seconds, wall time, are inflated): `auto`'s screening also tries the targets whose chains add no more
compute per byte than the byte takes to the host and back (70 of 76 at 8x, `stage5`'s convolutions left out) and
plans the best byte level beside it. By tfswap's accounting 8x is +153.3% (the table; 1.03 s of recomputation
instead of 1.47 s, 13 tensors swapped by 22 swap-ins, 22.96 / 46.75 GiB). By all accountings the written bypass
spaces that plan to +157.2% but leaves it 61 MiB over, and now also tries the plan of the level it replaced, the
byte level's +160.8% plan, which fits at +164.6% as before (the written graph byte-identical to 567846e's);
without that second candidate the row was +820.3%. The 6x rows, re-planned at a3e12fb: +50.0% by tfswap's
accounting (the link level's plan; +60.6% at 001b744) and +60.6% by all, the same plan as at 001b744.

What bounds 8x now (the +153.3% plan, 9.044 s; its trace from `tfswap simulate --trace`, 2db1a22): the forward
(0 to 1.70 s) has 0.72 s of compute and 1.29 s of copies to the host; the backward from `stage5` to `stage3`
(1.70 to 4.95 s) 2.69 s of compute; the backward from `stage2` on (4.95 to 9.04 s) 1.28 s of compute and 2.85 s
of copies back to the device, 2.60 s of them seven 4.43 GiB copies (`stage2/block3/out` three times,
`stage2/block1/out` twice, `stage2/block3`'s output gradient once). Taking each part at its busiest engine gives
1.29 + 2.69 + 2.85 = 6.83 s, +91% (an estimate: while each part's copies stay in it, and memory leaves no room to
fetch `stage2`'s ahead, no timing of them, earlier triggers or staggering, reaches +82%, 6.50 s); that needs fewer 4.43 GiB copies in `stage2`'s backward or fewer bytes to the host
in the forward.

What bounded 8x at +160.8% (that plan; its trace from `tfswap simulate --trace`): the compute stream is busy 5.12 s
(the unswapped 3.57 s and 1.47 s of recomputation) and idle 4.20 s waiting for swap-ins: 2.06 s in `stage2`'s
backward, 0.69 s in `stage3`'s, 0.84 s and 0.41 s in the forward at `stage2/block2/add` and `stage3/block4/add`
(`stage2/block1/out` and `stage3/block3/out` go to the host and come straight back for the block's sum, which does
not fit without the round trip), 0.2 s elsewhere; the links are busy 1.88 s device-to-host and 3.83 s
host-to-device. In `stage2`'s backward three 4.43 GiB tensors are live at every batch-norm gradient (13.47 GiB of
14.97 with the variables), so a 4.43 GiB copy can only land after one of them is freed: it cannot be fetched
ahead, and each stalls the step about 0.37 s (4.43 GiB at 12.8 GB/s); `stage2/block3/out` (the input of
`stage3/block1`) and `stage2/block1/out` are swapped in 3 times each, and `stage2/block3`'s output gradient goes
to the host and back once. The screening's link bound for the recomputed graph (its 17.3 GiB excess moved once
each way) is 5.09 s, +42.6%, and the compute alone is +43.3%: the gap to +160.8% is these stalls. A block's
input is read at its recomputation, at its first convolution's filter gradient and at the previous block's ReLU
gradient, the last two next to each other: twice per block at least, where holding it across the block needs
4 x 4.43 + 0.19 = 17.90 GiB. With two 0.37 s copies for each of `stage2/block1/out` and `stage2/block2/out` and
three for `stage2/block3/out`, none hidden (2.6 s), and everything else hidden, the step would be 5.12 + 2.6 =
7.7 s, +116% (an estimate from these counts, not a bound): +82% (6.50 s) needs most of those copies hidden behind
compute, which the three live 4.43 GiB tensors do not allow, less recomputation, or a `stage2` that needs fewer
checkpoints in its backward. Remaking a block output from `pool1` instead of bringing it back does not fit
either, by count: the recomputed sum `stage2/blockN/add` holds its two inputs and its output, three 4.43 GiB
tensors, beside the live 4.43 GiB gradient (17.90 GiB with the variables). Not built.

The anchor. The adaptive-window paper (`../shared/papers/out-of-core-adaptive-window.txt`) measured 7.5x at
55% of in-core speed on a V100 16 GB connected to the CPU by two NVLinks (50 GB/s each), swapping everything,
with its own allocator, under no VirtualCluster accounting. On tfswap's closest profile, `v100-16gb-nvlink`
(NVLink 2.0 to a POWER9 host, 40.6 GB/s each way), `bench/ceiling.py --device v100-16gb-nvlink` gives NVLINK.
The target is missed on `v100-16gb`: by tfswap's accounting 6x B0 now fits at +60.6% (since 001b744, the tuple-bypass
pass's re-plan also where tfswap's accounting alone is required and the plan costs more than +50%; +72.0% since
3a1765b, above), but
by all accountings the largest batch is 6x B0 with `L2Loss` gates (+60.6% since the tuple-bypass pass, +339.1% before;
with `Identity` gates 4x, +137.0%, and none from 5x on); 8x fits at +164.6% since the written bypass (9c3baa1,
above), +820.3% with the spacers alone (d5095b6), still far from the target (before them no plan, lowest 15.13 GiB by tfswap's own accounting; each accounting's
least excess: tfswap's -1.51, the nanosecond figure's -1.69 and the microsecond figure's +7.16 GiB); by tfswap's, 8x B0 (+160.8% at 9c3baa1, +171.2% at 618265c, +286.2% at f53415c, +479.7% at 55419d8, +1276.0% at d808eec, +1382.0% at c3ff82c, +1379.9% at 65bb28a),
bound in overhead by the host link (at least 63 GiB of the 8x excess would have to be
recomputed to meet +82%; recomputing every candidate is 86 GiB at +21.6% but leaves the 15.68 GiB bound of
`stage3/block1`'s input gradients) and, at about 9x, by `FusedBatchNormGradV3`."""


def at_commits(data):
    """"at C", or, for a merged run, the commit of each group of rows."""
    commits = row_commits(data)
    if len(commits) <= 1:
        return "at %s" % (commits[0] if commits else data.get("commit", "?"))
    parts = []
    for c in commits:
        rungs = []
        for r in data["rows"]:
            m = "%gx" % r["multiple"]
            if r.get("commit", data.get("commit")) == c and m not in rungs:
                rungs.append(m)
        parts.append("%s at %s" % (", ".join(rungs), c))
    return "(rungs %s)" % "; ".join(parts)


def markdown(data):
    """The ceiling section's body (without its title) from the results."""
    out = []
    b0, budget = data["b0"], data["budget"]
    out.append("Simulated for the profile %s (budget %s GiB, TensorFlow 2.18's default; B0 = %d: the unswapped "
               "step fits by tfswap's accounting and both of Grappler's at %d and not at %d: %s), by `bench/ceiling.py` "
               "%s: `tfswap rewrite --fetch train --device %s --fit-accounting A --gate-kind G` on ResNet-50 "
               "(testmodels/large.py) generated at each multiple of B0. Rewrite wall times measured on this "
               "machine's CPU (two cores shared with other jobs).\n" % (
                   DEVICE, gib(budget), b0, b0, b0 + 1, "checked" if data["b0_checked"] else "NOT confirmed",
                   at_commits(data), DEVICE))
    out.append("| batch (xB0) | accounting | gates | fits | peak GiB (tfswap / VC ns / VC us) | overhead | strategy "
               "| to host / back per step GiB | rewrite s |")
    out.append("|---|---|---|---|---|---:|---|---|---:|")
    rows = data["rows"]
    for r in rows:
        # The gates the rewrite built (--gate-kind); rows of runs before the option are Identity's.
        gates = r.get("gate_kind", "identity")
        if r.get("exit") == 0:
            out.append("| %d (%gx) | %s | %s | %s | %s / %s / %s | %+.1f%% | %s | %s / %s | %.1f |" % (
                r["batch"], r["multiple"], r["accounting"], gates, "yes" if r["fits"] else "no", gib(r["peak"]),
                gib(r["grappler_peak"]) if r["grappler_peak"] else "-",
                gib(r["grappler_peak_us"]) if r["grappler_peak_us"] else "-", 100 * r["overhead"], r["strategy"],
                gib(r["to_host"]), gib(r["from_host"]), r["seconds"]))
        elif not r.get("lowest_peak_gib") and r.get("error"):
            # Not the planner's no-fit verdict: rewrite failed otherwise (its first line).
            out.append("| %d (%gx) | %s | %s | error | rewrite failed%s | - | - | - | %.1f |" % (
                r["batch"], r["multiple"], r["accounting"], gates,
                ": the planned graph has a cycle" if "has a cycle" in r["error"] else "", r["seconds"]))
        else:
            low = r.get("lowest_peak_gib")
            by = r.get("lowest_excess_gib")
            out.append("| %d (%gx) | %s | %s | no plan | lowest reached %s | - | %s | - | %.1f |" % (
                r["batch"], r["multiple"], r["accounting"], gates, "%.2f" % low if low else "?",
                "least excess GiB: " + excess_text(by) if by else "-", r["seconds"]))
    out.append("")
    for acc in ACCOUNTINGS:
        ok = [r for r in rows if r["accounting"] == acc and r.get("exit") == 0 and r["fits"]]
        top = max(ok, key=lambda r: r["batch"]) if ok else None
        out.append("* Largest ladder batch with a plan that fits by `%s`: %s." % (
            acc, "%d (%gx B0, %+.1f%% simulated overhead)" % (top["batch"], top["multiple"], 100 * top["overhead"])
            if top else "none"))
    out.append("* Op bound: at B0 the largest op of the step needs %s GiB at once (%s), %s GiB resident beside "
               "it: no plan of any strategy fits a batch above %d (%.2fx B0) in %s GiB." % (
                   gib(data["op_bound_bytes"]), data["op_bound_op"], gib(data["resident"]), data["bound_batch"],
                   data["bound_batch"] / float(b0), gib(budget)))
    eight = [r for r in rows if r["multiple"] == 8 and r["accounting"] == "all"]
    if eight:
        r = eight[0]
        met = r.get("exit") == 0 and r["fits"] and r["overhead"] <= 0.82
        out.append("* Target (8x B0 within +82%%, fitting by both accountings): %s%s." % (
            "met" if met else "missed",
            "" if r.get("exit") != 0 else " (%+.1f%% at 8x)" % (100 * r["overhead"])))
    if eight and data.get("link") and str(eight[0]["batch"]) in data.get("unswapped", {}):
        base = data["unswapped"][str(eight[0]["batch"])]
        got = swappable(base, budget, data["link"][0], data["link"][1], 0.82)
        if got:
            e, excess = got
            out.append("* What the target needs, by the host link alone (the bound of \"How close to the link's "
                       "limit\", %.1f GB/s device-to-host, the recomputation's own time ignored): unswapped, the 8x "
                       "step takes %.2f s and peaks at %s GiB at %.2f s, %s GiB over the budget; within +82%% at most "
                       "%s GiB of it may cross the link, so at least %s GiB must be recomputed." % (
                           data["link"][0] / 1e9, base["step_ns"] / 1e9, gib(base["peak"]), base["peak_time_ns"] / 1e9,
                           gib(excess), gib(e), gib(excess - e)))
    blocked = [r for r in rows if r.get("exit") != 0 and r.get("live")]
    if blocked:
        out.append("")
        out.append("Where no plan fits: the peak of the lowest plan any strategy reached, by the accounting that is "
                   "over the budget, and the three largest activations live then (from `tfswap rewrite`'s no-fit "
                   "message; GiB):\n")
        for r in blocked:
            over = r.get("lowest_over", "tfswap")
            if over == "VirtualCluster" and r.get("lowest_vc_gib"):
                what = "the VirtualCluster's %.2f (ns) / %.2f (us), tfswap's %.2f" % (
                    r["lowest_vc_gib"][0], r["lowest_vc_gib"][1], r["lowest_tfswap_gib"])
            else:
                what = "tfswap's %s" % ("%.2f" % r["lowest_peak_gib"] if r.get("lowest_peak_gib") else "?")
            live = []
            for x in r["live"]:
                f = x.split()
                live.append("`%s` (%s%s)" % (f[0], f[1], ", " + f[2] if len(f) > 2 else ""))
            by = r.get("lowest_excess_gib")
            out.append("* %d (%gx), `%s`: %s%s: %s%s." % (
                r["batch"], r["multiple"], r["accounting"], what,
                " at %s" % r["lowest_at"] if r.get("lowest_at") else "", ", ".join(live),
                "; by each accounting alone, the least excess over the budget among the plans judged by it: %s" % (
                    ", ".join("%s %s" % (a, "%+.2f GiB (%d plans)" % (v[0], v[1]) if v else "not judged (no plan "
                                         "fits tfswap's accounting, and only those are)") for a, v in by.items()))
                if by else ""))
    diag = [r for r in rows if r.get("grappler_live")]
    if diag:
        out.append("")
        out.append("What the VirtualCluster's accounting holds where a plan that fits by tfswap's accounting does not fit "
                   "by it (`tfswap simulate --grappler` of that plan's rewrite; the buffers of at least half the largest "
                   "live one, largest first):\n")
        for r in diag:
            for key, what in (("us", "microsecond"), ("ns", "nanosecond")):
                d = r["grappler_live"][key]
                if d["peak"] <= r["budget"]:
                    continue
                big = [x for x in d["live"] if d["live"] and x[2] * 2 >= d["live"][0][2]]
                out.append("* %d (%gx), %s plan, %s figure %s GiB at %.3f s: %s." % (
                    r["batch"], r["multiple"], r["accounting"], what, gib(d["peak"]), d["at_ns"] / 1e9,
                    ", ".join("`%s` (%s, %s GiB)" % (n, op, gib(b)) for n, op, b in big)))
    out.append("")
    out.append(NOTES.replace("NVLINK", compared(data.get("compare"))))
    return "\n".join(out) + "\n"


def compared(cmp):
    """A sentence's worth of another device's run: per multiple and accounting, the overhead of
    the plan or that none fits."""
    if not cmp:
        return "no figures (not run)"
    parts = []
    for r in cmp["rows"]:
        if r.get("exit") == 0 and r["fits"]:
            what = "%+.1f%%" % (100 * r["overhead"])
        else:
            what = "no plan"
        parts.append("%gx by `%s` %s" % (r["multiple"], r["accounting"], what))
    return "(simulated, at %s) %s" % (cmp.get("commit", "?"), ", ".join(parts))


def update_section(md, data):
    """Replaces (or appends) the ceiling section of docs/BENCHMARKS.md."""
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


if __name__ == "__main__":
    sys.exit(main())
