"""bench/scale.py and bench/monotone.py (issue 14): the scale benchmark on a tiny synthetic
graph writes its results and its section of BENCHMARKS.md; the monotonicity check finds a
sweep whose larger budget got a slower plan, and passes one that did not."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import monotone  # noqa: E402
import report  # noqa: E402
import scale  # noqa: E402


def test_scale_small(tmp_path):
    results = tmp_path / "scale.json"
    assert scale.main(["--sizes", "300", "--commands", "inspect,simulate,rewrite,plan", "--cpu", "0",
                       "--out", str(tmp_path / "out"), "--results", str(results)]) == 0
    data = json.loads(results.read_text())
    row = data["rows"][0]
    assert row["nodes"] == 298
    for c in ("inspect", "simulate", "rewrite", "plan"):
        assert row[c]["status"] == 0, row[c]
        assert row[c]["rss"] > 0 and row[c]["cpu_seconds"] >= 0
    assert row["plan"]["budget"] == row["peak"] // 2
    (tmp_path / "BENCHMARKS.md").write_text("# B\n\n## Other\n\ntext\n")
    report.update_scale_section(str(tmp_path), str(results))
    text = (tmp_path / "BENCHMARKS.md").read_text()
    assert "## Other" in text and "## Planning at scale" in text and "| 298 |" in text


def results_with(overheads):
    plans = lambda b, o: {"strategy": "auto", "budget": b, "overhead": o, "fits_sim": True}  # noqa: E731
    pts = [{"model": "m", "device": "d", "batch": 1, "budget": b, "plans": [plans(b, o)]}
           for b, o in overheads]
    return {"meta": {}, "records": [{"kind": "curves", "args": {}, "result": {"points": pts}}]}


def test_monotone(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps(results_with([(10, 0.2), (20, 0.1), (30, 0.1)])))
    assert monotone.main(["--results", str(f), "--zoo", "", "--replanned", ""]) == 0
    f.write_text(json.dumps(results_with([(10, 0.2), (20, 0.05), (30, 0.1)])))
    assert monotone.main(["--results", str(f), "--zoo", "", "--replanned", ""]) == 1


def test_committed_section_matches_results():
    """The committed "Planning at scale" section is what docs/bench/scale.json renders to, so
    that figures edited into the docs by hand are not lost when bench/scale.py or
    bench/report.py regenerates the section from the results file."""
    docs = os.path.join(ROOT, "docs")
    with open(os.path.join(docs, "BENCHMARKS.md")) as f:
        text = f.read()
    start = text.index(report.SCALE_TITLE + "\n")
    end = text.find("\n## ", start + len(report.SCALE_TITLE))
    committed = (text[start:end] if end >= 0 else text[start:]).rstrip()
    rendered = []
    report.section_scale(rendered, os.path.join(docs, "bench", "scale.json"))
    assert "\n".join(rendered).rstrip() == committed
