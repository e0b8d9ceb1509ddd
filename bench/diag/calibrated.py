"""Diagnostic: can the offset each worker process carries be measured before the candidate's code
is loaded, and taken out of its speedup? (GPU, torch 2.x; no cudal1 build; repository root.)

  python3 bench/diag/calibrated.py SUITE_DIR SOLUTIONS.jsonl LEVEL/ID [...] [--pairs K]

Per fresh pair of processes R (reference) and C (candidate), both holding the reference model:
  phase A: R's and C's reference calls alternate (the same trusted code in both processes):
           c = median(C) / median(R);
  then C builds the candidate model;
  phase B: R's reference and C's candidate alternate (cudal1's protocol): raw = R / C;
           corrected = raw * c; also C's reference again (check: how much c moved).
Per task: the range over the pairs of raw and corrected, and of C's reference in the two phases.
Sampling as in two_process.py (fresh input copy, L2 flush, queued behind a spin, CUDA events)."""
import json, os, random, statistics, sys

import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))
from diag_common import suite_tasks_parser  # noqa: E402
from two_process import Side  # noqa: E402


def child(conn, suite, solutions, task_id):
    side = Side(suite, solutions, task_id, ("reference",))
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if msg == "load":
            fresh = Side(suite, solutions, task_id, ("candidate",))
            side.models["candidate"] = fresh.models["candidate"]
            conn.send("loaded")
            continue
        role, i = msg
        conn.send(side.time(role, i, False))


def med(v):
    return statistics.median(v)


def run_pair(ctx, a, task_id):
    conns, procs = [], []
    for _ in range(2):
        parent, kid = ctx.Pipe()
        p = ctx.Process(target=child, args=(kid, a.suite, a.solutions, task_id))
        p.start()
        procs.append(p)
        conns.append(parent)
    for c in conns:
        assert c.recv() == "ready"
    R, C = conns
    rng = random.Random(0)

    def alternate(pairs, n, warm):
        out = [[] for _ in pairs]
        for i in range(warm + n):
            for k in rng.sample(range(len(pairs)), len(pairs)):
                conn, role = pairs[k]
                conn.send((role, i))
                t = conn.recv()
                if i >= warm:
                    out[k].append(t)
        return [med(v) * 1e3 for v in out]

    ra, ca = alternate([(R, "reference"), (C, "reference")], a.calibration, 50)
    C.send("load")
    assert C.recv() == "loaded"
    rb, cb, cref = alternate([(R, "reference"), (C, "candidate"), (C, "reference")], a.samples, 100)
    for c in conns:
        c.send(None)
    for p in procs:
        p.join()
    calib = ca / ra
    raw = rb / cb
    return {"task": task_id, "ref_A_in_R": ra, "ref_A_in_C": ca, "ref_B_in_R": rb,
            "cand_B_in_C": cb, "ref_B_in_C": cref, "calibration": calib, "raw": raw,
            "corrected": raw * calib, "same_process_B": cref / cb,
            "calibration_moved": (cref / rb) / calib}


def main():
    p = suite_tasks_parser(pairs=6)
    p.add_argument("--calibration", type=int, default=150)
    a = p.parse_args()
    ctx = mp.get_context("spawn")
    for task_id in a.tasks:
        rows = []
        for k in range(a.pairs):
            row = run_pair(ctx, a, task_id)
            print(json.dumps(row), flush=True)
            rows.append(row)
        summary = {"task": task_id}
        for key in ("raw", "corrected", "same_process_B", "calibration", "calibration_moved"):
            v = [r[key] for r in rows]
            summary[key] = {"median": med(v), "range_pct": (max(v) - min(v)) / med(v) * 100}
        print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
