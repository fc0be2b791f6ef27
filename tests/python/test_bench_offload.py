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


sys.path.insert(0, str(ROOT / "bench"))
import offload  # noqa: E402  bench/offload.py


def _pt(size, profile, step, incore, peak, memory=16 * 2**30, fits=True, commit="abcdef123456"):
    return {"size": size, "profile": profile, "batch": 1, "params": 1, "fits": fits, "step_s": step,
            "incore_s": incore, "unswapped_peak": peak, "gpu_memory": memory, "commit": commit,
            "bound": "host link", "link_s": 1.0, "host_update_s": 0.5, "diagnosis": ["no plan fits"]}


def test_footprints_keep_the_largest_within_2x_of_in_core():
    gib = 2**30
    res = [_pt("1.5b", "v100-16gb", 3.0, 1.0, 40 * gib),       # 33% speed: not counted
           _pt("2.7b", "v100-16gb", 3.4, 1.7, 60 * gib),       # exactly 2x: counted
           _pt("6.7b", "v100-16gb", 8.0, 3.75, 110 * gib),     # 47%: not counted
           _pt("13b", "v100-16gb", 0, 0, 0, fits=False),
           _pt("6.7b", "a100-40gb", 5.0, 0.7, 120 * gib, memory=40 * gib)]
    got = dict(offload.footprints(res))
    assert got["v100-16gb"]["size"] == "2.7b"
    assert got["a100-40gb"] is None
    text = offload.footprint_text(res)
    assert "`v100-16gb` 3.8x (`gpt-2.7b` planned at abcdef1, 3.40 s against 1.70 s in-core, 50% of in-core speed)" in text
    assert "`a100-40gb` none" in text and "not reached" in text
    unfit = _pt("13b", "v100-16gb", 0, 7.0, 201 * gib, fits=False)
    res[3] = unfit
    assert "not counted: `gpt-13b` on `v100-16gb` would be 12.6x, but no plan fits it" in offload.footprint_text(res)
    assert "is not reached" in offload.footprint_text(res)
    assert "| v100-16gb | 13b | 1 | no | | 7.00 s | no plan fits | 12.6x (no plan) | abcdef1 |" in offload.markdown(res)
    res.append(_pt("13b", "v100-16gb", 12.0, 7.0, 200 * gib))
    assert "`v100-16gb` 12.5x (`gpt-13b`" in offload.footprint_text(res)
    assert "is reached" in offload.footprint_text(res)


def test_merge_into_replaces_the_same_points_only(tmp_path):
    path = tmp_path / "offload.json"
    old = [_pt("1.5b", "v100-16gb", 2.4, 1.2, 1, commit="f96d75c"), _pt("2.7b", "v100-16gb", 3.3, 1.7, 2, commit="f96d75c")]
    path.write_text(json.dumps({"meta": {"text": "T", "notes": "N"}, "results": old}))
    old.append(_pt("2.7b", "a100-40gb", 2.0, 0.4, 2, commit="f96d75c"))
    path.write_text(json.dumps({"meta": {"text": "T", "notes": "N"}, "results": old}))
    offload.merge_into(str(path), [_pt("1.5b", "v100-16gb", 3.7, 1.2, 1), _pt("13b", "v100-16gb", 12.0, 7.0, 3),
                                   _pt("13b", "h100", 4.0, 1.0, 3)])
    data = json.loads(path.read_text())
    assert data["meta"] == {"text": "T", "notes": "N"}
    assert [(r["size"], r["profile"], r["commit"]) for r in data["results"]] == [
        ("1.5b", "v100-16gb", "abcdef123456"), ("2.7b", "v100-16gb", "f96d75c"), ("13b", "v100-16gb", "abcdef123456"),
        ("2.7b", "a100-40gb", "f96d75c"), ("13b", "h100", "abcdef123456")]
    assert "| f96d75c |" in offload.markdown(data["results"]) and "| abcdef1 |" in offload.markdown(data["results"])


def test_update_offload_section_replaces_only_that_section(tmp_path):
    import report  # bench/report.py
    (tmp_path / "bench").mkdir()
    res = [_pt("13b", "v100-16gb", 12.0, 7.0, 200 * 2**30)]
    (tmp_path / "bench" / "offload.json").write_text(json.dumps({"meta": {"text": "HOW", "notes": "NOTES"}, "results": res}))
    (tmp_path / "BENCHMARKS.md").write_text("# B\n\n## Before\n\nkept\n\n## Variable offload (issue 15)\n\nold table\n\n"
                                            "## After\n\nalso kept\n")
    report.update_offload_section(str(tmp_path))
    text = (tmp_path / "BENCHMARKS.md").read_text()
    assert "old table" not in text and text.count("## Variable offload (issue 15)") == 1
    assert text.startswith("# B\n\n## Before\n\nkept\n\n## Variable offload (issue 15)\n\nHOW\n")
    assert "| v100-16gb | 13b | 1 | yes | 12.00 s | 7.00 s |" in text and "12.5x" in text and "NOTES" in text
    assert text.endswith("NOTES\n\n## After\n\nalso kept\n")
