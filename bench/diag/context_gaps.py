"""Diagnostic: what moves the device time of a microsecond call from one process to the next?
(GPU, torch 2.x; no cudal1 build needed; run from the repository root.)

  python3 bench/diag/context_gaps.py SUITE_DIR SOLUTIONS.jsonl LEVEL/ID [--samples N]

Times one task of a cudal1 bench suite (its reference `Model` and the `ModelNew` in the
solutions file), pairs alternating, each call queued behind a `torch.cuda._sleep` spin and timed
with CUDA events, and prints one JSON line: the median ms of each side in this process, and the
speedup. bench/diag/context_gaps.sh runs it in fresh processes under several background loads."""
import argparse, json, os, statistics, sys
import torch

sys.path.insert(0, os.path.dirname(__file__))
from diag_common import load_suite_task, queued_call_ms  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("suite")
p.add_argument("solutions")
p.add_argument("task", help="LEVEL/ID, e.g. 1/100")
p.add_argument("--samples", type=int, default=300)
p.add_argument("--graph", action="store_true",
               help="time replays of each call captured in a CUDA graph (launch descriptors on the "
                    "device) instead of the eager call")
a = p.parse_args()
task, cand = load_suite_task(a.suite, a.solutions, a.task)
torch.manual_seed(0)
models = {"reference": task.Model(*task.get_init_inputs()).cuda(),
          "candidate": cand.ModelNew(*task.get_init_inputs()).cuda()}
sets = [[t.cuda() for t in task.get_inputs()] for _ in range(16)]
start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def once(model, i):
    return queued_call_ms(model, sets[i % 16], start, stop)


probe_x = torch.zeros(1, device="cuda")


class Probe(torch.nn.Module):
    """Four launches of a one-element kernel: a call whose time is the process's launch gaps."""
    def forward(self, *_):
        for _ in range(4):
            probe_x.add_(1.0)
        return probe_x


models["probe"] = Probe()
if a.graph:
    class Replay:
        """Replays of one call captured in a CUDA graph on input set 0."""
        def __init__(self, model):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side), torch.no_grad():
                for _ in range(3):
                    model(*sets[0])
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph), torch.no_grad():
                model(*sets[0])

        def __call__(self, *_):
            self.graph.replay()

    models = {side: Replay(m) for side, m in models.items()}
times = {side: [] for side in models}
for i in range(200 + a.samples):
    for side, model in models.items():
        t = once(model, i)
        if i >= 200:
            times[side].append(t)
med = {side: statistics.median(v) for side, v in times.items()}
print(json.dumps({"task": a.task, "graph": a.graph, "pid": os.getpid(), "cpu": os.sched_getaffinity(0).__len__(),
                  "reference_ms": med["reference"], "candidate_ms": med["candidate"],
                  "probe_ms": med["probe"], "speedup": med["reference"] / med["candidate"]}))
