#!/usr/bin/env python3
"""Planning at scale (issue 14 item 1): tfswap's growth curve on synthetic training graphs.

    .venv/bin/python bench/scale.py [--sizes 10000,30000,100000,300000,1000000] [--report]
    .venv/bin/python bench/run.py --scale [--report]      # the same

For each size it generates a synthetic training graph (testmodels/synth: residual blocks of
Conv2D, Relu and AddV2 with their backward half, 512 KiB float32 activations, deterministic)
and times four tfswap commands on it, each alone on one core (`taskset -c CPU`, GOMAXPROCS=1)
under `/usr/bin/time -v` (wall time and peak resident memory):

* inspect:   `tfswap inspect G`
* simulate:  `tfswap simulate G --device v100-16gb --fetch train`
* rewrite:   `tfswap rewrite G --strategy lms-fixed -o OUT` (the LMS rewrite by fixed
  thresholds: no planning, the graph surgery and the prediction)
* plan:      `tfswap rewrite G --device v100-16gb --budget B -o OUT` (auto, the default
  strategy) with B half the unswapped simulated peak, the graph's tensors needing swapping or
  recomputation to fit. Only up to --plan-max nodes.

The machine may be shared: the figure reported is the CPU time (user and system) of the one
core, with the wall time kept in the results. A run that takes longer than --timeout seconds (wall), or a planning run that takes more than
--plan-cpu-limit seconds of CPU time, is stopped and recorded as such. The results go
to docs/bench/scale.json (the measurements, the machine and the commit) and, with --report, to
the "Planning at scale" section of docs/BENCHMARKS.md (bench/report.py writes the same section
when it regenerates the file), followed by the notes of the results' "meta" (kept by --merge).
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
SIZES = [10000, 30000, 100000, 300000, 1000000]
COMMANDS = ["inspect", "simulate", "rewrite", "plan"]
DEVICE = "v100-16gb"


def build(out):
    env = dict(os.environ, CGO_ENABLED="0")
    tf = os.path.join(out, "tfswap")
    syn = os.path.join(out, "tfswap-synth")
    subprocess.run(["go", "build", "-o", tf, "./cmd/tfswap"], cwd=ROOT, check=True, env=env)
    subprocess.run(["go", "build", "-o", syn, "./testmodels/synth/cmd/tfswap-synth"], cwd=ROOT,
                   check=True, env=env)
    return tf, syn


def timed(cmd, cpu, timeout, cpu_limit=None):
    """Runs cmd on one core under /usr/bin/time -v; returns wall seconds, CPU seconds, peak
    RSS bytes, exit status (None on timeout) and the output. With cpu_limit, the command is
    stopped (RLIMIT_CPU) after that many seconds of CPU time."""
    env = dict(os.environ, GOMAXPROCS="1")
    full = ["taskset", "-c", str(cpu), "/usr/bin/time", "-v"] + cmd

    def limit():
        if cpu_limit:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 10))
    try:
        p = subprocess.run(full, capture_output=True, text=True, timeout=timeout, env=env,
                           preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "rss": None, "status": None, "timeout": timeout}, ""
    if cpu_limit and "Command terminated by signal" in p.stderr:
        return {"seconds": None, "rss": None, "status": None, "cpu_limit": cpu_limit}, ""
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", p.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    user = re.search(r"User time \(seconds\): ([\d.]+)", p.stderr)
    system = re.search(r"System time \(seconds\): ([\d.]+)", p.stderr)
    cpu = float(user.group(1)) + float(system.group(1)) if user and system else None
    secs = None
    if wall:
        parts = [float(x) for x in wall.group(1).split(":")]
        secs = sum(x * 60 ** i for i, x in enumerate(reversed(parts)))
    out = {"seconds": round(secs, 2) if secs is not None else None,
           "cpu_seconds": round(cpu, 2) if cpu is not None else None,
           "rss": int(rss.group(1)) * 1024 if rss else None, "status": p.returncode}
    if p.returncode != 0:
        out["error"] = p.stderr.strip().splitlines()[-30:-23] if p.stderr else []
    return out, p.stdout


def peak_of(tf, graph):
    p = subprocess.run([tf, "simulate", graph, "--device", DEVICE, "--fetch", "train", "--top",
                        "0", "--json", "-"], capture_output=True, text=True, check=True)
    data, _ = json.JSONDecoder().raw_decode(p.stdout)
    gpu = next(d for d in data["result"]["devices"] if d["gpu"])
    return gpu["peak_bytes"]


def git_commit():
    p = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return p.stdout.strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                    help="comma-separated node counts")
    ap.add_argument("--plan-max", type=int, default=100000,
                    help="largest graph planned with --budget (default 100000)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated: " +
                    ", ".join(COMMANDS))
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run (default 600)")
    ap.add_argument("--cpu", type=int, default=1, help="the core the runs are pinned to")
    ap.add_argument("--plan-cpu-limit", type=int, default=900,
                    help="CPU seconds after which a planning run is stopped (default 900)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "scale"))
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "bench", "scale.json"))
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of the results file for sizes and commands not run")
    ap.add_argument("--report", action="store_true",
                    help="then write the scale section of docs/BENCHMARKS.md")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    commands = [c for c in args.commands.split(",") if c]
    os.makedirs(args.out, exist_ok=True)
    tf, syn = build(args.out)
    rows = []
    for n in sizes:
        graph = os.path.join(args.out, "synth%d.pb" % n)
        if not os.path.exists(graph):
            subprocess.run([syn, "-nodes", str(n), "-out", graph], check=True)
        row = {"nodes_asked": n, "graph_bytes": os.path.getsize(graph)}
        peak = peak_of(tf, graph) if "plan" in commands else None
        row["peak"] = peak
        with tempfile.TemporaryDirectory(dir=args.out) as tmp:
            out = os.path.join(tmp, "out.pb")
            for c in commands:
                if c == "plan" and n > args.plan_max:
                    continue
                cmd = {
                    "inspect": [tf, "inspect", graph],
                    "simulate": [tf, "simulate", graph, "--device", DEVICE, "--fetch", "train"],
                    "rewrite": [tf, "rewrite", graph, "--strategy", "lms-fixed", "-o", out],
                    "plan": [tf, "rewrite", graph, "--device", DEVICE, "--budget",
                             str(peak // 2) if peak else "0", "-o", out],
                }[c]
                r, stdout = timed(cmd, args.cpu, args.timeout,
                                  args.plan_cpu_limit if c == "plan" else None)
                if c == "inspect":
                    m = re.search(r"nodes: (\d+)", stdout)
                    if m:
                        row["nodes"] = int(m.group(1))
                if c == "plan" and peak:
                    r["budget"] = peak // 2
                if c == "plan":
                    m = re.search(r"effort bounded: .*", stdout)
                    if m:
                        r["effort"] = m.group(0).strip()
                row[c] = r
                if os.path.exists(out):
                    os.remove(out)
                print("%8d %-8s %s" % (n, c, json.dumps(r)), flush=True)
        rows.append(row)
    data = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
                     "commit": git_commit(), "machine": platform.machine(),
                     "cpu": cpu_name(), "device": DEVICE, "timeout": args.timeout,
                     "how": "measured on CPU: each command on one core (taskset, GOMAXPROCS=1), "
                            "/usr/bin/time -v's user and system time and maximum resident "
                            "set size"},
            "rows": rows}
    if args.merge and os.path.exists(args.results):
        with open(args.results) as f:
            prev = json.load(f)
        old = {r["nodes_asked"]: r for r in prev["rows"]}
        if prev["meta"].get("notes"):
            data["meta"]["notes"] = prev["meta"]["notes"]
        for r in rows:
            prev = old.get(r["nodes_asked"], {})
            old[r["nodes_asked"]] = dict(prev, **r)
        data["rows"] = [old[k] for k in sorted(old)]
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    tmp = args.results + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.results)
    print("wrote", args.results)
    if args.report:
        import report
        report.update_scale_section(os.path.join(ROOT, "docs"), args.results)
    return 0


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
