"""bench/zoo_bench.py's Markdown: a graph whose plans fit, and one where nothing fits and the
diagnosis names what is live."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import zoo_bench  # noqa: E402


def test_markdown_rows():
    fit = dict(exit=0, fits=True, overhead=0.012, peak=900 << 10, grappler_peak=800 << 10, swaps=7, recomputes=0)
    data = {"commit": "abc", "unknown_batch": 4, "graphs": [
        dict(name="gpt", nodes=2071, peak=1000 << 10, grappler_peak=820 << 10, vcluster_peak=820 << 10,
             plans=[dict(fit, fraction=f) for f in (0.9, 0.7, 0.5)]),
        dict(name="rnn_v1", nodes=481, peak=500 << 10, grappler_peak=300 << 10, vcluster_peak=None,
             plans=[dict(exit=1, fits=False, live=["a/b:0 80.0", "c:0 4.0"], fraction=f) for f in (0.9, 0.7, 0.5)]),
    ]}
    md = zoo_bench.markdown(data)
    assert "| `gpt` | 2071 | 1000.0 | 820.0 | 820.0 | +1.2%, 900.0 KiB (7 swaps) |" in md
    assert "| `rnn_v1` | 481 | 500.0 | 300.0 | n/a | no fit; live: `a/b:0`, `c:0` |" in md
    assert "at abc" in md
