"""bench/footprint.py on a crafted results file: the footprint is the unswapped peak of the
largest ladder batch whose plan fits by every accounting (the VirtualCluster's microsecond
reading too) at <= 100% overhead (a larger batch
counts even when a smaller one failed), over the GPU's memory; the bound names what stops the
batch above it; an unreadable file is refused with a non-zero exit naming it."""

import importlib.util
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
GIB = 2**30


def load():
    spec = importlib.util.spec_from_file_location("footprint", ROOT / "bench" / "footprint.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def plan(strategy, overhead, sim=True, vc=True):
    return {"strategy": strategy, "overhead": overhead, "fits_sim": sim, "fits_vc": vc}


def point(batch, multiple, peak_gib, *plans):
    return {"batch": batch, "multiple": multiple, "base": {"peak": peak_gib * GIB}, "plans": list(plans)}


RESULTS = {
    "meta": {"git": {"commit": "0123456789abcdef"}},
    "records": [
        {"kind": "nosswap", "result": {"device": "d16", "memory": 16 * GIB}},
        {"kind": "ladder", "result": {"model": "m", "device": "d16", "points": [
            point(10, 1, 16, plan("auto", 0.0)),
            point(20, 2, 32, plan("auto", 0.3, vc=False), plan("lms", 0.5)),  # auto: VC says no fit
            point(30, 3, 48, plan("auto", 0.9)),
            point(40, 4, 64, plan("auto", 1.5)),  # fits, but below 50% of in-core speed
        ]}},
        {"kind": "ladder", "result": {"model": "u", "device": "d16", "points": [
            point(5, 1, 8, plan("auto", 0.0)),
            # The VirtualCluster's microsecond reading is over the budget: no fit by default.
            point(10, 2, 32, dict(plan("auto", 0.2), budget=15 * GIB, vc={"peak_bytes_us": 16 * GIB})),
        ]}},
        {"kind": "ladder", "result": {"model": "n", "device": "d16", "points": [
            point(5, 1, 8, plan("auto", 0.0)),
            point(10, 2, 32, plan("auto", 0.2)),
        ]}},
    ],
}


def test_footprints():
    rows = {r["model"]: r for r in load().footprints(RESULTS)}
    m = rows["m"]
    assert (m["batch"], m["strategy"], m["overhead"]) == (30, "auto", 0.9)
    assert m["footprint"] == 3.0
    assert m["bound"] == "speed (batch 40: 150% overhead)"
    u = rows["u"]
    assert (u["batch"], u["footprint"], u["bound"]) == (5, 0.5, "no fit (batch 10)")
    n = rows["n"]
    assert (n["batch"], n["footprint"], n["bound"]) == (10, 2.0, "ladder top")
    # Any strategy: lms's batch 20 qualifies too, but auto's 30 is still the largest.
    assert {r["model"]: r["batch"] for r in load().footprints(RESULTS, ("auto", "lms"))} == {"m": 30, "n": 10, "u": 5}


def test_cli(tmp_path):
    f = tmp_path / "results.json"
    f.write_text(json.dumps(RESULTS))
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "footprint.py"), "--results", str(f)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "| d16 | m | auto | 30 (3x) | 48.00 GiB | 3.00x | 90% | speed (batch 40: 150% overhead) |" in p.stdout
    assert "commit 0123456789ab" in p.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "footprint.py"), "--results", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and str(bad) in p.stderr
