#!/usr/bin/env python3
"""Compares the full benchmark's results with an older run's, class by class (issue 14: "the
old benchmark's results reproduced, or improved with the difference explained, after the
redesign"), and renders the section "The redesign against the old run (issue 14)" of
docs/BENCHMARKS.md.

    .venv/bin/python bench/redesign.py [--results docs/bench/results.json]
                                       [--baseline docs/bench/results_11753b4.json]
                                       [--notes docs/bench/redesign.json]

bench/compare_runs.py compares two runs point by point, which only works when both ran the
same points. Between 11753b4 and the redesign the default budget changed (TensorFlow 2.18's
MinSystemMemory rule instead of the larger of 300 MiB and 6%), and with it B0 and every ladder
batch, and the judge of "fits" became stricter (the VirtualCluster's microsecond reading,
DeterminePeakMemoryUsage's own, beside its nanosecond one). So this compares what the report's
tables say: B0 per model and device (with what bounds the new B0), the largest ladder multiple
per strategy and overhead limit (with the old run also re-judged by the microsecond reading),
the zero-overhead reductions and overheads of the curves (budgets as fractions of the
unswapped peak), the targets, the verification and the rewrite times. The causes of the points
that got worse, found by re-running single points with the old and the new binary, are kept in
--notes (a JSON list of {"what", "why", "how"}) and rendered with the section.

bench/report.py renders the section when the baseline exists; run alone, this prints it.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
from report import GIB, fits, fits_sim, gib, mname, pct, strategy_label  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLE = "## The redesign against the old run (issue 14)"
BASELINE = os.path.join(ROOT, "docs", "bench", "results_11753b4.json")
NOTES = os.path.join(ROOT, "docs", "bench", "redesign.json")
LIMITS = (0.10, 0.25, 0.50)


def fits_all(row):
    """fits_all judges a plan as the redesigned harness does: the simulator and both of the
    VirtualCluster's readings (nanosecond and microsecond) within the budget, where it was
    checked. Rows of a run whose fits_vc held the nanosecond reading alone are judged again
    from their recorded VirtualCluster figures."""
    if not fits_sim(row):
        return False
    vc = row.get("vc")
    if not vc:
        return row.get("fits_vc") is not False
    return vc["peak_bytes"] <= row["budget"] and vc.get("peak_bytes_us", 0) <= row["budget"]


def ladder_multiple(res, model, device, strategy, limit, judge):
    """ladder_multiple returns the largest ladder multiple of B0 whose plan fits by judge within
    the overhead limit, or 0 when none does."""
    r = report.max_batch(res, model, device, strategy, limit, judge=judge)
    return r["multiple"] if r else 0


def devices_of(res):
    m = res.meta
    return list(m["devices"]) + [d for _, d in m.get("extra_pairs", []) if d not in m["devices"]]


def b0_rows(old, new):
    """b0_rows yields, per model and device of the new run, the B0 of both runs, the budgets and
    what bounds the new B0: the accounting (tfswap, Grappler's nanosecond or microsecond
    reading) that puts the unswapped graph at B0+1 over the budget."""
    for (mo, d), ns in sorted(new.nosswap.items()):
        os_ = old.nosswap.get((mo, d))
        if not os_:
            continue
        nxt = ns.get("sim_next") or {}
        over = []
        for key, name in (("peak", "tfswap"), ("grappler_peak", "VC ns"), ("grappler_peak_us", "VC us")):
            if nxt.get(key) is not None and nxt[key] > ns["budget"]:
                over.append(name)
        # The batch the budget change alone moves B0 by: the change over the bytes per sample.
        slope = ns.get("bytes_per_sample") or os_.get("bytes_per_sample")
        shift = (ns["budget"] - os_["budget"]) / slope if slope else 0.0
        # Would the old B0 fit the new budget by the new judge (the old run's own figures)?
        osim = os_.get("sim") or {}
        old_peaks = [osim.get("peak"), osim.get("grappler_peak")]
        yield {"model": mo, "device": d, "old_b0": os_["b0"], "new_b0": ns["b0"],
               "old_budget": os_["budget"], "new_budget": ns["budget"], "bound": over,
               "budget_shift": shift,
               "old_b0_fits_new_budget": all(p is not None and p <= ns["budget"] for p in old_peaks),
               "new_sim": ns.get("sim") or {}, "old_sim": osim}


def b0_cause(r):
    """b0_cause says which class explains a B0 that moved."""
    if r["new_b0"] == r["old_b0"]:
        return "reproduced"
    moved = r["new_b0"] - r["old_b0"]
    budget = r["new_budget"] - r["old_budget"]
    if r["bound"] == ["VC us"]:
        return "the microsecond reading bounds it (new judge)"
    if budget and (moved > 0) == (budget > 0) and abs(moved - r["budget_shift"]) <= max(2, 0.25 * abs(r["budget_shift"])):
        return "budget (%+.0f expected from the budget alone)" % r["budget_shift"]
    if budget and (moved > 0) == (budget > 0):
        return "budget (%+.0f expected from it alone) and the simulator's peaks" % r["budget_shift"]
    return "the simulator's peaks (budget alone: %+.0f)" % r["budget_shift"]


def cells(old, new):
    """cells compares the largest-ladder-multiple tables: for each device, model, strategy and
    overhead limit of both runs, the old multiple (as published, nanosecond judge), the old one
    re-judged with the microsecond reading and the new one (judged with both)."""
    out = []
    for d, mo, s, lim in cells_keys(old, new):
        out.append({"device": d, "model": mo, "strategy": s, "limit": lim,
                    "old": ladder_multiple(old, mo, d, s, lim, fits),
                    "old_all": ladder_multiple(old, mo, d, s, lim, fits_all),
                    "new": ladder_multiple(new, mo, d, s, lim, fits)})
    return out


def sim_cells(old, new):
    """sim_cells compares the same cells as cells with the simulator alone as the judge of both
    runs (tfswap's accounting, which the VirtualCluster's readings do not enter), returning
    (model, old multiple, new multiple) per cell."""
    out = []
    for c in cells_keys(old, new):
        d, mo, s, lim = c
        out.append((mo, ladder_multiple(old, mo, d, s, lim, fits_sim),
                    ladder_multiple(new, mo, d, s, lim, fits_sim)))
    return out


def cells_keys(old, new):
    """cells_keys yields (device, model, strategy, limit) for every cell both runs' tables have."""
    strategies = [s for s in new.strategies if s in old.strategies]
    for d in devices_of(new):
        for mo in new.meta["models"]:
            if not old.b0.get((mo, d)) or not new.b0.get((mo, d)):
                continue
            if not new.select(model=mo, device=d, tag="ladder"):
                continue
            for s in strategies:
                for lim in LIMITS:
                    yield d, mo, s, lim


def why_lower(new, c):
    """why_lower explains a cell whose new multiple is below the old one from the new run's own
    plan at the old multiple: none found, over the overhead limit, or over the budget by a
    VirtualCluster reading."""
    rows = [r for r in new.select(model=c["model"], device=c["device"], strategy=c["strategy"],
                                  tag="ladder") if r["multiple"] == c["old"]]
    if not rows:
        return "not run at %gx" % c["old"]
    r = rows[0]
    if r.get("skipped"):
        return "skipped at %gx (no plan at a smaller batch)" % c["old"]
    if r.get("error"):
        return "no plan at %gx (batch %d)" % (c["old"], r["batch"])
    if not fits_sim(r):
        return "over the budget by the simulator at %gx" % c["old"]
    if not fits(r):
        return "over the budget by the VirtualCluster at %gx" % c["old"]
    return "%s at %gx (batch %d)" % (pct(r["overhead"]), c["old"], r["batch"])


def old_overhead(old, c):
    rows = [r for r in old.select(model=c["model"], device=c["device"], strategy=c["strategy"],
                                  tag="ladder") if r["multiple"] == c["old"]]
    return pct(rows[0]["overhead"]) if rows and rows[0].get("overhead") is not None else "-"


def curve_rows(old, new, strategy="auto"):
    """curve_rows pairs the curves' points of one strategy by model and budget fraction (of the
    unswapped peak at each run's own B0 on the curve device): (model, fraction, old row, new
    row)."""
    def index(res):
        out = {}
        for r in res.rows:
            if r["tag"] == "curve" and r["strategy"] == strategy and r.get("fraction") is not None:
                out[(r["model"], round(r["fraction"], 4))] = r
        return out
    a, b = index(old), index(new)
    return [(k[0], k[1], a[k], b[k]) for k in sorted(set(a) & set(b))]


def targets(res):
    """targets returns the verdicts of report.py's Targets section for res, [(target, verdict,
    evidence)], rendering its plot into a scratch directory. A run whose records lack what the
    section reads raises ValueError naming the run's commit and what is missing, rather than
    rendering the comparison without its targets."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "bench"))
        try:
            return report.section_targets(res, [], d)
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError("the Targets section of the run at commit %s cannot be rendered: "
                             "%s: %s" % (res.meta["git"]["commit"][:7], type(e).__name__, e)) from e


def fmt_mult(x):
    return "%gx" % x if x else "-"


def section(old, new, notes, out):
    """section appends the comparison's section to out (lines of Markdown)."""
    om, nm = old.meta, new.meta
    import compare_runs  # bench/compare_runs.py
    counts, _, _ = compare_runs.compare({"records": new.records}, {"records": old.records})
    shared = sum(a + b for a, b in counts.values())
    out.append(TITLE + "\n")
    out.append(
        "Issue 14 asks for the old benchmark's results reproduced, or improved with the "
        "difference explained, after the redesign. The old run: `%s` at commit `%s` on %s (%.1f "
        "minutes); this one: `%s` at commit `%s` on %s (%.1f minutes), both mode %s on the "
        "2-core machine. Every figure below is simulated for the row's profile (tfswap's "
        "simulator) and judged with the VirtualCluster where the table says so, as in the "
        "sections above; rewrite times are measured on CPU (one core, `GOMAXPROCS=1`, other jobs "
        "on the machine). `bench/compare_runs.py` pairs plans of the same model, device, batch, "
        "budget and strategy: the two runs share %d such points, because the budgets changed "
        "and with them every B0 and ladder batch; this section, generated by "
        "`bench/redesign.py` from the two results files (the old one kept as "
        "`docs/bench/results_11753b4.json`), compares what the tables say instead.\n" % (
            om["command"].strip(), om["git"]["commit"][:7], om["started"][:10], om["elapsed_s"] / 60,
            nm["command"].strip(), nm["git"]["commit"][:7], nm["started"][:10], nm["elapsed_s"] / 60,
            nm["mode"], shared))
    out.append(
        "What changed between them, by class: (1) the default budget follows TensorFlow 2.18's "
        "`MinSystemMemory` (the memory less 500 MiB up to compute capability 6.x, 1050 MiB on "
        "7.x, 1800 MiB from 9.0) instead of the larger of 300 MiB and 6%: up on `gtx1080ti`, "
        "`titanx` and `h100`, down on `v100-16gb`; (2) the judge is stricter: a plan fits only "
        "when the VirtualCluster's microsecond reading (`DeterminePeakMemoryUsage`'s own) is "
        "within the budget too, and `tfswap rewrite` plans against all three figures "
        "(`--fit-accounting all`, was `both`); B0 is searched by the same rule; (3) the "
        "planner was redesigned (rewrite/plan, `cost.SwapStep` as the one memory model, auto's "
        "effort rule and link-bound skips, tighter and recomputed retries, the Problem "
        "read-only), and what it writes changed (a gate reads its trigger's smallest output, "
        "bd7b41e) and what it may swap or gate (Grappler's fan-out decisions kept, cf7d69a; "
        "relays, 467c9c8); (4) the simulator changed: value-dead nodes run as the NoOps "
        "Grappler's dependency optimizer makes of them (8e64d51), except nodes carrying "
        "`_grappler_do_not_remove`, tfswap's own (7861305); (5) `lms-fixed` (LMS with its "
        "fixed thresholds) is a strategy of its own, new in the tables.\n")

    # Budgets and B0.
    out.append("### Budgets and B0\n")
    out.append("| model | device | budget old / new GiB | B0 old / new | new B0+1 over the budget by | cause |")
    out.append("|---|---|---|---|---|---|")
    rows = list(b0_rows(old, new))
    for r in rows:
        out.append("| %s | `%s` | %s / %s | %d / %d | %s | %s |" % (
            mname(r["model"]), r["device"], gib(r["old_budget"]), gib(r["new_budget"]),
            r["old_b0"], r["new_b0"], ", ".join(r["bound"]) or "-", b0_cause(r)))
    same = sum(1 for r in rows if r["old_b0"] == r["new_b0"])
    out.append("\n%d of %d B0s are unchanged. \"Expected from the budget alone\" is the budget's "
               "change over the bytes per sample of the unswapped graph (the slope of the B0 "
               "search).\n" % (same, len(rows)))

    # The tables.
    cs = cells(old, new)
    out.append("### The largest trainable batch, cell by cell\n")
    out.append(
        "Each cell of the tables of \"Largest trainable batch at a given overhead\" (device, "
        "model, strategy present in both runs, overhead limit 10%, 25% or 50%): the old run "
        "as published (the VirtualCluster's nanosecond reading as the judge), the old run "
        "judged again with the microsecond reading as well (from its recorded VirtualCluster "
        "figures; plans it did not check count as fitting, as in the tables) and this run. The "
        "ladder's rungs are multiples of each run's own B0, so a cell compares multiples, not "
        "batches. Counts by strategy, this run against the old one as published and, in the "
        "last column, against the old run re-judged:\n")
    out.append("| strategy | cells | same | higher | lower | lower than the re-judged old run |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for s in sorted({c["strategy"] for c in cs}, key=lambda x: new.strategies.index(x)):
        sc = [c for c in cs if c["strategy"] == s]
        out.append("| %s | %d | %d | %d | %d | %d |" % (
            strategy_label(s), len(sc), sum(c["new"] == c["old"] for c in sc),
            sum(c["new"] > c["old"] for c in sc), sum(c["new"] < c["old"] for c in sc),
            sum(c["new"] < c["old_all"] for c in sc)))
    lower = [c for c in cs if c["new"] < c["old_all"]]
    out.append("\nThe same cells per model, with the VirtualCluster as the judge (as above, "
               "against the old run re-judged) and with the simulator alone as the judge of both "
               "runs (tfswap's accounting: no VirtualCluster figure enters it, but the simulator "
               "itself changed between the runs, and this run's planners still plan against all "
               "three accountings, so a plan over the microsecond reading is no plan by either "
               "judge; see the notes below):\n")
    out.append("| model | cells | VirtualCluster: same / higher / lower | simulator alone: same / higher / lower |")
    out.append("|---|---:|---|---|")
    sc = sim_cells(old, new)
    for mo in new.meta["models"]:
        vc = [(c["old_all"], c["new"]) for c in cs if c["model"] == mo]
        sm = [(a, b) for m_, a, b in sc if m_ == mo]
        if not vc:
            continue

        def split(pairs):
            return "%d / %d / %d" % (sum(a == b for a, b in pairs), sum(b > a for a, b in pairs),
                                     sum(b < a for a, b in pairs))
        out.append("| %s | %d | %s | %s |" % (mname(mo), len(vc), split(vc), split(sm)))
    judged = sum(1 for c in cs if c["old_all"] <= c["new"] < c["old"])
    out.append("\n%d cells are lower than the old run as published but not lower than the old "
               "run re-judged: the old plan there fitted by the VirtualCluster's nanosecond "
               "reading but not by its microsecond one, which the new judge requires.\n" % judged)
    if lower:
        out.append("The cells lower than the re-judged old run, one row per device, model and "
                   "strategy with the three limits (10% / 25% / 50%) side by side; then the "
                   "old plan's simulated overhead at the largest old multiple and what this "
                   "run's plan at that multiple did:\n")
        out.append("| device | model | strategy | old, re-judged | new | old plan there | new plan there |")
        out.append("|---|---|---|---|---|---|---|")
        groups = {}
        for c in cs:
            groups.setdefault((c["device"], c["model"], c["strategy"]), []).append(c)
        for key, g in groups.items():
            if not any(c in lower for c in g):
                continue
            top = max((c for c in g if c in lower), key=lambda c: c["old_all"])
            top = dict(top, old=top["old_all"])
            out.append("| `%s` | %s | %s | %s | %s | %s | %s |" % (
                key[0], mname(key[1]), strategy_label(key[2]),
                " / ".join(fmt_mult(c["old_all"]) for c in g), " / ".join(fmt_mult(c["new"]) for c in g),
                old_overhead(old, top), why_lower(new, top)))
    higher = [c for c in cs if c["new"] > c["old"]]
    if higher:
        out.append("\nThe higher cells: %s.\n" % "; ".join(
            "`%s` %s %s <=%.0f%% %s -> %s" % (c["device"], mname(c["model"]), strategy_label(c["strategy"]),
                                             100 * c["limit"], fmt_mult(c["old"]), fmt_mult(c["new"]))
            for c in higher))
    else:
        out.append("")

    # Curves.
    cr = curve_rows(old, new)
    if cr:
        out.append("### `auto`'s overhead along the curves\n")
        out.append(
            "The curves' budgets are fractions of the unswapped simulated peak at each run's B0 "
            "on `%s` (simulated for that profile, not VirtualCluster-checked). Per model, "
            "`auto`'s simulated overhead at each fraction, old -> new (\"none\": no plan); "
            "points within 0.1 point are counted as the same.\n" % nm["curve_device"])
        out.append("| model | B0 old / new | same | better | worse | the worse points |")
        out.append("|---|---|---:|---:|---:|---|")
        for mo in new.meta["curve_models"]:
            pts = [(f, a, b) for m_, f, a, b in cr if m_ == mo]
            if not pts:
                continue
            same = better = 0
            worse = []
            for f, a, b in pts:
                ao = a["overhead"] if fits_sim(a) else None
                bo = b["overhead"] if fits_sim(b) else None
                if ao == bo or (ao is not None and bo is not None and abs(ao - bo) <= report.TOL):
                    same += 1
                elif bo is not None and (ao is None or bo < ao):
                    better += 1
                else:
                    worse.append("%.0f%%: %s -> %s" % (100 * f, pct(ao) if ao is not None else "none",
                                                      pct(bo) if bo is not None else "none"))
            out.append("| %s | %s / %s | %d | %d | %d | %s |" % (
                mname(mo), old.b0.get((mo, om["curve_device"]), "-"),
                new.b0.get((mo, nm["curve_device"]), "-"), same, better, len(worse),
                "; ".join(worse) or "-"))
        out.append("")

    # Targets.
    tv = [targets(old), targets(new)]
    out.append("### The issue's targets\n")
    if not (tv[0] and tv[1]):
        out.append("Missing: section \"Targets (issue 4)\" gave no verdicts for %s.\n" % " or ".join(
            w for w, v in (("the old run", tv[0]), ("this run", tv[1])) if not v))
    else:
        out.append("The verdicts of section \"Targets (issue 4)\" for each run (the evidence for "
                   "this run's is in that section):\n")
        out.append("| target | old run | this run |")
        out.append("|---|---|---|")
        olds = {t.split(":")[0].split(" (B0")[0]: v for t, v, _ in tv[0]}
        for t, v, _ in tv[1]:
            key = t.split(":")[0].split(" (B0")[0]
            out.append("| %s | %s | %s |" % (t.replace(" (B0 = ", " (this run's B0 = "),
                                             olds.get(key, "-"), v))
        out.append("")

    # Rewrite time.
    out.append("### Rewrite time per strategy\n")
    out.append("Median and largest `tfswap rewrite` time over the ladder and target points "
               "(measured on CPU, one core, `GOMAXPROCS=1`; each run shared the machine with "
               "other jobs, so these are upper bounds and differ with the load as well as the "
               "code).\n")
    out.append("| strategy | old median / max | new median / max |")
    out.append("|---|---|---|")
    for s in new.strategies:
        def stat(res):
            ts = sorted(r["rewrite_s"] for r in res.rows if r["strategy"] == s and r["tag"] != "curve"
                        and r.get("rewrite_s") is not None)
            return "%.2f / %.2f s" % (ts[len(ts) // 2], ts[-1]) if ts else "-"
        out.append("| %s | %s | %s |" % (strategy_label(s), stat(old), stat(new)))
    out.append("")

    if notes:
        out.append("### What explains the differences (checked point by point)\n")
        for n in notes:
            out.append("* **%s** %s (%s)" % (n["what"], n["why"], n["how"]))
        out.append("")


def load(path):
    with open(path) as f:
        return report.Results(json.load(f))


def load_notes(path):
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "bench", "results.json"))
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--notes", default=NOTES)
    args = ap.parse_args(argv)
    loaded = []
    for path, fn in ((args.baseline, load), (args.results, load), (args.notes, load_notes)):
        try:
            loaded.append(fn(path))
        except (OSError, ValueError, KeyError) as e:
            print("redesign: %s: %s" % (path, e), file=sys.stderr)
            return 1
    old, new, notes = loaded
    out = []
    try:
        section(old, new, notes, out)
    except ValueError as e:
        print("redesign: %s" % e, file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
