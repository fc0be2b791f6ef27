#!/usr/bin/env python3
"""Checks that planning is monotone in the budget along every budget sweep of the benchmark
(issue 14 item 3): a plan that fits a budget fits every larger one, so the best overhead found
at a budget should be no worse than the best found at any smaller budget, and a budget larger
than one that got a plan should get a plan too.

    .venv/bin/python bench/monotone.py [--results docs/bench/results.json]
                                       [--zoo docs/bench/zoo.json] [--strategy auto]
                                       [--replanned docs/bench/monotone.json]
    .venv/bin/python bench/monotone.py --replan [--all] [--tfswap BIN] [--cache out/monotone]
    .venv/bin/python bench/monotone.py --update-docs

The sweeps are every plan of one strategy for one model, device, batch and kind in the full
benchmark's results (the overhead curves, the issue's budget sweeps, the targets' points at
several budgets) and every graph of the zoo (bench/zoo_bench.py: `tfswap rewrite`, that is
`auto`, at 90%, 70% and 50% of the graph's peak). For each point it compares the plan's
predicted overhead (simulated, tfswap's accounting, as the results record it) with the least
overhead of the plans that fit (by the simulator) at smaller budgets of the same sweep, and
lists every point that is worse by more than --tolerance or that got no plan. It exits 1 when
a strategy named by --strategy (the auto strategy, which promises monotonicity, by default)
has such a point, 0 otherwise; the other strategies' points are listed for information.
bench/run.py runs the check on its results and bench/report.py renders it in
docs/BENCHMARKS.md (section "Monotonicity in the budget").

The full benchmark's results can be older than the planner. `--replan` plans `auto`'s curve
sweeps of the results again with the tfswap of this checkout (built without cgo unless
--tfswap names a binary), the sweeps with a point that is not monotone or, with --all, every
one: the same model, device, batch and budget fractions of the unswapped simulated peak, one
`tfswap rewrite --fetch train --strategy auto` per budget (graphs from testmodels/large.py,
kept in --cache). It writes them to --replanned (docs/bench/monotone.json), which the check
reads as sweeps of their own ("replanned"); simulated for each sweep's profile.
`--update-docs` writes the check's section of docs/BENCHMARKS.md (before the section
"Targets" when it is not there yet), as bench/report.py renders it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLE = "## Monotonicity in the budget (issue 14 item 3)"


def sweeps(data):
    """Yields (key, [(budget, overhead, fits)]) per sweep of the full benchmark's results with
    at least two budgets; overhead is None where the strategy found no plan (a point skipped
    because a larger budget already had none is left out)."""
    groups = {}
    for r in data["records"]:
        res = r.get("result")
        if not res or r["kind"] in ("nosswap", "lms_thresholds"):
            continue
        for pt in res["points"] if "points" in res else [res]:
            for p in pt.get("plans", []):
                budget = p.get("budget", pt.get("budget"))
                if budget is None or p.get("skipped"):
                    continue
                if p.get("overhead") is None and not p.get("no_plan"):
                    continue  # an error of the harness, not a verdict of the planner
                key = (r["kind"], pt.get("model"), pt.get("device"), pt.get("batch"),
                       pt.get("tag") or r["kind"], p["strategy"])
                groups.setdefault(key, []).append(
                    (budget, p.get("overhead"), bool(p.get("fits_sim"))))
    for key, pts in sorted(groups.items(), key=lambda kv: [str(x) for x in kv[0]]):
        if len({b for b, _, _ in pts}) >= 2:
            yield key, sorted(pts, key=lambda x: x[0])


def zoo_sweeps(zoo):
    """Yields (key, [(budget, overhead, fits)]) per graph of the zoo's results (bench/zoo.json),
    planned by `tfswap rewrite`'s default strategy, auto."""
    for g in zoo.get("graphs", []):
        pts = []
        for p in g.get("plans", []):
            if p.get("exit") == 0:
                pts.append((p["budget"], p.get("overhead"), bool(p.get("fits"))))
            elif "live" in p:  # no plan (the planner's no-fit message), not an error
                pts.append((p["budget"], None, False))
        if len({b for b, _, _ in pts}) >= 2:
            yield ("zoo", g["name"], zoo.get("device"), g.get("batch"), "zoo", "auto"), \
                sorted(pts, key=lambda x: x[0])


def replanned_sweeps(rep):
    """Yields (key, [(budget, overhead, fits)]) per sweep planned again by --replan."""
    for sw in rep.get("sweeps", []):
        pts = []
        for p in sw["points"]:
            if p.get("exit") == 0:
                pts.append((p["budget"], p["overhead"], bool(p["fits"])))
            elif p.get("no_plan"):
                pts.append((p["budget"], None, False))
        if len({b for b, _, _ in pts}) >= 2:
            yield ("replanned", sw["model"], sw["device"], sw["batch"],
                   "replanned (%s)" % rep.get("commit", "?"), "auto"), sorted(pts, key=lambda x: x[0])


def violations(pts, tol):
    """The points of one sweep (sorted by budget) that are worse than a smaller budget's best
    fitting plan: (budget, overhead or None for no plan, that smaller budget, its overhead)."""
    out = []
    best = None  # least overhead of a fitting plan at a smaller budget, and that budget
    for budget, overhead, fits in pts:
        if best is not None and budget > best[1]:
            if overhead is None or (fits and overhead > best[0] + tol):
                out.append((budget, overhead, best[1], best[0]))
        if fits and overhead is not None and (best is None or overhead < best[0]):
            best = (overhead, budget)
    return out


def check(data, zoo=None, strict=("auto",), tol=0.001, replanned=None):
    """Runs the check on the full benchmark's results data, the zoo's results zoo and the
    sweeps planned again by --replan, replanned (each may be None). It returns {"sweeps": n, "strict": [...], "violations": [...]}, each
    violation a dict with the sweep's key fields, whether its strategy must be monotone, and
    the two points compared."""
    all_sweeps = []
    if data:
        all_sweeps += list(sweeps(data))
    if zoo:
        all_sweeps += list(zoo_sweeps(zoo))
    n = len(all_sweeps)
    if replanned:
        all_sweeps += list(replanned_sweeps(replanned))
    out = {"sweeps": len(all_sweeps), "replanned_sweeps": len(all_sweeps) - n,
           "replanned": sorted([k[1], k[2], k[3]] for k, _ in all_sweeps[n:]),
           "strict": sorted(strict), "violations": []}
    for key, pts in all_sweeps:
        kind, model, device, batch, tag, strategy = key
        for budget, overhead, smaller, o2 in violations(pts, tol):
            out["violations"].append({
                "kind": kind, "model": model, "device": device, "batch": batch, "tag": tag,
                "strategy": strategy, "must": strategy in strict, "budget": budget,
                "overhead": overhead, "smaller_budget": smaller, "smaller_overhead": o2})
    return out


def line(v):
    got = "no plan" if v["overhead"] is None else "%+.1f%%" % (100 * v["overhead"])
    return "%s %s on %s, batch %s, %s: %s at %.2f GiB, but %+.1f%% at %.2f GiB" % (
        v["tag"], v["model"], v["device"], v["batch"], v["strategy"], got,
        v["budget"] / 2**30, 100 * v["smaller_overhead"], v["smaller_budget"] / 2**30)


def summary(res):
    bad = sum(1 for v in res["violations"] if v["must"])
    return "%d sweeps checked; %d point(s) of %s not monotone" % (
        res["sweeps"], bad, ", ".join(res["strict"]))


def curve_sweeps(data):
    """The curve sweeps of auto in the full benchmark's results: (model, device, batch, tag,
    [fractions])."""
    out = {}
    for r in data["records"]:
        res = r.get("result")
        if not res or r["kind"] != "curves":
            continue
        for pt in res["points"]:
            if pt.get("fraction") is None:
                continue
            if any(p["strategy"] == "auto" for p in pt.get("plans", [])):
                key = (pt["model"], pt["device"], pt["batch"], pt.get("tag") or "curve")
                out.setdefault(key, set()).add(pt["fraction"])
    return [k + (sorted(v, reverse=True),) for k, v in sorted(out.items(), key=lambda kv: [str(x) for x in kv[0]])]


def replan(data, tfswap, cache, only=None, log=print):
    """Plans auto's curve sweeps of data again with tfswap (only those whose (model, device,
    batch, tag) is in only, when given) and returns the --replanned document."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tfside  # bench/tfside.py: the graph generator's cache
    commit = subprocess.run(["git", "log", "-1", "--format=%h"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    # The plans depend on the Go sources only (the graphs on testmodels/large.py's version).
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "*.go", "go.mod"],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    doc = {"commit": commit + ("+" if dirty else ""), "sweeps": []}
    for model, device, batch, tag, fractions in curve_sweeps(data):
        if only is not None and (model, device, batch, tag) not in only:
            continue
        src, _ = tfside.build_graph(model, batch, cache)
        p = subprocess.run([tfswap, "simulate", src, "--device", device, "--fetch", "train", "--json", "-"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("tfswap simulate %s: %s" % (src, p.stderr.strip()[-2000:]))
        sim = json.JSONDecoder().raw_decode(p.stdout)[0]["result"]
        peak = max(d["peak_bytes"] for d in sim["devices"] if d["gpu"])
        sw = {"model": model, "device": device, "batch": batch, "tag": tag, "peak": peak, "points": []}
        for f in fractions:
            budget = int(peak * f)
            with tempfile.TemporaryDirectory() as tmp:
                rep = os.path.join(tmp, "r.json")
                p = subprocess.run([tfswap, "rewrite", src, "-o", os.path.join(tmp, "o.pb"), "--device", device,
                                    "--fetch", "train", "--strategy", "auto", "--budget", str(budget),
                                    "--report", rep], capture_output=True, text=True)
                pt = {"fraction": f, "budget": budget, "exit": p.returncode}
                if p.returncode == 0:
                    with open(rep) as fh:
                        plan = json.load(fh)["plan"]
                    pt.update(overhead=plan["overhead"], fits=bool(plan["fits"]),
                              strategy=plan.get("plan_strategy", ""))
                else:
                    pt["no_plan"] = "no plan" in p.stderr or "does not fit" in p.stderr
                    pt["error"] = (p.stderr.strip().splitlines() or [""])[0][:300]
            log("%s %s b%d %.2f: %s" % (model, device, batch, f, pt))
            sw["points"].append(pt)
            if p.returncode != 0:
                break  # as the benchmark's curves: no smaller budget once one has no plan
        doc["sweeps"].append(sw)
    return doc


def sources(results, zoo, replanned):
    """The words naming what the check read, for the section: the paths that were given."""
    words = []
    if results:
        words.append("the full benchmark's budget sweeps (docs/bench/results.json, commit %s)" % (
            results.get("meta", {}).get("git", {}).get("commit", "?")[:7]))
    if zoo:
        words.append("the zoo's (docs/bench/zoo.json, commit %s)" % zoo.get("commit", "?"))
    if replanned:
        words.append("the curve sweeps planned again with `--replan` (docs/bench/monotone.json, "
                     "commit %s)" % replanned.get("commit", "?"))
    return ", ".join(words) or "nothing"


def update_section(md, text, before="## Targets"):
    """Replaces the section of docs/BENCHMARKS.md md titled TITLE with text (inserting it
    before the section titled before, or at the end, when there is none)."""
    with open(md) as f:
        doc = f.read()
    new = TITLE + "\n\n" + text.rstrip() + "\n\n"
    i = doc.find(TITLE + "\n")
    if i >= 0:
        j = doc.find("\n## ", i + len(TITLE))
        doc = doc[:i] + new + (doc[j + 1:] if j >= 0 else "")
    else:
        j = doc.find("\n" + before)
        doc = doc[:j + 1] + new + doc[j + 1:] if j >= 0 else doc.rstrip() + "\n\n" + new
    doc = doc.rstrip() + "\n"
    with open(md + ".tmp", "w") as f:
        f.write(doc)
    os.replace(md + ".tmp", md)


def markdown(res, source):
    """The BENCHMARKS section body for the check's result res; source says which results were
    checked."""
    out = ["Planning must be monotone in the budget: a plan found for a smaller budget fits every "
           "larger one, so `auto` must not give a slower plan (or none) for a larger budget "
           "(`bench/monotone.py`, over %s; overheads simulated for each sweep's profile, tfswap's "
           "accounting, equal within 0.1 point). %s.\n" % (source, summary(res).capitalize())]
    groups = [("Points of `auto` that are not monotone in the full benchmark's and the zoo's results:",
               lambda v: v["must"] and v["kind"] != "replanned"),
              ("Points of `auto` that are not monotone when planned again (`--replan`):",
               lambda v: v["must"] and v["kind"] == "replanned"),
              ("Other strategies (they do not promise monotonicity), for information:",
               lambda v: not v["must"])]
    # A sweep of the full benchmark's results that was planned again without a point that is
    # not monotone is marked so: its points above are the older planner's.
    again = {tuple(k) for k in res.get("replanned", [])}
    bad_again = {(v["model"], v["device"], v["batch"]) for v in res["violations"]
                 if v["must"] and v["kind"] == "replanned"}

    def mark(v):
        k = (v["model"], v["device"], v["batch"])
        if v["kind"] != "replanned" and k in again and k not in bad_again:
            return " (planned again with `--replan`: monotone)"
        return ""
    for head, keep in groups:
        vs = [v for v in res["violations"] if keep(v)]
        if vs:
            out.append(head + "\n")
            out += ["- %s%s" % (line(v), mark(v) if v["must"] else "") for v in vs]
            out.append("")
    if res.get("replanned_sweeps"):
        bad = sum(1 for v in res["violations"] if v["must"] and v["kind"] == "replanned")
        out.append("Planned again with `--replan`, %d sweep(s) of `auto` have %d point(s) that are "
                   "not monotone.\n" % (res["replanned_sweeps"], bad))
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "bench", "results.json"))
    ap.add_argument("--zoo", default=os.path.join(ROOT, "docs", "bench", "zoo.json"),
                    help="the zoo's results ('' for none)")
    ap.add_argument("--replanned", default=os.path.join(ROOT, "docs", "bench", "monotone.json"),
                    help="sweeps planned again by --replan ('' for none); written by --replan")
    ap.add_argument("--replan", action="store_true",
                    help="plan auto's curve sweeps of --results again (those not monotone; --all: every one)")
    ap.add_argument("--all", action="store_true", help="with --replan, every curve sweep")
    ap.add_argument("--update-docs", action="store_true",
                    help="write the check's section of docs/BENCHMARKS.md")
    ap.add_argument("--tfswap", help="with --replan, the tfswap binary (default: built from this checkout)")
    ap.add_argument("--cache", default=os.path.join(ROOT, "out", "monotone"),
                    help="with --replan, where the generated graphs are kept")
    ap.add_argument("--strategy", default="auto",
                    help="comma-separated strategies that must be monotone (default auto)")
    ap.add_argument("--tolerance", type=float, default=0.001,
                    help="overhead difference ignored (default 0.001, 0.1 point)")
    args = ap.parse_args(argv)
    loaded = []
    for path in (args.results, args.zoo, args.replanned):
        if not path or (path == args.replanned and (args.replan or not os.path.exists(path))):
            loaded.append(None)
            continue
        try:
            with open(path) as f:
                loaded.append(json.load(f))
        except (OSError, ValueError) as e:
            print("monotone: %s: %s" % (path, e), file=sys.stderr)
            return 2
    strict = set(args.strategy.split(","))
    if args.replan:
        if not args.replanned:
            print("monotone: --replan needs --replanned", file=sys.stderr)
            return 2
        only = None
        if not args.all:
            only = {(v["model"], v["device"], v["batch"], v["tag"])
                    for v in check(loaded[0], None, strict, args.tolerance)["violations"]
                    if v["must"] and v["kind"] == "curves"}
        tfswap = args.tfswap
        if not tfswap:
            tfswap = os.path.join(args.cache, "tfswap")
            subprocess.run(["go", "build", "-o", tfswap, "./cmd/tfswap"], cwd=ROOT, check=True,
                           env=dict(os.environ, CGO_ENABLED="0"))
        doc = replan(loaded[0], tfswap, args.cache, only)
        tmp = args.replanned + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.replanned)
        loaded[2] = doc
    res = check(loaded[0], loaded[1], strict, args.tolerance, loaded[2])
    if args.update_docs:
        update_section(os.path.join(ROOT, "docs", "BENCHMARKS.md"),
                       markdown(res, sources(*loaded)))
    for v in res["violations"]:
        print("%s %s" % ("NOT MONOTONE" if v["must"] else "note", line(v)))
    print(summary(res))
    return 1 if any(v["must"] for v in res["violations"]) else 0


if __name__ == "__main__":
    sys.exit(main())
