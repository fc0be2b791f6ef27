#!/usr/bin/env python3
"""Variable offload benchmark (issue 15): the largest GPT-style decoder that trains on each
device profile with its variables and Adam state on the host, simulated.

    .venv/bin/python bench/offload.py [--profiles v100-16gb,a100-40gb] [--sizes 774m,1.5b,2.7b]
                                      [--batch 1] [--out out/offload] [--markdown]
                                      [--into FILE] [--update-docs]
    .venv/bin/python bench/offload.py --smoke --out /tmp/o    # seconds: the tiny decoder

For each profile it walks up the GPT sizes of testmodels/large.py (`--model gpt --gpt-size S`,
at --batch, 1 by default, generated once into --cache) and plans each with `tfswap rewrite --offload all
--fetch train` for the profile at its default budget, under every accounting (`all`). A size
fits when rewrite writes a plan; the walk stops at the first size that does not. For a plan
it records the simulated step time and the in-core step (the unswapped graph on the same
profile with unlimited memory: what the plan's overhead is against), the bytes over the host
link, and which of three bounds is the largest: the host link (the busier direction's bytes at
the profile's rate), the host's Adam update (28 bytes of host memory traffic per parameter:
reading the weight, gradient and both moments, writing the weight and the moments, at the
profile's host memory bandwidth), or the GPU's own compute (the in-core step). For a size that
does not fit it records rewrite's diagnosis (what is live at the lowest peak any plan reached:
the largest single layer's activations and weights stay on the GPU).

It also reports the footprint multiple of every fitting size whose simulated step is within
2x of its in-core step (>= 50% of in-core speed): the unswapped graph's simulated peak (all
variables, slots and activations on the GPU) over the GPU's memory, and (footprint_text) the
largest such multiple per profile, against the issue's goal of 12x (SwapAdvisor's best).

Every point records the commit it was planned at. With --into FILE the new points replace
those of FILE (an offload.json, docs/bench/offload.json for the BENCHMARKS.md section) with the
same profile, size and batch, and the others are kept: sizes can be re-planned one at a time.
--update-docs merges them into docs/bench/offload.json and rewrites the "Variable offload"
section of docs/BENCHMARKS.md from it (bench/report.py's update_offload_section).

Every figure is simulated for the named profile (tfswap's simulator, docs/SIMULATOR.md),
never measured. Results go to OUT/offload.json (and with --markdown a table on stdout, the
BENCHMARKS.md offload section's). It is not part of `make test` (minutes per size); --smoke
runs the tiny decoder on v100-16gb with a small budget and is tested in tests/python.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SIZES = ["124m", "350m", "774m", "1.5b", "2.7b", "6.7b", "13b"]
PROFILES = ["v100-16gb", "v100-32gb", "a100-40gb", "a100-80gb", "h100", "gh200"]
# Bytes of host memory traffic per parameter of one Adam update: read weight, gradient, m, v;
# write weight, m, v (float32).
ADAM_HOST_BYTES = 7 * 4


def git_commit():
    """The checkout's commit (12 hex digits, "+dirty" when the tree has changes), or "?"."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()[:12]
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+dirty" if dirty else "")


def graph_params(graph):
    """The parameter count the graph's sidecar (NAME.json beside it) records."""
    with open(os.path.splitext(graph)[0] + ".json") as f:
        return int(json.load(f)["parameter_count"])


def build_tfswap(dest):
    env = dict(os.environ, CGO_ENABLED="0")
    subprocess.run(["go", "build", "-o", dest, "./cmd/tfswap"], cwd=ROOT, env=env, check=True)
    return dest


def generate(size, cache, batch=1):
    if size == "tiny" and batch == 1:
        return os.path.join(ROOT, "testmodels", "fixtures", "large", "gpt-tiny.pb")  # committed
    out = os.path.join(cache, "gpt-%s.pb" % size if batch == 1 else "gpt-%s-b%d.pb" % (size, batch))
    if not os.path.exists(out):
        subprocess.run([sys.executable, os.path.join(ROOT, "testmodels", "large.py"), "--model", "gpt",
                        "--gpt-size", size, "--batch", str(batch), "--out", out], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def profile_info(tfswap, name, tmp):
    path = os.path.join(tmp, name + ".profile.json")
    subprocess.run([tfswap, "simulate", "--device", name, "--dump-profile", path], check=True,
                   capture_output=True)
    with open(path) as f:
        return json.load(f)


def rewrite(tfswap, graph, profile, tmp, extra=()):
    out = os.path.join(tmp, "out.pb")
    rep = os.path.join(tmp, "report.json")
    if os.path.exists(rep):
        os.remove(rep)
    t0 = time.perf_counter()
    p = subprocess.run([tfswap, "rewrite", graph, "-o", out, "--offload", "all", "--device", profile,
                        "--fetch", "train", "--report", rep] + list(extra), capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if p.returncode == 0:
        with open(rep) as f:
            return json.load(f), None, secs
    if p.returncode == 1:
        return None, p.stderr.strip(), secs
    raise SystemExit("tfswap rewrite %s --device %s: exit %d\n%s" % (graph, profile, p.returncode, p.stderr[-3000:]))


def point(tfswap, graph, size, profile, prof, tmp, extra=(), batch=1):
    rep, nofit, secs = rewrite(tfswap, graph, profile, tmp, extra)
    pt = summarize(rep, nofit, graph_params(graph), size, profile, prof, secs)
    pt["batch"] = batch
    if not pt["fits"]:
        pt.update(unplanned(tfswap, graph, pt["params"], prof, tmp))
    pt["commit"] = git_commit()
    return pt


def unplanned(tfswap, graph, params, prof, tmp):
    """What a size no plan fits would need, from the unswapped graph's simulation (tfswap
    simulate --fetch train): its in-core step and peak (the footprint it would have), and two
    floors of any offloaded step: every gradient crossing the link to the host once
    (grads_link_s) and the host's Adam update (host_update_s)."""
    path = os.path.join(tmp, "simulate.json")
    subprocess.run([tfswap, "simulate", graph, "--device", prof["name"], "--fetch", "train", "--json", path,
                    "--top", "1"], check=True, capture_output=True)
    with open(path) as f:
        res = json.load(f)["result"]
    link = float(prof.get("d2h_bytes_per_s") or 0)
    return {"incore_s": res["step_time_ns"] / 1e9,
            "unswapped_peak": max(d["peak_bytes"] for d in res["devices"]),
            "gpu_memory": int(prof["memory_bytes"]),
            "grads_link_s": params * 4 / link if link else 0.0,
            "host_update_s": params * ADAM_HOST_BYTES / float(prof.get("host_mem_bytes_per_s") or 50e9)}


def summarize(rep, nofit, params, size, profile, prof, secs):
    """The point of one rewrite: rep is its --report JSON (None when it found no plan, and
    nofit its diagnosis), prof the profile's JSON (tfswap simulate --dump-profile)."""
    pt = {"size": size, "params": params, "profile": profile, "plan_seconds": round(secs, 1)}
    if rep is None:
        pt["fits"] = False
        pt["diagnosis"] = nofit.splitlines()[:6]
        return pt
    plan = rep["plan"]
    link = float(prof.get("h2d_bytes_per_s") or 0)
    host_bw = float(prof.get("host_mem_bytes_per_s") or 50e9)
    link_s = max(plan["bytes_to_host"], plan["bytes_to_device"]) / link if link else 0.0
    update_s = params * ADAM_HOST_BYTES / host_bw
    incore_s = plan["unswapped_step_time_ns"] / 1e9
    bounds = {"host link": link_s, "host update": update_s, "GPU compute": incore_s}
    peak = max(d["unswapped_peak"] for d in plan["devices"])
    pt.update({
        "fits": bool(plan["fits"]),
        "step_s": plan["step_time_ns"] / 1e9,
        "incore_s": incore_s,
        "to_host": plan["bytes_to_host"],
        "to_device": plan["bytes_to_device"],
        "link_s": link_s,
        "host_update_s": update_s,
        "bound": max(bounds, key=bounds.get),
        "peak": max(d["peak"] for d in plan["devices"]),
        "budget": plan["budget"],
        "gpu_memory": int(prof["memory_bytes"]),
        "unswapped_peak": peak,
        "offloaded_groups": len(rep.get("offloaded") or []),
        "swaps": len(rep.get("swaps") or []),
    })
    return pt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--sizes", default=",".join(SIZES), help="GPT sizes to walk up, smallest first")
    ap.add_argument("--batch", type=int, default=1, help="the decoders' batch (sequences of 1024 tokens)")
    ap.add_argument("--tfswap", help="tfswap binary (default: built from this checkout without cgo)")
    ap.add_argument("--cache", default=os.path.join(ROOT, "testmodels", "large"), help="where the graphs are generated")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "offload"))
    ap.add_argument("--smoke", action="store_true", help="the tiny decoder on v100-16gb at a 2 MiB budget")
    ap.add_argument("--markdown", action="store_true", help="print the results as a Markdown table")
    ap.add_argument("--into", help="merge the new points into this offload.json (same profile, size and batch replaced)")
    ap.add_argument("--update-docs", action="store_true",
                    help="merge the new points into docs/bench/offload.json and rewrite BENCHMARKS.md's section from it")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.cache, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tfswap = args.tfswap or build_tfswap(os.path.join(tmp, "tfswap"))
        profiles = ["v100-16gb"] if args.smoke else args.profiles.split(",")
        sizes = ["tiny"] if args.smoke else args.sizes.split(",")
        extra = ["--budget", "2MiB"] if args.smoke else []
        results = []
        for profile in profiles:
            prof = profile_info(tfswap, profile, tmp)
            for size in sizes:
                graph = generate(size, args.cache, args.batch)
                pt = point(tfswap, graph, size, profile, prof, tmp, extra, args.batch)
                results.append(pt)
                print(json.dumps(pt), flush=True)
                if not pt["fits"]:
                    break
    meta = {"mode": "smoke" if args.smoke else "full", "how": "simulated for each profile (tfswap's simulator); "
            "tfswap rewrite --offload all --fetch train at the profile's default budget" + (" (--budget 2MiB)" if args.smoke else "")
            + ", batch %d" % args.batch}
    path = os.path.join(args.out, "offload.json")
    tmp_path = path + ".tmp"
    with open(tmp_path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
        f.write("\n")
    os.replace(tmp_path, path)
    if args.into:
        merge_into(args.into, results)
    if args.update_docs:
        merge_into(os.path.join(ROOT, "docs", "bench", "offload.json"), results)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import report  # bench/report.py
        report.update_offload_section(os.path.join(ROOT, "docs"))
    if args.markdown:
        print(markdown(results))
        print()
        print(footprint_text(results))
    return 0


def commit_name(r):
    """The short commit point r was planned at ("?" when it was not recorded)."""
    c = r.get("commit") or "?"
    return c.split("+")[0][:7] + ("+dirty" if c.endswith("+dirty") else "")


def point_key(r):
    """What identifies a point: its profile, GPT size and batch."""
    return (r["profile"], r["size"], r.get("batch", 1))


def merge_into(path, results):
    """Replaces the points of the offload.json at path that results re-planned (same point_key),
    keeps the others in their order and inserts new ones after the last point of their profile
    (at the end for a new profile); the file's meta is kept. Written atomically."""
    with open(path) as f:
        data = json.load(f)
    new = {point_key(r): r for r in results}
    merged = [new.pop(point_key(r), r) for r in data["results"]]
    for r in results:
        if point_key(r) not in new:
            continue
        # After the last point of its profile, so that a profile's sizes stay together.
        at = max([i + 1 for i, m in enumerate(merged) if m["profile"] == r["profile"]] or [len(merged)])
        merged.insert(at, r)
    data["results"] = merged
    tmp_path = path + ".tmp"
    with open(tmp_path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp_path, path)


GOAL = 12.0  # the footprint goal: SwapAdvisor's best multiple


def footprints(results):
    """Per profile, the fitting point with the largest footprint multiple (unswapped peak over
    the GPU's memory) among those at >= 50% of in-core speed (simulated step at most 2x the
    in-core step), or None when no point there is that fast; sorted by profile name."""
    out = {}
    for r in results:
        if not r.get("fits"):
            continue
        out.setdefault(r["profile"], None)
        if r["step_s"] > 2 * r["incore_s"]:
            continue
        best = out[r["profile"]]
        if best is None or r["unswapped_peak"] * best["gpu_memory"] > best["unswapped_peak"] * r["gpu_memory"]:
            out[r["profile"]] = r
    return sorted(out.items())


def footprint_text(results):
    """The footprint paragraph: per profile, the largest (model + activation) footprint trained
    at >= 50% of in-core speed, and whether the issue's 12x goal is reached."""
    parts, top = [], 0.0
    for profile, r in footprints(results):
        if r is None:
            parts.append("`%s` none (no fitting size within 2x of its in-core step)" % profile)
            continue
        mult = r["unswapped_peak"] / float(r["gpu_memory"])
        top = max(top, mult)
        parts.append("`%s` %.1fx (`gpt-%s` planned at %s, %.2f s against %.2f s in-core, %.0f%% of in-core speed)" % (
            profile, mult, size_name(r), commit_name(r), r["step_s"], r["incore_s"], 100 * r["incore_s"] / r["step_s"]))
    unfit = [r for r in results if not r.get("fits") and "unswapped_peak" in r]
    if unfit:
        r = max(unfit, key=lambda r: r["unswapped_peak"] / float(r["gpu_memory"]))
        parts.append("not counted: `gpt-%s` on `%s` would be %.1fx, but no plan fits it" % (
            size_name(r), r["profile"], r["unswapped_peak"] / float(r["gpu_memory"])))
    if not parts:
        return "Footprint at >= 50% of in-core speed: no fitting point."
    return ("Footprint at >= 50%% of in-core speed (the largest unswapped (model + activation) peak over "
            "the GPU's memory among the sizes whose simulated step is within 2x of the in-core step): "
            "%s. The issue's goal, %.0fx (SwapAdvisor's best), is %s." % (
                "; ".join(parts), GOAL, "reached" if top >= GOAL else "not reached"))


def size_name(r):
    """The GPT size of point r, with its batch when it is not 1."""
    b = r.get("batch", 1)
    return r["size"] if b == 1 else "%s (batch %d)" % (r["size"], b)


def markdown(results):
    rows = ["| profile | GPT size | parameters | fits | simulated step | in-core step | bound | footprint / GPU memory | planned at |",
            "| --- | --- | ---: | --- | ---: | ---: | --- | ---: | --- |"]
    for r in results:
        if r["fits"]:
            foot = r["unswapped_peak"] / float(r["gpu_memory"])
            fast = r["step_s"] <= 2 * r["incore_s"]
            rows.append("| %s | %s | %s | yes | %.2f s | %.2f s | %s (link %.2f s, update %.2f s) | %.1fx%s | %s |" % (
                r["profile"], size_name(r), format(r["params"], ","), r["step_s"], r["incore_s"], r["bound"],
                r["link_s"], r["host_update_s"], foot, "" if fast else " (below 50% speed)", commit_name(r)))
        else:
            incore = "%.2f s" % r["incore_s"] if "incore_s" in r else ""
            foot = "%.1fx (no plan)" % (r["unswapped_peak"] / float(r["gpu_memory"])) if "unswapped_peak" in r else ""
            rows.append("| %s | %s | %s | no | | %s | %s | %s | %s |" % (
                r["profile"], size_name(r), format(r["params"], ","), incore,
                " ".join(r["diagnosis"][:1]).replace("|", "/"), foot, commit_name(r)))
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
