"""The TensorFlow side of the benchmark harness (bench/run.py), run inside its worker
processes, which import TensorFlow once:

  * build_graph: a training graph from testmodels/large.py at a given batch, cached on disk;
  * check: Grappler's VirtualCluster peak of a graph, through the checker of
    tools/vcluster/vcluster.py (imported, not copied: check_graph is called as it is);
  * grappler_swap: TensorFlow's own swapping, tf_optimizer.OptimizeGraph with
    RewriterConfig.memory_optimization = SWAPPING_HEURISTICS against a virtual GPU whose
    memory_size is the budget, every other Grappler pass switched off;
  * lower_grappler_swaps: Grappler's swap kernels as host Identities, the same rule as
    cost/grappler_swaps.go (the CPU wheel has no _CopyFromGpuToHost kernel, so the
    VirtualCluster cannot even load Grappler's output as it is).
"""

import contextlib
import fcntl
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "vcluster"))
sys.path.insert(0, os.path.join(ROOT, "testmodels"))

import vcluster  # noqa: E402  (tools/vcluster/vcluster.py)

_tf = None


def tf():
    global _tf
    if _tf is None:
        import tensorflow
        _tf = tensorflow
    return _tf


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def generator_version():
    """A hash of the graph generators' sources: cached graphs are rebuilt when they change."""
    h = hashlib.sha256()
    for name in ("large.py", "graphkit.py"):
        with open(os.path.join(ROOT, "testmodels", name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


@contextlib.contextmanager
def file_lock(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_graph(model, batch, cache_dir):
    """Path of model's training graph at batch (testmodels/large.py), built once per
    generator version; concurrent workers wait for each other's build."""
    d = os.path.join(cache_dir, "graphs", generator_version())
    path = os.path.join(d, "%s_b%d.pb" % (model, batch))
    if os.path.exists(path):
        return path, 0.0
    with file_lock(path + ".lock"):
        if os.path.exists(path):
            return path, 0.0
        import large  # testmodels/large.py
        t0 = time.time()
        _, data, side = large.build(model, batch)
        secs = time.time() - t0
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        with open(os.path.splitext(path)[0] + ".json", "w") as f:
            json.dump(side, f, indent=1)
        os.replace(tmp, path)
        return path, secs


def check(path, profile, fetch=("train",)):
    """VirtualCluster figures of one graph (vcluster.check_graph), for the first GPU."""
    t0 = time.time()
    # The checker gives its GPU room enough to measure any peak (vcluster.CHECKER_MEMORY); the
    # caller compares both peaks with the budget. The nodes Grappler's dependency optimizer
    # makes NoOps before a real step are NoOps first (vcluster.value_dead_as_noops): the
    # VirtualCluster would otherwise run nodes whose value nothing reads, which TensorFlow does
    # not (issue 14: the Transformer's plans, 13.43 GB as written against 11.52 GB so, titanx
    # batch 50, in the 2add593 run's notes, docs/bench/redesign.json).
    # Only the fetches' fan-in is scheduled, so the rest of the graph (init, fetch_var, ...)
    # is cut away first: the same peak and trace, in half the time on the large graphs.
    tfm = tf()
    gd = tfm.compat.v1.GraphDef()
    with open(path, "rb") as f:
        gd.ParseFromString(f.read())
    sub = _fanin(gd, fetch)
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".pb", delete=False) as f:
        f.write(sub.SerializeToString())
        pruned = f.name
    try:
        out = vcluster.check_graph(pruned, list(fetch), profile, 5, value_dead_noop=True)
    finally:
        os.unlink(pruned)
    gpu = out["devices"].get("/device:GPU:0", {})
    cpu = out["devices"].get("/device:CPU:0", {})
    return {
        "peak_bytes": gpu.get("peak_bytes", 0),
        "peak_bytes_us": gpu.get("peak_bytes_us", 0),
        "us_only_bytes": gpu.get("us_only_bytes", 0),
        "us_only": gpu.get("us_only", [])[:3],
        "host_peak_bytes": cpu.get("peak_bytes", 0),
        "cost_estimate_s": out["cost_estimate_s"],
        "nodes": out["nodes"],
        "value_dead_noops": len(out.get("value_dead_noops", [])),
        "live": gpu.get("live", [])[:3],
        "seconds": round(time.time() - t0, 3),
    }


def _fanin(gd, fetch):
    """The nodes gd's fetches need (data and control inputs), in gd's order."""
    by_name = {n.name: n for n in gd.node}
    keep, stack = set(), [f.split(":")[0].lstrip("^") for f in fetch]
    while stack:
        name = stack.pop()
        if name in keep or name not in by_name:
            continue
        keep.add(name)
        for i in by_name[name].input:
            stack.append(i.lstrip("^").split(":")[0])
    out = type(gd)()
    out.versions.CopyFrom(gd.versions)
    out.library.CopyFrom(gd.library)
    out.node.extend(n for n in gd.node if n.name in keep)
    return out


def check_cached(path, profile, cache_dir):
    # "vd": the figures of the graph with its value-dead nodes made NoOps (check); the cache's
    # figures of the graph as written have no suffix and are not reused.
    key = "%s_%s_%s_vd.json" % (sha256_file(path)[:32], profile["name"], profile["memory_bytes"])
    cpath = os.path.join(cache_dir, "vc", key)
    if os.path.exists(cpath):
        with open(cpath) as f:
            r = json.load(f)
        r["cached"] = True
        return r
    r = check(path, profile)
    os.makedirs(os.path.dirname(cpath), exist_ok=True)
    with open(cpath + ".tmp", "w") as f:
        json.dump(r, f)
    os.replace(cpath + ".tmp", cpath)
    return r


SWAP_OUT, SWAP_IN = "_CopyFromGpuToHost", "_CopyFromHostToGpu"


def lower_grappler_swaps(gd):
    """Grappler's swap kernels become Identities on the host CPU of their task, with
    _output_shapes copied from the tensor moved and the colocation dropped (the rule of
    cost/grappler_swaps.go). Returns the number of nodes changed; gd is changed in place."""
    by_name = {n.name: n for n in gd.node}

    def input_shape(n, depth=0):
        if depth > 8 or not n.input or n.input[0].startswith("^"):
            return None
        name, _, port = n.input[0].partition(":")
        p = by_name.get(name)
        if p is None:
            return None
        if p.op in (SWAP_OUT, SWAP_IN):
            return input_shape(p, depth + 1)
        shapes = p.attr["_output_shapes"].list.shape if "_output_shapes" in p.attr else []
        port = int(port or 0)
        return shapes[port] if port < len(shapes) else None

    shapes = {n.name: input_shape(n) for n in gd.node if n.op in (SWAP_OUT, SWAP_IN)}
    count = 0
    for n in gd.node:
        if n.op not in (SWAP_OUT, SWAP_IN):
            continue
        n.op = "Identity"
        dev = n.device
        if "/device:" in dev:
            n.device = dev.split("/device:")[0] + "/device:CPU:0"
        else:
            n.device = "/device:CPU:0"
        if "_class" in n.attr:
            del n.attr["_class"]
        sh = shapes[n.name]
        if sh is not None:
            n.attr["_output_shapes"].list.ClearField("shape")
            n.attr["_output_shapes"].list.shape.add().CopyFrom(sh)
        count += 1
    return count


_swap_ops = None


def load_swap_ops(cache_dir):
    """Builds (once per source version) and loads bench/grappler_ops/swap_ops.cc, the OpDefs of
    Grappler's swap kernels, which the CPU wheel lacks. Returns the library path, or "" when
    it could not be built (Grappler then stops after its first round of swaps)."""
    global _swap_ops
    if _swap_ops is not None:
        return _swap_ops
    src = os.path.join(ROOT, "bench", "grappler_ops", "swap_ops.cc")
    tfm = tf()
    with open(src, "rb") as f:
        h = hashlib.sha256(f.read() + tfm.__version__.encode()).hexdigest()[:12]
    lib = os.path.join(cache_dir, "swap_ops", "swap_ops_%s.so" % h)
    with file_lock(lib + ".lock"):
        if not os.path.exists(lib):
            import subprocess
            cmd = (["c++", "-shared", "-fPIC", "-O1", src, "-o", lib + ".tmp"]
                   + tfm.sysconfig.get_compile_flags() + tfm.sysconfig.get_link_flags())
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.stderr.write("bench: could not build %s:\n%s\n" % (src, p.stderr[-2000:]))
                _swap_ops = ""
                return _swap_ops
            os.replace(lib + ".tmp", lib)
    tfm.load_op_library(lib)
    _swap_ops = lib
    return _swap_ops


_OFF_PASSES = (
    "layout_optimizer", "constant_folding", "shape_optimization", "remapping",
    "arithmetic_optimization", "dependency_optimization", "loop_optimization",
    "function_optimization", "debug_stripper", "scoped_allocator_optimization",
    "pin_to_host_optimization", "implementation_selector", "auto_mixed_precision",
    "common_subgraph_elimination",
)


def grappler_swap(src, out_raw, out_lowered, profile, budget, cache_dir, fetch=("train",)):
    """Runs Grappler's SWAPPING_HEURISTICS on src against a virtual GPU of memory_size
    budget (the profile's other figures) and writes its output (out_raw) and the output with
    the swap kernels lowered (out_lowered). Every node is placed on the GPU first (the memory
    optimizer swaps only tensors of nodes placed on a GPU); the original device strings are
    put back afterwards, so the simulator and the checker place the graph as they place
    tfswap's. Returns statistics."""
    tfm = tf()
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
    from tensorflow.core.protobuf import device_properties_pb2 as dp
    from tensorflow.core.protobuf import rewriter_config_pb2 as rc
    from tensorflow.python.grappler import cluster as gcluster
    from tensorflow.python.grappler import tf_optimizer

    ops_lib = load_swap_ops(cache_dir)
    gd = tfm.compat.v1.GraphDef()
    with open(src, "rb") as f:
        gd.ParseFromString(f.read())
    orig_dev = {n.name: n.device for n in gd.node}
    for n in gd.node:
        n.device = vcluster.GPU_NAME % 0
    mg = meta_graph_pb2.MetaGraphDef()
    mg.graph_def.CopyFrom(gd)
    for name in fetch:
        mg.collection_def["train_op"].node_list.value.append(name)
    prof = dict(profile, memory_bytes=int(budget))
    devices = [dp.NamedDevice(name=vcluster.GPU_NAME % 0, properties=vcluster.gpu_properties(prof)),
               dp.NamedDevice(name=vcluster.CPU_NAME, properties=vcluster.cpu_properties(prof))]
    cfg = config_pb2.ConfigProto()
    r = cfg.graph_options.rewrite_options
    for name in _OFF_PASSES:
        if hasattr(r, name):
            setattr(r, name, rc.RewriterConfig.OFF)
    r.memory_optimization = rc.RewriterConfig.SWAPPING_HEURISTICS
    r.meta_optimizer_iterations = rc.RewriterConfig.ONE
    r.min_graph_nodes = -1
    c = gcluster.Cluster(devices=devices, disable_detailed_stats=True)
    t0 = time.time()
    try:
        og = tf_optimizer.OptimizeGraph(cfg, mg, cluster=c)
    finally:
        c.Shutdown()
    secs = time.time() - t0
    pairs = sum(1 for n in og.node if n.op == SWAP_OUT)
    # Grappler drops the _output_shapes attrs the simulator sizes tensors by: put them back
    # from the input (node names are kept), with the original device strings.
    orig_shapes = {n.name: n.attr["_output_shapes"] for n in gd.node if "_output_shapes" in n.attr}
    for n in og.node:
        n.device = orig_dev.get(n.name, "")
        if "_output_shapes" not in n.attr and n.name in orig_shapes:
            n.attr["_output_shapes"].CopyFrom(orig_shapes[n.name])
    with open(out_raw, "wb") as f:
        f.write(og.SerializeToString(deterministic=True))
    lowered = lower_grappler_swaps(og)
    with open(out_lowered, "wb") as f:
        f.write(og.SerializeToString(deterministic=True))
    return {"seconds": round(secs, 3), "swaps": pairs, "lowered": lowered,
            "nodes_in": len(gd.node), "nodes_out": len(og.node), "swap_opdefs": bool(ops_lib)}


def load_profile(path):
    return vcluster.load_profile(path)
