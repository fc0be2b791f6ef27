"""bench/monotone.py on crafted results: a point of auto whose plan is slower than a fitting
plan at a smaller budget of the same sweep, or that got no plan, is a violation (exit 1);
another strategy's is listed for information only; the zoo's sweeps and the --replan sweeps
are checked too; a monotone sweep passes (exit 0); an unreadable file is refused naming it."""

import importlib.util
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
GIB = 2**30


def load():
    spec = importlib.util.spec_from_file_location("monotone", ROOT / "bench" / "monotone.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def plan(strategy, budget_gib, overhead, fits=True):
    if overhead is None:
        return {"strategy": strategy, "budget": budget_gib * GIB, "no_plan": True, "error": "no plan fits"}
    return {"strategy": strategy, "budget": budget_gib * GIB, "overhead": overhead, "fits_sim": fits}


def curves(model, points):
    return {"kind": "curves", "result": {"model": model, "device": "d16", "batch": 8, "tag": "curve",
                                         "points": [{"model": model, "device": "d16", "batch": 8, "tag": "curve",
                                                     "fraction": f, "budget": b * GIB, "plans": ps}
                                                    for f, b, ps in points]}}


def results(*records):
    return {"meta": {}, "records": [{"kind": "nosswap", "result": {"model": "m"}}] + list(records)}


MONOTONE = curves("ok", [(0.9, 9, [plan("auto", 9, 0.01)]), (0.8, 8, [plan("auto", 8, 0.02)]),
                         (0.7, 7, [plan("auto", 7, None)]),
                         (0.6, 6, [{"strategy": "auto", "budget": 6 * GIB, "skipped": True, "no_plan": True}])])
SLOWER = curves("slow", [(0.9, 9, [plan("auto", 9, 0.05), plan("lms", 9, 0.5)]),
                         (0.8, 8, [plan("auto", 8, 0.02), plan("lms", 8, 0.1)]),
                         (0.7, 7, [plan("auto", 7, 0.03), plan("lms", 7, 0.2)])])
NOPLAN = curves("gap", [(0.9, 9, [plan("auto", 9, None)]), (0.8, 8, [plan("auto", 8, 0.02)])])


def test_violations():
    res = load().check(results(MONOTONE, SLOWER, NOPLAN))
    assert res["sweeps"] == 4
    got = sorted((v["model"], v["strategy"], v["must"], v["budget"] // GIB, v["overhead"], v["smaller_budget"] // GIB)
                 for v in res["violations"])
    assert got == [("gap", "auto", True, 9, None, 8),
                   ("slow", "auto", True, 9, 0.05, 8),
                   ("slow", "lms", False, 9, 0.5, 8)]


def test_zoo_and_replanned_sweeps():
    m = load()
    zoo = {"device": "d16", "graphs": [
        {"name": "z", "batch": 4, "plans": [
            {"budget": 9, "exit": 1, "fits": False, "live": ["a:0 1.0"]},
            {"budget": 7, "exit": 0, "fits": True, "overhead": 0.1}]},
        {"name": "err", "batch": 4, "plans": [  # an error, not a verdict: not a point
            {"budget": 9, "exit": 2, "fits": False, "error": "bad flag"},
            {"budget": 7, "exit": 0, "fits": True, "overhead": 0.1}]}]}
    rep = {"commit": "abc", "sweeps": [{"model": "r", "device": "d16", "batch": 8, "points": [
        {"budget": 9, "exit": 0, "fits": True, "overhead": 0.01},
        {"budget": 8, "exit": 0, "fits": True, "overhead": 0.03}]}]}
    res = m.check(results(), zoo, replanned=rep)
    assert res["sweeps"] == 2
    assert [(v["kind"], v["model"], v["overhead"]) for v in res["violations"]] == [("zoo", "z", None)]
    text = m.markdown(res, "test")
    assert "2 sweeps checked; 1 point(s) of auto not monotone" in text
    assert "no plan at" in text


def run(tmp_path, data, *args):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return subprocess.run([sys.executable, str(ROOT / "bench" / "monotone.py"), "--results", str(path),
                           "--zoo", "", "--replanned", ""] + list(args),
                          capture_output=True, text=True)


def test_exit_status(tmp_path):
    p = run(tmp_path, results(MONOTONE))
    assert p.returncode == 0, p.stderr
    assert "1 sweeps checked; 0 point(s) of auto not monotone" in p.stdout
    p = run(tmp_path, results(MONOTONE, SLOWER))
    assert p.returncode == 1
    assert "NOT MONOTONE curve slow on d16, batch 8, auto: +5.0% at 9.00 GiB, but +2.0% at 8.00 GiB" in p.stdout
    assert "note curve slow on d16, batch 8, lms" in p.stdout
    # lms must be monotone too when asked.
    assert "2 point(s) of auto, lms" in run(tmp_path, results(SLOWER), "--strategy", "auto,lms").stdout


def test_unreadable_results(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "monotone.py"), "--results", str(bad)],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert str(bad) in p.stderr
