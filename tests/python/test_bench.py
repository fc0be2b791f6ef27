"""The benchmark harness (bench/) in its smallest mode, so that it cannot rot: VGG-16 on a
made-up 3 GiB GPU, two batches, every strategy tfswap offers and Grappler's swapping, then
the report. Also checks that the harness's lowering of Grappler's swap kernels (for the
VirtualCluster) and the simulator's (cost/grappler_swaps.go) agree.

Run:  .venv/bin/python -m pytest -q tests/python/test_bench.py   (about a minute)
"""

import json
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

# Graphs, the Grappler op library and VirtualCluster results are cached across runs here
# (git-ignored), so that a second run of the test skips the compile and the graph builds.
CACHE = ROOT / "out" / "bench-test-cache"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--smoke", "--out", str(out),
                        "--cache", str(CACHE)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(out / "results.json") as f:
        return out, json.load(f)


def test_smoke_run_measures_every_point(smoke):
    out, res = smoke
    meta, recs = res["meta"], res["records"]
    assert meta["mode"] == "smoke"
    assert not [r for r in recs if r["error"]], [r["error"] for r in recs if r["error"]]
    ns = [r["result"] for r in recs if r["kind"] == "nosswap"]
    assert len(ns) == 1 and ns[0]["b0"] >= 2
    b0 = ns[0]["b0"]
    # The no-swap maximum: fits at B0, not at B0 + 1 (simulated, real graphs).
    assert ns[0]["sim"]["peak"] <= ns[0]["budget"] < ns[0]["sim_next"]["peak"]
    # Every strategy tfswap lists is benchmarked (the harness reads them from --help).
    listed = subprocess.run([meta.get("tfswap") or str(out / "tfswap"), "rewrite", "--list-strategies"],
                            capture_output=True, text=True, check=True).stdout
    for line in listed.splitlines():
        if line.strip():
            assert line.split()[0] in meta["strategies"], (line, meta["strategies"])
    points = [p for r in recs if r["kind"] == "ladder" for p in r["result"]["points"]]
    assert sorted(p["batch"] for p in points) == [b0, 2 * b0]
    for p in points:
        names = [x["strategy"] for x in p["plans"]]
        assert names == meta["strategies"] and "grappler" in names
        for x in p["plans"]:
            if x.get("no_plan"):
                continue
            assert not x.get("error"), x
            assert x["sim"]["peak"] > 0 and x["overhead"] > -0.01
            assert x["rewrite_s"] >= 0
            if x["strategy"] not in ("grappler", "lms-sweep"):
                # tfswap's own CPU time, measured from the worker's reaped children.
                assert 0 < x["rewrite_cpu_s"] <= x["rewrite_s"] + 1.0, x
            if x["fits_sim"]:
                # Every plan the simulator says fits was checked with the VirtualCluster.
                assert x["vc"]["peak_bytes"] > 0 and isinstance(x["fits_vc"], bool)
    # At B0 the unswapped graph fits: the VirtualCluster checked it too.
    p1 = next(p for p in points if p["batch"] == b0)
    assert p1["base_vc"]["peak_bytes"] > 0
    curves = [p for r in recs if r["kind"] == "curves" for p in r["result"]["points"]]
    assert curves and all(c["budget"] < c["base"]["peak"] for c in curves if c["fraction"])


def test_smoke_report(smoke, tmp_path):
    out, res = smoke
    import report
    assert report.main(["--results", str(out / "results.json"), "--docs", str(tmp_path)]) == 0
    text = (tmp_path / "BENCHMARKS.md").read_text()
    for heading in ("## Largest batch without swapping", "## Largest trainable batch",
                    "## Overhead versus memory reduction", "## Targets", "## Every ladder point"):
        assert heading in text
    assert res["meta"]["git"]["commit"][:12] in text
    svgs = list((tmp_path / "bench").glob("*.svg"))
    assert svgs
    for s in svgs:
        ET.parse(s)  # well-formed
    assert json.loads((tmp_path / "bench" / "results.json").read_text())["meta"]["mode"] == "smoke"


def test_grappler_lowering_matches_the_simulator(smoke, tmp_path):
    """tfswap simulate reads Grappler's raw output (cost/grappler_swaps.go lowers it) exactly as
    it reads the harness's lowered graph (bench/tfside.py), which the VirtualCluster checks."""
    out, res = smoke
    import tfside
    tfswap = res["meta"]["tfswap"]
    prof = tfside.load_profile(str(out / "profiles" / "smoke-3gb.json"))
    b0 = next(r["result"]["b0"] for r in res["records"] if r["kind"] == "nosswap")
    src, _ = tfside.build_graph("vgg16", 2 * b0, str(CACHE))
    tfside.load_swap_ops(str(CACHE))
    raw, low = tmp_path / "raw.pb", tmp_path / "low.pb"
    st = tfside.grappler_swap(src, str(raw), str(low), prof, 1 << 30, str(CACHE))
    assert st["swaps"] > 0 and st["lowered"] == 2 * st["swaps"]

    def sim(path):
        p = subprocess.run([tfswap, "simulate", str(path), "--device-file",
                            str(out / "profiles" / "smoke-3gb.json"), "--fetch", "train",
                            "--json", "-"], capture_output=True, text=True, check=True)
        r, _ = json.JSONDecoder().raw_decode(p.stdout)
        r = r["result"]
        return (r["step_time_ns"], [(d["name"], d["peak_bytes"]) for d in r["devices"]],
                r["d2h"], r["h2d"], r["unsized_tensors"])

    a, b = sim(raw), sim(low)
    assert a == b
    # One copy out per swapped tensor (TensorFlow sends a tensor once to each device), one
    # copy in per swap pair.
    assert 1 <= a[2]["Count"] <= st["swaps"] and a[3]["Count"] == st["swaps"]


def test_a_crashing_task_fails_alone():
    """A task that kills its worker (as TensorFlow's segfaults do) is recorded as failed; the
    tasks that were in flight with it are run again, each in a worker of its own, and
    succeed."""
    import run as bench_run

    tasks = [("selftest", {"n": i, "crash": i == 2}) for i in range(6)]
    pool = bench_run.Pool(2, {"selftest": True})
    logs = []
    try:
        results = bench_run.run_tasks(pool, tasks, logs.append, lambda r: None)
    finally:
        pool.close()
    by_n = {r["args"]["n"]: r for r in results}
    assert sorted(by_n) == list(range(6)), logs
    assert "worker died" in (by_n[2]["error"] or ""), by_n[2]
    for i in (0, 1, 3, 4, 5):
        assert by_n[i]["error"] is None and by_n[i]["result"] == {"n": i}, (by_n[i], logs)
    assert any("a worker died" in line for line in logs), logs


class FakeTfswap:
    """FakeTfswap stands for bench/run.py's Tfswap with made-up figures: `rewrite` writes a
    plan (and a --report with report_peaks), `simulate` returns peaks[threshold] (tfswap's peak
    and step time) or, with grappler=True, grappler[threshold] (the nanosecond and microsecond
    readings), where threshold is the --swapout-threshold a candidate was made with (None for
    a rewrite without one)."""

    timeout = 60

    def __init__(self, peaks, grappler, report_peaks=None):
        self.peaks, self.grappler, self.report_peaks = peaks, grappler, report_peaks
        self.grappler_sims = []
        self.made = {}

    def run(self, args, timeout=None):
        out = args[args.index("-o") + 1]
        thr = int(args[args.index("--swapout-threshold") + 1]) if "--swapout-threshold" in args else None
        with open(out, "wb") as f:
            f.write(b"plan %s" % str(thr).encode())
        self.made[out] = thr
        if "--report" in args and self.report_peaks is not None:
            with open(args[args.index("--report") + 1], "w") as f:
                json.dump({"plan": {"devices": [self.report_peaks]}}, f)
        self.last_cpu = 0.01
        return subprocess.CompletedProcess(args, 0, "", ""), 0.01

    def simulate(self, path, device, scale=1, grappler=False):
        with open(path, "rb") as f:
            thr = self.made[path] if f.read().startswith(b"plan") else None
        if grappler:
            self.grappler_sims.append(thr)
            ns, us = self.grappler[thr]
            return {"peak": ns, "peak_us": us, "step_ns": 1}
        peak, step = self.peaks[thr]
        return {"peak": peak, "peak_us": 0, "step_ns": step, "resident": 0}

    def device_flags(self, device):
        return ["--device", device]

    def fetch_flags(self):
        return []


GIB = 1 << 30


def _evaluate(tmp_path, strategy, ts):
    """_evaluate runs run.py's evaluate for strategy on a made-up graph whose unswapped peak
    (12 GiB) is over the 10 GiB budget, with ts as tfswap and no VirtualCluster check."""
    import run as bench_run

    src = tmp_path / "graph.pb"
    src.write_bytes(b"graph")
    bench_run._W.clear()
    bench_run._W.update(tfswap=ts, cfg={"scratch": str(tmp_path), "device_args": {"dev": "dev"},
                                        "profiles": {"dev": {"memory_bytes": 11 * GIB}}})
    base = {"peak": 12 * GIB, "step_ns": 100}
    return bench_run.evaluate("m", "dev", 1, strategy, 10 * GIB, str(src), base, "none", "t")


def test_lms_fixed_over_grappler_microseconds_is_no_plan(tmp_path):
    """An lms-fixed plan that fits tfswap's accounting and Grappler's nanosecond reading but
    not its microsecond one is no plan, as `tfswap rewrite` judges the other strategies'."""
    ts = FakeTfswap({None: (9 * GIB, 150)}, {},
                    report_peaks={"peak": 9 * GIB, "grappler_peak": 9 * GIB,
                                  "grappler_peak_us": 11 * GIB})
    rec = _evaluate(tmp_path, "lms-fixed", ts)
    assert rec.get("no_plan") and "grappler_peak_us" in (rec.get("error") or ""), rec
    assert "fits_sim" not in rec, rec


def test_lms_fixed_fitting_all_three_is_kept(tmp_path):
    """An lms-fixed plan within the budget by all three accountings is kept."""
    ts = FakeTfswap({None: (9 * GIB, 150)}, {},
                    report_peaks={"peak": 9 * GIB, "grappler_peak": 9 * GIB,
                                  "grappler_peak_us": 10 * GIB})
    rec = _evaluate(tmp_path, "lms-fixed", ts)
    assert not rec.get("error") and not rec.get("no_plan"), rec
    assert rec["fits_sim"] and rec["sim"]["peak"] == 9 * GIB and rec["overhead"] == 0.5, rec


def test_lms_fixed_without_grappler_figures_simulates_them(tmp_path):
    """With a report that has no Grappler figures, lms-fixed's plan is simulated with
    --grappler, and Grappler's microsecond reading over the budget makes it no plan."""
    ts = FakeTfswap({None: (9 * GIB, 150)}, {None: (9 * GIB, 11 * GIB)}, report_peaks={"peak": 9 * GIB})
    rec = _evaluate(tmp_path, "lms-fixed", ts)
    assert rec.get("no_plan") and "grappler_peak_us" in rec["error"], rec
    assert ts.grappler_sims == [None]


def test_lms_sweep_over_grappler_microseconds_is_no_plan(tmp_path):
    """The sweep's candidates are judged by all three accountings: one that fits tfswap's and
    Grappler's nanosecond reading but not the microsecond one does not make a plan; Grappler's
    readings are simulated only for the candidates that fit tfswap's accounting."""
    import run as bench_run

    peaks = {t: (11 * GIB, 200) for t in bench_run.LMS_THRESHOLDS}
    peaks[4] = (9 * GIB, 150)
    ts = FakeTfswap(peaks, {4: (9 * GIB, 11 * GIB)})
    rec = _evaluate(tmp_path, bench_run.LMS_SWEEP, ts)
    assert rec.get("no_plan") and "threshold 4" in (rec.get("error") or ""), rec
    assert ts.grappler_sims == [4]


def test_lms_sweep_keeps_the_fastest_candidate_fitting_all_three(tmp_path):
    """Of the sweep's candidates, the fastest that fits all three accountings is the plan,
    even when a faster one fits tfswap's accounting alone."""
    import run as bench_run

    peaks = {t: (11 * GIB, 120) for t in bench_run.LMS_THRESHOLDS}
    peaks[4], peaks[8] = (9 * GIB, 130), (9 * GIB, 150)
    ts = FakeTfswap(peaks, {4: (9 * GIB, 11 * GIB), 8: (9 * GIB, 10 * GIB)})
    rec = _evaluate(tmp_path, bench_run.LMS_SWEEP, ts)
    assert not rec.get("error") and rec["plan"]["swapout_threshold"] == 8, rec
    assert rec["fits_sim"] and rec["sim"]["step_ns"] == 150, rec


def test_lms_sweep_shortcut_needs_all_three(tmp_path):
    """An unswapped graph within the budget by tfswap's accounting but over it by Grappler's
    microsecond reading is swept, not kept as it is; one within it by all three is kept
    unswapped without trying a threshold."""
    import run as bench_run

    src = tmp_path / "graph.pb"
    src.write_bytes(b"graph")
    peaks = {t: (9 * GIB, 150) for t in bench_run.LMS_THRESHOLDS}
    peaks[None] = (9 * GIB, 100)

    def sweep(unswapped_us):
        grappler = {t: (9 * GIB, 9 * GIB) for t in bench_run.LMS_THRESHOLDS}
        grappler[None] = (9 * GIB, unswapped_us)
        ts = FakeTfswap(peaks, grappler)
        ts.made[str(src)] = None
        bench_run._W.clear()
        bench_run._W.update(tfswap=ts, cfg={"scratch": str(tmp_path), "device_args": {"dev": "dev"},
                                            "profiles": {"dev": {"memory_bytes": 11 * GIB}}})
        base = {"peak": 9 * GIB, "step_ns": 100}
        return ts, bench_run.evaluate("m", "dev", 1, bench_run.LMS_SWEEP, 10 * GIB, str(src),
                                      base, "none", "t")

    ts, rec = sweep(11 * GIB)
    assert not rec.get("error") and rec["plan"]["swapout_threshold"] is not None, rec
    assert ts.grappler_sims[0] is None and len(ts.grappler_sims) > 1, ts.grappler_sims
    ts, rec = sweep(9 * GIB)
    assert not rec.get("error") and rec["plan"]["swapout_threshold"] is None, rec
    assert ts.grappler_sims == [None], ts.grappler_sims
