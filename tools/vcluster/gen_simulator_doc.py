#!/usr/bin/env python3
"""Writes docs/SIMULATOR.md: tfswap's simulator, its device profiles and file formats, and
the comparison of its predictions with Grappler's VirtualCluster, every figure computed
here from the current tree.

    .venv/bin/python tools/vcluster/gen_simulator_doc.py            # -> docs/SIMULATOR.md
    .venv/bin/python tools/vcluster/gen_simulator_doc.py --no-large # fixtures only

It builds tfswap (go build, CGO_ENABLED=0), rewrites every graph in testmodels/fixtures
(and testmodels/large/, when testmodels/large.py has written it) with LMS's fixed default
thresholds (tfswap rewrite --strategy lms-fixed), simulates the originals and the rewrites with `tfswap simulate --json`, and runs
the same graphs through VirtualCluster with tools/vcluster/vcluster.py (in this process).
The plot docs/simulator-resnet50.svg is written by `tfswap simulate --plot`.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "vcluster"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

PROFILE = "v100-16gb"  # the device of the comparison
FETCH = "train"
# Grappler's rules, in the order the ablation switches them back to tfswap's.
ABLATION = ["grappler-times", "tie-by-name", "delayed-free", "recv-ops", "transient-recv", "unknown-dims-as-one",
            "no-workspace", "no-forwarding", "no-aliasing", "no-resident-variables", "run-value-dead"]
PROFILE_KEYS = ["format", "version", "name", "description", "memory_bytes", "fp32_flops",
                "tf32_flops", "fp16_flops", "mem_bytes_per_s", "d2h_bytes_per_s",
                "h2d_bytes_per_s", "duplex_copy", "launch_latency_s", "transfer_latency_s",
                "host_flops", "host_mem_bytes_per_s", "sms", "compute_capability", "link", "sources"]


def run(args, **kw):
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit("%s failed (%d):\n%s%s" % (" ".join(map(str, args)), r.returncode, r.stdout, r.stderr))
    return r.stdout


def gib(b):
    return "%.2f GiB" % (b / 2**30) if b >= 2**30 else ("%.1f MiB" % (b / 2**20) if b >= 2**20 else "%.1f KiB" % (b / 2**10))


def ms(ns):
    return "%.3f ms" % (ns / 1e6) if ns >= 1e6 else "%.1f µs" % (ns / 1e3)


def pct(a, b):
    return "%+.1f%%" % (100.0 * (a - b) / b) if b else "n/a"


def pct2(a, b):
    return "%+.2f%%" % (100.0 * (a - b) / b) if b else ("0" if a == 0 else "n/a")


class Doc:
    def __init__(self):
        self.parts = []

    def __call__(self, s=""):
        self.parts.append(s)

    def table(self, head, rows):
        self.parts.append("| " + " | ".join(head) + " |")
        self.parts.append("|" + "|".join(" --- " for _ in head) + "|")
        for r in rows:
            self.parts.append("| " + " | ".join(str(c) for c in r) + " |")
        self.parts.append("")

    def text(self):
        return "\n".join(self.parts).rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "SIMULATOR.md"))
    ap.add_argument("--no-large", action="store_true", help="leave out testmodels/large")
    args = ap.parse_args()

    import tensorflow as tf
    import vcluster

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="tfswap-simdoc-"))
    tfswap = tmp / "tfswap"
    # Build tfswap from the committed tree (HEAD), not from whatever is being edited.
    src = tmp / "src"
    src.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    commit = run(["git", "rev-parse", "--short", "HEAD"]).strip()
    r = subprocess.run(["go", "build", "-o", str(tfswap), "./cmd/tfswap"], cwd=src, capture_output=True, text=True,
                       env=dict(os.environ, CGO_ENABLED="0"))
    if r.returncode != 0:
        raise SystemExit("go build at HEAD failed:\n" + r.stderr)

    # Profiles.
    names = []
    for line in run([str(tfswap), "simulate", "--list-devices"]).splitlines()[1:]:
        if not line.strip():
            break
        names.append(line.split()[0])
    profiles = {}
    for n in names:
        path = tmp / (n + ".json")
        run([str(tfswap), "simulate", "--device", n, "--dump-profile", str(path)])
        profiles[n] = json.loads(path.read_text())
        if list(profiles[n].keys()) != PROFILE_KEYS:
            raise SystemExit("the device profile file's fields changed (%s); update PROFILE_KEYS and the "
                             "format table" % list(profiles[n].keys()))
    vprof = vcluster.load_profile(str(tmp / (PROFILE + ".json")))

    # Graphs: fixtures, then the large models when present.
    graphs = []
    for f in sorted((ROOT / "testmodels" / "fixtures").glob("*.pb")):
        graphs.append(("fixtures", f))
    large = ROOT / "testmodels" / "large"
    if not args.no_large and large.is_dir():
        order = ["resnet50", "vgg16", "inception_v3", "unet", "transformer", "lstm_lm"]
        for name in order:
            if (large / (name + ".pb")).exists():
                graphs.append(("large", large / (name + ".pb")))
    rows = []
    for kind, path in graphs:
        name = path.stem
        side = json.loads(path.with_suffix(".json").read_text())
        swapped = tmp / (name + ".swap.pb")
        rewrite_out = run([str(tfswap), "rewrite", str(path.relative_to(ROOT)), "-o", str(swapped), "--strategy", "lms-fixed"])
        rows.append({"name": name, "kind": kind, "path": path, "swapped": swapped, "side": side,
                     "rewrite": rewrite_out.splitlines()[1:3]})

    def simulate(path, conv=None, extra=()):
        cmd = [str(tfswap), "simulate", str(path), "--device", PROFILE, "--fetch", FETCH, "--json", "-", "--top", "5"]
        if conv:
            cmd += ["--conventions", conv]
        return json.loads(run(cmd + list(extra)))["result"]

    def gpu(res):
        return next(d for d in res["devices"] if d["gpu"])

    def dev(res, name):
        return next((d for d in res["devices"] if d["name"] == name), None)

    for r in rows:
        for which in ("orig", "swap"):
            p = r["path"] if which == "orig" else r["swapped"]
            r[which] = {
                "tfswap": simulate(p),
                # The VirtualCluster runs value-dead nodes: Grappler's rules plus run-value-dead.
                "grappler": simulate(p, ",".join(ABLATION)),
                "vc": vcluster.check_graph(str(p), [FETCH], vprof, 5, trace=True),
            }
            # Ablation: start from Grappler's rules and switch them back to tfswap's one by one.
            steps = []
            on = list(ABLATION)
            for rule in [None] + ABLATION:
                if rule:
                    on.remove(rule)
                res = simulate(p, ",".join(on) if on else "tfswap")
                steps.append((rule, res))
            r[which]["ablation"] = steps

    # Batch-scaled ResNet-50 on every profile, and the plot.
    scaled = []
    r50 = next((r for r in rows if r["name"] == "resnet50"), None)
    plot_rel = "simulator-resnet50.svg"
    if r50:
        for n in names:
            cmd = [str(tfswap), "simulate", str(r50["swapped"]), "--baseline", str(r50["path"]), "--device", n,
                   "--fetch", FETCH, "--batch-scale", "4", "--json", "-", "--top", "0"]
            out = json.loads(run(cmd))
            scaled.append((n, out["baseline"], out["result"]))
        run([str(tfswap), "simulate", str(r50["swapped"]), "--baseline", str(r50["path"]), "--device", PROFILE,
             "--fetch", FETCH, "--batch-scale", "6", "--top", "0",
             "--plot", str(pathlib.Path(args.out).parent / plot_rel)])

    write(args.out, profiles, names, rows, scaled, r50, plot_rel, tf.__version__, gpu, dev, commit)
    print("wrote", args.out)


def resident_note(rows, gpu):
    """The contribution of the resident-variables rule on the cnn fixture, for the text."""
    for r in rows:
        if r["name"] == "cnn":
            steps = r["orig"]["ablation"]
            # The step that switches no-resident-variables back, against the one before it
            # (not the last step: run-value-dead comes after it).
            i = [rule for rule, _ in steps].index("no-resident-variables")
            a, b = gpu(steps[i - 1][1])["peak_bytes"], gpu(steps[i][1])["peak_bytes"]
            return "%s on the cnn fixture, whose Momentum slots double its weights" % pct(b, a)
    return "see the last column"


def write(out, profiles, names, rows, scaled, r50, plot_rel, tfver, gpu, dev, commit):
    d = Doc()
    fx = [r for r in rows if r["kind"] == "fixtures"]
    lg = [r for r in rows if r["kind"] == "large"]
    d("# The simulator: `tfswap simulate`, and its check against Grappler's VirtualCluster")
    d()
    d("<!-- Generated by tools/vcluster/gen_simulator_doc.py; do not edit. Rerun it after changing cost/, "
      "the fixtures or the rewrite. -->")
    d()
    d("tfswap predicts what one training step costs on a GPU that is not there: how long each op and "
      "each host transfer takes, and how much device memory is allocated at every moment, with and "
      "without swapping. This page describes the model (package `cost`), its inputs, and the check "
      "against TensorFlow's own analytical simulator. Every number below was computed by "
      "`tools/vcluster/gen_simulator_doc.py` with tfswap built at commit %s and TensorFlow %s from "
      "the project venv; each table says how." % (commit, tfver))
    d()
    d("```")
    d("tfswap simulate model.swap.pb --device v100-16gb --baseline model.pb --fetch train \\")
    d("    --trace step.json --plot memory.svg            # side by side, trace, memory plot")
    d("tfswap simulate model.pb --device a100-40gb --batch-scale 4   # 4x the batch")
    d("tfswap simulate model.pb --device-file my-gpu.json --measured ops.json")
    d("tfswap simulate model.pb --device v100-16gb --grappler      # Grappler's accounting: ns and µs peaks (see below)")
    d("tfswap simulate --list-devices")
    d("tfswap inspect model.pb --device h100 --fetch train           # adds the predicted peak")
    d("```")
    d()
    d("`--trace` writes a Chrome trace event file (open it in Perfetto or chrome://tracing): a process "
      "per device, a thread for the compute stream and one per copy engine, a `memory` counter per "
      "device and a marker at each peak. `--plot` draws the compute device's memory over the step "
      "for the baseline and the rewritten graph with the device's memory as the budget line (SVG, "
      "or PNG for a file name ending in `.png`). "
      "`--json` gives everything in machine-readable form. `--fetch NODE` simulates only what "
      "`Session.run(NODE)` would run (its fan-in); without it the training step is found (the "
      "sinks whose fan-in holds the variable updates computed from variables, not the "
      "initialisers or reads outside the step), for the model and its `--baseline` alike, and "
      "printed as `fetch: X (found: ...)`; a graph that updates no variable is simulated whole, "
      "every node.")
    d()

    # ---------------------------------------------------------------- model
    d("## Execution model")
    d()
    d("**Devices.** A node runs on the device its `device` field names; a node without one runs on the "
      "default compute device, `/device:GPU:0` (`--compute-device` changes it), with the job, replica "
      "and task it names. Every GPU gets the device profile; CPU devices are the host. tfswap's swap "
      "nodes are pinned to `/device:CPU:0`, so they run on the host.")
    d()
    d("**Op time.** An op's time is `max(FLOPs / peak, bytes / memory bandwidth) + launch latency` "
      "(section *Op cost rules* gives the FLOPs and bytes). The peak is the FP16 tensor-core rate for "
      "half-precision matrix products and convolutions, the TF32 rate for float32 ones on GPUs that "
      "have TF32 (TensorFlow's default since 2.4; `--no-tf32` turns it off), the FP32 rate otherwise. "
      "Ops that launch no kernel (`Identity`, `Reshape`, `Const`, `VarHandleOp`, `ReadVariableOp`, "
      "shape ops, ...) take 1 ns, `NoOp` none; every other op at least 1 ns (so an op's successors "
      "become ready strictly after it starts; Grappler has the same floor). Host ops use the "
      "profile's host rates and no launch latency. A measured op profile (`--measured`) replaces the "
      "estimate of every node it times; times measured on another kind of device are scaled by one "
      "factor (see *Measured op profiles*).")
    d()
    d("**Ready order.** As in TensorFlow's executor, an op becomes ready when all its data and control "
      "inputs have arrived. Each device has one compute stream that runs one op at a time. When it "
      "is free it takes, among the ready ops, the one that became ready first; ties go to the op "
      "earliest in the graph's topological order (`graphdef.Graph.Topo`: Kahn's algorithm taking "
      "ready nodes in GraphDef order). The order is therefore deterministic and independent of "
      "timing noise. "
      "On the host, an op that launches no kernel (a swap's or a weight copy's `Identity`) does not "
      "wait behind a kernel the host is running (an optimizer update of offloaded variables): it "
      "starts at once beside it, as TensorFlow's executor runs inexpensive kernels inline instead of "
      "queueing them on the inter-op thread pool; with the host free it takes its turn in ready "
      "order. Grappler's conventions (`--fit-accounting` grappler-ns and grappler-us) keep one op at "
      "a time on the host, as the VirtualScheduler does. "
      "A while loop is executed once per node (one iteration); a conditional runs one branch, and "
      "a function call costs what its body does (next paragraph). "
      "A loop's gradient accumulators hold every iteration's element (`cost/accumulators.go`): "
      "a v1 loop's stack (`StackPushV2`) or a lowered v2 loop's TensorList "
      "(`TensorListPushBack` onto a list made by `EmptyTensorList` or `TensorListReserve` "
      "outside the loop) allocates, when its push runs, the pushed tensor's bytes times the "
      "loop's iteration count on the push's device, and frees it when the accumulator's last "
      "pop in the step ends; every pop waits for the accumulator's pushes (the executor's loops"
      " order them so: a pop of an empty stack fails). An unlowered `While`/`StatelessWhile` "
      "whose body pushes onto a loop variable entering as such a list outputs that list holding"
      " those bytes, freed after its last reader (the gradient `While`). The accumulated bytes "
      "grow over the forward loop and shrink over the backward one; the simulator holds their "
      "total over both loops, what is live where the two meet. The iteration count is the "
      "list's static capacity (`EmptyTensorList`'s `max_num_elements`, which `while_v2` sets to"
      " the loop's `maximum_iterations`; `TensorListReserve`'s `num_elements`), else the "
      "smallest static bound a `Less`/`LessEqual` of the loop's condition (the v1 frame, the "
      "`While`'s cond function) compares with, an iteration variable counting up from 0 by 1 "
      "assumed; where neither is static an accumulator counts one element and `simulate` says "
      "how many did. `--conventions no-accumulators` holds one element per push, as the "
      "VirtualCluster does (it is one of `GrapplerConventions`' rules): it knows no "
      "accumulators, so on the zoo's rnn graphs tfswap's peak moves away from the "
      "VirtualCluster's where the accumulators are live at the peak (`rnn_v2`: 586.3 KiB "
      "without, 673.5 KiB with, the VirtualCluster 327.1 KiB in the zoo table of "
      "docs/BENCHMARKS.md; `rnn_v1`'s peak, in the optimizer's updates after the loops, does "
      "not move: 505.5 KiB; simulated v100-16gb, zoo batch, at this change). A rewrite that "
      "places accumulators on the host (the LMS rewrite; a planned strategy's `accumulators` "
      "pass, docs/PLANNING.md) is predicted by simulating the graph it writes, its "
      "accumulators' nodes on the host and each push reading its tensor through a copy there, "
      "so the accumulated bytes are the host's: on the control-flow rnn_v1, `rewrite "
      "--strategy lms-fixed --min-bytes 1` predicts 35.4 KiB for the GPU, what `simulate` "
      "gives for the written graph, where it predicted 87.7 KiB before, the accumulators "
      "still counted on the GPU (simulated v100-16gb; `TestLMSPredictsPlacedAccumulators`). "
      "The host side of such a push or pop (the stack's ops, timed by their bytes only) runs "
      "beside the GPU's stream, so the simulated step of such a graph is shorter than the "
      "unswapped one's (225.9 µs against 315.4 µs there).")
    d()
    d("**Value-dead nodes.** When the fetches are known (`--fetch`, or the training step tfswap "
      "finds), a node whose value nothing in the step reads runs as the `NoOp` Grappler's "
      "dependency optimizer makes of it (`cost/pruned.go`): it waits for its inputs, takes no "
      "time, allocates nothing and holds none of the tensors it reads, so a tensor lives until "
      "its last live reader. Such nodes are tied to the step only by control edges: the "
      "gradient of a constant factor (`Mul_grad/Mul_1` of `scores * (1/sqrt(d))`), the input "
      "gradient of a network's first layer, whose halves of `tf.gradients`' tuples nothing "
      "reads, while `group_deps` still depends on them. "
      "`DependencyOptimizer::SafeToConvertToNoOp` (`dependency_optimizer.cc`) converts a node "
      "with no data output read, not fetched, free of side effects (not stateful, no ref input, "
      "not a queue, send or in-place op, not a placeholder), not `Merge`, `Switch`, `Enter`, "
      "`Exit`, `NextIteration`, `Assert`, `CheckNumerics`, `ControlTrigger` or a constant, and, "
      "an `Identity`, not reading a variable, a `_Recv` or a `Switch`, and not among the nodes "
      "to preserve, which include every node carrying `_grappler_do_not_remove` "
      "(`GrapplerItem::NodesToPreserve`): tfswap's gates, swap and recompute nodes; it then "
      "revisits the node's inputs, so a whole chain goes. tfswap marks, in reverse topological "
      "order, every such node whose data readers in the step are all marked. The "
      "tensorflow-tagged test `TestValueDeadNodesDoNotRun` (`tfrun`) checks on the fixtures and "
      "the zoo GPT, measured on CPU under TensorFlow's default configuration, that none of them "
      "is left in the partition graphs of a traced step but as a `NoOp`, and "
      "`TestGatesRunUnderGrappler` that the gates of a rewrite, which nothing reads but through "
      "control edges, run as `Identity` ops there and in the simulator. `--conventions ...,run-value-dead` "
      "runs them as written, as the VirtualCluster does with a graph Grappler has not optimized "
      "(and TensorFlow with the dependency optimizer off).")
    d()
    d("**Conditionals and function calls.** A v1 conditional's branches are found as TensorFlow's "
      "executor decides which tensors are dead (`graphdef.Graph.Conds`): a node is in a branch "
      "when it is dead whenever the predicate (traced back through `Identity`, `tf.cond`'s "
      "`pred_id`) has the other value: an output of a `Switch` on the other side, or a node with "
      "a dead data or control input, except a `Merge`, which is dead only when all its inputs "
      "are. A forward conditional and its gradient share the predicate, so a branch includes its "
      "gradient and the zero gradients `tf.cond` builds for the other side's inputs. Of the two "
      "branches of each predicate the step runs the one whose outputs have more bytes (inner "
      "conditionals are decided first); the other is not simulated, and a `Merge` waits only for "
      "the branch taken. A function call (`PartitionedCall`, `StatefulPartitionedCall`, a library "
      "function called as an op) is costed from its body in the graph's function library "
      "(`cost/calls.go`): the body is simulated on its own, on the call's device, with the same "
      "profile and accounting; the call takes the body's step time and holds, while it runs, the "
      "body's peak less its arguments and results, as workspace. An `If`/`StatelessIf` (or "
      "`Case`) costs its larger branch function, a `While`/`StatelessWhile` its cond and its body "
      "once. Two switches give the earlier rules back: `--conventions both-branches` runs both "
      "branches of every conditional and costs an `If` as both its branches, `--conventions "
      "calls-by-bytes` times a call by its bytes, as an op without a cost rule, with no memory of "
      "its own. Neither is one of Grappler's rules, but Grappler's VirtualCluster does both: it "
      "runs both sides of a v1 conditional and times a call by its bytes. With the two switches "
      "on, tfswap under Grappler's rules reproduces the VirtualCluster's nanosecond and "
      "microsecond peaks to the byte on the graphs of `testmodels/controlflow` that call "
      "functions (`fn_call`, `stateful_call`, `if_cnn`) and on `cond_cnn_twin`. With both "
      "branches run, a conditional's `Merge` runs as the VirtualScheduler runs it: as soon as one "
      "input arrives, handing its output to its consumers, and again each time another input "
      "arrives (`SchedulerState::GetOutputNodes` makes a `Merge` ready on every input, "
      "`MarkNodeExecuted` runs it again without scheduling its outputs); the trace gives it one "
      "span, from its first run's start to its last run's end, so that GraphMemory keeps its output "
      "and every input, the paired zero gradient of one side beside the gradient of the other, "
      "live until its last input has arrived (`vsMerge` in `cost/sim.go`), which the runtime never "
      "does. Grappler gives the zero gradient of a resource variable (`Fill` of a `VariableShape`) "
      "and the gradient `Merge` of it and the other side's gradient unknown dimensions "
      "(`MergeShape` relaxes the dimensions whose values differ); `ResourceApplyGradientDescent`'s "
      "shape function then merges such a gradient with the variable's shape, which makes it known "
      "again (`cond_cnn`'s filter gradients), while on the zoo's `cond_v1`, whose such gradients "
      "reach `ResourceApplyMomentum` through an `AddN`, they stay unknown in the VirtualCluster's "
      "trace (the `AddN` comes out known when an op added to the graph merges it with a known "
      "shape, so Grappler's global merges do run there). With these rules tfswap reproduces the "
      "VirtualCluster's nanosecond and microsecond peaks to the byte on `cond_cnn` "
      "(`TestControlFlowVirtualCluster`: 25,896,097 bytes; 22,748,957 when the `Merge` waited for "
      "both inputs) and its peak on `cond_v1` (`TestVirtualClusterZoo`: 923,561 bytes).")
    d()
    d("On the graphs of `testmodels/controlflow` (`testmodels/controlflow.py`, batch 8; simulated "
      "on `v100-16gb`, `--fetch train`, tfswap's accounting; the figures `TestCondAlternatives` "
      "and `TestFunctionCallsFromBodies` in `cost/controlflow_test.go` log and bound):")
    d()
    d("| graph | what | peak | step | with both-branches, calls-by-bytes |")
    d("| --- | --- | --- | --- | --- |")
    d("| cond_cnn | v1 `tf.cond` on a learning-phase placeholder | 17,433,674 B | 958.3 µs | "
      "18,703,385 B, 1014.0 µs |")
    d("| cond_cnn_twin | the same model without the cond | 16,385,076 B | 943.6 µs | (no "
      "conditional) |")
    d("| if_cnn | cond_cnn with an `If` | 16,716,806 B | 989.8 µs | 17,765,458 B, 1048.0 µs (both "
      "branches) |")
    d("| fn_call | the block as a `tf.function` (`PartitionedCall`) | 17,765,380 B | 943.6 µs | "
      "17,581,044 B, 754.3 µs (by bytes) |")
    d("| rnn_v2 | a v2 `While` loop | 42,212 B | 370.4 µs | 33,476 B, 190.2 µs (by bytes) |")
    d()
    d("The conditional's peak comes within 6.4% of its twin's (the rest is the zero gradient "
      "`tf.cond` builds for the input of the side not taken), the function call's step within "
      "0.01% of the same block written inline, where timing the call by its bytes underestimates "
      "it by 20%.")
    d()
    d("**Transfers.** Every data edge between two devices becomes a transfer, one per tensor and "
      "receiving device (TensorFlow sends a tensor once to each device that reads it); a control "
      "edge between devices becomes a 0-byte control message (TensorFlow sends a dummy tensor). A "
      "transfer is requested when its producer finishes, waits the profile's transfer latency "
      "(issuing the copy, the rendezvous), then queues on a copy engine: a GPU has a device-to-host "
      "engine and a host-to-device engine, one FIFO queue each (a shared one if the profile says the "
      "copy engines do not overlap); copies to a GPU use its host-to-device engine, copies from a "
      "GPU its device-to-host engine. The engine is busy for `bytes / link rate`. Host-to-host "
      "transfers are free. The consumers of a transfer become ready when it completes.")
    d()
    d("**Memory.** An op's outputs are allocated when it starts. A buffer is freed when its last "
      "consumer on the device has finished and the last transfer out of it has completed. The "
      "destination buffer of a transfer is allocated on the receiving device when the transfer is "
      "requested and freed when its last consumer there has finished. Outputs nobody reads are "
      "freed when their op ends. On top of that:")
    d()
    d("- *Resident buffers:* every variable of the graph (`VarHandleOp`, `VariableV2`: weights, "
      "optimizer slots, batch-norm statistics; sized from their `shape` and `dtype` attrs) and every "
      "`Const` the step runs are allocated for the whole step. `ReadVariableOp` shares its "
      "variable's buffer, as TensorFlow does outside copy-on-read mode.")
    d("- *Aliases:* `Identity`, `IdentityN`, `StopGradient`, `PreventGradient`, `Reshape`, `Squeeze`, "
      "`ExpandDims`, `EnsureShape`, `CheckNumerics`, `Bitcast` (and `Enter`/`Exit`/`Switch`/`NextIteration`) "
      "share their input's buffer when it is on their device; a `Merge` shares the buffer of its "
      "input that arrives (`MergeOp::Compute` sets its output to that input), the first one when "
      "both branches run.")
    d("- *Forwarding:* an elementwise op (unary and binary arithmetic, activations and their "
      "gradients, `BiasAdd`, `AddN`) writes its output into an input buffer of the same size and "
      "dtype when it is that buffer's only remaining reader (TensorFlow's "
      "`forward_input_or_allocate_output`), except a fed tensor's, which `Session.run`'s caller "
      "still holds. `FusedBatchNorm` (V2, V3) writes its `y` into its `x` the same way "
      "(`FusedBatchNormOpBase` in `tensorflow/core/kernels/fused_batch_norm_op.cc` forwards input "
      "0 to output 0); in a training step the batch-norm gradient still reads `x`, so this "
      "happens only where `x`'s later reads were redirected to a swapped-in or recomputed copy. "
      "`FusedBatchNormGrad` (all versions) never forwards: its kernel allocates `x_backprop`, so "
      "it holds `y_backprop`, `x` and `x_backprop` at once (the op that bounds ResNet-50's batch, "
      "docs/BENCHMARKS.md).")
    d("- *Workspace:* a convolution (forward, either backprop) holds a temporary copy of its "
      "filter while it runs: TensorFlow's conv kernels transform the filter into cuDNN's layout "
      "in an `allocate_temp` buffer. cuDNN's own scratch space depends on the algorithm autotuning "
      "picks and is not counted.")
    d("- *Unknown sizes:* a tensor whose shape is not fully known counts 0 bytes and is reported "
      "(`FusedBatchNormV3`'s `reserve_space_3` is the usual one).")
    d()
    d("**Stalls and step time.** The step time is when the last op or transfer finishes. The "
      "*swap-in stall* of a device is the time its compute stream sat idle while the next op it "
      "ran was waiting for a host-to-device copy (a swap-in) — the stall vDNN and Kim et al. tune "
      "their prefetch against. Other idle time (waiting for another device, a control message) "
      "is reported separately. The *overhead* of a rewrite is its step time against the baseline's.")
    d()
    d("**Batch scaling** (`--batch-scale k`). The batch size B is dimension 0 of the first "
      "`Placeholder` (in graph order) whose dimension 0 is known; every `Placeholder` with dimension 0 "
      "equal to B carries the batch. Another tensor carries it when its producer has a data input "
      "that carries it (or makes a tensor of the shape an input gives, `Fill`, `BroadcastTo` or a "
      "random op, and that input is the `Shape` or `ShapeN` of a tensor that carries it, directly or "
      "through `Identity`, `Switch`, `Merge` and the like: the zero gradients of a v1 conditional, "
      "dropout's mask), its dimension 0 is a known multiple of B, and the producer does not sum over "
      "the batch: not a filter or bias gradient (`Conv2DBackpropFilter`, "
      "`DepthwiseConv2dNativeBackpropFilter`, `BiasAddGrad`), not a `MatMul` with `transpose_a` (a "
      "weight gradient), not a shape op, and not one of `FusedBatchNorm*`'s per-channel outputs. "
      "Dimension 0 of every tensor that carries the batch is multiplied by k, and op costs are "
      "computed from the scaled shapes. Batch-major layouts are assumed: a time-major tensor "
      "(`[T, B, ...]`) is not scaled. The body of a function a call runs is scaled with its caller: "
      "its arguments (`_Arg`) whose dimension 0 is B carry the batch.")
    d()
    d("**Not modelled.** The BFC allocator's rounding, fragmentation and pool growth (TensorFlow "
      "reserves memory in chunks; the prediction is bytes in use, not bytes reserved); the CUDA "
      "context and cuDNN/cuBLAS workspaces; Grappler's rewrites before the step (layout conversion, "
      "fusion, constant folding, pruning — simulate the graph Grappler outputs to include them); "
      "kernel concurrency on one GPU (one stream); contention between GPUs on a shared PCIe switch "
      "(by default each GPU has its own copy engines); host memory limits; time-varying clocks. Op times are "
      "roofline estimates at peak rates; real kernels reach a fraction of them, so absolute step "
      "times are optimistic while the balance between compute and transfers is the point.")
    d()

    # ---------------------------------------------------------------- profiles
    d("## Device profiles")
    d()
    d("Built-in profiles (`tfswap simulate --list-devices`; `--dump-profile FILE` writes one in the "
      "`--device-file` format with its sources). Rates are dense peaks; the host link is the "
      "effective rate each way.")
    d()
    rows_p = []
    for n in names:
        p = profiles[n]
        tf32 = "%.0f" % (p["tf32_flops"] / 1e12) if p["tf32_flops"] else "–"
        rows_p.append([n, "%d GiB" % (p["memory_bytes"] >> 30), "%.1f" % (p["fp32_flops"] / 1e12), tf32,
                       ("%.1f" if p["fp16_flops"] < 100e12 else "%.0f") % (p["fp16_flops"] / 1e12),
                       "%.0f" % (p["mem_bytes_per_s"] / 1e9), p["link"], "%.1f" % (p["h2d_bytes_per_s"] / 1e9),
                       "%d / %s" % (p["sms"], p["compute_capability"])])
    d.table(["profile", "memory", "FP32 TFLOP/s", "TF32", "FP16", "memory GB/s", "host link", "link GB/s each way",
             "SMs / CC"], rows_p)
    d("Sources and derivations, per profile:")
    d()
    for n in names:
        p = profiles[n]
        d("- **%s** (%s):" % (n, p["description"]))
        for s in p["sources"]:
            d("  - " + s)
    d()
    d("### Device profile files (`--device-file`)")
    d()
    d("A JSON object; unknown fields, a wrong `format` or `version`, missing required fields and "
      "out-of-range values are errors that name the field.")
    d()
    d.table(["field", "", "meaning"], [
        ["`format`", "required", "`\"tfswap-device-profile\"`"],
        ["`version`", "required", "`1`"],
        ["`name`", "required", "the profile's name"],
        ["`description`", "", "free text"],
        ["`memory_bytes`", "required", "device memory (the budget line)"],
        ["`fp32_flops`", "required", "peak FP32 FLOP/s"],
        ["`tf32_flops`", "default 0", "peak TF32 tensor-core FLOP/s; 0 = no TF32"],
        ["`fp16_flops`", "default `fp32_flops`", "peak FP16 (tensor-core) FLOP/s"],
        ["`mem_bytes_per_s`", "required", "device memory bandwidth"],
        ["`d2h_bytes_per_s`, `h2d_bytes_per_s`", "required", "effective host-link rate each way"],
        ["`duplex_copy`", "default true", "device-to-host and host-to-device copies overlap (two copy engines)"],
        ["`launch_latency_s`", "default 5e-6", "added to every kernel"],
        ["`transfer_latency_s`", "default 1e-5", "paid by every transfer before it queues"],
        ["`host_flops`, `host_mem_bytes_per_s`", "default 1e12, 5e10", "rates of ops placed on the host"],
        ["`sms`, `compute_capability`", "", "SM count and CUDA compute capability (`\"7.0\"`); needed by the VirtualCluster checker"],
        ["`tensorflow`", "", "the TensorFlow release the graphs will run on (`\"2.18\"`, the default; "
         "`\"1.15\"`, `\"2.4\"`): it chooses the rule of the memory TensorFlow's GPU device keeps back, "
         "hence the default budget of `tfswap rewrite`: from 2.5 on, by compute capability "
         "(`MinSystemMemory` in `tensorflow/core/common_runtime/gpu/gpu_device.cc`: 500 MiB up to "
         "6.x, 1050 MiB on 7.x, 1536 MiB on 8.x, 1800 MiB from 9.0 in 2.18); before 2.5, max(300 "
         "MiB, 6% of the memory) (225 MiB below 2 GiB), the rule tensorflow/tensorflow#44810 "
         "replaced in November 2020"],
        ["`link`, `sources`", "", "free text: the link, and where the figures come from"],
    ])
    d("### Measured op profiles (`--measured`)")
    d()
    d("The format `tfswap profile` writes from real iterations (defined in `cost/measured.go`, "
      "which is authoritative). `compute_ns` is the op's time on its device from start to end, the "
      "median over `iterations`, not counting time waiting for inputs; it replaces the estimate for "
      "the node of that name when the node is simulated on the kind of device it was measured on "
      "(the same device type and, for GPUs, the same profile when `device.profile` names one). "
      "Nodes measured on another kind of device (a CPU profile used to simulate a GPU) are scaled "
      "by one factor per simulation — the sum of their estimates on the simulated device over the "
      "sum of their measured times — which `tfswap simulate --measured` applies and reports. "
      "`output_bytes` (per output port, -1 unknown) fill in sizes the shapes leave unknown; "
      "`machine` (optional) describes the computer the profile was taken on. Unknown fields are "
      "errors.")
    d()
    d("```json")
    d("""{
  "format": "tfswap-op-profile",
  "version": 1,
  "device": {"name": "/job:localhost/replica:0/task:0/device:GPU:0",
             "model": "Tesla V100-SXM2-16GB", "profile": "v100-16gb-nvlink"},
  "tensorflow_version": "2.18.0",
  "graph": "resnet.pb",
  "iterations": 10,
  "machine": {"hostname": "node7", "os": "linux", "arch": "amd64", "gpus": ["Tesla V100-SXM2-16GB"]},
  "nodes": [
    {"name": "stem/conv/Conv2D", "op": "Conv2D",
     "device": "/job:localhost/replica:0/task:0/device:GPU:0",
     "compute_ns": 41250, "output_bytes": [524288]}
  ]
}""")
    d("```")
    d()

    # ---------------------------------------------------------------- op rules
    d("## Op cost rules")
    d()
    d("FLOPs count a multiply-add as 2. Bytes are the op's data inputs plus outputs unless the rule "
      "says otherwise. Ops without a rule, and ops whose shapes are unknown, cost their bytes only "
      "and are counted and reported as unknown (`tfswap simulate` lists them).")
    d()
    d.table(["ops", "FLOPs", "notes"], [
        ["`Conv2D`, `Conv3D`, `_FusedConv2D`, `Conv2DBackpropInput`, `Conv2DBackpropFilter` (and 3-D V2)",
         "2 · N · output spatial · C_out · kernel spatial · C_in per group", "the backprops are one such product each, from dy's and the filter's shapes; workspace: the filter"],
        ["`DepthwiseConv2dNative` and backprops", "2 · N · output spatial · C_in · multiplier · kernel spatial", ""],
        ["`MatMul`, `_FusedMatMul`", "2 · M · N · K", "`transpose_a/b`"],
        ["`BatchMatMul`, `V2`, `V3`", "2 · broadcast batch · M · N · K", "`adj_x/y`"],
        ["`Einsum` (two operands)", "2 · product of the sizes of all distinct labels", "ellipses expanded; one-operand equations cost bytes"],
        ["`MaxPool`, `AvgPool` (2-D, 3-D)", "output elements · window", ""],
        ["`MaxPoolGrad`, `AvgPoolGrad`", "gradient elements · window (+ original input elements for max)", ""],
        ["`FusedBatchNorm`, `V2`, `V3`", "8 per element training, 4 inference", "training reads x twice"],
        ["`FusedBatchNormGrad`, `V2`, `V3`", "12 per element", ""],
        ["elementwise (`Add`, `Mul`, `Relu`, `ReluGrad`, `BiasAdd`, ...), `AddN`", "1 per output element (8 for transcendentals, 2–4 for grads and divisions); AddN: (n−1) per element", "broadcasting by the output's shape"],
        ["reductions (`Sum`, `Mean`, `Max`, `ArgMax`, `BiasAddGrad`, `L2Loss`, ...)", "1 (2) per input element", ""],
        ["`Softmax`, `LogSoftmax`; `SparseSoftmaxCrossEntropyWithLogits`; `SoftmaxCrossEntropyWithLogits`", "5; 6; 7 per logit", ""],
        ["`GatherV2`, `Gather`, `ResourceGather`, `GatherNd`", "0", "bytes: 2 · output + indices (the rows read, not the table)"],
        ["`UnsortedSegmentSum`, `ScatterNd`; `ResourceScatterAdd`/`Sub`/`Update`", "1 per update element", "scatters: 3 · updates + indices"],
        ["`LSTMBlockCell`, `BlockLSTM(V2)`, `GRUBlockCell`", "per step 2 · B · (I + H) · G · H + 20 · B · H (G = 4 LSTM, 3 GRU)", ""],
        ["`LSTMBlockCellGrad`, `GRUBlockCellGrad`; `BlockLSTMGrad(V2)`", "30 · B · H; twice the gate product + 30 · B · H per step", ""],
        ["`CudnnRNN*` (+ backprop)", "per layer, direction and step 2 · B · (I_l + H) · G · H (backprop ×2)", "time-major unless `time_major` is false"],
        ["optimizer updates (`ResourceApplyGradientDescent`, `Momentum`, `Adam`, `RMSProp`, `Adagrad`, `Adadelta`, ...), `Assign*VariableOp`", "2–14 per element", "bytes: the n-element arrays read and written in place (Momentum 5n, Adam 7n)"],
        ["data movement (`ConcatV2`, `Split`, `Slice`, `Transpose`, `Pad`, `Tile`, `Fill`, `ZerosLike`, ...)", "0", ""],
        ["random (`RandomUniform`, `TruncatedNormal`, ...)", "10–24 per element", ""],
    ])

    # ---------------------------------------------------------------- check
    d("## The independent check: Grappler's VirtualCluster")
    d()
    d("TensorFlow ships an analytical simulator of its own, Grappler's `VirtualCluster` "
      "(`tensorflow/core/grappler/clusters/virtual_cluster.cc`). `tools/vcluster/vcluster.py` builds "
      "the same device in one — a GPU with `num_cores` = the profile's SMs, `architecture` = the "
      "compute capability's major number, the frequency chosen so that Grappler's "
      "`OpLevelCostEstimator::GetDeviceInfo` (cores per SM × SMs × frequency × 2) gives the profile's "
      "FP32 peak, `bandwidth` = the memory bandwidth — plus the host `/device:CPU:0`, and a Grappler "
      "item from a MetaGraphDef whose `train_op` collection is `[\"%s\"]`. The GPU's `memory_size` is "
      "not the profile's memory but 2^62 bytes: `VirtualCluster::Run` returns RESOURCE_EXHAUSTED "
      "when the scheduler's own estimate of a device's peak reaches `memory_size` (and "
      "`Cluster.MeasureCosts` raises it), so the checker gives the device room for any graph and "
      "compares its peaks with a budget afterwards (`--budget`). Facts about Grappler below were "
      "read from TensorFlow 2.18's source (`virtual_cluster.cc`, `virtual_scheduler.cc`, "
      "`virtual_placer.cc`, `analytical_cost_estimator.cc`, `graph_memory.cc`, "
      "`op_level_cost_estimator.cc`, `op_types.cc`, `costs/utils.cc`, `framework/common_shape_fns.cc`, "
      "`ops/array_ops.cc`) and each is exercised by the check." % FETCH)
    d()
    d("What VirtualCluster does with a graph: `VirtualPlacer` puts every node without a device on "
      "the GPU with the lowest id; the `VirtualScheduler` runs the transitive fan-in of the fetch "
      "nodes, with a single `FirstReadyManager` (the ready node with the earliest ready time first, "
      "ties by node name); each cross-device data input becomes a `_Send` on a "
      "`Channel_from_X_to_Y` device and a `_Recv` on the receiving device, each costed like an "
      "`Identity` (1 ns), one pair per tensor and receiving device, while a control input from "
      "another device is treated as an edge on one device (no `_Send`, no `_Recv`: "
      "`SchedulerState::Init`). Every op takes the time `OpLevelCostEstimator` gives it: "
      "`ceil(operations / GOP/s) + ceil(bytes read and written / GB/s)` ns (compute and memory "
      "do not overlap), with per-op operation counts (a convolution's multiply-adds × 2, an "
      "elementwise op's elements × Eigen's cost of its functor, ...), 1 ns for `Identity`-like, "
      "shape and variable ops, nothing for `NoOp`, and bytes alone for ops it has no rule for "
      "(`FusedBatchNormV3`, `ResourceApplyAdam`, `Mean`, ...). Shapes, for these times and for "
      "memory, come from Grappler's own static shape inference (`GraphProperties`), which knows "
      "only the values of `Const` nodes: a `Transpose` whose permutation is computed (the "
      "`InvertPermutation` of a transpose's gradient), an `UnsortedSegmentSum` whose number of "
      "segments is, get dimensions it calls unknown and counts as 1. `Cluster.DeterminePeakMemoryUsage` "
      "(`GraphMemory::InferStatically`) takes that run's trace and keeps every output of every op "
      "live from its op's start to 1 ns after the end of its last consumer in the original graph — "
      "on whatever device — or of the op itself; a resource or variant handle is 0 bytes.")
    d()
    d("### Three figures for one step")
    d()
    d("A plan's peak has three figures, and `tfswap rewrite --fit-accounting` names each:")
    d()
    d("- **tfswap** — tfswap's model of TensorFlow's runtime (`tfswap simulate`): variables "
      "resident, aliases and in-place forwarding, copies on the copy engines at the link's rate. "
      "The figure that predicts what a real step allocates.")
    d("- **grappler-ns** — GraphMemory's rule applied to the VirtualScheduler's trace read to the "
      "nanosecond (`all_start_nanos`, `op_end_rel_nanos`, which the scheduler fills in): the checker's "
      "`peak_bytes`, and `DeviceResult.PeakBytes` of `tfswap simulate --grappler`.")
    d("- **grappler-us** — the same rule on the same trace read to the microsecond, as "
      "`GraphMemory::InferFromTrace` reads it (`all_start_micros`, `op_end_rel_micros`: the "
      "nanosecond times truncated by `Costs::NanoSeconds::asMicroSeconds`): TensorFlow's own "
      "`Cluster.DeterminePeakMemoryUsage`, the checker's `peak_bytes_us`, and "
      "`MicrosecondPeakBytes` of `tfswap simulate --grappler`.")
    d()
    d("**When the two Grappler figures differ.** In microseconds a tensor is live in every "
      "microsecond from the one its producer starts in to the one its last reader ends in, so "
      "tensors that never coexist — one freed, another allocated a few nanoseconds later — count "
      "together when the two instants fall in the same microsecond. The microsecond figure is "
      "therefore never below the nanosecond one, equal when every op near the peak takes "
      "microseconds, and larger where ops of a few nanoseconds cluster at the peak: a small graph "
      "whose whole step lasts a few microseconds (the MLP fixture runs in one: nearly all its "
      "tensors count), and in rewritten graphs the 1 ns `_Recv` of every swap-in, the gate "
      "`Identity` (a copy of its trigger's output in Grappler's accounting) and the `Identity` "
      "copies of `tf.gradients`' tuples, beside the tensor the next op allocates. The checker "
      "names, for each device, the tensors the microsecond peak counts that are not live together "
      "with the others at any nanosecond of that microsecond (`us_only`; the last column below). "
      "They are counted against the best nanosecond of the microsecond peak's own microsecond, so "
      "when the nanosecond peak lies elsewhere in the step they can weigh more than the "
      "difference between the two figures.")
    d()
    d("**When tfswap's figure differs from Grappler's**: the accounting rules, one by one in the "
      "section after next.")
    d()
    d("`--fit-accounting all` (the default) requires a plan to fit by all three, so that every plan "
      "`tfswap rewrite` reports as fitting also fits by TensorFlow's own "
      "`DeterminePeakMemoryUsage`; `tfswap`, `grappler-ns`, `grappler-us` or a comma-separated list "
      "of them ask for those alone (`both` is `tfswap,grappler-ns` as before, with its 2% margin "
      "for recomputations); whatever it asks, `rewrite` prints and reports (`--report`) all three "
      "figures of the plan.")
    d()
    trows = []
    for r in rows:
        for which, label in (("orig", r["name"]), ("swap", r["name"] + " (rewritten)")):
            vc = r[which]["vc"]["devices"]
            for devname in sorted(vc):
                v = vc[devname]
                if v["peak_bytes_us"] == 0 and v["peak_bytes"] == 0:
                    continue
                diff = "–"
                if v["us_only_count"]:
                    big = v["us_only"][0]
                    diff = "%d tensors, %s; largest `%s` (%s)" % (v["us_only_count"], gib(v["us_only_bytes"]),
                                                                  big["tensor"], gib(big["bytes"]))
                trows.append([label, devname, "{:,}".format(v["peak_bytes_us"]), "{:,}".format(v["peak_bytes"]),
                              pct(v["peak_bytes_us"], v["peak_bytes"]), diff])
    d("VirtualCluster on `%s`, peak bytes per device (`tools/vcluster/vcluster.py`): "
      "`DeterminePeakMemoryUsage` (µs trace) and the same rule on the ns trace, and the tensors "
      "the µs peak counts that are not live together with the others at any nanosecond of its "
      "microsecond. The checker re-implements GraphMemory's rule (`live_tensors`, `peak_of`) and "
      "verifies on every graph and device that from the microsecond timestamps it gives exactly "
      "`DeterminePeakMemoryUsage`'s number; it does for every graph below." % PROFILE)
    d()
    d.table(["graph", "device", "DeterminePeakMemoryUsage", "GraphMemory rule, ns trace", "µs / ns",
             "counted only in µs"], trows)

    d("### Agreement")
    d()
    d("Peak bytes per device for one step (`--fetch %s`) on `%s`. *VirtualCluster*: "
      "`tools/vcluster/vcluster.py`, nanosecond and microsecond readings of its trace. *tfswap, "
      "Grappler's rules*: `tfswap simulate --conventions` with every accounting rule listed in the "
      "next section switched to Grappler's, `run-value-dead` included (`--grappler` and "
      "`run-value-dead`), its nanosecond and microsecond peaks. *tfswap*: `tfswap "
      "simulate` with its own accounting, the prediction users get. Rewritten graphs are `tfswap "
      "rewrite --strategy lms-fixed` (LMS's default thresholds). The test `TestVirtualClusterAgreement` (`go test ./cost`; "
      "`TFSWAP_VCLUSTER_LARGE=1` adds the large models) requires, for every graph below, original "
      "and rewritten, and for a vDNN plan of each (whose waits make GPU ops wait for host "
      "swap-outs) and, on the fixtures, a plan recomputing every candidate, every op of the "
      "simulation to run on the device, from the nanosecond and to the nanosecond, with the "
      "output shapes that the VirtualCluster's trace records, and both peaks of every device to "
      "be the VirtualCluster's to the byte." % (FETCH, PROFILE))
    d()
    arows = []
    worst = 0
    cost_diff = 0
    for r in rows:
        for which, label in (("orig", r["name"]), ("swap", r["name"] + " (rewritten)")):
            vc = r[which]["vc"]["devices"]
            for devname in sorted(vc, key=lambda n: (not n.endswith("GPU:0"), n)):
                v = vc[devname]["peak_bytes"]
                vu = vc[devname]["peak_bytes_us"]
                g = dev(r[which]["grappler"], devname)
                t = dev(r[which]["tfswap"], devname)
                if v == 0 and vu == 0 and g is None:
                    continue
                gb = g["peak_bytes"] if g else 0
                gu = g.get("peak_bytes_us", 0) if g else 0
                tb = t["peak_bytes"] if t else 0
                worst = max(worst, abs(gb - v), abs(gu - vu))
                arows.append([label, devname, "{:,}".format(v), "{:,}".format(gb), "{:,}".format(vu), "{:,}".format(gu),
                              "{:,}".format(tb), pct(tb, v)])
            # MeasureCosts reports its cost estimate in whole microseconds.
            cost_diff = max(cost_diff, abs(r[which]["grappler"]["step_time_ns"] // 1000 * 1000 -
                                           round(r[which]["vc"]["cost_estimate_s"] * 1e9)))
    d.table(["graph", "device", "VirtualCluster ns", "tfswap, Grappler's rules, ns", "VirtualCluster µs",
             "tfswap, Grappler's rules, µs", "tfswap", "diff from VC ns"], arows)
    d("With Grappler's rules the largest difference of any peak on any device is %d bytes, and "
      "the simulated step, truncated to the microsecond as `Cluster.MeasureCosts` reports its "
      "cost estimate, differs from that estimate by %d ns: the two "
      "simulators agree on which nodes run, where, in what order, at which nanosecond, how large "
      "every tensor is and when it is freed. The difference between the last columns and the "
      "others is the difference between the accountings, explained next." % (worst, cost_diff))
    d()

    d("### Where tfswap's accounting differs from Grappler's, and why")
    d()
    d("Each difference is one switch in `cost.Conventions` (`--conventions` on the command line, "
      "hidden); `--grappler` turns all of them on. tfswap's default is its model of TensorFlow's "
      "runtime; Grappler's is a static estimate that does not try to be one:")
    d()
    d("1. **no-resident-variables.** Grappler's `IsPersistent` (`op_types.cc`) covers `Const`, "
      "`VariableV2`, `VarHandleOp` and `ReadVariableOp`, but `GraphMemory` ignores it: it counts every "
      "op output as a tensor from its op's start to its last consumer. With resource variables the "
      "variable's own buffer is no op's output (`VarHandleOp` outputs a handle of size 0), so weights "
      "count only through their `ReadVariableOp` outputs, from the read to the last consumer, and "
      "optimizer slots (momentum, Adam's m and v), only ever touched through handles by "
      "`ResourceApply*`, not at all. tfswap counts every variable and the constants the step runs "
      "for the whole step, as they are in a session, and lets `ReadVariableOp` share the variable's "
      "buffer. This is the largest systematic difference on unrewritten graphs, mostly upwards, "
      "up to the size of the weights plus optimizer slots (%s), but it can go the other way: a "
      "variable read by several `ReadVariableOp`s counts once per read in Grappler's accounting "
      "and once in all in tfswap's (the unrolled LSTM language model reads each 32 MiB LSTM kernel "
      "37 times)." % resident_note(rows, gpu))
    d("2. **no-aliasing.** Grappler gives `Identity` (the `tuple/control_dependency` identities "
      "`tf.gradients` builds around every gradient), `Reshape`, `Squeeze`, `ExpandDims` and the like "
      "their own output; TensorFlow forwards the input buffer (`context->set_output(0, input)`). "
      "Grappler counts these tensors twice while both are live.")
    d("3. **no-forwarding.** Grappler never lets an elementwise op write into its input; TensorFlow's "
      "cwise kernels do (`forward_input_or_allocate_output`) when they are the buffer's last reader — "
      "common in the backward pass.")
    d("4. **no-workspace.** The VirtualScheduler reports no temporary memory "
      "(`temp_memory_size` 0); tfswap counts the convolution filter's temporary cuDNN-layout copy.")
    d("5. **unknown-dims-as-one.** Grappler sizes a tensor of unknown dimensions as if they were 1 "
      "(`CalculateTensorSize`); tfswap counts 0 bytes and reports the tensor. A few bytes here.")
    d("6. **recv-ops.** The VirtualScheduler models a transfer as a 1 ns `_Send` and a 1 ns `_Recv`; "
      "the `_Recv` runs on the receiving device's timeline in the ready order, so a swap-in waits "
      "for a slot on the GPU and its consumer becomes ready after it. Transfer time is not modelled. "
      "tfswap copies on the GPU's copy engines at the link's rate, concurrently with compute: a "
      "swapped-out tensor stays on the GPU until its device-to-host copy has completed, and copies "
      "queue behind each other. This is what makes tfswap's prediction for rewritten graphs much "
      "higher than Grappler's: at a GPU's speed, activations are produced faster than PCIe can "
      "carry them away (see the next section).")
    d("7. **transient-recv.** `GraphMemory` keeps a sent tensor allocated on its producer's device "
      "until its consumers on the other device have finished, and frees a `_Recv`'s output when the "
      "`_Recv` ends (no node of the original graph reads it). tfswap frees the producer's buffer "
      "when the copy out of it completes and keeps the received copy until its consumers on the "
      "receiving device have finished, as TensorFlow's executor does. With Grappler's rules, a "
      "swapped-in tensor is therefore never counted on the GPU while its consumer runs.")
    d("8. **delayed-free.** `GraphMemory` frees a tensor 1 ns after its last consumer ends (\"to "
      "account for TF overhead that slightly delays deallocations\"), so the outputs of the op that "
      "starts at that instant are counted together with the inputs of the op that just ended; "
      "tfswap frees first.")
    d("9. **tie-by-name.** Grappler breaks ties between ops ready at the same time by name, tfswap by "
      "topological (graph) order. The order changes which tensors meet at the peak.")
    d("10. **grappler-times.** Ops take the times `OpLevelCostEstimator` gives them (see above; "
      "`cost/grappler_time.go`, whose elementwise costs `tools/vcluster/cwise_costs.py` measures "
      "from the VirtualCluster), with the shapes Grappler's inference gives them "
      "(`cost/grappler_shapes.go`), instead of tfswap's roofline times. On one device the order "
      "of the ops, and so the nanosecond peak, hardly depends on the times; the microsecond peak "
      "does, since it depends on which ops share a microsecond.")
    d("11. **run-value-dead.** The VirtualCluster runs the graph as written, so a node whose "
      "value nothing reads (see *Value-dead nodes*) runs and holds its inputs until it ends; "
      "before a real step Grappler's dependency optimizer turns it into a `NoOp`. This rule is "
      "not part of `--grappler` (tfswap judges plans by what will run); the agreement above is "
      "with it on.")
    d("12. **no-accumulators.** The VirtualScheduler runs a while loop's body once and knows no"
      " stacks or TensorLists: a push's output is one element, freed after its readers, and a "
      "gradient loop's pop may run before the forward loop's push. tfswap holds every "
      "iteration's element in the accumulator from the push until its last pop, and a pop waits"
      " for the pushes (see *Ready order*). No graph of the table below has a loop.")
    d("13. **merge-reruns.** The VirtualScheduler runs a `Merge` whenever one of its inputs "
      "becomes ready: a while loop's `Merge` runs on its `Enter`, then again when the loop's "
      "`NextIteration` ends, without scheduling its outputs the second time, and its trace "
      "gives both runs one span, from the first start to the second end "
      "(`SchedulerState::MarkNodeExecuted`, a \"previously executed merge\"). `GraphMemory` reads "
      "that span: the `Enter`'s tensor, the `NextIteration`'s and the `Merge`'s outputs stay "
      "live until the body has run, the loop-invariant gradient accumulators "
      "(`Enter_grad/b_acc_1`, a weight's size) among them. tfswap's loop `Merge` runs once and "
      "frees the `Enter`'s tensor when it ends, as TensorFlow's executor does (the `Enter` and "
      "the `Merge` forward one buffer); `--conventions merge-reruns` runs it again. It is not "
      "part of `--grappler`; on the zoo's `rnn_v1` it is what the two simulators disagreed on "
      "(`TestLoopVirtualCluster`). No graph of the table below has a loop.")
    d()
    d("Switching the rules back one at a time, starting from Grappler's (the first column, equal to "
      "VirtualCluster's nanosecond figure above) and ending at tfswap's, shows what each contributes "
      "on the compute device (`tfswap simulate --conventions`, nanosecond peak bytes on `%s`, "
      "`--fetch %s`):" % (PROFILE, FETCH))
    d()
    head = ["graph", "Grappler's rules"] + ["− " + r for r in ABLATION]
    ab = []
    for r in rows:
        for which, label in (("orig", r["name"]), ("swap", r["name"] + " (rewritten)")):
            steps = r[which]["ablation"]
            base = gpu(steps[0][1])["peak_bytes"]
            cells = [label, gib(base)]
            prev = base
            for rule, res in steps[1:]:
                b = gpu(res)["peak_bytes"]
                cells.append(pct(b, prev) if b != prev else "·")
                prev = b
            ab.append(cells)
    d.table(head, ab)
    d("Each cell is the change from the column before (· = none); the last column ends at tfswap's "
      "own prediction. Rules interact, so a rule's contribution depends on the ones already "
      "switched back.")
    d()

    d("### Time")
    d()
    d("VirtualCluster's cost estimate (`Cluster.MeasureCosts`), the step time of `tfswap simulate "
      "--grappler` (Grappler's op times) and tfswap's own step time for the unrewritten graphs, "
      "same device:")
    d()
    trow = []
    for r in rows:
        trow.append([r["name"], ms(r["orig"]["vc"]["cost_estimate_s"] * 1e9), ms(r["orig"]["grappler"]["step_time_ns"]),
                     ms(r["orig"]["tfswap"]["step_time_ns"]),
                     "%.1f" % (r["orig"]["tfswap"]["step_time_ns"] / max(1.0, r["orig"]["vc"]["cost_estimate_s"] * 1e9))])
    d.table(["graph", "VirtualCluster", "tfswap, Grappler's rules", "tfswap", "ratio"], trow)
    d("Grappler's `OpLevelCostEstimator` adds an op's compute time and memory time "
      "(`compute_memory_overlap_` is false) and adds no launch overhead; tfswap takes the larger of "
      "the two and adds the profile's launch latency (5 µs) to every kernel. On the small fixtures, "
      "whose kernels take well under a microsecond at V100 rates, the launch latency is nearly the "
      "whole step; on the large models the two estimates come close. Neither includes transfer "
      "time in the comparison above (there are no transfers in unrewritten graphs); for rewritten "
      "graphs VirtualCluster's estimate is unchanged by design (a `_Send`/`_Recv` costs 1 ns).")
    d()

    # ---------------------------------------------------------------- swaps
    d("## What the rewrite does, according to the simulator")
    d()
    d("Every graph rewritten by `tfswap rewrite --strategy lms-fixed` (LMS's default thresholds), simulated on "
      "`%s` (`tfswap simulate REWRITTEN --baseline ORIGINAL --device %s --fetch %s`):" % (PROFILE, PROFILE, FETCH))
    d()
    srow = []
    for r in rows:
        b, s = r["orig"]["tfswap"], r["swap"]["tfswap"]
        host = dev(s, "/device:CPU:0")
        srow.append([r["name"], r["side"].get("batch", "?"), r["rewrite"][0].split(":", 1)[1].strip() if r["rewrite"] else "",
                     gib(gpu(b)["peak_bytes"]), gib(gpu(s)["peak_bytes"]), pct(gpu(s)["peak_bytes"], gpu(b)["peak_bytes"]),
                     gib(host["peak_bytes"]) if host else "–",
                     ms(b["step_time_ns"]), ms(s["step_time_ns"]), pct(s["step_time_ns"], b["step_time_ns"]),
                     ms(gpu(s)["swap_in_stall_ns"]),
                     gib(gpu(r["swap"]["grappler"])["peak_bytes"])])
    d.table(["graph", "batch", "swapped", "GPU peak", "rewritten", "change", "host peak", "step", "rewritten", "overhead",
             "swap-in stall", "GPU peak, Grappler's rules"], srow)
    d("The last column is what a simulator with free transfers (Grappler's) predicts for the "
      "rewritten graph. The difference is the point of modelling the link: with LMS's default "
      "thresholds every activation far from its backward use is swapped, and at V100 speed the "
      "forward pass produces them several times faster than PCIe 3.0 moves them, so they wait on "
      "the GPU in the device-to-host queue and the peak drops far less than the bytes swapped; "
      "the backward pass then waits for each swap-in. A planner has to fit the swaps to the link.")
    d()
    if scaled:
        d("ResNet-50 at 4× its generated batch (`--batch-scale 4`) on every built-in profile "
          "(`tfswap simulate resnet50.swap.pb --baseline resnet50.pb --batch-scale 4 --device NAME`):")
        d()
        rr = []
        for n, b, s in scaled:
            rr.append([n, profiles[n]["link"], gib(gpu(b)["peak_bytes"]), gib(gpu(s)["peak_bytes"]),
                       pct(gpu(s)["peak_bytes"], gpu(b)["peak_bytes"]), ms(b["step_time_ns"]), ms(s["step_time_ns"]),
                       pct(s["step_time_ns"], b["step_time_ns"])])
        d.table(["profile", "host link", "GPU peak", "rewritten", "change", "step", "rewritten", "overhead"], rr)
        d("The faster the host link relative to the GPU, the more of the swapped bytes leave the GPU "
          "before the peak and the smaller the overhead; NVLink hosts (the machines TFLMS and the "
          "out-of-core paper used) and NVLink-C2C change the picture.")
        d()
    if r50:
        d("![GPU memory over one ResNet-50 step, batch ×6, original and rewritten, on v100-16gb](%s)" % plot_rel)
        d()
        d("*ResNet-50 at 6× its generated batch on `%s`: memory allocated on the GPU over one step, "
          "original and rewritten, with the 16 GiB budget (`tfswap simulate resnet50.swap.pb "
          "--baseline resnet50.pb --device %s --fetch %s --batch-scale 6 --plot`).*" % (PROFILE, PROFILE, FETCH))
        d()
    d("The large graphs come from `testmodels/large.py` (not committed; this page includes them "
      "when they have been generated) at the batch sizes it chooses; the small ones are "
      "`testmodels/fixtures`.")
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(out).write_text(d.text())


if __name__ == "__main__":
    main()
