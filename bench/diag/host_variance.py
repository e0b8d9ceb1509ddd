"""Diagnostic: how much does the window-clock time of a host-bound call (thousands of small
launches) move between fresh processes, without cudal1? (GPU, torch 2.x; no cudal1 build needed)

  python3 bench/diag/host_variance.py TASK.py [--side reference|candidate CANDIDATE.py]
                                      [--trace] [--gc] [--samples N]

Times the call the way the window clock does (CUDA event, call, device-wide synchronize, CUDA
event) and prints one JSON line: median ms, quartiles, and the median host CPU time of the
calling thread per call (time.thread_time), which tells a slower host (more CPU time per call)
from a host that was taken away (wall time beyond the CPU time). --trace records CUDA activity
with torch.profiler (CUPTI) while sampling; --gc leaves Python's cyclic garbage collector on
(cudal1 turns it off for timing, as timeit does)."""
import argparse, gc, json, os, statistics, sys, time
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diag_common import load  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("task")
p.add_argument("--candidate")
p.add_argument("--trace", action="store_true")
p.add_argument("--gc", action="store_true")
p.add_argument("--samples", type=int, default=30)
p.add_argument("--warmup", type=int, default=5)
a = p.parse_args()


task = load(a.task, "task")
torch.manual_seed(0)
if a.candidate:
    model = load(a.candidate, "candidate").ModelNew(*task.get_init_inputs()).cuda()
else:
    model = task.Model(*task.get_init_inputs()).cuda()
sets = [[t.cuda() for t in task.get_inputs()] for _ in range(4)]
start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def run(n):
    wall, cpu = [], []
    for i in range(n):
        torch.cuda.synchronize()
        c0 = time.thread_time()
        start.record()
        with torch.no_grad():
            model(*sets[i % len(sets)])
        torch.cuda.synchronize()
        stop.record()
        stop.synchronize()
        cpu.append((time.thread_time() - c0) * 1e3)
        wall.append(start.elapsed_time(stop))
    return wall, cpu


run(a.warmup)
gc.collect()
if not a.gc:
    gc.disable()
if a.trace:
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]):
        wall, cpu = run(a.samples)
else:
    wall, cpu = run(a.samples)
q = statistics.quantiles(wall, n=4)
print(json.dumps({"task": a.task, "side": "candidate" if a.candidate else "reference",
                  "trace": a.trace, "gc": a.gc, "cpus": len(os.sched_getaffinity(0)),
                  "median_ms": statistics.median(wall), "p25_ms": q[0], "p75_ms": q[2],
                  "thread_cpu_ms": statistics.median(cpu)}))
