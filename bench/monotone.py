#!/usr/bin/env python3
"""Checks that planning is monotone in the budget along every budget sweep of the benchmark's
results (issue 14 item 3): a plan that fits a budget fits every larger one, so the best
overhead found at a budget should be no worse than the best found at any smaller budget.

    .venv/bin/python bench/monotone.py [--results docs/bench/results.json] [--strategy auto]

A sweep is every plan of one strategy for one model, device, batch and kind (the overhead
curves, the issue's budget sweeps). For each point it compares the plan's predicted overhead
(simulated, tfswap's accounting, as the results record it) with the least overhead of the
plans that fit (by the simulator) at smaller budgets of the same sweep, and lists every point
that is worse by more than --tolerance. It exits 1 when a strategy named by --strategy (the
auto strategy, which promises monotonicity, by default) has such a point, 0 otherwise; the
other strategies' points are listed for information.
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sweeps(data):
    """Yields (key, [(budget, overhead, fits)]) per sweep with at least two budgets."""
    groups = {}
    for r in data["records"]:
        res = r.get("result")
        if not res or r["kind"] in ("nosswap", "lms_thresholds"):
            continue
        for pt in res["points"] if "points" in res else [res]:
            for p in pt.get("plans", []):
                budget = p.get("budget", pt.get("budget"))
                if budget is None or p.get("overhead") is None:
                    continue
                key = (r["kind"], pt.get("model"), pt.get("device"), pt.get("batch"),
                       pt.get("tag") or r["kind"], p["strategy"])
                groups.setdefault(key, []).append((budget, p["overhead"], bool(p.get("fits_sim"))))
    for key, pts in sorted(groups.items(), key=lambda kv: [str(x) for x in kv[0]]):
        if len({b for b, _, _ in pts}) >= 2:
            yield key, sorted(pts)


def violations(pts, tol):
    out = []
    best = None  # least overhead of a fitting plan at a smaller budget, and that budget
    for budget, overhead, fits in pts:
        if fits and best is not None and overhead > best[0] + tol:
            out.append((budget, overhead, best[1], best[0]))
        if fits and (best is None or overhead < best[0]):
            best = (overhead, budget)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "bench", "results.json"))
    ap.add_argument("--strategy", default="auto",
                    help="comma-separated strategies that must be monotone (default auto)")
    ap.add_argument("--tolerance", type=float, default=0.001,
                    help="overhead difference ignored (default 0.001, 0.1 point)")
    args = ap.parse_args(argv)
    with open(args.results) as f:
        data = json.load(f)
    strict = set(args.strategy.split(","))
    n, bad = 0, 0
    for key, pts in sweeps(data):
        n += 1
        for budget, overhead, smaller, o2 in violations(pts, args.tolerance):
            kind, model, device, batch, tag, strategy = key
            must = strategy in strict
            bad += must
            print("%s %s %s on %s, batch %s, %s: %+.1f%% at %.2f GiB, but %+.1f%% at %.2f GiB" % (
                "NOT MONOTONE" if must else "note", kind, model, device, batch, strategy,
                100 * overhead, budget / 2**30, 100 * o2, smaller / 2**30))
    print("%d sweeps checked; %d point(s) of %s not monotone" % (n, bad, ", ".join(sorted(strict))))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
