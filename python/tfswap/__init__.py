"""tfswap for TensorFlow 2: swap tensors to host memory inside tf.function and Keras fit.

``tfswap.enable()`` loads tfswap's graph-optimizer plugin into TensorFlow (a PluggableDevice
graph optimizer, grappler_bridge/tfswap_plugin.cc) and configures it. From then on every
training step TensorFlow builds (a ``tf.function``, Keras ``model.fit``'s train function) is
planned by tfswap when Grappler optimizes it, and runs with the planned swaps::

    import tfswap
    tfswap.enable(budget="10GiB")          # before the first step runs
    model.fit(x, y, epochs=3)
    print(tfswap.plan_summary())

Configuration is read by the plugin each time it optimizes a graph, so ``enable()`` with
other options, or ``disable()``, apply to the functions traced afterwards without restarting
Python. TF1 graphs are rewritten with ``tfswap.rewrite(graph_def)``.
"""

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import threading
import warnings

__all__ = ["enable", "disable", "plan_summary", "rewrite", "check_model", "profile_for", "binary_path",
           "plugin_path"]

_HERE = os.path.dirname(os.path.abspath(__file__))
# A checkout used without installing (PYTHONPATH=python): the build outputs of the checkout.
_CHECKOUT = os.path.dirname(os.path.dirname(_HERE))

_lock = threading.Lock()
_loaded_type = None  # the device type the plugin was registered for, once loaded
_plan_log = None
_compile_patched = None

# enable()'s keyword -> the environment variable the plugin reads.
_OPTIONS = {
    "budget": "TFSWAP_BUDGET",
    "strategy": "TFSWAP_STRATEGY",
    "device": "TFSWAP_DEVICE",
    "recompute": "TFSWAP_RECOMPUTE",
    "min_bytes": "TFSWAP_MIN_BYTES",
    "compute_device": "TFSWAP_COMPUTE_DEVICE",
    "timeout": "TFSWAP_TIMEOUT",
    "log": "TFSWAP_LOG",
    "batch_size": "TFSWAP_BATCH_SIZE",
    "preserve": "TFSWAP_PRESERVE",
    "offload": "TFSWAP_OFFLOAD",
    "gate_kind": "TFSWAP_GATE_KIND",
}

# The values enable() accepts for the options the plugin would otherwise refuse only when it
# optimizes a graph (with a warning, leaving the graph unchanged).
_CHOICES = {
    "gate_kind": ("identity", "reduce"),
    "recompute": ("auto", "off", "max"),
    "offload": ("none", "all", "auto"),
}


def binary_path():
    """binary_path returns the tfswap binary the plugin runs: $TFSWAP_BINARY, the one bundled
    in the installed package, the checkout's bin/tfswap, or tfswap on PATH."""
    env = os.environ.get("TFSWAP_BINARY")
    if env:
        return env
    for p in (os.path.join(_HERE, "_bin", "tfswap"), os.path.join(_CHECKOUT, "bin", "tfswap")):
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    found = shutil.which("tfswap")
    if found:
        return found
    raise FileNotFoundError(
        "tfswap: no tfswap binary: install the package with pip, run make setup in the checkout, "
        "or set TFSWAP_BINARY"
    )


def plugin_path():
    """plugin_path returns the plugin library: $TFSWAP_PLUGIN, the one bundled in the
    installed package, or the checkout's grappler_bridge/libtfswap_plugin.so."""
    env = os.environ.get("TFSWAP_PLUGIN")
    if env:
        return env
    for p in (
        os.path.join(_HERE, "_bin", "libtfswap_plugin.so"),
        os.path.join(_CHECKOUT, "grappler_bridge", "libtfswap_plugin.so"),
    ):
        if os.path.isfile(p):
            return p
    raise FileNotFoundError(
        "tfswap: no libtfswap_plugin.so: install the package with pip, run "
        "grappler_bridge/build.sh in the checkout, or set TFSWAP_PLUGIN"
    )


# Built-in device profiles (tfswap simulate --list-devices) by the model-name token that names
# their GPU, each with the memory tokens that tell its variants apart (first: the default).
_FAMILIES = [
    ("GH200", [("", "gh200")]),
    ("H100", [("", "h100")]),
    ("A100", [("80GB", "a100-80gb"), ("", "a100-40gb")]),
    ("V100", [("32GB", "v100-32gb"), ("", "v100-16gb")]),
    ("1080TI", [("", "gtx1080ti")]),
    ("TITANX", [("", "titanx")]),
]


def profile_for(model_name):
    """profile_for returns the built-in device profile for a GPU model name as TensorFlow
    reports it ("Tesla V100-SXM2-32GB" -> "v100-32gb"), or None when no profile names that
    GPU (tfswap then plans for its default device)."""
    name = (model_name or "").upper().replace(" ", "").replace("-", "")
    for token, variants in _FAMILIES:
        if token in name:
            for mem, profile in variants:
                if mem in name:
                    return profile
    return None


def _detect_device():
    """The profile of the first GPU TensorFlow sees, or None (no GPU, or none that a built-in
    profile names)."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    details = tf.config.experimental.get_device_details(gpus[0])
    profile = profile_for(details.get("device_name", ""))
    if profile is None:
        warnings.warn("tfswap: no built-in device profile for the GPU %r: planning for tfswap's "
                      "default device; give enable(device=...) or budget=" % details.get("device_name"),
                      stacklevel=3)
    return profile


def enable(budget=None, strategy=None, device=None, recompute=None, min_bytes=None,
           compute_device=None, device_type=None, batch_size=None, timeout=None, log=None,
           preserve=None, offload=None, gate_kind=None):
    """enable switches tfswap on for the graphs TensorFlow optimizes from now on.

    budget (e.g. "10GiB"), strategy ("auto", "lms", ...), device (a device profile such as
    "v100-16gb"; by default the GPU TensorFlow sees), recompute ("auto", "off", "max") and
    min_bytes are tfswap rewrite's options of the same names. Without device, the profile is
    the one that names the first GPU TensorFlow sees (profile_for). compute_device limits the
    swapping to one device (e.g. "/device:CPU:1") or to several (a list, or a comma-separated
    string: the replicas of a MirroredStrategy step), each planned against its own budget;
    without it the plugin plans every GPU, or, registered for CPU, every CPU of the graph but
    CPU:0 of its task (the host). batch_size is the batch size tfswap
    assumes where a shape's leading dimension is unknown: Keras traces its train function for
    batches of any size, and tfswap sizes only tensors of known shape (without it, the plan's
    log line says how many tensors were left unsized). preserve lists node names tfswap
    leaves exactly as they are (tfswap rewrite --preserve): their outputs are never swapped
    or recomputed and their inputs never redirected; Grappler's own nodes to preserve are
    always kept so. offload ("none", "all"; "auto" is taken as "all") is tfswap rewrite's
    --offload for TensorFlow 2: a variable lives where the program created it (eagerly,
    outside the function), so the plugin moves none; the reads of the variables created on
    the host (under tf.device("/CPU:0"), the optimizer's slots too) are copied to the compute
    device behind triggers, and variables created on a compute device stay there, with one
    warning saying so. gate_kind ("identity", the default, or "reduce") is tfswap rewrite's
    --gate-kind: the op each gate is, an Identity of the trigger's output or an L2Loss of it
    (4 bytes, where the output is floating-point). A gate_kind, recompute or offload other
    than those listed raises ValueError before TensorFlow is touched. timeout is the seconds
    one rewrite may take (default 60; past it the graph runs unchanged, with a warning), and
    log how much the plugin logs: 0 warnings only, 1 (default) one line per plan, 2 also
    tfswap's whole summary. device_type is the device type the plugin
    registers for, "GPU" (default) or "CPU" (the two-device CPU emulation); it is fixed when
    the plugin is first loaded. Options left None are unset (tfswap's defaults). Call it
    before the first step of the model runs: graphs already optimized keep their plan.
    """
    global _loaded_type, _plan_log
    values = dict(budget=budget, strategy=strategy, device=device, recompute=recompute,
                  min_bytes=min_bytes, compute_device=compute_device, batch_size=batch_size,
                  timeout=timeout, log=log, preserve=preserve, offload=offload,
                  gate_kind=gate_kind)
    for key, allowed in _CHOICES.items():
        if values[key] is not None and values[key] not in allowed:
            raise ValueError("tfswap: enable(%s=%r): %s must be one of %s" % (
                key, values[key], key, ", ".join(repr(a) for a in allowed)))
    if isinstance(preserve, str):
        values["preserve"] = preserve
    elif preserve is not None:
        values["preserve"] = ",".join(preserve)
    with _lock:
        want = device_type or os.environ.get("TFSWAP_DEVICE_TYPE") or "GPU"
        if _loaded_type is not None and want != _loaded_type:
            raise ValueError(
                "tfswap: the plugin is registered for %s in this process; the device type "
                "cannot change once loaded (start a new process)" % _loaded_type
            )
        os.environ["TFSWAP_BINARY"] = binary_path()
        if values["device"] is None and want == "GPU":
            values["device"] = _detect_device()
        for key, env in _OPTIONS.items():
            v = values[key]
            if v is None:
                os.environ.pop(env, None)
            elif key == "compute_device" and isinstance(v, (list, tuple)):
                os.environ[env] = ",".join(str(d) for d in v)
            else:
                os.environ[env] = str(v)
        if _plan_log is None:
            # The plan records live as long as the process.
            d = tempfile.mkdtemp(prefix="tfswap-plans-")
            atexit.register(shutil.rmtree, d, True)
            _plan_log = os.path.join(d, "plans.jsonl")
        os.environ["TFSWAP_PLAN_LOG"] = _plan_log
        os.environ["TFSWAP_ENABLED"] = "1"
        if _loaded_type is None:
            os.environ["TFSWAP_DEVICE_TYPE"] = want
            from tensorflow.python.framework import load_library

            load_library.load_pluggable_device_library(plugin_path())
            _loaded_type = want
        _patch_keras_compile()


def disable():
    """disable leaves the graphs TensorFlow optimizes from now on unchanged (the plugin stays
    loaded, doing nothing)."""
    os.environ["TFSWAP_ENABLED"] = "0"


def plan_summary():
    """plan_summary returns what tfswap planned in this process since enable(), one dict per
    optimized training graph: graph (the function's name), nodes, swap_nodes (how many the
    rewrite added), swapped, recomputed, peak and step (tfswap's summary lines), shape_seconds
    and tfswap_seconds (the time added to graph optimization), gate_kind (the gate kind tfswap
    was given, by enable(gate_kind=) or a --gate-kind in TFSWAP_FLAGS: "identity" or "reduce"), and report (tfswap's JSON report, or None)."""
    path = _plan_log or os.environ.get("TFSWAP_PLAN_LOG")
    if not path or not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def check_model(model):
    """check_model warns when a Keras model is compiled with XLA (jit_compile=True, which
    Keras' "auto" picks on a GPU): Grappler, and with it tfswap, does not see inside XLA
    clusters, so nothing is swapped. Returns True when the model is fine for tfswap."""
    jit = getattr(model, "jit_compile", None)
    if jit is True:
        warnings.warn(
            "tfswap: model %r is compiled with jit_compile=True: Grappler does not see inside "
            "XLA clusters, so tfswap cannot swap its tensors; compile it with "
            "jit_compile=False" % getattr(model, "name", model),
            stacklevel=3,
        )
        return False
    return True


def _patch_keras_compile():
    """Wraps keras.Model.compile once so that every compiled model is checked."""
    global _compile_patched
    if _compile_patched is not None:
        return
    try:
        import keras
    except ImportError:  # Keras is not installed: nothing to check
        _compile_patched = False
        return
    original = keras.Model.compile

    def compile(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if os.environ.get("TFSWAP_ENABLED") == "1":
            check_model(self)
        return result

    compile.__doc__ = original.__doc__
    keras.Model.compile = compile
    _compile_patched = original


def rewrite(graph_def, **options):
    """rewrite returns a TF1 training GraphDef rewritten by tfswap (the same as
    ``tfswap rewrite``): options are its flags, underscores for dashes (budget="10GiB",
    strategy="lms", compute_device="/device:GPU:0", fetch=["train"]; a list gives the flag once
    per element, True a flag without value). graph_def is a GraphDef or its serialized bytes;
    the result is of the same kind. Raises RuntimeError with tfswap's message when it fails."""
    data = graph_def if isinstance(graph_def, (bytes, bytearray)) else graph_def.SerializeToString()
    argv = [binary_path(), "rewrite", "-", "-o", "-"]
    for key in sorted(options):
        value = options[key]
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            argv.extend("%s=%s" % (flag, v) for v in value)
        else:
            argv.append("%s=%s" % (flag, value))
    proc = subprocess.run(argv, input=bytes(data), capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(
            "tfswap rewrite failed (exit status %d): %s"
            % (proc.returncode, proc.stderr.decode(errors="replace").strip())
        )
    if isinstance(graph_def, (bytes, bytearray)):
        return proc.stdout
    out = type(graph_def)()
    out.ParseFromString(proc.stdout)
    return out
