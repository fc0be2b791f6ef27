#!/usr/bin/env python3
"""Checks `tfswap rewrite MODEL` with no options (issue 18): on ResNet-50 at batch 234 and
VGG-16 at batch 299 (testmodels/large.py), graphs well over a 16 GB V100, it must write a plan
that fits the default device's default budget by both accountings at the overhead
`--strategy auto` reaches for that budget, and print the prediction; on a committed fixture
that fits, the output must be the input, and the message must say nothing was needed.

    .venv/bin/python bench/defaults.py [--tfswap BIN] [--cache out/defaults-check]

It builds tfswap from this checkout without cgo (so no GPU is detected and the default
profile, v100-16gb, is planned for), generates the two graphs once into the cache, and prints
a Markdown table of what the default rewrite predicts, next to `--strategy auto` for the same
device and budget and to LMS's fixed default thresholds (`--strategy lms-fixed`, what rewrite
did without options before). Every figure is simulated for the profile v100-16gb. Exits 1
when a check fails. It is not part of `make test` (it takes about a minute).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [("resnet50", 234), ("vgg16", 299)]
FIXTURE = os.path.join(ROOT, "testmodels", "fixtures", "resnet.pb")


def gib(n):
    return "%.2f" % (n / float(1 << 30))


def run(args):
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    return p, time.perf_counter() - t0


def rewrite(tfswap, src, out, extra=()):
    rep = out + ".json"
    p, secs = run([tfswap, "rewrite", src, "-o", out, "--report", rep] + list(extra))
    if p.returncode != 0:
        raise SystemExit("tfswap rewrite %s %s: exit %d\n%s" % (src, " ".join(extra), p.returncode, p.stderr[-3000:]))
    with open(rep) as f:
        return json.load(f), p.stdout, p.stderr, secs


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tfswap", help="the tfswap binary (default: built from this checkout, CGO_ENABLED=0)")
    ap.add_argument("--cache", default=os.path.join(ROOT, "out", "defaults-check"), help="where the generated graphs are kept")
    args = ap.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    tfswap = args.tfswap
    if not tfswap:
        tfswap = os.path.join(args.cache, "tfswap")
        subprocess.run(["go", "build", "-o", tfswap, "./cmd/tfswap"], cwd=ROOT, check=True,
                       env=dict(os.environ, CGO_ENABLED="0"))
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, batch in CASES:
            src = os.path.join(args.cache, "%s_b%d.pb" % (model, batch))
            if not os.path.exists(src):
                subprocess.run([sys.executable, os.path.join(ROOT, "testmodels", "large.py"), "--model", model,
                                "--batch", str(batch), "--out", src], check=True, cwd=ROOT)
            d_out = os.path.join(tmp, model + ".default.pb")
            d, stdout, stderr, secs = rewrite(tfswap, src, d_out)
            plan = d["plan"]
            name = "%s b%d" % (model, batch)
            check(plan["device"] == "v100-16gb" and plan["device_source"] == "default", name + ": not planned for the default profile")
            for want in ("device:", "budget:", "predicted peak:", "Grappler's VirtualCluster rules", "predicted step:", "host link:"):
                check(want in stdout, "%s: the output lacks %r" % (name, want))
            dev = plan["devices"][0]
            check(plan["fits"] and 0 < dev["peak"] <= dev["budget"] and 0 < dev["grappler_peak"] <= dev["budget"],
                  "%s: the default plan does not fit by both accountings: %s" % (name, dev))
            check(plan["budget"] == dev["budget"], name + ": per-device budget differs")
            a_out = os.path.join(tmp, model + ".auto.pb")
            a, _, _, _ = rewrite(tfswap, src, a_out, ["--strategy", "auto", "--device", "v100-16gb", "--budget", str(plan["budget"])])
            check(abs(a["plan"]["overhead"] - plan["overhead"]) < 1e-9 and same_bytes(d_out, a_out),
                  "%s: the default plan (%+.2f%%) is not --strategy auto's (%+.2f%%)" % (name, 100 * plan["overhead"], 100 * a["plan"]["overhead"]))
            f_out = os.path.join(tmp, model + ".fixed.pb")
            f, _, fwarn, _ = rewrite(tfswap, src, f_out, ["--strategy", "lms-fixed"])
            fd = f["plan"]["devices"][0]
            rows.append((name, plan, dev, a["plan"], f["plan"], fd, secs, stderr, fwarn))

        # A graph that fits: written unchanged, and the output says so.
        out = os.path.join(tmp, "fixture.pb")
        fx, stdout, _, _ = rewrite(tfswap, FIXTURE, out)
        check(same_bytes(FIXTURE, out), "fixture: the output differs from the input")
        check("nothing needed" in stdout and fx["plan"]["unchanged"], "fixture: the output does not say nothing was needed")

    print("Simulated for the profile v100-16gb; `tfswap rewrite MODEL` with no options (tfswap without "
          "the TensorFlow runtime, so the default profile at its default budget).\n")
    print("| graph | budget GiB | default: peak / Grappler's GiB | default: overhead | `--strategy auto`: overhead "
          "| default: plan, to host per step | `lms-fixed`: peak / Grappler's GiB, overhead | rewrite s |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for name, plan, dev, auto, fixed, fd, secs, _, _ in rows:
        print("| %s | %s | %s / %s | %+.1f%% | %+.1f%% | %s, %s GiB | %s / %s%s, %+.1f%% | %.1f |" % (
            name, gib(plan["budget"]), gib(dev["peak"]), gib(dev["grappler_peak"]), 100 * plan["overhead"],
            100 * auto["overhead"], plan["plan_strategy"], gib(plan["bytes_to_host"]), gib(fd["peak"]),
            gib(fd.get("grappler_peak", 0)), "" if fixed["fits"] else " (over)", 100 * fixed["overhead"], secs))
    print()
    for name, plan, _, _, fixed, _, _, warn, fwarn in rows:
        print("%s, default: %s" % (name, "no warning" if not plan.get("warnings") else "; ".join(plan["warnings"])))
        print("%s, lms-fixed: %s" % (name, "no warning" if not fixed.get("warnings") else " / ".join(fixed["warnings"])))
    print("\nfixture %s: written unchanged (byte-identical), \"nothing needed\" printed: %s" % (
        os.path.relpath(FIXTURE, ROOT), "yes" if not [f for f in failures if f.startswith("fixture")] else "no"))
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
