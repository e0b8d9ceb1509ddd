"""Diagnostic: inside one process, does a microsecond call's device time depend on where its
memory lies (fresh allocator pools) or on the stream (hardware queue) it runs on? (GPU, torch >= 2.5;
run from the repository root.)

  python3 bench/diag/placement.py SUITE_DIR SOLUTIONS.jsonl LEVEL/ID [--pools K] [--samples N]

Prints JSON lines: the reference's and the candidate's median ms for each of K memory pools
(inputs and every allocation of the call in a fresh `torch.cuda.MemPool`) on the default stream,
then for the first pool on K side streams."""
import argparse, json, os, statistics, sys
import torch

sys.path.insert(0, os.path.dirname(__file__))
from diag_common import load_suite_task  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("suite")
p.add_argument("solutions")
p.add_argument("task")
p.add_argument("--pools", type=int, default=5)
p.add_argument("--samples", type=int, default=200)
a = p.parse_args()
task, cand = load_suite_task(a.suite, a.solutions, a.task)
torch.manual_seed(0)
start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def median_ms(model, sets, n, stream):
    out = []
    with torch.cuda.stream(stream):
        for i in range(100 + n):
            torch.cuda.synchronize()
            torch.cuda._sleep(1_000_000)
            start.record(stream)
            with torch.no_grad():
                model(*sets[i % len(sets)])
            stop.record(stream)
            stop.synchronize()
            if i >= 100:
                out.append(start.elapsed_time(stop))
    return statistics.median(out) * 1e3


pools = []
for k in range(a.pools):
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        pad = torch.empty((k + 1) << 21, dtype=torch.uint8, device="cuda")  # new segments per pool
        models = {"reference": task.Model(*task.get_init_inputs()).cuda(),
                  "candidate": cand.ModelNew(*task.get_init_inputs()).cuda()}
        sets = [[t.cuda() for t in task.get_inputs()] for _ in range(16)]
    pools.append((pool, pad, models, sets))
default = torch.cuda.current_stream()
for k, (pool, _, models, sets) in enumerate(pools):
    with torch.cuda.use_mem_pool(pool):
        r = {side: median_ms(m, sets, a.samples, default) for side, m in models.items()}
    print(json.dumps({"pid": os.getpid(), "what": f"pool{k}", **r, "speedup": r["reference"] / r["candidate"]}))
pool, _, models, sets = pools[0]
for k in range(a.pools):
    s = torch.cuda.Stream()
    with torch.cuda.use_mem_pool(pool):
        r = {side: median_ms(m, sets, a.samples, s) for side, m in models.items()}
    print(json.dumps({"pid": os.getpid(), "what": f"stream{k}", **r, "speedup": r["reference"] / r["candidate"]}))
