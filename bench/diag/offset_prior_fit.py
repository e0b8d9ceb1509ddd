#!/usr/bin/env python3
"""Fits the prior for a process's offset (OffsetPrior in src/include/cudal1/eval/timing.hpp) to
the timing rounds of `cudal1 bench` runs.

Every verdict timed on the queued clock with two or more rounds gives the spread of its rounds'
log speedups (K - 1 degrees of freedom) next to their sampling noise. The model of one round's
variance is floor^2 + sum over the two sides of (g * kernels^p / call_us)^2 (+ choice^2 where
`timing.rerun.per_process_choice`) + the round's own sampling variance; the script prints the
best (g, p, floor, choice) by Gaussian likelihood over a grid, and each verdict's observed
deviation next to the fitted one and the committed defaults'.

  python3 bench/diag/offset_prior_fit.py RUN1/results.jsonl RUN2/results.jsonl ...

Standard library only. Numbers of 2026-11-26: bench/results/2026-11-26-rerun-intervals.md.
"""
import json
import math
import statistics
import sys

COMMITTED = {"p": 1.0, "g": 0.08, "floor": 0.004, "choice": 0.015}


def verdicts(path):
    with open(path) as handle:
        for text in handle:
            if text.strip():
                line = json.loads(text)
                yield "%s/%s" % (line.get("level"), line.get("task_id")), line.get("verdict") or {}


def sides(verdict):
    activity = verdict["timing"].get("activity") or {}
    return [((activity.get(side) or {}).get("kernels_per_call") or 1, verdict[key] * 1e3)
            for side, key in (("reference", "reference_ms"), ("candidate", "candidate_ms"))]


def observations(paths):
    found = []
    for path in paths:
        for task, verdict in verdicts(path):
            timing = verdict.get("timing") or {}
            rounds = timing.get("rounds") or []
            if verdict.get("status") not in ("ok", "rejected") or timing.get("mode") != "queued":
                continue
            if len(rounds) < 2:
                continue
            logs = [math.log(r["speedup"]) for r in rounds]
            mean = statistics.fmean(logs)
            within = statistics.fmean(
                (math.log(r["speedup_ci"][1] / r["speedup_ci"][0]) / 3.92) ** 2 for r in rounds)
            choice = (timing.get("rerun") or {}).get("per_process_choice", False)
            found.append({"task": task, "ss": sum((y - mean) ** 2 for y in logs),
                          "df": len(logs) - 1, "sides": sides(verdict), "within": within,
                          "choice": choice})
    return found


def variance(model, o):
    tau = model["floor"] ** 2 + sum((model["g"] * n ** model["p"] / us) ** 2 for n, us in o["sides"])
    return tau + (model["choice"] ** 2 if o["choice"] else 0) + o["within"]


def neg_log_likelihood(model, found):
    return sum(o["df"] * math.log(variance(model, o)) + o["ss"] / variance(model, o) for o in found)


def main():
    found = observations(sys.argv[1:])
    if not found:
        raise SystemExit("no verdict with two or more rounds on the queued clock")
    grid = [{"p": p, "g": 0.01 * g, "floor": f, "choice": c}
            for p in (0.5, 0.75, 1.0) for g in range(1, 16)
            for f in (0.001, 0.002, 0.003, 0.004, 0.006) for c in (0.0, 0.015, 0.03)]
    best = min(grid, key=lambda m: neg_log_likelihood(m, found))
    print("%d verdicts with rounds" % len(found))
    print("best: %s (-log L %.1f); committed: %s (-log L %.1f)" % (
        best, neg_log_likelihood(best, found), COMMITTED, neg_log_likelihood(COMMITTED, found)))
    for o in sorted(found, key=lambda o: o["task"]):
        print("%-6s K=%d observed %.4f fitted %.4f committed %.4f  kernels/us %s" % (
            o["task"], o["df"] + 1, math.sqrt(o["ss"] / o["df"]), math.sqrt(variance(best, o)),
            math.sqrt(variance(COMMITTED, o)), [(n, round(us, 1)) for n, us in o["sides"]]))


if __name__ == "__main__":
    main()
