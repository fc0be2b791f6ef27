"""bench/offload.py --smoke: the tiny GPT-style decoder (testmodels/fixtures/large/gpt-tiny)
planned with every variable on the host for v100-16gb at a 2 MiB budget, below its unswapped
peak: the point must fit with the variables offloaded, lower the peak under the budget, and
name a bound; the Markdown table must show it."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_offload_smoke(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "offload.py"), "--smoke", "--out", str(tmp_path),
                        "--cache", str(tmp_path), "--markdown"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((tmp_path / "offload.json").read_text())
    assert res["meta"]["mode"] == "smoke" and "simulated" in res["meta"]["how"]
    (pt,) = res["results"]
    assert pt["size"] == "tiny" and pt["params"] == 109312
    assert pt["fits"] and pt["offloaded_groups"] > 0
    assert pt["peak"] <= pt["budget"] < pt["unswapped_peak"]
    assert pt["to_host"] > 0 and pt["to_device"] > 0  # gradients out, weights in
    assert pt["bound"] in ("host link", "host update", "GPU compute")
    assert "| v100-16gb | tiny | 109,312 | yes |" in p.stdout
