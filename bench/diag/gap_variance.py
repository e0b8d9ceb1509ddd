"""Diagnostic: does the device time of a call queued behind a spin kernel move between fresh
processes, and does CUPTI tracing change that? (GPU, torch 2.x; no cudal1 build needed)

  python3 bench/diag/gap_variance.py TASK.py [--trace] [--samples N]

Prints one line: median ms of the queued call (CUDA events after a torch.cuda._sleep hold), with
--trace while torch.profiler records CUDA activity (CUPTI)."""
import argparse, os, statistics, sys
import torch

sys.path.insert(0, os.path.dirname(__file__))
from diag_common import load, queued_call_ms  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("task")
p.add_argument("--trace", action="store_true")
p.add_argument("--samples", type=int, default=300)
a = p.parse_args()
task = load(a.task, "task")
torch.manual_seed(0)
model = task.Model(*task.get_init_inputs()).cuda()
sets = [[t.cuda() for t in task.get_inputs()] for _ in range(16)]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def run(n):
    out = []
    for i in range(n):
        flush.fill_(i & 255)
        out.append(queued_call_ms(model, sets[i % 16], start, stop))
    return out


run(200)
if a.trace:
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        times = run(a.samples)
else:
    times = run(a.samples)
q = statistics.quantiles(times, n=4)
print("%s median_ms %.5f  p25 %.5f p75 %.5f" % ("trace" if a.trace else "plain", statistics.median(times), q[0], q[2]))
