#!/usr/bin/env python3
"""tfswap's benchmark harness (issue 4): budget-driven swap planning on the large training
graphs, every strategy side by side with TensorFlow's own Grappler swapping.

    .venv/bin/python bench/run.py            # full run (all models x devices), ~30 min on 2 cores
    .venv/bin/python bench/run.py --quick    # a subset in a few minutes
    .venv/bin/python bench/report.py         # docs/BENCHMARKS.md and docs/bench/*.svg from it

For each model (testmodels/large.py) and device profile it finds the largest batch whose
simulated peak fits the budget without swapping (B0), then plans batches up to 10 x B0 with
every strategy `tfswap rewrite --strategy` offers and with Grappler's SWAPPING_HEURISTICS,
and records per (model, device, batch, strategy): the predicted peak and step time (tfswap's
simulator), the predicted overhead against the unswapped graph at the same batch, the
VirtualCluster peak of the planned graph and the rewrite time. It also sweeps the budget at
a fixed batch for the overhead-vs-memory-reduction curves, and evaluates the issue's
targets. Everything goes to out/bench/results.json; see bench/README.md.
"""

import argparse
import concurrent.futures as cf
from concurrent.futures.process import BrokenProcessPool
import datetime
import hashlib
import json
import math
import multiprocessing as mp
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS_VERSION = 1

MODELS = ["resnet50", "vgg16", "inception_v3", "unet", "transformer", "lstm_lm"]
DEVICES = ["gtx1080ti", "titanx", "v100-16gb", "h100"]
# Strategies of `tfswap rewrite --strategy`, in the order tables show them.
PLANNERS = ["lms", "lms-fixed", "vdnn-all", "vdnn-conv", "vdnn-dyn", "autoswap", "window", "auto"]
# Strategies whose plan does not depend on the budget (LMS with its default thresholds, the
# vDNN static policies).
STATIC = {"lms-fixed", "vdnn-all", "vdnn-conv"}
GRAPPLER = "grappler"
# tfswap's auto strategy without recomputation (`--strategy auto --recompute off`): the
# swap-only planner, for a like-for-like comparison with the papers' swap-only strategies.
AUTO_SWAP = "auto-swap"
# Before the planners exist: LMS with fixed thresholds, the harness picking the fastest
# plan that fits from a sweep of --swapout-threshold (a user tuning TFLMS by hand).
LMS_SWEEP = "lms-sweep"
LMS_THRESHOLDS = [2, 4, 8, 16, 32]

PRESETS = {
    "full": dict(models=MODELS, devices=DEVICES, ladder=[1, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 10],
                 curve_device="v100-16gb", curve_models=MODELS,
                 # Finer steps near the top, where plans reach their zero-overhead reduction.
                 curve_fractions=[0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2],
                 targets=True, vc="select",
                 # The out-of-core and LMS papers' ResNet-50 figures come from V100s on NVLink.
                 extra=[("resnet50", "v100-16gb-nvlink")]),
    # The harness's own test (tests/python/test_bench.py): VGG-16 on a 3 GiB GPU (its default
    # budget, 3 GiB less TensorFlow 2.18's 1050 MiB, holds VGG-16's weights and momentum with
    # room for a few images).
    "smoke": dict(models=["vgg16"], devices=["smoke-3gb"], ladder=[1, 2],
                  curve_device="smoke-3gb", curve_models=["vgg16"], curve_fractions=[0.7],
                  targets=False, vc="fits"),
    "quick": dict(models=["resnet50", "vgg16"], devices=["v100-16gb"], ladder=[1, 2, 4, 8],
                  curve_device="v100-16gb", curve_models=["resnet50"],
                  curve_fractions=[0.8, 0.6, 0.4], targets=False, vc="select"),
}

# The targets that need points of their own (besides the ladder and curves).
TARGET_CURVE = dict(model="resnet50", device="gtx1080ti", batch=100,
                    fractions=[0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5, 0.4])
TARGET_VGG = dict(model="vgg16", device="titanx", batch=256)


# ---------------------------------------------------------------------------------------
# tfswap CLI


class Tfswap:
    """Runs the tfswap binary."""

    def __init__(self, binary, timeout):
        self.binary = binary
        self.timeout = timeout
        self.env = dict(os.environ, GOMAXPROCS="1")

    def run(self, args, timeout=None):
        """Runs tfswap with args; returns the completed process and its wall seconds, and
        sets self.last_cpu to its CPU seconds (user + system, from the worker's reaped
        children: a worker runs one child at a time, so the difference is this child's)."""
        t0 = time.perf_counter()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            p = subprocess.run([self.binary] + args, capture_output=True, text=True,
                               timeout=timeout or self.timeout, env=self.env)
        finally:
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            self.last_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        return p, time.perf_counter() - t0

    def device_flags(self, device):
        if os.path.isfile(device):
            return ["--device-file", device]
        return ["--device", device]

    def simulate(self, path, device, scale=1, grappler=False):
        args = ["simulate", path] + self.device_flags(device) + ["--fetch", "train", "--top", "3",
                                                                 "--json", "-"]
        if scale != 1:
            args += ["--batch-scale", str(scale)]
        if grappler:
            args += ["--grappler"]
        p, secs = self.run(args)
        if p.returncode != 0:
            raise RuntimeError("tfswap simulate %s: %s" % (path, p.stderr.strip()[-2000:]))
        # --json - prints the JSON first, then the text summary.
        data, _ = json.JSONDecoder().raw_decode(p.stdout)
        r = data["result"]
        gpu = next(d for d in r["devices"] if d["gpu"])
        host = next((d for d in r["devices"] if not d["gpu"]), None)
        return {
            "peak": gpu["peak_bytes"], "peak_time_ns": gpu.get("peak_time_ns"),
            # With --grappler: the microsecond reading of the trace (DeterminePeakMemoryUsage).
            "peak_us": gpu.get("peak_bytes_us", 0),
            "step_ns": r["step_time_ns"],
            "resident": gpu["resident_bytes"], "stall_ns": gpu["swap_in_stall_ns"],
            "host_peak": host["peak_bytes"] if host else 0,
            "d2h_bytes": r["d2h"].get("Bytes", r["d2h"].get("bytes", 0)),
            "h2d_bytes": r["h2d"].get("Bytes", r["h2d"].get("bytes", 0)),
            "live": [{"name": l["Name"], "bytes": l["Bytes"], "kind": l["Kind"]}
                     for l in gpu.get("live") or []][:3],
            "unknown_ops": sum((r.get("unknown_ops") or {}).values()),
            "seconds": round(secs, 3),
        }

    def fetch_flags(self):
        """--fetch train when `tfswap rewrite` has it: plan the step the simulator scores (the
        fan-in of train), not every node of the graph."""
        if not hasattr(self, "_fetch"):
            p, _ = self.run(["rewrite", "--help"], timeout=60)
            self._fetch = ["--fetch", "train"] if "--fetch" in p.stdout + p.stderr else []
        return self._fetch

    def strategies(self):
        """The strategies `tfswap rewrite` offers (parsed from its --help), or []."""
        p, _ = self.run(["rewrite", "--help"], timeout=60)
        text = p.stdout + p.stderr
        # The option's own line (and its continuation lines), not a mention in the text.
        m = re.search(r"(?m)^\s*--strategy\b[^\n]*(\n(?!\s*--)[^\n]*)*", text)
        if not m:
            return []
        block = m.group(0)
        found = [s for s in PLANNERS if re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(s), block)]
        found = found or list(PLANNERS)
        if "auto" in found and "--recompute" in text:
            found.insert(found.index("auto") + 1, AUTO_SWAP)
        return found


def build_tfswap(out_dir):
    """Builds tfswap (pure Go) from this checkout into out_dir."""
    path = os.path.join(out_dir, "tfswap")
    env = dict(os.environ, CGO_ENABLED="0")
    subprocess.run(["go", "build", "-o", path, "./cmd/tfswap"], cwd=ROOT, check=True, env=env)
    return path


def git_state():
    def git(*a):
        p = subprocess.run(["git"] + list(a), cwd=ROOT, capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else ""
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "subject": git("log", "-1", "--format=%s"),
            "dirty": bool(dirty)}


def min_system_memory(available, cc_major):
    """The memory TensorFlow 2.18's GPU device keeps out of its allocator's reach
    (MinSystemMemory, tensorflow/core/common_runtime/gpu/gpu_device.cc; cost.MinSystemMemory)."""
    mib = 1 << 20
    if available < 2 << 30:
        return 225 * mib
    if cc_major <= 6:
        return 500 * mib
    if cc_major == 7:
        return 1050 * mib
    if cc_major == 8:
        return 1536 * mib
    return 1800 * mib


def default_budget(profile):
    """The default per-device budget of `tfswap rewrite` for a device profile: the memory less
    what TensorFlow 2.18 keeps back for its compute capability (cost.TFMemoryLimit; a profile
    without one gets the largest reserve). The harness checks it against the budget tfswap
    reports (check_default_budget)."""
    mem = int(profile["memory_bytes"])
    try:
        major = int(str(profile.get("compute_capability") or "").split(".")[0])
    except ValueError:
        major = 9
    r = min_system_memory(mem, major)
    return mem if r >= mem else mem - r


def check_default_budget(ts, device_arg, budget, src):
    """Fails when tfswap's default budget for a device differs from default_budget's: rewrites
    src (a fixture that fits) with no budget and reads the budget from the report."""
    with tempfile.TemporaryDirectory() as d:
        rep = os.path.join(d, "r.json")
        p, _ = ts.run(["rewrite", src, "-o", os.path.join(d, "o.pb"), "--report", rep] + ts.device_flags(device_arg))
        if p.returncode != 0:
            raise SystemExit("default budget check: tfswap rewrite failed: %s" % p.stderr.strip()[-2000:])
        with open(rep) as f:
            got = json.load(f)["plan"]["budget"]
    if got != budget:
        raise SystemExit("default budget of %s: tfswap says %d, the harness %d" % (device_arg, got, budget))


# ---------------------------------------------------------------------------------------
# Worker side (runs in pool processes that import TensorFlow once)

_W = {}


def _init_worker(cfg):
    _W["cfg"] = cfg
    if cfg.get("selftest"):
        return  # run_tasks' own test (task_selftest) needs no TensorFlow
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import tfside  # noqa: F401
    _W["cfg"] = cfg
    _W["tfside"] = tfside
    _W["tfswap"] = Tfswap(cfg["tfswap"], cfg["timeout"])
    tfside.load_swap_ops(cfg["cache"])


# GRAPPLER_CALLS_PER_HELPER is how many Grappler optimisations one helper process runs before
# it is replaced: TensorFlow's memory optimizer, run again and again in one process, has
# segfaulted (a write to address 0 in libtensorflow_cc: the Inception-v3 ladder on h100 in
# every run, and each of its calls alone in a fresh process succeeds).
GRAPPLER_CALLS_PER_HELPER = 3


def _grappler_helper(conn, cache):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import tfside
    tfside.load_swap_ops(cache)
    while True:
        args = conn.recv()
        if args is None:
            return
        try:
            conn.send(("ok", tfside.grappler_swap(*args)))
        except Exception as e:  # an error of Grappler's, not a crash
            conn.send(("error", "%s: %s" % (type(e).__name__, e)))


def grappler_call(src, raw, out, prof, budget, cache):
    """tfside.grappler_swap in the worker's helper process (started on demand, replaced after
    GRAPPLER_CALLS_PER_HELPER calls); a crash of the helper fails this call alone."""
    h = _W.get("grappler")
    if h is None or h["calls"] >= GRAPPLER_CALLS_PER_HELPER:
        if h is not None:
            _stop_helper(h)
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_grappler_helper, args=(child, cache), daemon=True)
        proc.start()
        h = _W["grappler"] = {"proc": proc, "conn": parent, "calls": 0}
    h["calls"] += 1
    try:
        h["conn"].send((src, raw, out, prof, budget, cache))
        kind, val = h["conn"].recv()
    except (EOFError, OSError, BrokenPipeError):
        h["proc"].join(5)
        code = h["proc"].exitcode
        _W["grappler"] = None
        raise RuntimeError("Grappler's swapping crashed TensorFlow (helper exit code %s)" % code)
    if kind == "error":
        raise RuntimeError(val)
    return val


def _stop_helper(h):
    try:
        h["conn"].send(None)
    except (OSError, BrokenPipeError):
        pass
    h["proc"].join(10)
    if h["proc"].is_alive():
        h["proc"].kill()


def _task(kind, args):
    t0 = time.time()
    try:
        out = TASKS[kind](**args)
        err = None
    except Exception as e:  # recorded, the run goes on
        out, err = None, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()[-3000:])
    finally:
        if _W.get("grappler") is not None:  # no helper outlives its task
            _stop_helper(_W["grappler"])
            _W["grappler"] = None
    return {"kind": kind, "args": args, "result": out, "error": err,
            "seconds": round(time.time() - t0, 2)}


def graph(model, batch):
    path, secs = _W["tfside"].build_graph(model, batch, _W["cfg"]["cache"])
    return path


def profile_of(device):
    return _W["cfg"]["profiles"][device]


def task_nosswap(model, device):
    """The largest batch whose simulated peak fits the budget without swapping, by tfswap's
    accounting and by Grappler's (the VirtualCluster's), as plans are judged. The peak is
    close to affine in the batch (activations grow with it, weights do not), so two
    simulations of the batch-2 graph, as it is and with --batch-scale 32, give a first guess;
    graphs generated at the batch itself then settle it: gallop from the guess until one
    batch fits and the next does not, then bisect between them."""
    ts = _W["tfswap"]
    prof = profile_of(device)
    budget = _W["cfg"]["budgets"][device]
    dev = _W["cfg"]["device_args"][device]
    base = graph(model, 2)
    real = {2: ts.simulate(base, dev)}
    scale = 32
    scaled = ts.simulate(base, dev, scale)
    slope = (scaled["peak"] - real[2]["peak"]) / (2 * scale - 2)
    guess = max(1, int(2 + (budget - real[2]["peak"]) // max(slope, 1)))

    def fits_real(b):
        # By every accounting, as `tfswap rewrite` judges plans by default (--fit-accounting
        # all): tfswap's, and the Grappler-rules peaks, which are the VirtualCluster's from its
        # trace's nanoseconds and (DeterminePeakMemoryUsage) its microseconds.
        if b not in real:
            real[b] = ts.simulate(graph(model, b), dev)
        if real[b]["peak"] > budget:
            return False
        if "grappler_peak" not in real[b]:
            g = ts.simulate(graph(model, b), dev, grappler=True)
            real[b]["grappler_peak"], real[b]["grappler_peak_us"] = g["peak"], g["peak_us"]
        return max(real[b]["grappler_peak"], real[b]["grappler_peak_us"]) <= budget

    # Secant steps on real graphs (the line through batch 2 and the latest guess) while they
    # move the guess; the search below then needs a graph or two more.
    for _ in range(3):
        fits_real(guess)
        if guess <= 2:
            break
        slope = (real[guess]["peak"] - real[2]["peak"]) / (guess - 2)
        nxt = max(1, int(2 + (budget - real[2]["peak"]) // max(slope, 1)))
        if nxt == guess:
            break
        guess = nxt
    if fits_real(guess):
        lo, step = guess, 1
        while fits_real(lo + step):
            lo += step
            step *= 2
        hi = lo + step
    else:
        hi, step = guess, 1
        while hi - step >= 1 and not fits_real(hi - step):
            hi -= step
            step *= 2
        lo = max(0, hi - step)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits_real(mid):
            lo = mid
        else:
            hi = mid
    b0 = lo
    rec = {"model": model, "device": device, "budget": budget,
           "memory": int(prof["memory_bytes"]), "b0": b0, "guess": guess,
           "bytes_per_sample": slope, "graphs_checked": sorted(real)}
    side = os.path.splitext(base)[0] + ".json"
    if os.path.exists(side):
        with open(side) as f:
            meta = json.load(f)
        rec["graph"] = {k: meta.get(k) for k in ("node_count", "parameter_count", "description")}
    if b0 >= 1:
        rec["sim"] = real[b0]
        rec["sim_next"] = real.get(b0 + 1) or ts.simulate(graph(model, b0 + 1), dev)
        rec["vc"] = _W["tfside"].check_cached(graph(model, b0), prof, _W["cfg"]["cache"])
    return rec


def _summarize_report(path):
    try:
        with open(path) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        return None
    out = {}
    for k, v in rep.items():
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[k] = v
        elif isinstance(v, list):
            out[k + "_count"] = len(v)
        elif isinstance(v, dict):
            for k2, v2 in v.items():
                if isinstance(v2, (str, int, float, bool)):
                    out[k + "." + k2] = v2
    return out


def _report_peaks(path):
    """The first GPU's figures in a `tfswap rewrite --report` (its three accountings)."""
    try:
        with open(path) as f:
            d = json.load(f)["plan"]["devices"][0]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    return {k: d.get(k) for k in ("peak", "grappler_peak", "grappler_peak_us", "fit_accountings")}


# The accountings a plan's peak must fit the budget by, as `tfswap rewrite --fit-accounting all`
# judges its own plans: tfswap's, and Grappler's trace read to the nanosecond and microsecond.
ACCOUNTINGS = ("peak", "grappler_peak", "grappler_peak_us")


def _three_peaks(ts, path, dev, peak, budget, known=None):
    """_three_peaks returns the plan at path's peaks by the three accountings (ACCOUNTINGS),
    given tfswap's peak; Grappler's come from known (a rewrite report's figures) when it has
    them, else from `tfswap simulate --grappler`, run only when tfswap's peak fits the budget
    (a plan over it fits no matter what Grappler says)."""
    got = {"peak": peak, "grappler_peak": None, "grappler_peak_us": None}
    if known and known.get("grappler_peak") is not None and known.get("grappler_peak_us") is not None:
        got.update(grappler_peak=known["grappler_peak"], grappler_peak_us=known["grappler_peak_us"])
    elif peak <= budget:
        g = ts.simulate(path, dev, grappler=True)
        got.update(grappler_peak=g["peak"], grappler_peak_us=g["peak_us"])
    return got


def _fits_all(peaks, budget):
    """_fits_all reports whether every accounting in peaks (_three_peaks) is within budget."""
    return all(peaks.get(k) is not None and peaks[k] <= budget for k in ACCOUNTINGS)


def _over_all(peaks, budget):
    """_over_all names the accountings of peaks that are over budget (or not simulated)."""
    return ", ".join("%s %s" % (k, "not simulated" if peaks.get(k) is None else
                                "%d > %d" % (peaks[k], budget))
                     for k in ACCOUNTINGS if peaks.get(k) is None or peaks[k] > budget)


def evaluate(model, device, batch, strategy, budget, src, base, vc_policy, tag, keep_dir=None):
    """Plans src with strategy, simulates the plan and checks it with the VirtualCluster. With
    keep_dir, a plan the simulator fits is kept there (rec["plan_file"]) for a later check."""
    cfg = _W["cfg"]
    ts = _W["tfswap"]
    prof = profile_of(device)
    dev = cfg["device_args"][device]
    work = tempfile.mkdtemp(prefix="plan-", dir=cfg["scratch"])
    rec = {"model": model, "device": device, "batch": batch, "strategy": strategy,
           "budget": budget, "tag": tag}
    try:
        out = os.path.join(work, "plan.pb")
        if strategy == GRAPPLER:
            raw = os.path.join(work, "grappler_raw.pb")
            st = grappler_call(src, raw, out, prof, budget, cfg["cache"])
            rec["rewrite_s"] = st["seconds"]  # OptimizeGraph alone
            rec["plan"] = st
            rec["swaps"] = st["swaps"]
        elif strategy == LMS_SWEEP:
            best, total = None, 0.0
            # Fits as it is by all three accountings: a user would not swap. Grappler's readings
            # of the unswapped graph are simulated only when tfswap's peak fits.
            if _fits_all(_three_peaks(ts, src, dev, base["peak"], budget), budget):
                shutil.copy(src, out)
                rec["rewrite_s"] = 0.0
                rec["plan"] = {"swapout_threshold": None, "thresholds_tried": []}
                rec["sim"] = base
                best = ()
            for thr in ([] if best == () else LMS_THRESHOLDS):
                cand = os.path.join(work, "lms_%d.pb" % thr)
                p, secs = ts.run(["rewrite", src, "-o", cand, "--swapout-threshold", str(thr)])
                total += secs
                if p.returncode != 0:
                    continue
                s = ts.simulate(cand, dev)
                peaks = _three_peaks(ts, cand, dev, s["peak"], budget)
                key = (not _fits_all(peaks, budget), s["step_ns"], s["peak"])
                if best is None or key < best[0]:
                    best = (key, thr, cand, s, peaks)
            if best is None:
                rec["error"] = "no threshold gave a plan"
                return rec
            if best != () and best[0][0]:  # judged as `tfswap rewrite` judges its plans
                rec["rewrite_s"] = round(total, 3)
                rec["plan_peaks"] = best[4]
                rec["error"] = ("no threshold gave a plan that fits all three accountings; the "
                                "best (threshold %d): %s" % (best[1], _over_all(best[4], budget)))
                rec["no_plan"] = True
                return rec
            if best != ():
                shutil.copy(best[2], out)
                rec["rewrite_s"] = round(total, 3)
                rec["plan"] = {"swapout_threshold": best[1], "thresholds_tried": LMS_THRESHOLDS}
                rec["sim"] = best[3]
        else:
            rep = os.path.join(work, "report.json")
            flags = ["--strategy", "auto", "--recompute", "off"] if strategy == AUTO_SWAP else \
                ["--strategy", strategy]
            args = ["rewrite", src, "-o", out] + flags + ["--budget", str(budget),
                                                          "--report", rep] + ts.device_flags(dev) + ts.fetch_flags()
            try:
                p, secs = ts.run(args)
            except subprocess.TimeoutExpired:
                rec["error"] = "timeout after %ds" % ts.timeout
                return rec
            rec["rewrite_s"] = round(secs, 3)
            rec["rewrite_cpu_s"] = round(ts.last_cpu, 3)
            rec["plan"] = _summarize_report(rep)
            rec["plan_peaks"] = _report_peaks(rep)
            if p.returncode != 0:
                msg = (p.stderr or p.stdout).strip()
                rec["error"] = msg[:2500]
                rec["no_plan"] = True
                return rec
            if strategy == "lms-fixed":
                # LMS's fixed thresholds ignore the budget, so rewrite returns the plan whether
                # it fits or not: the harness judges it as rewrite judges the other strategies'.
                rec["sim"] = ts.simulate(out, dev)
                peaks = _three_peaks(ts, out, dev, rec["sim"]["peak"], budget, rec["plan_peaks"])
                if not _fits_all(peaks, budget):
                    rec["error"] = "the plan does not fit all three accountings: " + \
                        _over_all(peaks, budget)
                    rec["no_plan"] = True
                    return rec
        if "sim" not in rec:
            rec["sim"] = ts.simulate(out, dev)
        s = rec["sim"]
        rec["fits_sim"] = s["peak"] <= budget
        rec["overhead"] = s["step_ns"] / base["step_ns"] - 1
        rec["reduction"] = 1 - s["peak"] / base["peak"]
        if callable(vc_policy):
            want = vc_policy(rec)
        else:
            want = vc_policy == "all" or (vc_policy in ("fits", "select") and rec["fits_sim"])
        if want:
            rec["vc"] = _W["tfside"].check_cached(out, prof, cfg["cache"])
            _vc_verdicts(rec, s["resident"])
        if keep_dir and rec["fits_sim"]:
            rec["plan_file"] = os.path.join(keep_dir, "%s_b%d_%d.pb" % (strategy, batch, budget))
            shutil.copy(out, rec["plan_file"])
        if cfg.get("keep_plans"):
            keep = os.path.join(cfg["out"], "plans", model, device, "b%d" % batch)
            os.makedirs(keep, exist_ok=True)
            shutil.copy(out, os.path.join(keep, "%s_%s_%d.pb" % (tag, strategy, budget)))
        return rec
    except Exception as e:
        rec["error"] = "%s: %s" % (type(e).__name__, e)
        return rec
    finally:
        shutil.rmtree(work, ignore_errors=True)


def task_point(model, device, batch, multiple, strategies, budget=None, tag="point",
               vc_baseline=False, vc=None):
    """One (model, device, batch): the unswapped graph, then every strategy."""
    cfg = _W["cfg"]
    ts = _W["tfswap"]
    dev = cfg["device_args"][device]
    budget = budget or cfg["budgets"][device]
    src = graph(model, batch)
    base = ts.simulate(src, dev)
    out = {"model": model, "device": device, "batch": batch, "multiple": multiple,
           "budget": budget, "tag": tag, "base": base, "plans": []}
    if vc_baseline:
        out["base_vc"] = _W["tfside"].check_cached(src, profile_of(device), cfg["cache"])
    for s in strategies:
        out["plans"].append(evaluate(model, device, batch, s, budget, src, base, vc or cfg["vc"],
                                     tag))
    return out


# Overhead limits of the report's tables (and of the 45% target; inf: at any overhead).
LIMITS = [0.10, 0.25, 0.45, 0.50, float("inf")]


def _skipped(strategy, budget, why):
    return {"strategy": strategy, "budget": budget, "error": why, "no_plan": True, "skipped": True}


def _vc_verdicts(rec, resident):
    """The judge: TensorFlow's own peaks, the VirtualCluster's GraphMemory figure from its
    trace's nanoseconds and from its microseconds (Cluster.DeterminePeakMemoryUsage); a plan
    fits when both are within the budget. GraphMemory does not count variables and optimizer
    slots (resource handles are 0 bytes); with tfswap's figure for them added, the check is
    stricter (fits_vc_resident)."""
    vc, budget = rec["vc"], rec["budget"]
    rec["fits_vc_ns"] = vc["peak_bytes"] <= budget
    rec["fits_vc_us"] = vc.get("peak_bytes_us", 0) <= budget
    rec["fits_vc"] = rec["fits_vc_ns"] and rec["fits_vc_us"]
    rec["fits_vc_resident"] = max(vc["peak_bytes"], vc.get("peak_bytes_us", 0)) + resident <= budget


def _vc_check(rec, device):
    cfg = _W["cfg"]
    rec["vc"] = _W["tfside"].check_cached(rec["plan_file"], profile_of(device), cfg["cache"])
    _vc_verdicts(rec, rec["sim"]["resident"])


def task_ladder(model, device, points, strategies):
    """The batch ladder of one (model, device), from the smallest batch up. A planner that
    finds no plan at one batch is not asked again at larger ones (more memory is needed
    there). With the "select" VirtualCluster policy only the plans the report's tables rest on
    are checked: for each strategy and overhead limit, the largest batch whose plan fits per
    the simulator within the limit, then the next largest if the VirtualCluster disagrees, and
    so on."""
    cfg = _W["cfg"]
    ts = _W["tfswap"]
    dev = cfg["device_args"][device]
    budget = cfg["budgets"][device]
    policy = cfg["vc"]
    work = tempfile.mkdtemp(prefix="ladder-", dir=cfg["scratch"])
    failed = {}
    out = []
    try:
        for batch, multiple in sorted(points):
            src = graph(model, batch)
            base = ts.simulate(src, dev)
            pt = {"model": model, "device": device, "batch": batch, "multiple": multiple,
                  "budget": budget, "tag": "ladder", "base": base, "plans": []}
            if multiple == 1:
                pt["base_vc"] = _W["tfside"].check_cached(src, profile_of(device), cfg["cache"])
            for s in strategies:
                if s in failed:
                    pt["plans"].append(_skipped(s, budget, "skipped: no plan at batch %d" % failed[s]))
                    continue
                rec = evaluate(model, device, batch, s, budget, src, base,
                               "none" if policy == "select" else policy, "ladder",
                               keep_dir=work if policy == "select" else None)
                if rec.get("no_plan") or (rec.get("error") or "").startswith("timeout"):
                    failed[s] = batch
                pt["plans"].append(rec)
            out.append(pt)
        if policy == "select":
            for i, s in enumerate(strategies):
                open_limits = set(range(len(LIMITS)))
                for pt in sorted(out, key=lambda p: -p["batch"]):
                    rec = pt["plans"][i]
                    if not rec.get("plan_file"):
                        continue
                    if any(rec["overhead"] <= LIMITS[k] for k in open_limits):
                        _vc_check(rec, device)
                        if rec["fits_vc"]:
                            open_limits -= {k for k in range(len(LIMITS))
                                            if rec["overhead"] <= LIMITS[k]}
                    if not open_limits:
                        break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for pt in out:
        for rec in pt["plans"]:
            rec.pop("plan_file", None)
    return {"model": model, "device": device, "points": out}


def task_curves(model, device, batch, fractions, strategies, tag="curve"):
    """A budget sweep at one batch: budgets of fraction x the unswapped graph's simulated peak,
    from the largest down; a planner that finds no plan at one budget is not asked for smaller
    ones. Strategies in STATIC ignore the budget: planned once, with the device's default."""
    cfg = _W["cfg"]
    ts = _W["tfswap"]
    dev = cfg["device_args"][device]
    src = graph(model, batch)
    base = ts.simulate(src, dev)
    out = []
    static = [s for s in strategies if s in STATIC]
    budgeted = [s for s in strategies if s not in STATIC]
    failed = {}
    for fraction in sorted(fractions, reverse=True):
        budget = int(base["peak"] * fraction)
        pt = {"model": model, "device": device, "batch": batch, "fraction": fraction,
              "budget": budget, "tag": tag, "base": base, "plans": []}
        for s in budgeted:
            if s in failed:
                pt["plans"].append(_skipped(s, budget, "skipped: no plan at %.0f%%" % (100 * failed[s])))
                continue
            rec = evaluate(model, device, batch, s, budget, src, base, "none", tag)
            if rec.get("no_plan") or (rec.get("error") or "").startswith("timeout"):
                failed[s] = fraction
            pt["plans"].append(rec)
        out.append(pt)
    if static:
        budget = cfg["budgets"][device]
        pt = {"model": model, "device": device, "batch": batch, "fraction": None,
              "budget": budget, "tag": tag, "base": base, "plans": []}
        for s in static:
            pt["plans"].append(evaluate(model, device, batch, s, budget, src, base, "none", tag))
        out.append(pt)
    return {"model": model, "device": device, "batch": batch, "tag": tag, "points": out}


def task_lms_thresholds(model, device, batch, tag="curve"):
    """Fixed-threshold LMS plans (no budget), for the curves before the lms planner exists."""
    cfg = _W["cfg"]
    ts = _W["tfswap"]
    dev = cfg["device_args"][device]
    src = graph(model, batch)
    base = ts.simulate(src, dev)
    out = {"model": model, "device": device, "batch": batch, "tag": tag, "base": base,
           "plans": []}
    work = tempfile.mkdtemp(prefix="lms-", dir=cfg["scratch"])
    try:
        for thr in LMS_THRESHOLDS + [64, 128]:
            p_out = os.path.join(work, "p.pb")
            p, secs = ts.run(["rewrite", src, "-o", p_out, "--swapout-threshold", str(thr)])
            rec = {"strategy": "lms-threshold", "threshold": thr, "rewrite_s": round(secs, 3)}
            if p.returncode != 0:
                rec["error"] = p.stderr.strip()[-500:]
            else:
                s = ts.simulate(p_out, dev)
                rec.update(sim=s, overhead=s["step_ns"] / base["step_ns"] - 1,
                           reduction=1 - s["peak"] / base["peak"])
            out["plans"].append(rec)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def task_selftest(n, crash=False):
    """A task for the harness's own test: returns n, or kills its worker the way a crash in
    TensorFlow does."""
    if crash:
        os._exit(11)
    return {"n": n}


TASKS = {"selftest": task_selftest, "nosswap": task_nosswap, "point": task_point, "ladder": task_ladder,
         "curves": task_curves,
         "lms_thresholds": task_lms_thresholds}

# Rough relative cost per model (graph size), to start the longest tasks first.
WEIGHT = {"transformer": 5, "lstm_lm": 4, "inception_v3": 4, "resnet50": 3, "unet": 1,
          "vgg16": 1}


# ---------------------------------------------------------------------------------------
# Driver


class Pool:
    """Worker processes that import TensorFlow once each, replaced after a few tasks (see
    TASKS_PER_WORKER). A worker that dies (TensorFlow has segfaulted here) breaks the
    executor; Pool then starts a new one and run_tasks runs the tasks that were unfinished
    again, each in a worker of its own (run_isolated)."""

    def __init__(self, jobs, cfg):
        self.jobs, self.cfg = jobs, cfg
        self.ex = None

    def executor(self):
        if self.ex is None:
            # Not max_tasks_per_child: with it Python 3.11's executor can stop starting
            # workers and wait forever; run_tasks replaces the executor every few tasks.
            self.ex = cf.ProcessPoolExecutor(self.jobs, mp_context=mp.get_context("spawn"),
                                             initializer=_init_worker, initargs=(self.cfg,))
        return self.ex

    def reset(self):
        if self.ex is not None:
            self.ex.shutdown(wait=False, cancel_futures=True)
            self.ex = None

    def call(self, fn, *args):
        return self.executor().submit(fn, *args).result()

    def close(self):
        if self.ex is not None:
            self.ex.shutdown(wait=True, cancel_futures=True)
            self.ex = None


# CRASH_TRIES is how many times a task may crash a worker of its own before it is recorded as
# failed. A crash breaks every task in flight on the shared executor and which of them caused
# it is not known, so after a crash the unfinished tasks run again each in an executor of its
# own: only the task that crashes its own worker is charged with it.
CRASH_TRIES = 2
# TASKS_PER_WORKER is how many tasks a worker process runs, on average, before it is replaced
# (building graphs and running Grappler in one process for long grows it by gigabytes).
TASKS_PER_WORKER = 4


def _log_done(log, results, total, r):
    a = r["args"]
    log("  [%d/%d] %s %s %s%s %.1fs%s" % (
        len(results), total, r["kind"], a.get("model"), a.get("device"),
        " b%s" % a["batch"] if "batch" in a else
        " b%s" % ",".join(str(b) for b, _ in a["points"]) if "points" in a else "",
        r["seconds"], "  ERROR " + r["error"].splitlines()[0] if r["error"] else ""))


def run_isolated(pool, tasks, suspects, log, finish):
    """Runs each suspect task in a single-worker executor of its own, pool.jobs at a time; a
    task whose worker dies CRASH_TRIES times is recorded as failed."""
    queue = list(suspects)
    tries = {i: 0 for i in suspects}
    running = {}
    while queue or running:
        while queue and len(running) < pool.jobs:
            i = queue.pop(0)
            ex = cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"),
                                        initializer=_init_worker, initargs=(pool.cfg,))
            running[ex.submit(_task, *tasks[i])] = (i, ex)
        done, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
        for f in done:
            i, ex = running.pop(f)
            ex.shutdown(wait=False, cancel_futures=True)
            try:
                finish(i, f.result())
            except BrokenProcessPool:
                tries[i] += 1
                kind, args = tasks[i]
                if tries[i] >= CRASH_TRIES:
                    finish(i, {"kind": kind, "args": args, "result": None, "seconds": 0.0,
                               "error": "worker died (a crash in TensorFlow) in %d tries, "
                                        "running alone" % tries[i]})
                else:
                    log("  %s %s %s crashed its own worker; once more" % (kind, args.get("model"),
                                                                         args.get("device")))
                    queue.append(i)


def run_tasks(pool, tasks, log, done_cb):
    tasks = sorted(tasks, key=lambda t: -WEIGHT.get(t[1].get("model"), 1))
    results = []
    left = list(range(len(tasks)))
    total = len(tasks)

    def finish(i, r):
        left.remove(i)
        results.append(r)
        done_cb(r)
        _log_done(log, results, total, r)

    while left:
        # At most TASKS_PER_WORKER tasks per worker before the executor is replaced.
        chunk = left[:pool.jobs * TASKS_PER_WORKER]
        futs = {pool.executor().submit(_task, *tasks[i]): i for i in chunk}
        broken = False
        for f in cf.as_completed(futs):
            try:
                r = f.result()
            except BrokenProcessPool:
                broken = True
                continue
            finish(futs[f], r)
        if not broken and left:
            pool.close()
        if broken:
            pool.reset()
            unfinished = [i for i in chunk if i in left]
            log("  a worker died; %d unfinished task(s) run again, each in a worker of its own"
                % len(unfinished))
            run_isolated(pool, tasks, unfinished, log, finish)
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a subset that runs in a few minutes")
    ap.add_argument("--smoke", action="store_true", help="the harness's self-test: VGG-16 on a "
                    "made-up 3 GiB GPU (v100-16gb with less memory), two batches, under a minute")
    ap.add_argument("--models", help="comma-separated models (default: the preset's)")
    ap.add_argument("--devices", help="comma-separated device profiles or profile files")
    ap.add_argument("--ladder", help="comma-separated multiples of B0 (default: the preset's)")
    ap.add_argument("--strategies", help="comma-separated strategies (default: every one "
                    "`tfswap rewrite --strategy` offers, and grappler)")
    ap.add_argument("--curve-fractions", help="comma-separated budget fractions of the "
                    "unswapped peak for the curves ('' for none)")
    ap.add_argument("--curve-models", help="comma-separated models with curves")
    ap.add_argument("--curve-device", help="device profile of the curves")
    ap.add_argument("--no-targets", action="store_true", help="skip the targets' extra points")
    ap.add_argument("--vc", choices=["all", "fits", "select", "none"],
                    help="VirtualCluster-check every plan (all), every plan the simulator says "
                    "fits (fits), those the report's tables rest on (select, the default), or none")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--tfswap", help="tfswap binary (default: built from this checkout)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per tfswap run")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench"),
                    help="output directory (default out/bench)")
    ap.add_argument("--cache", help="graph and VirtualCluster cache (default OUT/cache)")
    ap.add_argument("--keep-plans", action="store_true", help="keep the planned graphs")
    ap.add_argument("--report", action="store_true",
                    help="then write docs/BENCHMARKS.md and docs/bench/ (bench/report.py)")
    ap.add_argument("--scale", action="store_true",
                    help="only the scale benchmark (bench/scale.py with its defaults): tfswap's "
                         "time and memory on synthetic graphs of 10k to 1M nodes")
    args = ap.parse_args(argv)
    if args.scale:
        import scale
        return scale.main(["--report"] if args.report else [])

    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    preset = dict(PRESETS[mode])
    split = lambda s: [x for x in s.split(",") if x] if s is not None else None  # noqa: E731
    models = split(args.models) or preset["models"]
    devices = split(args.devices) or preset["devices"]
    ladder = [float(x) for x in split(args.ladder)] if args.ladder else preset["ladder"]
    fractions = ([float(x) for x in split(args.curve_fractions)]
                 if args.curve_fractions is not None else preset["curve_fractions"])
    curve_models = split(args.curve_models) or [m for m in preset["curve_models"] if m in models]
    curve_device = args.curve_device or preset["curve_device"]
    if curve_device not in devices:
        curve_device = devices[0]
    targets = preset["targets"] and not args.no_targets
    custom = any(x is not None for x in (args.models, args.devices, args.ladder))
    if custom:
        mode += "-custom"

    os.makedirs(args.out, exist_ok=True)
    cache = args.cache or os.path.join(args.out, "cache")
    scratch = tempfile.mkdtemp(prefix="bench-", dir=args.out)
    log_path = os.path.join(args.out, "run.log")
    logf = open(log_path, "w")

    def log(msg):
        line = "%s %s" % (time.strftime("%H:%M:%S"), msg)
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    t_start = time.time()
    binary = args.tfswap or build_tfswap(args.out)
    ts = Tfswap(binary, args.timeout)
    offered = ts.strategies()
    if args.strategies:
        strategies = split(args.strategies)
    else:
        strategies = (list(offered) if offered else [LMS_SWEEP]) + [GRAPPLER]
    log("tfswap %s; strategies offered: %s; benchmarking: %s" % (
        binary, ", ".join(offered) or "(no --strategy yet)", ", ".join(strategies)))

    # Device profiles: the built-in ones dumped to files for the checker.
    profiles, device_args, budgets = {}, {}, {}
    pdir = os.path.join(args.out, "profiles")
    os.makedirs(pdir, exist_ok=True)
    extra_devices = {d for _, d in preset.get("extra", [])} if not custom else set()
    for d in set(devices) | {curve_device} | extra_devices | (
            {TARGET_CURVE["device"], TARGET_VGG["device"]} if targets else set()):
        if os.path.isfile(d):  # a profile file of the user's
            path = arg = os.path.abspath(d)
        else:
            path = os.path.join(pdir, d + ".json")
            builtin = "v100-16gb" if d == "smoke-3gb" else d
            p, _ = ts.run(["simulate", "--device", builtin, "--dump-profile", path])
            if p.returncode != 0:
                raise SystemExit("profile %s: %s" % (d, p.stderr.strip()))
            arg = d
            if d == "smoke-3gb":
                with open(path) as f:
                    prof = json.load(f)
                prof.update(name="v100-3gb", memory_bytes=3 << 30,
                            description="a made-up V100 with 3 GiB, for the harness's self-test")
                with open(path, "w") as f:
                    json.dump(prof, f, indent=1)
                arg = os.path.abspath(path)
        with open(path) as f:
            prof = json.load(f)
        profiles[d] = prof
        device_args[d] = arg
        budgets[d] = default_budget(prof)
        if "lms-fixed" in offered:  # a tfswap that reports its default budget
            check_default_budget(ts, arg, budgets[d], os.path.join(ROOT, "testmodels", "fixtures", "mlp.pb"))

    cfg = {"tfswap": binary, "timeout": args.timeout, "cache": cache, "scratch": scratch,
           "out": args.out, "profiles": profiles, "device_args": device_args,
           "budgets": budgets, "vc": args.vc or preset["vc"], "keep_plans": args.keep_plans}
    records = []
    rec_path = os.path.join(args.out, "records.jsonl")
    recf = open(rec_path, "w")

    def done(r):
        records.append(r)
        recf.write(json.dumps(r) + "\n")
        recf.flush()

    # On SIGTERM, leave through the finally below, which shuts the workers down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    phases = {}
    pool = Pool(args.jobs, cfg)
    try:
        tf_version = pool.call(_worker_tf_version)
        # Phase 1: the no-swap maximum batch per (model, device).
        t0 = time.time()
        log("phase 1: largest batch without swapping, %d (model, device) pairs" %
            (len(models) * len(devices)))
        extra = set()
        if targets:
            extra = {(TARGET_CURVE["model"], TARGET_CURVE["device"]),
                     (TARGET_VGG["model"], TARGET_VGG["device"])}
        ladder_pairs = [(m, d) for m in models for d in devices]
        if not custom:
            ladder_pairs += [p for p in preset.get("extra", []) if p not in ladder_pairs]
        pairs = ladder_pairs + sorted(extra - set(ladder_pairs))
        res = run_tasks(pool, [("nosswap", {"model": m, "device": d}) for m, d in pairs], log, done)
        b0 = {}
        for r in res:
            if r["result"]:
                b0[(r["args"]["model"], r["args"]["device"])] = r["result"]["b0"]
        phases["nosswap_s"] = round(time.time() - t0, 1)

        # Phase 2: the batch ladder, the curves and the targets' points.
        t0 = time.time()
        tasks = []
        for m, d in ladder_pairs:
            base = b0.get((m, d), 0)
            if base < 1:
                continue
            pts = {}
            for mult in ladder:
                pts.setdefault(max(1, int(round(mult * base))), mult)
            tasks.append(("ladder", {"model": m, "device": d, "points": sorted(pts.items()),
                                     "strategies": strategies}))
        curve_strats = [s for s in strategies if s != LMS_SWEEP]
        for m in curve_models:
            base = b0.get((m, curve_device), 0)
            if base < 1:
                continue
            if fractions:
                tasks.append(("curves", {"model": m, "device": curve_device, "batch": base,
                                         "fractions": fractions, "strategies": curve_strats}))
            if "lms" not in strategies:
                tasks.append(("lms_thresholds", {"model": m, "device": curve_device,
                                                 "batch": base}))
        if targets:
            tc = TARGET_CURVE
            tasks.append(("curves", {"model": tc["model"], "device": tc["device"],
                                     "batch": tc["batch"], "fractions": tc["fractions"],
                                     "strategies": curve_strats, "tag": "target-autoswap"}))
            if "lms" not in strategies:
                tasks.append(("lms_thresholds", {"model": tc["model"], "device": tc["device"],
                                                 "batch": tc["batch"], "tag": "target-autoswap"}))
            tv = TARGET_VGG
            mem = int(profiles[tv["device"]]["memory_bytes"])
            for budget in sorted({budgets[tv["device"]], mem}):
                tasks.append(("point", {"model": tv["model"], "device": tv["device"],
                                        "batch": tv["batch"], "multiple": None,
                                        "strategies": strategies, "budget": budget,
                                        "tag": "target-vdnn", "vc": "fits"}))
        log("phase 2: %d tasks (ladder points, curve budgets, targets)" % len(tasks))
        run_tasks(pool, tasks, log, done)
        phases["points_s"] = round(time.time() - t0, 1)
    finally:
        pool.close()

    shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.time() - t_start
    meta = {
        "harness_version": HARNESS_VERSION, "mode": mode,
        "command": "bench/run.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started": datetime.datetime.fromtimestamp(t_start, datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "elapsed_s": round(elapsed, 1), "phases": phases, "jobs": args.jobs,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "git": git_state(), "tfswap": binary, "strategies_offered": offered,
        "strategies": strategies, "models": models, "devices": devices, "ladder": ladder,
        "extra_pairs": [list(p) for p in preset.get("extra", [])] if not custom else [],
        "curve_device": curve_device, "curve_models": curve_models,
        "curve_fractions": fractions, "targets": targets, "vc_policy": cfg["vc"],
        "budgets": budgets,
        "profiles": {d: {k: p.get(k) for k in ("name", "memory_bytes", "fp32_flops",
                                                 "mem_bytes_per_s", "d2h_bytes_per_s",
                                                 "h2d_bytes_per_s", "description")}
                     for d, p in profiles.items()},
        "tensorflow": tf_version,
    }
    out = {"meta": meta, "records": records}
    path = os.path.join(args.out, "results.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(path + ".tmp", path)
    errors = sum(1 for r in records if r["error"])
    log("done in %.1f min: %d tasks (%d failed), results in %s" % (
        elapsed / 60, len(records), errors, path))
    # Monotonicity in the budget along the run's sweeps (issue 14 item 3; bench/monotone.py).
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import monotone
    mono = monotone.check(out)
    for v in mono["violations"]:
        log("%s %s" % ("NOT MONOTONE" if v["must"] else "monotone note:", monotone.line(v)))
    log("monotone: " + monotone.summary(mono))
    if args.report:
        import report
        report.main(["--results", path])
    return 0


def _worker_tf_version():
    return _W["tfside"].tf().__version__


if __name__ == "__main__":
    sys.exit(main())
