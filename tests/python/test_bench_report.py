"""bench/report.py's Setup section names the budget rule the run used: a results file whose
budgets are the memory less the larger of 300 MiB and 6% (tfswap before TensorFlow 2.18's
MinSystemMemory, as in the run at 11753b4) is described by that rule, and one whose budgets
come from bench/run.py's default_budget (TensorFlow 2.18's rule) by the compute-capability
rule, so that regenerating the report from an older run does not misstate its budgets."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402
import run  # noqa: E402

GIB = 2**30


def meta(budget_of):
    profiles = {
        "v100": {"name": "v100", "memory_bytes": 16 * GIB, "fp32_flops": 14e12, "mem_bytes_per_s": 9e11,
                 "h2d_bytes_per_s": 12.8e9, "d2h_bytes_per_s": 12.8e9, "compute_capability": "7.0"},
        "small": {"name": "small", "memory_bytes": 3 * GIB, "fp32_flops": 1e12, "mem_bytes_per_s": 1e11,
                  "h2d_bytes_per_s": 12.8e9, "d2h_bytes_per_s": 12.8e9, "compute_capability": "6.1"},
    }
    return {"devices": sorted(profiles), "profiles": profiles,
            "budgets": {d: budget_of(p) for d, p in profiles.items()}}


class Res:
    def __init__(self, m):
        self.meta = m
        self.nosswap = {}


def setup_text(m):
    out = []
    report.section_setup(Res(m), out)
    return "\n".join(out)


def test_setup_names_the_rule_of_the_run():
    old = meta(lambda p: int(p["memory_bytes"] - max(300 * 2**20, 0.06 * p["memory_bytes"])))
    new = meta(run.default_budget)
    assert new["budgets"] != old["budgets"]
    assert report.legacy_budgets(old) and not report.legacy_budgets(new)
    t = setup_text(old)
    assert "larger of 300 MiB and 6%" in t and "1050 MiB on 7.x" not in t
    t = setup_text(new)
    assert "1050 MiB on 7.x" in t and "300 MiB" not in t
    # A run with budgets of neither kind (say --budget by hand) is not called legacy.
    mixed = dict(old, budgets=dict(old["budgets"], v100=new["budgets"]["v100"]))
    assert not report.legacy_budgets(mixed)


def test_planning_target_judged_by_cpu_time():
    """The 4x planning-time target is judged by the tfswap process's CPU time where the run
    recorded it (wall time grows with the other jobs on the machine), and by wall time for an
    older run without it."""
    rows = [{"strategy": "auto", "batch": 740, "rewrite_s": 3.28, "rewrite_cpu_s": 1.91},
            {"strategy": "vdnn-all", "batch": 740, "rewrite_s": 0.17, "rewrite_cpu_s": 0.15},
            {"strategy": "grappler", "batch": 740, "rewrite_s": 0.53}]
    verdict, evidence = report.planning_target(rows, True, 2)
    assert verdict == "**met**", evidence
    assert "CPU time" in evidence and "auto 1.91 s (3.28 s)" in evidence
    assert "Grappler (TF) - (0.53 s)" in evidence
    slow = [dict(rows[0], rewrite_cpu_s=2.4)] + rows[1:]
    assert report.planning_target(slow, True, 2)[0] == "**missed**"
    old = [{k: v for k, v in r.items() if k != "rewrite_cpu_s"} for r in rows]
    verdict, evidence = report.planning_target(old, True, 2)
    assert verdict == "**missed**" and "CPU time" not in evidence and "auto 3.28 s" in evidence
    assert report.planning_target(rows, False, 2)[0] == "not measured"
