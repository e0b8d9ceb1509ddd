"""Diagnostic: a speedup timed with the reference and the candidate in two processes, the way
cudal1 times it, repeated over fresh pairs of processes. Does each pair carry its own offset, and
does anything done per sample remove it? (GPU, torch 2.x; no cudal1 build; repository root.)

  python3 bench/diag/two_process.py SUITE_DIR SOLUTIONS.jsonl LEVEL/ID [LEVEL/ID ...]
      [--pairs K] [--samples N]

For each task and each of K fresh process pairs, samples alternate between the two processes
(random order within a pair of samples). Every sample: a fresh copy of the next input set, an L2
flush (a fill of twice the L2 size), a synchronize, a `torch.cuda._sleep` spin the host queues
the call behind, CUDA events around the call. Conditions, interleaved in blocks of 20 samples
inside each pair so that the pair's offset is common to all of them:

  plain   as above, on the default stream;
  precall the same call, untimed, on another input set just before the flush;
  streams as above, each sample on the next of 16 streams (spin, events and call);
  burst   four samples of one side in a row, then four of the other (the first of each four is
          reported as burst_first, the others as burst_rest).

With --per-stream, first one process times the reference on each of the 16 streams.
Then K single processes holding both models time the plain condition (same_process).
Prints one JSON line per pair and a summary per task and condition: the range of the speedup
over the pairs and of each side's median."""
import json, os, random, statistics, sys

import torch
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))
from diag_common import load_suite_task, queued_call_ms, suite_tasks_parser  # noqa: E402

SETS = 16
STREAMS = 16


class Side:
    def __init__(self, suite, solutions, task_id, roles):
        task, cand = load_suite_task(suite, solutions, task_id)
        torch.manual_seed(0)
        self.models = {}
        if "reference" in roles:
            self.models["reference"] = task.Model(*task.get_init_inputs()).cuda()
        if "candidate" in roles:
            self.models["candidate"] = cand.ModelNew(*task.get_init_inputs()).cuda()
        self.sets = [[t.cuda() if torch.is_tensor(t) else t for t in task.get_inputs()]
                     for _ in range(SETS)]
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush = torch.empty(max(2 * l2, 1 << 20) // 4, dtype=torch.int32, device="cuda")
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)
        self.fill = 0
        self.streams = [torch.cuda.Stream() for _ in range(STREAMS)]

    def fresh(self, i):
        return [t.clone() if torch.is_tensor(t) else t for t in self.sets[i % SETS]]

    @torch.no_grad()
    def time(self, role, i, precall, stream=None):
        model = self.models[role]
        x = self.fresh(i)
        if precall:
            model(*self.fresh(i + 7))
        self.fill += 1
        self.flush.fill_(self.fill)
        s = None if stream is None else self.streams[stream % STREAMS]
        return queued_call_ms(model, x, self.start, self.stop, s)


def child(conn, suite, solutions, task_id, roles):
    side = Side(suite, solutions, task_id, roles)
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            return
        role, i, precall, stream = msg
        conn.send(side.time(role, i, precall, stream))


def med(values):
    return statistics.median(values) if values else float("nan")


def run_pair(ctx, a, task_id):
    conns, procs = {}, []
    for role in ("reference", "candidate"):
        parent, kid = ctx.Pipe()
        p = ctx.Process(target=child, args=(kid, a.suite, a.solutions, task_id, (role,)))
        p.start()
        procs.append(p)
        conns[role] = parent
    for c in conns.values():
        assert c.recv() == "ready"

    def call(role, i, precall=False, stream=None):
        conns[role].send((role, i, precall, stream))
        return conns[role].recv()

    rng = random.Random(0)
    for i in range(100):  # warm-up
        for role in conns:
            call(role, i)
    times = {k: {"reference": [], "candidate": []} for k in CONDITIONS}
    i = 0
    blocks = ("plain", "precall", "streams", "burst")
    for block in range(len(blocks) * a.samples // 20):
        condition = blocks[block % len(blocks)]
        for _ in range(20 if condition != "burst" else 5):
            i += 1
            if condition == "burst":
                for role in rng.sample(list(conns), 2):
                    for k in range(4):
                        times["burst_first" if k == 0 else "burst_rest"][role].append(
                            call(role, i + k))
                continue
            for role in rng.sample(list(conns), 2):
                times[condition][role].append(
                    call(role, i, condition == "precall", i if condition == "streams" else None))
    for c in conns.values():
        c.send(None)
    for p in procs:
        p.join()
    return {k: {role: med(v) * 1e3 for role, v in sides.items()} for k, sides in times.items()}


CONDITIONS = ("plain", "precall", "streams", "burst_first", "burst_rest")


def per_stream(ctx, a, task_id):
    """One process, the reference only: its median on each of the STREAMS streams."""
    parent, kid = ctx.Pipe()
    p = ctx.Process(target=child, args=(kid, a.suite, a.solutions, task_id, ("reference",)))
    p.start()
    assert parent.recv() == "ready"
    times = [[] for _ in range(STREAMS)]
    for i in range(100 + a.samples):
        for k in range(STREAMS):
            parent.send(("reference", i, False, k))
            t = parent.recv()
            if i >= 100:
                times[k].append(t)
    parent.send(None)
    p.join()
    meds = [med(v) * 1e3 for v in times]
    return {"task": task_id, "per_stream_reference_us": meds,
            "range_pct": (max(meds) - min(meds)) / med(meds) * 100}


def run_single(ctx, a, task_id):
    parent, kid = ctx.Pipe()
    p = ctx.Process(target=child, args=(kid, a.suite, a.solutions, task_id,
                                        ("reference", "candidate")))
    p.start()
    assert parent.recv() == "ready"
    times = {"reference": [], "candidate": []}
    rng = random.Random(0)
    for i in range(100 + a.samples):
        for role in rng.sample(list(times), 2):
            parent.send((role, i, False, None))
            t = parent.recv()
            if i >= 100:
                times[role].append(t)
    parent.send(None)
    p.join()
    return {"same_process": {role: med(v) * 1e3 for role, v in times.items()}}


def main():
    p = suite_tasks_parser(pairs=5)
    p.add_argument("--per-stream", action="store_true")
    a = p.parse_args()
    ctx = mp.get_context("spawn")
    summary = []
    for task_id in a.tasks:
        if a.per_stream:
            print(json.dumps(per_stream(ctx, a, task_id)), flush=True)
        rows = []
        for k in range(a.pairs):
            row = {"task": task_id, "pair": k, **run_pair(ctx, a, task_id),
                   **run_single(ctx, a, task_id)}
            for cond, sides in list(row.items()):
                if isinstance(sides, dict):
                    sides["speedup"] = sides["reference"] / sides["candidate"]
            print(json.dumps(row), flush=True)
            rows.append(row)
        for cond in CONDITIONS + ("same_process",):
            s = [r[cond]["speedup"] for r in rows]
            ref = [r[cond]["reference"] for r in rows]
            cand = [r[cond]["candidate"] for r in rows]
            line = {"task": task_id, "condition": cond,
                    "speedup_range_pct": (max(s) - min(s)) / med(s) * 100,
                    "speedup_median": med(s),
                    "reference_us": [min(ref), max(ref)], "candidate_us": [min(cand), max(cand)]}
            summary.append(line)
            print(json.dumps({"summary": line}), flush=True)


if __name__ == "__main__":
    main()
