#!/usr/bin/env python3
"""How long a process's first CUDA call takes (its context) when N processes make theirs at once,
and what each context holds on the device: the diagnostic behind issue 32's slow worker loads.

    context_contention.py [--counts 1,4,16,32] [--device 0]

Each process imports PyTorch first (as a zygote's fork has), then all wait on one start time and
make their first CUDA call; each reports that call's wall and CPU seconds and stays until all are
done, so the device's used memory (NVML) counts N contexts. One JSON line per N on stdout.
"""

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import time


def used_mib(device):
    out = subprocess.run(["nvidia-smi", "-i", str(device), "--query-gpu=memory.used",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True)
    return float(out.stdout.strip() or 0)


def child(device, start_at, results, done):
    import torch  # before the start: a fork of the zygote has it already

    while time.time() < start_at:
        time.sleep(0.001)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    torch.zeros(1, device="cuda:%d" % device)
    torch.cuda.synchronize()
    results.put({"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0,
                 "pid": os.getpid()})
    done.wait()


def run(count, device):
    ctx = mp.get_context("spawn")
    results, done = ctx.Queue(), ctx.Event()
    before = used_mib(device)
    start_at = time.time() + 10.0 + 0.5 * count  # every child has imported PyTorch by then
    procs = [ctx.Process(target=child, args=(device, start_at, results, done)) for _ in range(count)]
    for p in procs:
        p.start()
    got = [results.get(timeout=600) for _ in range(count)]
    after = used_mib(device)
    done.set()
    for p in procs:
        p.join()
    walls = sorted(r["wall_s"] for r in got)
    cpus = sorted(r["cpu_s"] for r in got)
    return {"processes": count, "first_call_wall_s": {"median": statistics.median(walls),
                                                     "max": walls[-1], "min": walls[0]},
            "first_call_cpu_s_median": statistics.median(cpus),
            "device_mib_per_context": (after - before) / count}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="1,4,16,32")
    parser.add_argument("--device", type=int, default=0)
    opts = parser.parse_args()
    for count in (int(c) for c in opts.counts.split(",")):
        print(json.dumps(run(count, opts.device)), flush=True)


if __name__ == "__main__":
    main()
