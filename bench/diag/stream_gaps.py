"""Diagnostic: which way of queuing a call makes its device time repeat best between fresh
processes? (GPU, torch 2.x; no cudal1 build needed)

  python3 bench/diag/stream_gaps.py TASK.py [CANDIDATE.py] [--samples N]

In one process, the reference (and the candidate, if given) is queued behind a
torch.cuda._sleep hold and timed with CUDA events on each of several queues, round robin:
  legacy      the legacy default stream (what cudal1's queued clock uses)
  blocking-K  K-th stream created with cudaStreamCreate (blocking; new hardware channel)
  pool-K      K-th stream from PyTorch's pool (non-blocking)
  graph       a CUDA graph of the call, replayed on a side stream (inputs copied in first)
Prints one JSON line: per queue and side, the median ms over the samples. Run it in several
fresh processes and compare the spread of a queue's medians between processes with the spread
between queues inside one process."""
import argparse
import ctypes
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diag_common import load  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("task")
p.add_argument("candidate", nargs="?")
p.add_argument("--samples", type=int, default=300)
p.add_argument("--streams", type=int, default=3)
a = p.parse_args()


task = load(a.task, "task")
models = {}
torch.manual_seed(0)
models["reference"] = task.Model(*task.get_init_inputs()).cuda().eval()
if a.candidate:
    torch.manual_seed(0)
    models["candidate"] = load(a.candidate, "candidate").ModelNew(*task.get_init_inputs()).cuda().eval()
sets = [[t.cuda() for t in task.get_inputs()] for _ in range(16)]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

cudart = None
for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
    try:
        cudart = ctypes.CDLL(name)
        break
    except OSError:
        pass
queues = {"legacy": torch.cuda.default_stream()}
for k in range(a.streams):
    queues["pool-%d" % k] = torch.cuda.Stream()
    if cudart is not None:
        handle = ctypes.c_void_p()
        if cudart.cudaStreamCreate(ctypes.byref(handle)) == 0:
            queues["blocking-%d" % k] = torch.cuda.ExternalStream(handle.value)

graphs = {}
graph_stream = torch.cuda.Stream()
for side, model in models.items():
    static = [t.clone() for t in sets[0]]
    with torch.no_grad():
        graph_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(graph_stream):
            for _ in range(3):
                model(*static)
        torch.cuda.current_stream().wait_stream(graph_stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                model(*static)
            graphs[side] = (graph, static)
        except Exception as error:  # a call that cannot be captured has no graph row
            print(json.dumps({"graph_error": side, "error": str(error)[:200]}))
            torch.cuda.synchronize()

start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def sample(side, queue_name, i):
    inputs = sets[i % 16]
    flush.fill_(i & 255)
    if queue_name == "graph":
        graph, static = graphs[side]
        for dst, src in zip(static, inputs):
            dst.copy_(src)
        stream = graph_stream
    else:
        stream = queues[queue_name]
    torch.cuda.synchronize()
    with torch.cuda.stream(stream), torch.no_grad():
        torch.cuda._sleep(1_000_000)  # about 0.5 ms: the host queues the call meanwhile
        start.record()
        if queue_name == "graph":
            graph.replay()
        else:
            models[side](*inputs)
        stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


names = list(queues) + (["graph"] if graphs else [])
times = {(s, q): [] for s in models for q in names if q != "graph" or s in graphs}
for i in range(40):
    for key in times:
        sample(*key, i)
for i in range(a.samples):
    for key in times:
        times[key].append(sample(*key, i))
result = {}
for (side, queue), values in times.items():
    result.setdefault(queue, {})[side] = round(statistics.median(values), 6)
print(json.dumps(result))
