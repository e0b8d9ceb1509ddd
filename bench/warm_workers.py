#!/usr/bin/env python3
"""Warm workers against started ones: `cudal1 bench` on a suite with `--warm-workers off` and
`on`, side by side on one machine and one build cache.

A first run (off) fills the build cache and is reported apart (its time is the builds'). Then
the modes alternate, RUNS times each, every run with its own results directory and the same warm
cache, so that the difference between them is the workers' start. Per run: wall time, CPU
seconds of the whole machine while it ran (/proc/stat), per candidate the time from its start to
its verdict (`phases.total_s`) and its load (`phases.load_s`: starting the two workers, importing
the task and the candidate, building the models), and the statuses; across runs, whether every
task got the same status in every run.

Writes OUT/warm-workers.json and OUT/warm-workers.md. Standard library only.

  python3 bench/warm_workers.py --cudal1 build-gpu/cudal1 --suite S/suite --solutions S/solutions.jsonl \
      --device cuda --runs 1 --out OUT [--bench-arg=--time-budget --bench-arg=3]
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_cpu import machine_cpu_seconds  # noqa: E402
from serve_load import measured_commit  # noqa: E402


def quantiles(values):
    if not values:
        return None
    ordered = sorted(values)
    return {"n": len(values), "mean": round(statistics.fmean(values), 2),
            "median": round(statistics.median(values), 2),
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
            "max": round(ordered[-1], 2)}


def summarize(run_dir):
    tasks = {}
    with open(os.path.join(run_dir, "results.jsonl")) as handle:
        for text in handle:
            if not text.strip():
                continue
            line = json.loads(text)
            verdict = line.get("verdict") or {}
            phases = (verdict.get("details") or {}).get("phases") or verdict.get("phases") or {}
            key = "%s/%s" % (line.get("level_id", "?"), line.get("task_id", "?"))
            tasks[key] = {"status": verdict.get("status", "missing"),
                          "flags": sorted(verdict.get("flags") or []),
                          "load_s": phases.get("load_s"), "total_s": phases.get("total_s")}
    return tasks


def run_bench(args, label, mode, cache):
    run_dir = os.path.join(args.out, label)
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [args.cudal1, "bench", "--suite", args.suite, "--solutions", args.solutions,
               "--out", run_dir, "--device", args.device, "--cache-dir", cache, "-q",
               "--warm-workers", mode] + args.bench_arg
    print("%s: %s" % (label, " ".join(command)), flush=True)
    cpu_before, start = machine_cpu_seconds(), time.monotonic()
    with open(os.path.join(args.out, label + ".log"), "w") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
    wall, cpu = time.monotonic() - start, machine_cpu_seconds() - cpu_before
    tasks = summarize(run_dir)
    statuses = {}
    for task in tasks.values():
        statuses[task["status"]] = statuses.get(task["status"], 0) + 1
    summary = {"label": label, "warm_workers": mode, "exit_code": code, "wall_s": round(wall, 1),
               "machine_cpu_s": round(cpu, 1), "candidates": len(tasks), "statuses": statuses,
               "load_s": quantiles([t["load_s"] for t in tasks.values() if t["load_s"] is not None]),
               "total_s": quantiles([t["total_s"] for t in tasks.values() if t["total_s"] is not None])}
    print("%s: %.1f s wall, %.0f CPU-s, load %s, statuses %s" % (
        label, wall, cpu, summary["load_s"], statuses), flush=True)
    return summary, tasks


def write(args, record):
    with open(os.path.join(args.out, "warm-workers.json"), "w") as handle:
        json.dump(record, handle, indent=1)
    rows = ["| run | warm workers | wall s | machine CPU-s | load s median (p95) | start to verdict s "
            "median (p95) | statuses |", "|---|---|---|---|---|---|---|"]
    for run in record["runs"]:
        load, total = run["load_s"] or {}, run["total_s"] or {}
        rows.append("| %s | %s | %.1f | %.0f | %s (%s) | %s (%s) | %s |" % (
            run["label"], run["warm_workers"], run["wall_s"], run["machine_cpu_s"],
            load.get("median"), load.get("p95"), total.get("median"), total.get("p95"),
            ", ".join("%s %d" % item for item in sorted(run["statuses"].items()))))
    text = "\n".join([
        "# Warm workers: `cudal1 bench` with --warm-workers off and on", "",
        "Device: %s. Date: %s. Code: %s. Suite: %s (%d candidates)." % (
            record["device"], record["date"], record["code"], record["suite"],
            record["runs"][0]["candidates"] if record["runs"] else 0), "",
        "The first run fills the build cache (its time is mostly nvcc); the others share it.", ""]
        + rows + ["", "Statuses equal in every run: %s." % record["statuses_equal"]]
        + (["Tasks whose status differed: %s" % record["status_changes"]]
           if record["status_changes"] else []))
    with open(os.path.join(args.out, "warm-workers.md"), "w") as handle:
        handle.write(text + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--suite", required=True)
    parser.add_argument("--solutions", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--runs", type=int, default=1, help="runs of each mode after the first")
    parser.add_argument("--out", required=True)
    parser.add_argument("--bench-arg", action="append", default=[])
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cache = os.path.join(args.out, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    code = measured_commit() or "?"
    record = {"device": os.environ.get("CUDAL1_DEVICE_NAME", args.device),
              "date": datetime.date.today().isoformat(), "code": code, "suite": args.suite,
              "runs": [], "statuses_equal": None, "status_changes": []}
    per_run = []
    plan = [("fill-off", "off")]
    for k in range(args.runs):
        plan += [("off-%d" % (k + 1), "off"), ("on-%d" % (k + 1), "on")]
    for label, mode in plan:
        summary, tasks = run_bench(args, label, mode, cache)
        record["runs"].append(summary)
        per_run.append(tasks)
        keys = sorted(set().union(*per_run))
        changes = [{"task": key, "statuses": [r.get(key, {}).get("status") for r in per_run]}
                   for key in keys if len({r.get(key, {}).get("status") for r in per_run}) > 1]
        record["status_changes"] = changes
        record["statuses_equal"] = not changes
        write(args, record)
    print(open(os.path.join(args.out, "warm-workers.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
