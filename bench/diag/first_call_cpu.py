#!/usr/bin/env python3
"""Where a reference worker's first call spends CPU (issue 32): every task of a suite, its model
built on the GPU in a fresh process, then its first call and a second one, each timed in the
process's CPU seconds, once plainly and once under cudal1's FLOP counter (the reference's first
call in a worker is counted: src/worker/python/flop_count.py). No cudal1 build is needed.

    bench/diag/first_call_cpu.py --suite S/suite --out FILE [--jobs 4] [--device cuda]
"""

import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import importlib.util, json, sys, time
import torch
spec = importlib.util.spec_from_file_location("task", sys.argv[1])
task = importlib.util.module_from_spec(spec)
spec.loader.exec_module(task)
mode, device = sys.argv[2], sys.argv[3]
flop = {}
exec(open(sys.argv[4]).read(), flop)
torch.set_grad_enabled(False)
c0 = time.process_time()
torch.manual_seed(0)
model = task.Model(*task.get_init_inputs()).to(device)
inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
torch.cuda.synchronize() if device != "cpu" else None
c1, w1 = time.process_time(), time.time()
if mode == "counted":
    out = flop["counted_call"](model, inputs)[0]
else:
    out = model(*inputs)
torch.cuda.synchronize() if device != "cpu" else None
c2, w2 = time.process_time(), time.time()
out = model(*inputs)
torch.cuda.synchronize() if device != "cpu" else None
c3 = time.process_time()
print(json.dumps({"setup_cpu_s": c1 - c0, "first_cpu_s": c2 - c1, "first_wall_s": w2 - w1,
                  "second_cpu_s": c3 - c2}))
"""


def one(task, mode, device, flop_count):
    begin = time.time()
    run = subprocess.run([sys.executable, "-c", CHILD, task, mode, device, flop_count],
                         capture_output=True, text=True, timeout=600)
    try:
        out = json.loads(run.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        out = {"error": (run.stderr or run.stdout)[-400:]}
    out["process_wall_s"] = round(time.time() - begin, 2)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    flop_count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "worker",
                              "python", "flop_count.py")
    tasks = sorted(glob.glob(os.path.join(args.suite, "level*", "*.py")))
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {(t, m): pool.submit(one, t, m, args.device, flop_count)
                   for t in tasks for m in ("plain", "counted")}
        for (t, m), future in futures.items():
            name = os.path.relpath(t, args.suite)[:-3]
            results.setdefault(name, {})[m] = future.result()
    for name, r in results.items():
        print("%-70s plain first %6.2f CPU-s, counted first %6.2f, second %5.2f, setup %5.2f" % (
            name[:70], r["plain"].get("first_cpu_s", -1), r["counted"].get("first_cpu_s", -1),
            r["plain"].get("second_cpu_s", -1), r["plain"].get("setup_cpu_s", -1)))
    with open(args.out, "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%d"), "device": args.device, "jobs": args.jobs,
                   "tasks": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
