"""bench/compare_runs.py on crafted runs: identical plans agree (exit 0) even when their files
and timings differ; a plan whose simulated step differs fails the comparison (exit 1) unless its
strategy is ignored; a point in one run only fails; runs with no point in common exit 2."""

import importlib.util
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "bench" / "compare_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def plan(strategy, peak, output="/tmp/a/plan.pb", seconds=1.0):
    return {"strategy": strategy, "sim": {"peak": peak, "step_ns": 100, "d2h_bytes": 8, "h2d_bytes": 8},
            "overhead": 0.1, "fits_sim": True,
            "plan": {"output": output, "seconds": seconds, "plan.waits": 2}}


def run(*plans, batch=4):
    return {"records": [{"kind": "ladder", "result": {"points": [
        {"model": "m", "device": "d", "batch": batch, "budget": 1 << 30, "plans": list(plans)}]}}]}


def cli(tmp_path, new, old, *extra):
    paths = []
    for name, data in (("new.json", new), ("old.json", old)):
        p = tmp_path / name
        p.write_text(json.dumps(data))
        paths.append(str(p))
    return subprocess.run([sys.executable, str(ROOT / "bench" / "compare_runs.py"), *paths, *extra],
                          capture_output=True, text=True)


def test_same_plans_agree_despite_paths_and_times(tmp_path):
    r = cli(tmp_path, run(plan("lms", 10, "/x/p.pb", 2.0), plan("auto", 9)),
            run(plan("lms", 10, "/y/q.pb", 5.0), plan("auto", 9)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "lms          1 same,   0 differ" in r.stdout


def test_a_different_peak_fails_unless_ignored(tmp_path):
    new, old = run(plan("lms", 10), plan("grappler", 7)), run(plan("lms", 11), plan("grappler", 8))
    r = cli(tmp_path, new, old)
    assert r.returncode == 1
    assert "differs: ('ladder', 'm', 'd', 4, 1073741824, 'lms')" in r.stdout
    r = cli(tmp_path, run(plan("lms", 10), plan("grappler", 7)), run(plan("lms", 10), plan("grappler", 8)),
            "--ignore", "grappler")
    assert r.returncode == 0, r.stdout
    assert "grappler     0 same,   1 differ (ignored)" in r.stdout


def test_a_point_in_one_run_only_fails(tmp_path):
    r = cli(tmp_path, run(plan("lms", 10), plan("auto", 9)), run(plan("lms", 10)))
    assert r.returncode == 1
    assert "in one run only: ('ladder', 'm', 'd', 4, 1073741824, 'auto')" in r.stdout


def test_runs_without_a_common_point_exit_2(tmp_path):
    r = cli(tmp_path, run(plan("lms", 10), batch=4), run(plan("lms", 10), batch=8))
    assert r.returncode == 2
    assert "share no point" in r.stderr


def test_signature_ignores_only_volatile_fields():
    mod = load()
    a, b = plan("lms", 10), plan("lms", 10, "/elsewhere.pb", 9.0)
    assert mod.signature(a) == mod.signature(b)
    b["plan"]["plan.waits"] = 3
    assert mod.signature(a) != mod.signature(b)
