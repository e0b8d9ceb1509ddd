#!/usr/bin/env python3
"""Ready workers against none, one candidate at a time: `cudal1 bench --jobs 1` on the first
LIMIT tasks of a suite, with one build cache: first `--ready-workers 0` to make the builds and
start the zygote (not compared), then READY (default 8) and `0` again, both with the builds made. Compared:
what follows the build in each verdict (load, correctness, timing: `phases.total_s - build_s`),
its load and timing parts, and the statuses.

    python3 bench/ready_latency.py --cudal1 build-gpu/cudal1 --suite S/suite \
        --solutions S/solutions.jsonl --limit 4 --out OUT

Writes OUT/ready-latency.json. Standard library only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reward_cost import fields, read_lines, task_key  # noqa: E402


def median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def verdicts(run_dir):
    out = {}
    for line in read_lines(run_dir):
        phases = fields(line.get("verdict") or {}).get("phases") or {}
        total, build = phases.get("total_s"), phases.get("build_s") or 0.0
        out[task_key(line)] = {
            "status": (line.get("verdict") or {}).get("status", "missing"),
            "after_build_s": None if total is None else total - build,
            "load_s": phases.get("load_s"), "timing_s": phases.get("timing_s"),
            "ready_workers": phases.get("ready_workers", 0)}
    return out


def run(args, label, ready, cache):
    run_dir = os.path.join(args.out, label)
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [args.cudal1, "bench", "--suite", args.suite, "--solutions", args.solutions,
               "--out", run_dir, "--device", args.device, "--cache-dir", cache, "-q",
               "--jobs", "1", "--limit", str(args.limit), "--time-budget", "1",
               "--ready-workers", ready]
    start = time.monotonic()
    with open(run_dir + ".log", "w") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
    tasks = verdicts(run_dir)
    summary = {"label": label, "ready_workers": ready, "exit_code": code, "wall_s": round(time.monotonic() - start, 1),
               "candidates": len(tasks),
               "after_build_s_median": median(t["after_build_s"] for t in tasks.values()),
               "load_s_median": median(t["load_s"] for t in tasks.values()),
               "timing_s_median": median(t["timing_s"] for t in tasks.values()),
               "workers_taken_ready": sum(t["ready_workers"] for t in tasks.values())}
    print(json.dumps(summary), flush=True)
    return summary, tasks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--suite", required=True)
    parser.add_argument("--solutions", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--ready", default="8", help="--ready-workers of the run with them")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cache = os.path.join(args.out, "cache")
    runs = [run(args, label, ready, cache)
            for label, ready in (("warm-up", "0"), ("ready-" + args.ready, args.ready), ("ready-0", "0"))]
    with_ready, without = runs[1][1], runs[2][1]
    same = {key: with_ready[key]["status"] == without.get(key, {}).get("status")
            for key in with_ready}
    report = {"runs": [r[0] for r in runs], "statuses_equal": same,
              "tasks": {args.ready: with_ready, "0": without}}
    with open(os.path.join(args.out, "ready-latency.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    print("statuses equal: %d of %d" % (sum(same.values()), len(same)))


if __name__ == "__main__":
    main()
