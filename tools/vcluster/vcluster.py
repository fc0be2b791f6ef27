#!/usr/bin/env python3
"""Independent check of tfswap's simulator: run graphs through TensorFlow's own
analytical simulator, Grappler's VirtualCluster, on the same device.

    .venv/bin/python tools/vcluster/vcluster.py --device-file v100.json \
        --fetch train testmodels/fixtures/resnet.pb /tmp/resnet.swap.pb [--budget 15GiB] [--json]

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
    timestamps, and fails otherwise. peak_bytes_us is never below peak_bytes;
  * the tensors live at each peak, and those that make the difference: the
    tensors the microsecond peak counts that are not live together with the
    others at any nanosecond of that microsecond (us_only: released or
    allocated within the same microsecond as the rest);
  * with --budget, whether each GPU's two peaks are within it;
  * cost_estimate_s: Cluster.MeasureCosts' run time (the VirtualScheduler's
    critical path with OpLevelCostEstimator's per-op costs).

The GPU is built so that Grappler's OpLevelCostEstimator sees the profile's
FP32 peak and memory bandwidth: num_cores = SMs, architecture = the compute
capability's major number, frequency chosen so that num_cores x frequency x
cores-per-SM(architecture, Grappler's table: 128 below 6, else 64) x 2 equals
fp32_flops, bandwidth = mem_bytes_per_s in KB/s. Its memory_size is not the
profile's memory but CHECKER_MEMORY (2^62 bytes): the VirtualCluster refuses a
graph whose scheduler-estimated peak reaches memory_size (virtual_cluster.cc
Run returns RESOURCE_EXHAUSTED, and MeasureCosts raises it), so the checker
gives the device room for any graph and compares peaks with the budget
afterwards. The CPU gets num_cores = 1 and frequency = host_flops in MHz
(Grappler's CPU rate is num_cores x frequency), bandwidth = host_mem_bytes_per_s
in KB/s.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

GPU_NAME = "/job:localhost/replica:0/task:0/device:GPU:%d"
CPU_NAME = "/job:localhost/replica:0/task:0/device:CPU:0"
# The checker's devices' memory_size: large enough that no graph's peak reaches it.
CHECKER_MEMORY = 1 << 62


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


def gpu_properties(p, memory_size=None):
    """Grappler's GPU for profile p; memory_size defaults to the profile's memory."""
    from tensorflow.core.protobuf import device_properties_pb2 as dp
    major = int(p["compute_capability"].split(".")[0])
    cores = grappler_cores_per_sm(major)
    freq_mhz = p["fp32_flops"] / (p["sms"] * cores * 2) / 1e6
    return dp.DeviceProperties(
        type="GPU", vendor="NVIDIA", model=p["name"],
        frequency=int(round(freq_mhz)), num_cores=int(p["sms"]),
        environment={"architecture": str(major)},
        memory_size=int(p["memory_bytes"] if memory_size is None else memory_size),
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


def live_tensors(graph_def, step_stats):
    """GraphMemory::InferFromTrace's live tensors (tensorflow/core/grappler/costs/graph_memory.cc).

    Every output of every op in the trace is a live tensor on the op's device,
    of its allocated_bytes, allocated at the op's start and freed 1 ns after the
    end of the op or of its last consumer in the original graph (data inputs
    only, whatever device the consumer ran on), whichever is later. Ops the
    scheduler added (_Send/_Recv) are not in the graph, so nothing extends
    their outputs. Each tensor gets both clocks: the trace's nanoseconds
    (all_start_nanos, op_end_rel_nanos) and its microseconds (all_start_micros,
    op_end_rel_micros, which GraphMemory reads), the latter in ns as GraphMemory
    compares them (micros x 1000, release at micros x 1000 + 1).

    Returns {device: [(node, port, bytes, alloc_ns, dealloc_ns, alloc_us, dealloc_us)]}.
    """
    def times(ns):
        return (ns.all_start_nanos, ns.all_start_nanos + ns.op_end_rel_nanos + 1,
                ns.all_start_micros * 1000,
                (ns.all_start_micros + ns.op_end_rel_micros) * 1000 + 1)

    placement = {}
    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            placement[ns.node_name] = ds.device
    nodes = {n.name: n for n in graph_def.node}
    live = {}  # (node, port) -> [device, bytes, alloc_ns, dealloc_ns, alloc_us, dealloc_us]

    def find_or_create(name, port, device):
        t = live.get((name, port))
        if t is None:
            t = live[(name, port)] = [device, 0, 0, 0, 0, 0]
        return t

    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            a_ns, d_ns, a_us, d_us = times(ns)
            for i, out in enumerate(ns.output):
                t = find_or_create(ns.node_name, i, ds.device)
                t[1] = out.tensor_description.allocation_description.allocated_bytes
                t[2], t[4] = a_ns, a_us
                t[3], t[5] = max(t[3], d_ns), max(t[5], d_us)
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
                t[3], t[5] = max(t[3], d_ns), max(t[5], d_us)
    per_device = {}
    for key, (dev, size, a_ns, d_ns, a_us, d_us) in live.items():
        per_device.setdefault(dev, []).append((key[0], key[1], size, a_ns, d_ns, a_us, d_us))
    return per_device


def peak_of(tensors, clock):
    """GraphMemory's peak over tensors by one clock ("ns" or "us"): allocations and
    releases sorted by time, the peak taken between distinct timestamps.

    Returns (peak, time of the peak, indices of the tensors live then).
    """
    a, d = (3, 4) if clock == "ns" else (5, 6)
    events = []
    for idx, t in enumerate(tensors):
        events.append((t[a], True, idx))
        events.append((t[d], False, idx))
    events.sort(key=lambda e: e[0])
    peak, at, cur, live_now, live_at_peak = 0, 0, 0, set(), set()
    for k, (ts, is_alloc, idx) in enumerate(events):
        if is_alloc:
            cur += tensors[idx][2]
            live_now.add(idx)
        else:
            cur -= tensors[idx][2]
            live_now.discard(idx)
        if k + 1 == len(events) or ts != events[k + 1][0]:
            if cur > peak:
                peak, at, live_at_peak = cur, ts, set(live_now)
    return peak, at, live_at_peak


def microsecond_only(tensors, at_us, live_us):
    """The tensors the microsecond peak (at at_us, in ns) counts that are not live
    together with the most of the others at any nanosecond of that microsecond: the
    difference the microsecond clock makes at its peak. Returns (indices, the
    nanosecond within the microsecond where the others are live together)."""
    window = [at_us] + sorted({tensors[i][3] for i in live_us if at_us <= tensors[i][3] < at_us + 1000})
    best, best_t, best_set = -1, at_us, set()
    for t in window:
        s = {i for i in live_us if tensors[i][3] <= t < tensors[i][4]}
        b = sum(tensors[i][2] for i in s)
        if b > best:
            best, best_t, best_set = b, t, s
    return set(live_us) - best_set, best_t


def describe(tensors, idx, top):
    rows = sorted((tensors[i] for i in idx), key=lambda x: (-x[2], x[0], x[1]))
    return [{"tensor": "%s:%d" % (n, port), "bytes": int(b), "alloc_ns": int(a), "dealloc_ns": int(d)}
            for (n, port, b, a, d, _, _) in rows[:top]]


def load_metagraph(path, fetch):
    """The GraphDef at path and a MetaGraphDef of it whose `train_op` collection names the
    fetches (the nodes Grappler keeps and runs, as a session run of them would)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import meta_graph_pb2

    gd = tf.compat.v1.GraphDef()
    with open(path, "rb") as f:
        gd.ParseFromString(f.read())
    mg = meta_graph_pb2.MetaGraphDef()
    mg.graph_def.CopyFrom(gd)
    for name in fetch:
        mg.collection_def["train_op"].node_list.value.append(name)
    return gd, mg


def value_dead_as_noops(gd, mg):
    """Returns gd and mg with the nodes Grappler's dependency optimizer turns into NoOps made
    NoOps, and the names of those nodes.

    Before a real step TensorFlow's meta-optimizer runs the dependency optimizer (on by default
    in RewriterConfig), which turns a node whose value nothing the fetches need reads into a
    NoOp that waits for its inputs (DependencyOptimizer::SafeToConvertToNoOp). The
    VirtualCluster schedules the graph as written, so it would run such a node and count its
    outputs. This applies the optimizer's own decision, run alone as tools/vcluster/dependency.py
    runs it, and nothing else of it: the Identities it bypasses and the NoOps it removes stay,
    so the graph keeps every other buffer the VirtualCluster counts."""
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2, rewriter_config_pb2
    from tensorflow.python.grappler import tf_optimizer

    cfg = config_pb2.ConfigProto()
    rw = cfg.graph_options.rewrite_options
    rw.optimizers[:] = ["dependency"]
    rw.min_graph_nodes = -1
    rw.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    after = {n.name: n.op for n in tf_optimizer.OptimizeGraph(cfg, mg).node}
    out = type(gd)()
    out.CopyFrom(gd)
    # A NoOp the optimizer made may then be removed too (a NoOp with one input or one output
    # is bypassed), so a node gone that is not an Identity may have gone that way; the
    # Identities it bypasses forward their input at run time and stay as written. A node gone
    # because the fetches do not need it (the item's pruning) may still be read by another
    # such node: only nodes whose value no node left as it is reads become NoOps.
    by_name = {n.name: n for n in out.node}
    fanin, stack = set(), list(mg.collection_def["train_op"].node_list.value)
    while stack:
        name = stack.pop()
        if name in fanin or name not in by_name:
            continue
        fanin.add(name)
        stack.extend(i.lstrip("^").split(":")[0] for i in by_name[name].input)
    cand = {n.name for n in out.node
            if n.name in fanin and n.op not in ("NoOp", "Identity", "IdentityN")
            and after.get(n.name, "gone") in ("NoOp", "gone")}
    readers = {}
    for n in out.node:
        for i in n.input:
            if not i.startswith("^"):
                readers.setdefault(i.split(":")[0], set()).add(n.name)
    changed = True
    while changed:
        changed = False
        for name in sorted(cand):
            if readers.get(name, set()) - cand:
                cand.discard(name)
                changed = True
    made = []
    for n in out.node:
        if n.name not in cand:
            continue
        made.append(n.name)
        ins = []
        for i in n.input:
            c = "^" + i.lstrip("^").split(":")[0]
            if c not in ins:
                ins.append(c)
        n.op = "NoOp"
        n.attr.clear()
        del n.input[:]
        n.input.extend(ins)
    out_mg = meta_graph_pb2.MetaGraphDef()
    out_mg.CopyFrom(mg)
    out_mg.graph_def.CopyFrom(out)
    return out, out_mg, made


def after_default_passes(gd, mg, devices):
    """Returns gd and mg as TensorFlow's default Grappler passes leave them before a real step
    (tf_optimizer.OptimizeGraph with the default ConfigProto, on a cluster of the checker's
    devices), and the names of the Identity nodes they removed (the dependency optimizer
    bypasses Identities such as tf.gradients' tuple Identities)."""
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
    from tensorflow.python.grappler import cluster as gcluster
    from tensorflow.python.grappler import tf_optimizer

    c = gcluster.Cluster(devices=devices)
    try:
        opt = tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), mg, cluster=c)
    finally:
        c.Shutdown()
    kept = {n.name for n in opt.node}
    removed = sorted(n.name for n in gd.node if n.op == "Identity" and n.name not in kept)
    out_mg = meta_graph_pb2.MetaGraphDef()
    out_mg.CopyFrom(mg)
    out_mg.graph_def.CopyFrom(opt)
    return opt, out_mg, removed


def check_graph(path, fetch, profile, top, budget=None, trace=False, value_dead_noop=False,
                default_passes=False):
    """VirtualCluster figures of the graph at path for the fetches: per device the peak by the
    nanosecond and the microsecond reading of the VirtualScheduler's trace and what is live at
    each. With value_dead_noop the nodes Grappler's dependency optimizer makes NoOps are NoOps
    first (value_dead_as_noops), as they are when TensorFlow runs the step. With
    default_passes the graph checked is the one TensorFlow's default Grappler passes make of it
    (after_default_passes), the Identities they removed listed."""
    import tensorflow as tf
    from tensorflow.core.protobuf import device_properties_pb2 as dp
    from tensorflow.python.grappler import cluster as gcluster
    from tensorflow.python.grappler import item as gitem

    gd, mg = load_metagraph(path, fetch)
    made_noops = []
    if value_dead_noop:
        gd, mg, made_noops = value_dead_as_noops(gd, mg)
    devices = [dp.NamedDevice(name=GPU_NAME % i, properties=gpu_properties(profile, CHECKER_MEMORY))
               for i in gpu_indices(gd)]
    devices.append(dp.NamedDevice(name=CPU_NAME, properties=cpu_properties(profile)))
    nodes_written, removed = len(gd.node), None
    if default_passes:
        gd, mg, removed = after_default_passes(gd, mg, devices)
    it = gitem.Item(mg)
    c = gcluster.Cluster(devices=devices, disable_timeline=False)
    try:
        peaks_us = c.DeterminePeakMemoryUsage(it)
        _, run_time, step_stats = c.MeasureCosts(it)
    finally:
        c.Shutdown()
    tensors = live_tensors(gd, step_stats)
    out = {"path": path, "fetch": list(fetch), "nodes": len(gd.node),
           "cost_estimate_s": run_time, "devices": {}}
    if value_dead_noop:
        out["value_dead_noops"] = sorted(made_noops)
    if removed is not None:
        out["default_passes"] = {"nodes_written": nodes_written, "identities_removed": removed}
    for dev, (peak_tf, _) in sorted(peaks_us.items()):
        peak_tf = max(int(peak_tf), 0)
        ts = tensors.get(dev, [])
        peak_us, at_us, live_us = peak_of(ts, "us")
        if peak_us != peak_tf:
            raise SystemExit("%s: %s: the re-implemented GraphMemory rule gives %d bytes from "
                             "the microsecond trace, DeterminePeakMemoryUsage %d: the checker "
                             "no longer matches TensorFlow %s" % (path, dev, peak_us, peak_tf,
                                                                  tf.__version__))
        peak, at, live = peak_of(ts, "ns")
        diff, diff_at = microsecond_only(ts, at_us, live_us) if live_us else (set(), at_us)
        d = {
            "peak_bytes": int(peak),
            "peak_time_ns": int(at),
            "live_count": len(live),
            "live": describe(ts, live, top),
            "peak_bytes_us": peak_tf,
            "peak_time_us_ns": int(at_us),
            "live_us_count": len(live_us),
            "live_us": describe(ts, live_us, top),
            "us_only_bytes": int(sum(ts[i][2] for i in diff)),
            "us_only_count": len(diff),
            "us_only_others_at_ns": int(diff_at),
            "us_only": describe(ts, diff, top),
        }
        if budget is not None and "GPU" in dev.upper():
            d["budget"] = int(budget)
            d["fits_ns"] = peak <= budget
            d["fits_us"] = peak_tf <= budget
        out["devices"][short(dev)] = d
    if trace:
        def shape(o):
            sh = o.tensor_description.shape
            return None if sh.unknown_rank else [int(d.size) for d in sh.dim]
        out["trace"] = [[short(ds.device), ns.node_name, ns.timeline_label, int(ns.all_start_nanos),
                         int(ns.all_start_nanos + ns.op_end_rel_nanos), [shape(o) for o in ns.output]]
                        for ds in step_stats.dev_stats for ns in ds.node_stats]
    return out


UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
         "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def parse_bytes(s):
    """A byte count: 123, 15GiB, 1.5GB (binary and decimal units)."""
    t = s.strip().lower()
    num = t.rstrip("kmgtib")
    try:
        value = float(num)
        unit = UNITS[t[len(num):]]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError("not a byte count: %r (want e.g. 15GiB)" % s)
    if value < 0:
        raise argparse.ArgumentTypeError("negative byte count: %r" % s)
    return int(value * unit)


def human(b):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(b) >= size:
            return "%.2f %s" % (b / size, unit)
    return "%d B" % b


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device-file", required=True,
                    help="tfswap device profile JSON (tfswap simulate --dump-profile)")
    ap.add_argument("--fetch", action="append", default=[],
                    help="node the step runs (the train_op collection); repeatable; "
                         "default: train")
    ap.add_argument("--top", type=int, default=10,
                    help="how many live tensors at the peak to list")
    ap.add_argument("--budget", type=parse_bytes,
                    help="compare each GPU's peaks with this budget (bytes, or 15GiB, ...)")
    ap.add_argument("--trace", action="store_true",
                    help="with --json, add every op's device, start and end (ns) and its "
                         "outputs' shapes as Grappler inferred them")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--value-dead-noop", action="store_true",
                    help="first make NoOps of the nodes Grappler's dependency optimizer makes "
                         "NoOps before a real step (what tfswap's simulator assumes); default: "
                         "the graph as written")
    ap.add_argument("--default-passes", action="store_true",
                    help="check the graph TensorFlow's default Grappler passes make of it before a "
                         "real step (OptimizeGraph, default ConfigProto), not the graph as written")
    ap.add_argument("graphs", nargs="+")
    args = ap.parse_args(argv)
    profile = load_profile(args.device_file)
    fetch = args.fetch or ["train"]
    import tensorflow as tf
    result = {"tensorflow_version": tf.__version__, "profile": profile["name"],
              "graphs": [check_graph(g, fetch, profile, args.top, args.budget, args.trace,
                                         args.value_dead_noop, args.default_passes)
                         for g in args.graphs]}
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print("VirtualCluster (TensorFlow %s), device profile %s" % (tf.__version__, profile["name"]))
    over = False
    for g in result["graphs"]:
        print("%s: cost estimate %.3f ms" % (g["path"], g["cost_estimate_s"] * 1e3))
        if "default_passes" in g:
            print("  after TensorFlow's default Grappler passes: %d of %d nodes, %d Identities removed"
                  % (g["nodes"], g["default_passes"]["nodes_written"],
                     len(g["default_passes"]["identities_removed"])))
        for dev, d in g["devices"].items():
            print("  %-16s peak %s (%d bytes, ns trace, %d tensors live); DeterminePeakMemoryUsage "
                  "%s (%d bytes, us trace, %d tensors)"
                  % (dev, human(d["peak_bytes"]), d["peak_bytes"], d["live_count"],
                     human(d["peak_bytes_us"]), d["peak_bytes_us"], d["live_us_count"]))
            if d["us_only_count"]:
                big = d["us_only"][0]
                print("  %-16s   the us peak at %.3f us counts %s more in %d tensors not live with the "
                      "others at %d ns, largest %s (%s, live %d..%d ns)"
                      % ("", d["peak_time_us_ns"] / 1e3, human(d["us_only_bytes"]), d["us_only_count"],
                         d["us_only_others_at_ns"], big["tensor"], human(big["bytes"]),
                         big["alloc_ns"], big["dealloc_ns"] - 1))
            if "budget" in d:
                for clock in ("ns", "us"):
                    peak = d["peak_bytes" if clock == "ns" else "peak_bytes_us"]
                    if peak > d["budget"]:
                        over = True
                print("  %-16s   budget %s: %s by the ns trace, %s by DeterminePeakMemoryUsage"
                      % ("", human(d["budget"]),
                         "fits" if d["fits_ns"] else "over by " + human(d["peak_bytes"] - d["budget"]),
                         "fits" if d["fits_us"] else "over by " + human(d["peak_bytes_us"] - d["budget"])))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
