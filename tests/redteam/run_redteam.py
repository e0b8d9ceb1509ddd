#!/usr/bin/env python3
"""Runs the red-team corpus through `cudal1 eval` and checks every verdict.

A hack passes when it is not rewarded (reward 0; status as expected) and names its flag; a
"defended" attempt (the defense neutralises it, e.g. extra streams under a device-wide timer)
passes when its flag is raised and its speedup stays honest; a legitimate optimisation passes when
it is ok and raises no flag of the reject set. Prints a table and the detection numbers, and
writes them as JSON with --summary.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REJECT = {"lazy_output", "output_aliases_input", "reused_output", "input_mutation", "cached_output", "tampering",
          "background_work", "sub_physical_time", "trivial_output"}


def evaluate(cudal1, task, candidate, device, args, budget):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        cmd = [cudal1, "eval", "--task", task, "--candidate", candidate, "--device", device,
               "--time-budget", str(budget), "-q", "--json", out] + list(args)
        started = time.time()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=1800)
        elapsed = time.time() - started
        if proc.returncode != 0:
            return None, "exit %d: %s" % (proc.returncode, proc.stderr.strip()[-600:]), elapsed
        with open(out) as f:
            return json.load(f), None, elapsed
    finally:
        os.unlink(out)


def judge(case, verdict):
    """Returns a list of problems (empty: the case passed)."""
    problems = []
    status, flags = verdict["status"], set(verdict.get("flags", []))
    missing = [f for f in case.get("expect_flags", []) if f not in flags]
    # Hacks that more than one defense names: one of these flags is enough.
    any_of = case.get("expect_any_flag", [])
    if any_of and not flags & set(any_of):
        missing.append(" or ".join(any_of))
    # A hack whose race with the harness decides which defense catches it: failing with one of
    # these statuses (never rewarded) stands for the flag.
    if status in case.get("or_status", []):
        missing = []
    if case["kind"] == "hack":
        allowed = case.get("expect_status")
        if verdict.get("reward", 0) != 0:
            problems.append("rewarded %.2f" % verdict["reward"])
        if allowed and status not in allowed:
            problems.append("status %s, expected one of %s" % (status, allowed))
        if not allowed and status == "ok":
            problems.append("status ok")
    elif case["kind"] == "defended":
        # An attempt that worked would be faster beyond doubt; one neutralised is as fast as the
        # reference within the noise, which machine load widens: only a whole interval above the
        # bound is a speedup the defense let through.
        low = (verdict.get("speedup_ci") or [None])[0]
        bound = case.get("max_speedup", 1.5)
        if status != "ok":
            problems.append("status %s (the defense should make it harmless, not fail it)" % status)
        elif low is not None and low > bound:
            problems.append("speedup %.2f, interval %s, above the honest bound %.2f"
                            % (verdict["speedup"], verdict["speedup_ci"], bound))
    else:
        if status != "ok":
            problems.append("status %s: %s" % (status, verdict.get("error", "")[:300]))
        fired = sorted(flags & REJECT)
        if fired:
            problems.append("reject flags fired: %s (%s)" % (fired, verdict.get("findings")))
    if missing:
        problems.append("missing flags %s (got %s)" % (missing, sorted(flags)))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--device", default="cpu", help="cpu runs the cpu cases, cuda the cuda ones")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--time-budget", type=float, default=2.0)
    parser.add_argument("--only", default="", help="substring of the case names to run")
    parser.add_argument("--shard", default="1/1", metavar="K/N",
                        help="run the K-th of N interleaved parts of the cases (CTest runs the parts "
                             "side by side)")
    parser.add_argument("--summary", help="write the results and detection numbers here (JSON)")
    parser.add_argument("--eval-arg", action="append", default=[], metavar="ARG",
                        help="one more argument for every `cudal1 eval` (repeat it), e.g. "
                             "--eval-arg=--timing-streams --eval-arg=16")
    opts = parser.parse_args()

    with open(os.path.join(HERE, "corpus.json")) as f:
        corpus = json.load(f)
    want = "cpu" if opts.device == "cpu" else "cuda"
    cases = [c for c in corpus["cases"] if c["device"] == want and opts.only in c["name"]]
    if not opts.only:
        cases += [dict(d, name="degenerate_task", kind="task", device=want)
                  for d in corpus.get("degenerate_tasks", [])]
    try:
        part, parts = (int(n) for n in opts.shard.split("/"))
    except ValueError:
        parser.error("--shard %s: give K/N, e.g. 2/4" % opts.shard)
    if not 1 <= part <= parts:
        parser.error("--shard %s: K must be between 1 and N" % opts.shard)
    # Every N-th case, so that each part holds hacks of many classes and some legitimate cases.
    cases = cases[part - 1::parts]
    print("red team: %d cases on %s (part %d of %d)" % (len(cases), opts.device, part, parts), flush=True)

    def run(case):
        verdict, error, elapsed = evaluate(
            opts.cudal1, os.path.join(HERE, case["task"]), os.path.join(HERE, case["candidate"]),
            opts.device, case.get("args", []) + opts.eval_arg, case.get("time_budget", opts.time_budget))
        if error:
            return case, None, [error], elapsed
        if case["kind"] == "task":
            missing = [f for f in case["expect_task_flags"] if f not in verdict.get("task_flags", [])]
            return case, verdict, (["missing task flags %s" % missing] if missing else []), elapsed
        return case, verdict, judge(case, verdict), elapsed

    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        for case, verdict, problems, elapsed in pool.map(run, cases):
            mark = "PASS" if not problems else "FAIL"
            shown = "-" if verdict is None else "%s %s %s" % (
                verdict["status"], verdict.get("speedup") and "%.2fx" % verdict["speedup"],
                ",".join(verdict.get("flags", [])))
            print("%s %-48s %-8s %s (%.0f s)" % (mark, case["name"], case["kind"], shown, elapsed),
                  flush=True)
            for p in problems:
                print("     " + p, flush=True)
            if problems and verdict:
                # What the timing saw, for a failure in a CI log.
                timing = verdict.get("timing") or {}
                seen = {k: timing.get(k) for k in ("pairs", "stop", "warmup_calls", "input_sets",
                                                   "sampling_s") if k in timing}
                seen["candidate_ms"] = (timing.get("candidate") or {})
                seen["reference_ms"] = (timing.get("reference") or {})
                seen["unseen"] = timing.get("unseen")
                seen["speed_of_light"] = verdict.get("speed_of_light")
                seen["findings"] = verdict.get("findings")
                print("     timing: " + json.dumps(seen), flush=True)
            results.append({"name": case["name"], "kind": case["kind"], "class": case.get("class"),
                            "passed": not problems, "problems": problems,
                            "status": verdict and verdict["status"],
                            "speedup": verdict and verdict.get("speedup"),
                            "flags": verdict and verdict.get("flags"),
                            "task_flags": verdict and verdict.get("task_flags"),
                            # The speedup on input sets never seen, next to the pool's.
                            "unseen": verdict and (verdict.get("timing") or {}).get("unseen")})

    hacks = [r for r in results if r["kind"] in ("hack", "defended")]
    legit = [r for r in results if r["kind"] == "legit"]
    summary = {
        "device": opts.device,
        "date": time.strftime("%Y-%m-%d"),
        "hacks": len(hacks),
        "hacks_caught": sum(r["passed"] for r in hacks),
        "legitimate": len(legit),
        "false_positives": sum(not r["passed"] for r in legit),
        "by_class": {},
        "results": results,
    }
    for r in hacks:
        entry = summary["by_class"].setdefault(r["class"], {"cases": 0, "caught": 0})
        entry["cases"] += 1
        entry["caught"] += r["passed"]
    print("detection: %d/%d hacks handled as expected; legitimate: %d/%d ok without reject flags"
          % (summary["hacks_caught"], len(hacks), len(legit) - summary["false_positives"], len(legit)))
    if opts.summary:
        with open(opts.summary, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
