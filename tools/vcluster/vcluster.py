#!/usr/bin/env python3
"""Independent check of tfswap's simulator: run graphs through TensorFlow's own
analytical simulator, Grappler's VirtualCluster, on the same device.

    .venv/bin/python tools/vcluster/vcluster.py --device-file v100.json \
        --fetch train testmodels/fixtures/resnet.pb /tmp/resnet.swap.pb [--json]

The device file is tfswap's device profile format (`tfswap simulate --device NAME
--dump-profile FILE` writes one). For each graph the checker builds a MetaGraphDef
whose `train_op` collection names the fetches, a Grappler item from it, and a
VirtualCluster with one GPU per GPU index the graph names (at least GPU:0) and
the host CPU:0, and reports per device:

  * peak_bytes_us: Cluster.DeterminePeakMemoryUsage, TensorFlow's own answer
    (GraphMemory::InferStatically: it runs the VirtualScheduler and, from the
    trace, keeps every op output live from its op's start to the end of its
    last consumer, +1 ns). GraphMemory reads the trace's *microsecond*
    timestamps, so every op that starts within the same microsecond looks
    simultaneous: on a fast GPU a small graph runs in a few microseconds and
    the "peak" becomes the sum of nearly all its tensors;
  * peak_bytes: the same rule (graph_memory.cc InferFromTrace, re-implemented
    below) applied to the same VirtualCluster trace's *nanosecond* timestamps
    (NodeExecStats.all_start_nanos / op_end_rel_nanos, which the
    VirtualScheduler also fills in). The checker verifies that the
    re-implementation reproduces peak_bytes_us exactly from the microsecond
    timestamps, and fails otherwise;
  * the tensors live at that peak;
  * cost_estimate_s: Cluster.MeasureCosts' run time (the VirtualScheduler's
    critical path with OpLevelCostEstimator's per-op costs).

The GPU is built so that Grappler's OpLevelCostEstimator sees the profile's
FP32 peak and memory bandwidth: num_cores = SMs, architecture = the compute
capability's major number, frequency chosen so that num_cores x frequency x
cores-per-SM(architecture, Grappler's table: 128 below 6, else 64) x 2 equals
fp32_flops, bandwidth = mem_bytes_per_s in KB/s, memory_size = memory_bytes.
The CPU gets num_cores = 1 and frequency = host_flops in MHz (Grappler's CPU
rate is num_cores x frequency), bandwidth = host_mem_bytes_per_s in KB/s.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

GPU_NAME = "/job:localhost/replica:0/task:0/device:GPU:%d"
CPU_NAME = "/job:localhost/replica:0/task:0/device:CPU:0"


def grappler_cores_per_sm(arch_major):
    """Grappler's OpLevelCostEstimator::GetDeviceInfo table (by architecture string)."""
    if arch_major < 3:
        return 32
    if arch_major < 4:
        return 192
    if arch_major < 6:
        return 128
    return 64


def load_profile(path):
    with open(path) as f:
        p = json.load(f)
    if p.get("format") != "tfswap-device-profile" or p.get("version") != 1:
        raise SystemExit("%s: not a tfswap device profile (format/version)" % path)
    for k in ("name", "memory_bytes", "fp32_flops", "mem_bytes_per_s"):
        if k not in p:
            raise SystemExit("%s: missing %s" % (path, k))
    if not p.get("sms") or not p.get("compute_capability"):
        raise SystemExit("%s: the checker needs sms and compute_capability to build "
                         "Grappler's device" % path)
    return p


def gpu_properties(p):
    from tensorflow.core.protobuf import device_properties_pb2 as dp
    major = int(p["compute_capability"].split(".")[0])
    cores = grappler_cores_per_sm(major)
    freq_mhz = p["fp32_flops"] / (p["sms"] * cores * 2) / 1e6
    return dp.DeviceProperties(
        type="GPU", vendor="NVIDIA", model=p["name"],
        frequency=int(round(freq_mhz)), num_cores=int(p["sms"]),
        environment={"architecture": str(major)},
        memory_size=int(p["memory_bytes"]),
        bandwidth=int(round(p["mem_bytes_per_s"] / 1e3)))


def cpu_properties(p):
    from tensorflow.core.protobuf import device_properties_pb2 as dp
    host_flops = p.get("host_flops", 1e12)
    host_bw = p.get("host_mem_bytes_per_s", 50e9)
    return dp.DeviceProperties(
        type="CPU", frequency=int(round(host_flops / 1e6)), num_cores=1,
        memory_size=1 << 40, bandwidth=int(round(host_bw / 1e3)))


def short(device):
    return device.replace("/job:localhost/replica:0/task:0", "")


def gpu_indices(graph_def):
    """GPU indices the graph's nodes name (always including 0)."""
    idx = {0}
    for n in graph_def.node:
        d = n.device.lower()
        for key in ("device:gpu:", "/gpu:"):
            if key in d:
                rest = d.split(key, 1)[1].split("/")[0]
                if rest.isdigit():
                    idx.add(int(rest))
    return sorted(idx)


def infer_from_trace(graph_def, step_stats, nanos):
    """GraphMemory::InferFromTrace (tensorflow/core/grappler/costs/graph_memory.cc).

    Every output of every op in the trace is a live tensor on the op's device,
    of its allocated_bytes, allocated at the op's start and freed 1 ns after the
    end of the op or of its last consumer in the original graph (data inputs
    only, whatever device the consumer ran on), whichever is later. Ops the
    scheduler added (_Send/_Recv) are not in the graph, so nothing extends
    their outputs. Peaks are taken between distinct timestamps. With nanos
    False the timestamps are the trace's microseconds (as GraphMemory reads
    them); with nanos True its nanoseconds.

    Returns {device: (peak, [(node, port, bytes, alloc, dealloc), ...])}.
    """
    def times(ns):
        if nanos:
            return ns.all_start_nanos, ns.all_start_nanos + ns.op_end_rel_nanos + 1
        return (ns.all_start_micros * 1000,
                (ns.all_start_micros + ns.op_end_rel_micros) * 1000 + 1)

    placement = {}
    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            placement[ns.node_name] = ds.device
    nodes = {n.name: n for n in graph_def.node}
    live = {}  # (node, port) -> [device, bytes, alloc, dealloc]

    def find_or_create(name, port, device):
        t = live.get((name, port))
        if t is None:
            t = live[(name, port)] = [device, 0, 0, 0]
        return t

    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            start, end = times(ns)
            for i, out in enumerate(ns.output):
                t = find_or_create(ns.node_name, i, ds.device)
                t[1] = out.tensor_description.allocation_description.allocated_bytes
                t[2] = start
                t[3] = max(t[3], end)
            node = nodes.get(ns.node_name)
            if node is None:
                continue
            swapped = set()
            if "_swap_to_host" in node.attr:
                swapped = set(node.attr["_swap_to_host"].list.i)
            for i, inp in enumerate(node.input):
                if i in swapped or inp.startswith("^"):
                    continue
                name, _, port = inp.partition(":")
                t = find_or_create(name, int(port or 0), placement.get(name, ""))
                t[3] = max(t[3], end)
    per_device = {}
    for key, (dev, size, alloc, dealloc) in live.items():
        per_device.setdefault(dev, []).append((key[0], key[1], size, alloc, dealloc))
    result = {}
    for dev, tensors in per_device.items():
        events = []
        for idx, (_, _, size, alloc, dealloc) in enumerate(tensors):
            events.append((alloc, True, idx))
            events.append((dealloc, False, idx))
        events.sort(key=lambda e: e[0])
        peak, cur, live_now, live_at_peak = 0, 0, set(), set()
        for k, (ts, is_alloc, idx) in enumerate(events):
            if is_alloc:
                cur += tensors[idx][2]
                live_now.add(idx)
            else:
                cur -= tensors[idx][2]
                live_now.discard(idx)
            if k + 1 == len(events) or ts != events[k + 1][0]:
                if cur > peak:
                    peak, live_at_peak = cur, set(live_now)
        result[dev] = (peak, [tensors[i] for i in live_at_peak])
    return result


def check_graph(path, fetch, profile, top):
    import tensorflow as tf
    from tensorflow.core.protobuf import device_properties_pb2 as dp
    from tensorflow.core.protobuf import meta_graph_pb2
    from tensorflow.python.grappler import cluster as gcluster
    from tensorflow.python.grappler import item as gitem

    gd = tf.compat.v1.GraphDef()
    with open(path, "rb") as f:
        gd.ParseFromString(f.read())
    mg = meta_graph_pb2.MetaGraphDef()
    mg.graph_def.CopyFrom(gd)
    for name in fetch:
        mg.collection_def["train_op"].node_list.value.append(name)
    it = gitem.Item(mg)
    devices = [dp.NamedDevice(name=GPU_NAME % i, properties=gpu_properties(profile))
               for i in gpu_indices(gd)]
    devices.append(dp.NamedDevice(name=CPU_NAME, properties=cpu_properties(profile)))
    c = gcluster.Cluster(devices=devices, disable_timeline=False)
    try:
        peaks_us = c.DeterminePeakMemoryUsage(it)
        _, run_time, step_stats = c.MeasureCosts(it)
    finally:
        c.Shutdown()
    mine_us = infer_from_trace(gd, step_stats, nanos=False)
    mine_ns = infer_from_trace(gd, step_stats, nanos=True)
    out = {"path": path, "fetch": list(fetch), "nodes": len(gd.node),
           "cost_estimate_s": run_time, "devices": {}}
    for dev, (peak_us, _) in sorted(peaks_us.items()):
        peak_us = max(int(peak_us), 0)
        check_us = mine_us.get(dev, (0, []))[0]
        if check_us != peak_us:
            raise SystemExit("%s: %s: the re-implemented GraphMemory rule gives %d bytes from "
                             "the microsecond trace, DeterminePeakMemoryUsage %d: the checker "
                             "no longer matches TensorFlow %s" % (path, dev, check_us, peak_us,
                                                                  __import__("tensorflow").__version__))
        peak, live = mine_ns.get(dev, (0, []))
        live = sorted(live, key=lambda x: (-x[2], x[0], x[1]))
        out["devices"][short(dev)] = {
            "peak_bytes": int(peak),
            "peak_bytes_us": peak_us,
            "live_count": len(live),
            "live": [{"tensor": "%s:%d" % (n, port), "bytes": int(b),
                      "alloc_ns": int(a), "dealloc_ns": int(d)}
                     for (n, port, b, a, d) in live[:top]],
        }
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device-file", required=True,
                    help="tfswap device profile JSON (tfswap simulate --dump-profile)")
    ap.add_argument("--fetch", action="append", default=[],
                    help="node the step runs (the train_op collection); repeatable; "
                         "default: train")
    ap.add_argument("--top", type=int, default=10,
                    help="how many live tensors at the peak to list")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("graphs", nargs="+")
    args = ap.parse_args(argv)
    profile = load_profile(args.device_file)
    fetch = args.fetch or ["train"]
    import tensorflow as tf
    result = {"tensorflow_version": tf.__version__, "profile": profile["name"],
              "graphs": [check_graph(g, fetch, profile, args.top) for g in args.graphs]}
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print("VirtualCluster (TensorFlow %s), device profile %s" % (tf.__version__, profile["name"]))
    for g in result["graphs"]:
        print("%s: cost estimate %.3f ms" % (g["path"], g["cost_estimate_s"] * 1e3))
        for dev, d in g["devices"].items():
            print("  %-16s peak %12d bytes (%d tensors live); DeterminePeakMemoryUsage %d"
                  % (dev, d["peak_bytes"], d["live_count"], d["peak_bytes_us"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
