#!/usr/bin/env python3
"""Where a candidate's 'kernels outside its timed calls' come from (background_work on legitimate
kernels in later timing rounds). Runs JOBS evaluations of one candidate at once, REPEATS times,
and prints every activity summary of every verdict: outside counts, how many of them started
inside a window and ended after it, the largest overshoot, and examples.

    bench/diag/outside_windows.py --cudal1 build-gpu/cudal1 --task T --candidate C --jobs 8 --repeats 2 --out DIR
"""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def activities(node, path=""):
    if isinstance(node, dict):
        if "kernels_outside_windows" in node:
            yield path, node
        for k, v in node.items():
            yield from activities(v, path + "/" + str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from activities(v, path + "/" + str(i))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cudal1", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", required=True)
    p.add_argument("--eval-arg", action="append", default=[])
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)

    def one(i):
        path = os.path.join(a.out, "verdict-%02d.json" % i)
        subprocess.run([a.cudal1, "eval", "--task", a.task, "--candidate", a.candidate, "--device", "cuda",
                        "--json", path, "-q"] + a.eval_arg, capture_output=True, text=True)
        return path

    paths = []
    for r in range(a.repeats):
        with ThreadPoolExecutor(a.jobs) as pool:
            paths += list(pool.map(one, range(r * a.jobs, (r + 1) * a.jobs)))
    flagged = 0
    for path in paths:
        if not os.path.exists(path):
            print(path, "no verdict")
            continue
        v = json.load(open(path))
        flags = v.get("flags", [])
        flagged += "background_work" in flags
        print("%s %s %s %s" % (os.path.basename(path), v.get("status"), v.get("speedup"), flags))
        for where, act in activities(v):
            print("   %-60s outside %3d (+%d copies) at_end %3d overshoot %6d ns  %s" % (
                where[-60:], act.get("kernels_outside_windows", 0), act.get("copies_outside_windows", 0),
                act.get("outside_at_window_end", 0), act.get("outside_overshoot_ns", 0),
                json.dumps(act.get("outside_examples", []))[:160]))
    print("background_work in %d of %d verdicts" % (flagged, len(paths)))


if __name__ == "__main__":
    sys.exit(main())
