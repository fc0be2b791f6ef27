"""Every swap-in of ResNet-50 (testmodels/large.py) is triggered by an op reachable from the
swapped tensor's producer (issue 11, item 8). Under the default LMS options 16 of its
swap-ins used to be gated by an op on a sibling branch (the other output of a gradient's
tuple), which nothing orders after the swap-out. The check here walks the original GraphDef
in Python, independently of tfswap's own Verify.

Run:  .venv/bin/python -m pytest -q tests/python/test_trigger_reach.py   (about half a minute)
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reach")
    exe = tmp / "tfswap"
    env = dict(os.environ, CGO_ENABLED="0")
    subprocess.run(["go", "build", "-o", str(exe), "./cmd/tfswap"], cwd=ROOT, env=env, check=True, timeout=600)
    model = tmp / "r50.pb"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, str(ROOT / "testmodels" / "large.py"), "--model", "resnet50", "--batch", "8",
                    "--out", str(model)], cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
    return tmp, exe, model


def _descendants(graph_def):
    """Returns a function telling the nodes reachable from a node through data and control
    edges (the node itself excluded)."""
    outs = {}
    for n in graph_def.node:
        for inp in n.input:
            src = inp[1:] if inp.startswith("^") else inp.split(":")[0]
            outs.setdefault(src, []).append(n.name)
    memo = {}

    def desc(name):
        if name not in memo:
            seen, stack = set(), [name]
            while stack:
                for c in outs.get(stack.pop(), []):
                    if c not in seen:
                        seen.add(c)
                        stack.append(c)
            memo[name] = seen
        return memo[name]
    return desc


def _check(report_path, model):
    from tensorflow.core.framework import graph_pb2
    g = graph_pb2.GraphDef()
    g.ParseFromString(model.read_bytes())
    desc = _descendants(g)
    with open(report_path) as f:
        rep = json.load(f)
    swap_ins, bad = 0, []
    for s in rep["swaps"]:
        for si in s["SwapIns"]:
            swap_ins += 1
            if si["Trigger"] not in desc(s["Producer"]):
                bad.append((s["Tensor"], si["Trigger"]))
    return swap_ins, bad


def _rewrite(exe, model, out, *args):
    report = out.with_suffix(".json")
    p = subprocess.run([str(exe), "rewrite", str(model), "-o", str(out), "--report", str(report), *args],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return report


def test_lms_defaults(work):
    tmp, exe, model = work
    swap_ins, bad = _check(_rewrite(exe, model, tmp / "lms.pb", "--strategy", "lms-fixed"), model)
    assert swap_ins > 50, swap_ins  # there is something to check
    assert not bad, f"{len(bad)} of {swap_ins} swap-ins triggered off the producer's descent: {bad[:5]}"


@pytest.mark.parametrize("strategy", ["lms", "auto"])
def test_planned(work, strategy):
    tmp, exe, model = work
    sim = tmp / "sim.json"
    p = subprocess.run([str(exe), "simulate", str(model), "--device", "v100-16gb", "--fetch", "train", "--json", str(sim)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    with open(sim) as f:
        peak = max(d["peak_bytes"] for d in json.load(f)["result"]["devices"] if d["gpu"])
    report = _rewrite(exe, model, tmp / (strategy + ".pb"), "--device", "v100-16gb", "--fetch", "train",
                      "--strategy", strategy, "--budget", str(peak * 3 // 4))
    swap_ins, bad = _check(report, model)
    assert swap_ins > 0, "the plan swaps nothing: nothing to check"
    assert not bad, f"{len(bad)} of {swap_ins} swap-ins triggered off the producer's descent: {bad[:5]}"
