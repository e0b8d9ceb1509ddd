#!/usr/bin/env python3
"""How far a legitimate candidate's speedup on unseen input sets strays from its speedup on the
timing pool (the verdict's timing.unseen.inflation; over the limit, a candidate is flagged
cached_output). Evaluates the red-team corpus's legitimate and defended cases and the examples'
candidates of one device, ROUNDS times each, JOBS at a time, and prints one JSON line per
verdict: [name, status, inflation, inflation_low, flags, first_inflation_low, seen_pairs,
first_use_pairs]. Load the machine yourself to see
the check under load (e.g. a busy loop per core).

Usage: bench/unseen_inflation.py CUDAL1 [--device cpu] [--rounds 2] [--jobs 2] [--budget 3]
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REDTEAM = os.path.join(ROOT, "tests", "redteam")


def cases(device):
    corpus = json.load(open(os.path.join(REDTEAM, "corpus.json")))
    for c in corpus["cases"]:
        if c["kind"] in ("legit", "defended") and c.get("device", "cpu") == device:
            yield (c["name"], os.path.join(REDTEAM, c["task"]), os.path.join(REDTEAM, c["candidate"]),
                   c.get("args", []))
    manifest = json.load(open(os.path.join(ROOT, "examples", "manifest.json")))
    for task in manifest["tasks"]:
        for candidate in task["candidates"]:
            if bool(candidate.get("uses_cuda")) != (device != "cpu"):
                continue
            base = os.path.join(ROOT, "examples", task["dir"])
            yield ("examples/%s/%s" % (task["dir"], candidate["file"]), os.path.join(base, "task.py"),
                   os.path.join(base, candidate["file"]), [])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cudal1")
    p.add_argument("--device", default="cpu")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--budget", type=float, default=3)
    a = p.parse_args()

    def run(case):
        name, task, candidate, args = case
        fd, out = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            subprocess.run([a.cudal1, "eval", "--task", task, "--candidate", candidate, "--device",
                            a.device, "--time-budget", str(a.budget), "-q", "--json", out] + args,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                v = json.load(f)
        except (OSError, ValueError):
            return [name, "no verdict", None, None, [], None, None, None]
        finally:
            os.unlink(out)
        u = (v.get("timing") or {}).get("unseen") or {}
        return [name, v["status"], u.get("inflation"), u.get("inflation_low"), v.get("flags", []),
                u.get("first_inflation_low"), u.get("seen_pairs"), u.get("first_use_pairs")]

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for row in pool.map(run, list(cases(a.device)) * a.rounds):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
