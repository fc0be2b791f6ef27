"""Tests of the VirtualCluster checker (tools/vcluster/vcluster.py).

The checker is tfswap's independent reference for peak memory, so these tests pin down that
it asks TensorFlow what we think it asks: that the Grappler device it builds has the
profile's FP32 rate, and that its re-implementation of GraphMemory's liveness rule gives
exactly DeterminePeakMemoryUsage's answer on a graph whose answer we can work out by hand.

Run:  .venv/bin/python -m pytest -q tests/python/test_vcluster.py
"""

import json
import os
import pathlib
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "vcluster"))
import vcluster  # noqa: E402

# The v100-16gb profile's figures (cost/profile.go): what the checker builds devices from.
V100 = {
    "format": "tfswap-device-profile", "version": 1, "name": "v100-16gb",
    "memory_bytes": 16 << 30, "fp32_flops": 14e12, "fp16_flops": 112e12,
    "mem_bytes_per_s": 900e9, "d2h_bytes_per_s": 12.8e9, "h2d_bytes_per_s": 12.8e9,
    "host_flops": 1e12, "host_mem_bytes_per_s": 50e9, "sms": 80, "compute_capability": "7.0",
}
TITANX = dict(V100, name="titanx", fp32_flops=3072 * 2 * 1075e6, sms=24,
              compute_capability="5.2", mem_bytes_per_s=336.5e9)


@pytest.fixture
def profile_file(tmp_path):
    def write(p):
        path = tmp_path / (p["name"] + ".json")
        path.write_text(json.dumps(p))
        return str(path)
    return write


@pytest.mark.parametrize("profile", [V100, TITANX], ids=["volta", "maxwell"])
def test_grappler_device_has_the_profiles_fp32_rate(profile):
    from tensorflow.core.protobuf import device_properties_pb2 as dp
    from tensorflow.python.grappler import cluster as gcluster
    props = vcluster.gpu_properties(profile)
    c = gcluster.Cluster(devices=[dp.NamedDevice(name=vcluster.GPU_NAME % 0, properties=props)])
    try:
        gflops = c.EstimatePerformance(dp.NamedDevice(name=vcluster.GPU_NAME % 0, properties=props))
    finally:
        c.Shutdown()
    # The frequency is an integer number of MHz, so the rate is matched to within 0.1%.
    assert gflops == pytest.approx(profile["fp32_flops"] / 1e9, rel=1e-3)
    assert props.bandwidth == int(profile["mem_bytes_per_s"] / 1e3)  # KB/s
    assert props.memory_size == profile["memory_bytes"]


def neg_chain(path, n=1024):
    """x (feed) -> a = Neg(x) -> b = Neg(a); train = NoOp(^b). Each tensor is 4n bytes."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [n], name="x")
        a = tf.negative(x, name="a")
        b = tf.negative(a, name="b")
        with tf.control_dependencies([b]):
            tf.no_op(name="train")
    pathlib.Path(path).write_bytes(g.as_graph_def(add_shapes=True).SerializeToString())


def test_graphmemory_rule_on_a_chain(tmp_path, profile_file):
    # GraphMemory frees a tensor 1 ns after its last consumer ends, so when b starts (the
    # instant a ends) x is still counted: x, a and b are live together. A runtime that
    # freed x when a finished would hold two tensors, not three.
    graph = tmp_path / "chain.pb"
    neg_chain(graph)
    out = vcluster.check_graph(str(graph), ["train"], vcluster.load_profile(profile_file(V100)), 10)
    gpu = out["devices"]["/device:GPU:0"]
    assert gpu["peak_bytes"] == 3 * 4096
    assert sorted(t["tensor"] for t in gpu["live"]) == ["a:0", "b:0", "x:0"]
    # The microsecond trace puts every op of this graph in the same microsecond: TensorFlow's
    # own DeterminePeakMemoryUsage gives the same three tensors here.
    assert gpu["peak_bytes_us"] == 3 * 4096


def test_only_the_fetch_fanin_runs(tmp_path, profile_file):
    graph = tmp_path / "chain.pb"
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1024], name="x")
        tf.negative(x, name="a")
        big = tf.zeros([1 << 20], name="unused_big")  # 4 MiB, not needed by train
        tf.negative(big, name="unused_neg")
        with tf.control_dependencies([x]):
            tf.no_op(name="train")
    graph.write_bytes(g.as_graph_def(add_shapes=True).SerializeToString())
    out = vcluster.check_graph(str(graph), ["train"], vcluster.load_profile(profile_file(V100)), 10)
    assert out["devices"]["/device:GPU:0"]["peak_bytes"] == 4096


def test_a_graph_larger_than_the_device(tmp_path, profile_file):
    # The VirtualCluster refuses a graph whose scheduler peak reaches the device's
    # memory_size (ResourceExhaustedError from MeasureCosts); the checker's device has room
    # for any graph and compares with the budget afterwards.
    graph = tmp_path / "chain.pb"
    neg_chain(graph, n=1 << 20)  # three 4 MiB tensors live together
    tiny = dict(V100, memory_bytes=1 << 20)
    out = vcluster.check_graph(str(graph), ["train"], vcluster.load_profile(profile_file(tiny)), 10,
                               budget=8 << 20)
    gpu = out["devices"]["/device:GPU:0"]
    assert gpu["peak_bytes"] == 3 * (4 << 20)
    assert gpu["fits_ns"] is False and gpu["fits_us"] is False and gpu["budget"] == 8 << 20
    assert vcluster.main(["--device-file", profile_file(tiny), "--budget", "8MiB", str(graph)]) == 1
    assert vcluster.main(["--device-file", profile_file(tiny), "--budget", "12MiB", str(graph)]) == 0


def test_the_tensors_that_make_the_microsecond_difference(profile_file):
    # On the MLP the whole step runs within about one microsecond: DeterminePeakMemoryUsage
    # counts nearly every tensor, the nanosecond trace a few at a time. The tensors the
    # microsecond peak counts but that are not live together with the others are listed, and
    # with the others they make up the microsecond peak.
    prof = vcluster.load_profile(profile_file(V100))
    out = vcluster.check_graph(str(ROOT / "testmodels" / "fixtures" / "mlp.pb"), ["train"], prof, 100)
    gpu = out["devices"]["/device:GPU:0"]
    assert gpu["peak_bytes_us"] > gpu["peak_bytes"] > 0
    assert gpu["us_only_count"] > 0 and gpu["us_only_bytes"] > 0
    others = gpu["peak_bytes_us"] - gpu["us_only_bytes"]
    assert others <= gpu["peak_bytes"]
    t = gpu["us_only_others_at_ns"]
    assert gpu["peak_time_us_ns"] <= t < gpu["peak_time_us_ns"] + 1000
    for x in gpu["us_only"]:
        # Each is live in the peak's microsecond, but not at the nanosecond the others are.
        assert not (x["alloc_ns"] <= t < x["dealloc_ns"])
        assert x["alloc_ns"] < gpu["peak_time_us_ns"] + 1000 and x["dealloc_ns"] > gpu["peak_time_us_ns"]


def test_reimplementation_matches_tensorflow_on_the_fixtures(profile_file):
    # check_graph raises SystemExit when its microsecond re-implementation of GraphMemory
    # disagrees with DeterminePeakMemoryUsage on any device.
    prof = vcluster.load_profile(profile_file(V100))
    for name in ("mlp", "cnn"):
        out = vcluster.check_graph(str(ROOT / "testmodels" / "fixtures" / (name + ".pb")), ["train"], prof, 5)
        assert out["devices"]["/device:GPU:0"]["peak_bytes"] > 0
        assert out["cost_estimate_s"] > 0


def test_cli_json(tmp_path, profile_file, capsys):
    graph = tmp_path / "chain.pb"
    neg_chain(graph)
    assert vcluster.main(["--device-file", profile_file(V100), "--json", str(graph)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"] == "v100-16gb"
    assert out["graphs"][0]["devices"]["/device:GPU:0"]["peak_bytes"] == 3 * 4096


def test_cli_trace_and_parse_bytes(tmp_path, profile_file, capsys):
    graph = tmp_path / "chain.pb"
    neg_chain(graph)
    assert vcluster.main(["--device-file", profile_file(V100), "--json", "--trace", str(graph)]) == 0
    out = json.loads(capsys.readouterr().out)
    trace = {e[1]: e for e in out["graphs"][0]["trace"]}
    assert trace["a"][2] == "Neg" and trace["a"][4] > trace["a"][3]
    assert trace["a"][5] == [[1024]]
    assert vcluster.parse_bytes("15GiB") == 15 << 30 and vcluster.parse_bytes("1.5GB") == 1500000000
    assert vcluster.parse_bytes("123") == 123
    with pytest.raises(Exception):
        vcluster.parse_bytes("lots")


def test_rejects_a_profile_without_sms(tmp_path, profile_file):
    p = dict(V100)
    del p["sms"]
    with pytest.raises(SystemExit):
        vcluster.load_profile(profile_file(p))


def test_value_dead_noop_runs_what_the_dependency_optimizer_leaves(tmp_path, profile_file):
    # In neg_chain nothing reads b's value (train waits for it by a control edge), and then
    # nothing reads a's: Grappler's dependency optimizer makes both NoOps before a real step,
    # as tfswap's simulator assumes (cost.PrunedNodes). As written, the VirtualCluster holds
    # x, a and b at once; with value_dead_noop only the fed x is left.
    graph = tmp_path / "chain.pb"
    neg_chain(graph)
    prof = vcluster.load_profile(profile_file(V100))
    written = vcluster.check_graph(str(graph), ["train"], prof, 10)
    assert "value_dead_noops" not in written
    assert written["devices"]["/device:GPU:0"]["peak_bytes"] == 3 * 4096
    out = vcluster.check_graph(str(graph), ["train"], prof, 10, value_dead_noop=True)
    assert out["value_dead_noops"] == ["a", "b"]
    gpu = out["devices"]["/device:GPU:0"]
    assert gpu["peak_bytes"] == gpu["peak_bytes_us"] == 4096
    assert [t["tensor"] for t in gpu["live"]] == ["x:0"]


def test_value_dead_noop_keeps_nodes_whose_value_is_read(tmp_path, profile_file):
    # The fixtures' training steps read every value they compute: nothing is made a NoOp, and
    # the figures are those of the graph as written.
    prof = vcluster.load_profile(profile_file(V100))
    path = str(ROOT / "testmodels" / "fixtures" / "mlp.pb")
    written = vcluster.check_graph(path, ["train"], prof, 5)
    out = vcluster.check_graph(path, ["train"], prof, 5, value_dead_noop=True)
    assert out["value_dead_noops"] == []
    assert out["devices"]["/device:GPU:0"]["peak_bytes"] == written["devices"]["/device:GPU:0"]["peak_bytes"]


def test_default_passes_remove_tuple_identities(tmp_path, profile_file):
    # tf.tuple's Identities (as tf.gradients makes them) count as buffers of their own in the
    # VirtualCluster as written; TensorFlow's default Grappler passes remove them before a
    # real step, and the checker then counts the graph without them.
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1024], name="x")
        a = tf.nn.relu(x, name="a")
        b = tf.math.sigmoid(x, name="b")
        ta, tb = tf.tuple([a, b], name="t")
        c = tf.multiply(ta, tb, name="c")
        with tf.control_dependencies([c]):
            tf.no_op(name="train")
    graph = tmp_path / "tuple.pb"
    graph.write_bytes(g.as_graph_def(add_shapes=True).SerializeToString())
    prof = vcluster.load_profile(profile_file(V100))
    written = vcluster.check_graph(str(graph), ["train"], prof, 10)
    assert "default_passes" not in written
    live = [t["tensor"] for t in written["devices"]["/device:GPU:0"]["live"]]
    assert any(t.startswith("t/control_dependency") for t in live), live
    out = vcluster.check_graph(str(graph), ["train"], prof, 10, default_passes=True)
    assert out["default_passes"]["identities_removed"] == ["t/control_dependency", "t/control_dependency_1"]
    gpu = out["devices"]["/device:GPU:0"]
    assert not any("control_dependency" in t["tensor"] for t in gpu["live"])
    assert gpu["peak_bytes"] < written["devices"]["/device:GPU:0"]["peak_bytes"]
