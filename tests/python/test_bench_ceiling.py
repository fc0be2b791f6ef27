"""bench/ceiling.py's pieces that need no large graph: the op bound on the residual-network
fixture (the batch-norm gradient holds its two inputs and the output it allocates) and the
Markdown of a ladder with a fitting point and a point where no plan fits."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import ceiling  # noqa: E402


def test_op_bound_is_the_batch_norm_gradient():
    size, op = ceiling.op_bound(str(ROOT / "testmodels" / "fixtures" / "resnet.pb"))
    assert "(FusedBatchNormGradV3)" in op
    act = 512 << 10  # the fixture's block activations: 512 KiB of float32
    assert 3 * act <= size < 3 * act + (64 << 10), (size, op)


def test_markdown_names_fits_bound_and_target():
    row = dict(accounting="all", exit=0, fits=True, strategy="auto", overhead=0.5, peak=14 << 30,
               grappler_peak=14 << 30, grappler_peak_us=14 << 30, to_host=1 << 30, from_host=1 << 30, seconds=1.0)
    data = {"b0": 100, "b0_checked": True, "budget": 15 << 30, "resident": 1 << 28, "op_bound_bytes": 5 << 30,
            "op_bound_op": "g (FusedBatchNormGradV3)", "bound_batch": 295, "commit": "abc",
            "rows": [dict(row, multiple=4.0, batch=400),
                     dict(row, multiple=5.0, batch=500, gate_kind="reduce"),
                     dict(accounting="all", exit=1, fits=False, lowest_peak_gib=17.9, multiple=8.0, batch=800,
                          seconds=2.0, gate_kind="reduce")]}
    md = ceiling.markdown(data)
    # A row without a gate kind is from a run before --gate-kind: its gates were Identities.
    assert "| 400 (4x) | all | identity | yes | 14.00 / 14.00 / 14.00 | +50.0% | auto |" in md
    assert "| 500 (5x) | all | reduce | yes | 14.00 / 14.00 / 14.00 | +50.0% | auto |" in md
    assert "| 800 (8x) | all | reduce | no plan | lowest reached 17.90 |" in md
    assert "fits by `all`: 500 (5x B0, +50.0% simulated overhead)" in md
    assert "above 295 (2.95x B0)" in md
    assert "Target (8x B0 within +82%, fitting by both accountings): missed" in md


def test_swappable_solves_the_link_bound():
    # 10 GiB over the budget at 1 s of a 3 s step, 1 GiB/s each way: within +100% (6 s),
    # max(1, E) + max(2, E) <= 6 gives E = 3 GiB; the other 7 GiB must be recomputed.
    gb = 1 << 30
    base = {"peak": 20 * gb, "peak_time_ns": 10**9, "step_ns": 3 * 10**9}
    e, excess = ceiling.swappable(base, 10 * gb, gb, gb, 1.0)
    assert excess == 10 * gb
    assert abs(e - 3 * gb) < (1 << 20), e
    # A generous target lets the whole excess cross the link.
    assert ceiling.swappable(base, 10 * gb, gb, gb, 10.0) == (10 * gb, 10 * gb)
    assert ceiling.swappable({}, 10 * gb, gb, gb, 1.0) is None


def test_markdown_states_what_the_target_needs_by_the_link():
    gb = 1 << 30
    data = {"b0": 100, "b0_checked": True, "budget": 10 * gb, "resident": 1 << 28, "op_bound_bytes": 5 << 30,
            "op_bound_op": "g (FusedBatchNormGradV3)", "bound_batch": 295, "commit": "abc",
            "rows": [dict(accounting="all", exit=1, fits=False, lowest_peak_gib=17.9, multiple=8.0, batch=800,
                          seconds=2.0)],
            "unswapped": {"800": {"peak": 20 * gb, "peak_time_ns": 10**9, "step_ns": 3 * 10**9}},
            "link": [gb, gb]}
    md = ceiling.markdown(data)
    # +82% of 3 s is 5.46 s: E = 2.73 GiB may cross, 7.27 GiB must be recomputed.
    assert "10.00 GiB over the budget; within +82% at most 2.73 GiB of it may cross the link, " \
           "so at least 7.27 GiB must be recomputed" in md, md


def test_merge_replaces_only_the_rungs_run_again():
    saved = {"device": "v100-16gb", "b0": 100, "commit": "old", "unswapped": {"400": {"peak": 1}},
             "rows": [dict(accounting=a, exit=1, fits=False, lowest_peak_gib=16.0, seconds=1.0, multiple=m,
                           batch=int(100 * m))
                      for m in (4.0, 8.0) for a in ("tfswap", "all")]}
    new = {"device": "v100-16gb", "b0": 100, "commit": "new", "unswapped": {"800": {"peak": 2}}, "budget": 7,
           "rows": [dict(accounting=a, exit=1, fits=False, lowest_peak_gib=17.9, seconds=2.0, multiple=8.0, batch=800)
                    for a in ("all", "tfswap")]}
    out = ceiling.merge(saved, new)
    assert [(r["batch"], r["accounting"], r["commit"]) for r in out["rows"]] == [
        (400, "tfswap", "old"), (400, "all", "old"), (800, "tfswap", "new"), (800, "all", "new")]
    assert out["budget"] == 7 and out["commit"] == "new"
    assert set(out["unswapped"]) == {"400", "800"}
    assert ceiling.at_commits(out) == "(rungs 4x at old; 8x at new)"
    assert "`bench/ceiling.py` (rungs 4x at old; 8x at new):" in ceiling.markdown(
        dict(out, b0_checked=True, resident=0, op_bound_bytes=1, op_bound_op="g", bound_batch=1))
    try:
        ceiling.merge(dict(saved, b0=99), new)
    except SystemExit as e:
        assert "B0 99" in str(e)
    else:
        raise AssertionError("a saved run of another B0 was merged")


def test_no_fit_message_gives_each_accountings_least_excess():
    # The golden no-fit message of the residual fixture (no plan fits tfswap's accounting, so
    # Grappler's judged none), and a line where tfswap's fits and Grappler's do not.
    golden = (ROOT / "rewrite" / "plan" / "testdata" / "plans" / "nofit_resnet_auto.golden").read_text()
    by = ceiling.lowest_by_accounting(golden)
    assert list(by) == ["tfswap", "grappler-ns", "grappler-us"]
    assert by["tfswap"][0] > 0 and by["tfswap"][1] > 0 and by["grappler-ns"] is None, by
    line = ("  lowest excess over the budget by each accounting among the plans judged by it (Grappler's figures "
            "are computed only for plans that fit tfswap's accounting, when both are required): tfswap: 512.0 MiB "
            "under (40 plans); grappler-ns: 7.20 GiB over (31 plans); grappler-us: 1.0 GiB over (1 plan)\n")
    by = ceiling.lowest_by_accounting(line)
    assert by == {"tfswap": [-0.5, 40], "grappler-ns": [7.2, 31], "grappler-us": [1.0, 1]}, by
    assert ceiling.lowest_by_accounting("no plan fits x within 1 GiB (strategy auto): ...") == {}
    data = {"b0": 100, "b0_checked": True, "budget": 15 << 30, "resident": 1 << 28, "op_bound_bytes": 5 << 30,
            "op_bound_op": "g (FusedBatchNormGradV3)", "bound_batch": 295, "commit": "abc",
            "rows": [dict(accounting="all", exit=1, fits=False, lowest_peak_gib=15.13, multiple=8.0, batch=800,
                          seconds=2.0, gate_kind="reduce", live=["a:0 4.43 Relu"], lowest_excess_gib=by)]}
    md = ceiling.markdown(data)
    assert ("| 800 (8x) | all | reduce | no plan | lowest reached 15.13 | - | least excess GiB: tfswap -0.50, "
            "VC ns +7.20, VC us +1.00 | - | 2.0 |") in md, md
    assert "grappler-ns +7.20 GiB (31 plans)" in md
