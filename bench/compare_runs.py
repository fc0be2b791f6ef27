#!/usr/bin/env python3
"""Compares the plans of two benchmark runs (bench/run.py's results.json) point by point.

    .venv/bin/python bench/compare_runs.py NEW/results.json OLD/results.json [--ignore grappler]

Made to check that a redesign reproduces the benchmark (issue 14): run bench/run.py twice with
the same options, once with `--tfswap` set to the binary before the change, and compare. A
point is one plan: (record kind, model, device, batch, budget, strategy). Two plans agree when
their simulated step (peak, step time, bytes each way), overhead, fit and the plan's own report
(without file paths and timings) are equal. Prints each differing point and a count per
strategy; exits 1 when a point differs or is missing in either run (strategies named by
--ignore are counted but do not fail), 2 when the runs share no point.
"""

import argparse
import json
import sys

# Report fields that name files or time tfswap itself, not the plan.
VOLATILE = ("input", "output", "seconds", "report")


def plans(results):
    """Returns the plans of a results.json, keyed by their point."""
    out = {}
    for rec in results.get("records", []):
        res = rec.get("result")
        if not isinstance(res, dict):
            continue
        for p in res.get("points", []):
            for pl in p.get("plans", []):
                key = (rec.get("kind"), p.get("model"), p.get("device"), p.get("batch"),
                       p.get("budget"), pl.get("strategy"))
                out[key] = pl
    return out


def signature(pl):
    """Returns what two runs' plans must share to agree, as canonical JSON."""
    sim = pl.get("sim") or {}
    report = {k: v for k, v in (pl.get("plan") or {}).items() if k not in VOLATILE}
    return json.dumps([sim.get("peak"), sim.get("step_ns"), sim.get("d2h_bytes"),
                       sim.get("h2d_bytes"), pl.get("overhead"), pl.get("fits_sim"),
                       pl.get("plan_peaks"), report], sort_keys=True)


def compare(new, old):
    """Compares two runs' plans; returns (per-strategy [same, differing] counts, the keys
    that differ, the keys found in one run only)."""
    a, b = plans(new), plans(old)
    counts, differ = {}, []
    for key in sorted(set(a) & set(b), key=repr):
        c = counts.setdefault(key[5], [0, 0])
        if signature(a[key]) == signature(b[key]):
            c[0] += 1
        else:
            c[1] += 1
            differ.append(key)
    only = sorted(set(a) ^ set(b), key=repr)
    return counts, differ, only


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("new")
    ap.add_argument("old")
    ap.add_argument("--ignore", default="", help="comma-separated strategies whose differences "
                    "do not fail the comparison (e.g. grappler: TensorFlow's own swapping)")
    args = ap.parse_args(argv)
    runs = []
    for path in (args.new, args.old):
        with open(path) as f:
            runs.append(json.load(f))
    ignore = {s for s in args.ignore.split(",") if s}
    counts, differ, only = compare(runs[0], runs[1])
    if not counts:
        print("%s and %s share no point" % (args.new, args.old), file=sys.stderr)
        return 2
    for key in differ:
        print("differs: %s" % (key,))
    for key in only:
        print("in one run only: %s" % (key,))
    for s in sorted(counts):
        same, diff = counts[s]
        print("%-10s %3d same, %3d differ%s" % (s, same, diff, " (ignored)" if s in ignore else ""))
    failing = [k for k in differ if k[5] not in ignore] + only
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
