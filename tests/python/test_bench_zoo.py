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


GO_LOG = """=== RUN   TestZooBitIdenticalUnderGrappler/concrete
    zoo_test.go:121: no plan at 90% of 1302260 bytes (batch x64): not trained
=== RUN   TestZooBitIdenticalUnderGrappler/concrete/lms
    zoo_test.go:149: 3 moved; losses [2.56 2.42 2.18]; 20 variables compared, 0 differ
--- PASS: TestGPTBitIdenticalUnderGrappler (133.92s)
    --- PASS: TestGPTBitIdenticalUnderGrappler/lms (38.52s)
    --- PASS: TestGPTBitIdenticalUnderGrappler/plan90 (30.87s)
--- FAIL: TestZooBitIdenticalUnderGrappler (500.00s)
    --- PASS: TestZooBitIdenticalUnderGrappler/concrete (20.00s)
        --- PASS: TestZooBitIdenticalUnderGrappler/concrete/lms (5.00s)
    --- PASS: TestZooBitIdenticalUnderGrappler/cond_v1 (20.00s)
        zoo_test.go:121: no plan at 70% of 21860006 bytes (batch x64): not trained
        --- PASS: TestZooBitIdenticalUnderGrappler/cond_v1/lms (5.00s)
        --- PASS: TestZooBitIdenticalUnderGrappler/cond_v1/plan90 (5.00s)
    --- FAIL: TestZooBitIdenticalUnderGrappler/rnn_v2 (20.00s)
        zoo_test.go:121: no plan at 90% of 1302260 bytes (batch x64): not trained
        zoo_test.go:121: no plan at 70% of 1302260 bytes (batch x64): not trained
        --- FAIL: TestZooBitIdenticalUnderGrappler/rnn_v2/lms (5.00s)
    --- SKIP: TestZooBitIdenticalUnderGrappler/gpt (0.00s)
"""

BRIDGE_LOG = """---- Captured stdout call ----
planned and trained: ['cond_v1', 'gpt']; no plan fits: ['rnn_v1']
PASSED tests/python/test_bridge_zoo.py::test_zoo_bit_identical_through_bridge[cond_v1]
PASSED tests/python/test_bridge_zoo.py::test_zoo_bit_identical_through_bridge[gpt]
PASSED tests/python/test_bridge_zoo.py::test_zoo_planned_bit_identical_through_bridge
XFAIL tests/python/test_bridge_zoo.py::test_zoo_bit_identical_through_bridge[rnn_v2] - reason
"""


def test_parse_test_logs():
    go = zoo_bench.parse_go_log(GO_LOG)
    assert go["gpt"] == {"lms": "pass", "plan90": "pass", "skip": True}
    assert go["cond_v1"] == {"lms": "pass", "plan90": "pass", "plan70": "no plan"}
    assert go["rnn_v2"] == {"lms": "fail", "plan90": "no plan", "plan70": "no plan"}
    assert go["concrete"] == {"lms": "pass", "plan90": "no plan"}
    br = zoo_bench.parse_bridge_log(BRIDGE_LOG)
    assert br["cond_v1"] == {"lms": "passed", "plan": "passed"}
    assert br["rnn_v2"] == {"lms": "xfail"}
    assert br["rnn_v1"] == {"plan": "no plan"}


def test_audit_rows():
    """The audit judges the peak by tfswap with the VirtualCluster's conventions, within 10%,
    and says n/a for an unknown batch; a plan cell fails when a plan neither fits nor names
    what is live."""
    plans = [dict(exit=0, fits=True, fraction=0.9), dict(exit=1, fits=False, live=["a:0 1.0"], fraction=0.7),
             dict(exit=1, fits=False, error="boom", fraction=0.5)]
    data = {"commit": "abc", "tests_commit": "def", "graphs": [
        dict(name="cond_v1", nodes=1, peak=400, grappler_peak=580, vc_conv_peak=709, vcluster_peak=902,
             features=["v1 cond"], plans=plans[:2]),
        dict(name="gpt", nodes=1, peak=106, grappler_peak=82, vc_conv_peak=100, vcluster_peak=100, features=[],
             plans=plans),
        dict(name="unknown_batch", nodes=1, peak=1, grappler_peak=1, vc_conv_peak=1, vcluster_peak=1,
             features=["unknown batch"], plans=plans[:1]),
    ], "go_results": zoo_bench.parse_go_log(GO_LOG), "bridge_results": zoo_bench.parse_bridge_log(BRIDGE_LOG)}
    md = zoo_bench.audit_markdown(data)
    assert ("| `cond_v1` | v1 cond | **fails**: inspect -56%, Grappler's -36%, VC's conventions -21% | holds: 1 of 2 fit, "
            "the rest name what is live | bit-identical | plan90 bit-identical, plan70 no plan | bit-identical | "
            "bit-identical |") in md
    assert "| `gpt` | - | holds: inspect +6%, Grappler's -18%, VC's conventions +0% | **fails**: 1 of 3 fit" in md
    assert "| `unknown_batch` | unknown batch | n/a: the VirtualCluster counts the unknown batch as 1 |" in md
    assert "test logs at def" in md


def test_audit_v1_cond_evidence():
    """For a graph with a v1 conditional the audit says what the VirtualCluster cannot judge and
    lists the tensors live at its peak that the JSON kept; without them it says nothing."""
    g = dict(name="cond_v1", nodes=1, peak=400 << 10, grappler_peak=580 << 10, vc_conv_peak=903 << 10,
             vcluster_peak=902 << 10, features=["v1 cond"], plans=[],
             vcluster_live=["a/Switch:1 64.0", "a_1/Switch:0 64.0"])
    md = zoo_bench.audit_markdown({"commit": "abc", "graphs": [g]})
    assert "What the VirtualCluster cannot judge on `cond_v1`" in md
    assert "Its peak (902.0 KiB) is not a peak a step has" in md
    assert "are `a/Switch:1` 64.0, `a_1/Switch:0` 64.0, among them tensors of both sides" in md
    assert ("the VC's conventions figure (903.0 KiB); tfswap's own accounting (`inspect`, 400.0 KiB) and "
            "Grappler's (580.0 KiB) run the larger branch only.") in md
    del g["vcluster_live"]
    assert "cannot judge on" not in zoo_bench.audit_markdown({"commit": "abc", "graphs": [g]})


def test_audit_v1_loop_evidence():
    """For a graph with a v1 while loop the audit says what the VirtualCluster counts that a step
    does not hold and lists the tensors live at its peak that the JSON kept; without them it says
    nothing."""
    g = dict(name="rnn_v1", nodes=1, peak=424 << 10, grappler_peak=336 << 10, vc_conv_peak=503 << 10,
             vcluster_peak=501 << 10, features=["v1 loop"], plans=[],
             vcluster_live=["g/Enter_grad/b_acc_1:0 80.0", "g/Enter_grad/b_acc_2:0 80.0"])
    md = zoo_bench.audit_markdown({"commit": "abc", "graphs": [g]})
    assert "What the VirtualCluster counts on `rnn_v1` that a step does not hold" in md
    assert ("Its largest tensors live at its peak (501.0 KiB; KiB, tools/vcluster/vcluster.py) are "
            "`g/Enter_grad/b_acc_1:0` 80.0, `g/Enter_grad/b_acc_2:0` 80.0.") in md
    assert ("The VC's conventions figure (503.0 KiB) models that; tfswap's own accounting (`inspect`, 424.0 KiB)"
            in md)
    assert "cannot judge on" not in md
    del g["vcluster_live"]
    assert "counts on `rnn_v1`" not in zoo_bench.audit_markdown({"commit": "abc", "graphs": [g]})
