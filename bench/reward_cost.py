#!/usr/bin/env python3
"""GPU-seconds per reward: `cudal1 bench` on a suite, run N times from scratch (each run with an
empty build cache and its own results directory), and what the device was held for.

For every verdict that took the device, `phases.device_held` is [from, to] in Unix seconds: the
time the evaluation held the device's lock (correctness trials, timing, the checks between).
This script reports, per run:
  - wall time of the whole bench (nvcc builds included) and the statuses;
  - GPU-held seconds per candidate (mean, median, max) over the candidates that took the device;
  - where the held time went: correctness trials, timing (and its parts: input pools, warm-up,
    sampling, spot checks, the kernel trace), the rest;
and, over two or more runs, the speedup spread between runs on the tasks ok in all of them
(|a/b - 1| per task, median and max), the status changes between runs and the tasks whose
timing stopped at the budget (flag `noisy`).

Writes OUT/reward-cost.json and OUT/reward-cost.md (updated after each run: a run cut short still
leaves what it measured). Standard library only.

  python3 bench/reward_cost.py --cudal1 build-gpu/cudal1 --suite S/suite --solutions S/solutions.jsonl \
      --runs 2 --out OUT [--bench-arg=--time-budget --bench-arg=3]
  python3 bench/reward_cost.py --analyze RUN_DIR [RUN_DIR ...] --out OUT   # results already there
      [--wall-s SECONDS ...]                                                 # their wall times
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def read_lines(run_dir):
    """A run's result lines: RUN_DIR/results.jsonl, or a results file itself."""
    path = run_dir if run_dir.endswith(".jsonl") else os.path.join(run_dir, "results.jsonl")
    lines = []
    with open(path) as handle:
        for text in handle:
            text = text.strip()
            if text:
                lines.append(json.loads(text))
    return lines


def task_key(line):
    return "%s/%s" % (line.get("level_id", line.get("level", "?")), line.get("task_id", "?"))


def quantiles(values):
    if not values:
        return None
    ordered = sorted(values)
    return {"n": len(values), "mean": round(statistics.fmean(values), 3),
            "median": round(statistics.median(values), 3), "max": round(ordered[-1], 3),
            "sum": round(sum(values), 2)}


def fields(verdict):
    """A verdict's details: at its top level in cudal1's JSON, under "details" in older lines."""
    merged = dict(verdict.get("details") or {})
    merged.update(verdict)
    return merged


def spans(verdict, key):
    """The [from, to] holds a phase recorded: one pair, or a list of pairs (the shared holds
    since they are taken per trial)."""
    value = fields(verdict).get("phases", {}).get(key)
    if not isinstance(value, list) or not value:
        return []
    if all(isinstance(x, (int, float)) for x in value):
        return [value] if len(value) == 2 else []
    return [pair for pair in value if isinstance(pair, list) and len(pair) == 2]


def span(verdict, key="device_held"):
    """[from, to] of the timing hold, or None."""
    found = spans(verdict, key)
    return found[0] if found else None


def occupancy(spans):
    """Seconds during which at least one of the spans was open (their union)."""
    total, end = 0.0, None
    for start, stop in sorted(spans):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def timing_parts(details):
    """Seconds of the timing phase by part, from the timing details of one or several rounds."""
    timing = details.get("timing") or {}
    rounds = timing.get("rounds") if isinstance(timing.get("rounds"), list) else [timing]
    parts = {"warmup_s": 0.0, "sampling_s": 0.0, "spot_check_s": 0.0, "activity_s": 0.0,
             "elapsed_s": 0.0}
    for one in rounds:
        for key in parts:
            value = one.get(key)
            if isinstance(value, (int, float)):
                parts[key] += value
    # What elapsed besides warm-up, sampling and the trace: mostly the input pools.
    parts["pools_and_rest_s"] = max(0.0, parts["elapsed_s"] - parts["warmup_s"] -
                                    parts["sampling_s"] - parts["activity_s"])
    return parts


def sample_parts(details):
    """Per sample, both sides averaged (ms), from the timing details of one round: where the
    worker's time goes (`timing.sample_steps_ms`), the round trip beyond it (`request_ms`), the
    whole overhead besides the call (`overhead_ms`); and the pairs taken."""
    timing = details.get("timing") or {}
    if isinstance(timing.get("rounds"), list):
        return {}
    parts = {}
    steps = timing.get("sample_steps_ms") or {}
    sides = [steps.get(side) or {} for side in ("reference", "candidate")]
    for step in sorted(set(sides[0]) & set(sides[1])):
        parts[step + "_ms"] = (sides[0][step] + sides[1][step]) / 2
    for key in ("request_ms", "overhead_ms"):
        value = timing.get(key) or {}
        if "reference" in value and "candidate" in value:
            parts[key] = (value["reference"] + value["candidate"]) / 2
    if isinstance(timing.get("pairs"), (int, float)):
        parts["pairs"] = timing["pairs"]
    return parts


def timing_rules(task, timing_details, flags, into):
    """What the timing's own rules did for one verdict, added to `into` (lists by rule): a round
    that missed the queued clock's hold left out, an outlying round left out, a retried probe,
    the trace's lateness taken off (largest, any side or round), records left where the trace was
    suspended, background_work."""
    rerun = timing_details.get("rerun") or {}
    if rerun.get("missed_hold_left_out"):
        # c659d5e wrote the record of one round as its [key, value] pairs, one list item each.
        left_out = rerun["missed_hold_left_out"]
        if left_out and all(isinstance(m, list) and len(m) == 2 for m in left_out):
            left_out = [dict(left_out)]
        into["missed_hold_left_out"].append([task, [m.get("round") for m in left_out]])
    if rerun.get("round_left_out"):
        into["round_left_out"].append([task, rerun["round_left_out"].get("round")])
    if timing_details.get("missed_hold"):
        into["missed_hold"].append(task)
    if timing_details.get("queued_probe_retried"):
        into["queued_probe_retried"].append(task)
    shifts = [((timing_details.get("activity") or {}).get(side) or {}).get("trace_shift")
              for side in ("reference", "candidate")]
    for r in timing_details.get("rounds") or []:
        shifts += [((r.get("outside") or {}).get(side) or {}).get("trace_shift")
                   for side in ("reference", "candidate")]
    largest = max((x.get("max_ns", 0) for x in shifts if isinstance(x, dict)), default=0)
    if largest:
        into["trace_shift_max_ns"].append([task, largest])
    # Records left behind where the trace was suspended (summed over sides and rounds).
    untraced = sum(((r.get("outside") or {}).get(side) or {}).get("untraced_window_records", 0)
                   for r in timing_details.get("rounds") or [] for side in ("reference", "candidate"))
    if untraced:
        into["untraced_window_records"].append([task, untraced])
    if "background_work" in flags:
        into["background_work"].append(task)


def summarize_run(run_dir, wall_s=None):
    lines = read_lines(run_dir)
    statuses = {}
    held, correctness, timing, other, shared = [], [], [], [], []
    calibration_held = []  # every calibration's exclusive hold, timed candidate or not
    device_spans = []  # every span that used the device, alone or shared
    used = 0  # candidates that used the device at all
    per_part = {}
    per_sample = {}
    window_clock = []  # tasks timed on the window clock, and why
    rules = {key: [] for key in ("missed_hold", "missed_hold_left_out", "round_left_out",
                                 "queued_probe_retried", "trace_shift_max_ns",
                                 "untraced_window_records", "background_work")}
    per_task = {}
    for line in lines:
        verdict = line.get("verdict") or {}
        status = verdict.get("status", "missing")
        statuses[status] = statuses.get(status, 0) + 1
        details = fields(verdict)
        phases = details.get("phases", {})
        # The timing's exclusive holds: one, or one per batch of timing rounds (the device is
        # given back while their workers load).
        held_spans, together = spans(verdict, "device_held"), spans(verdict, "device_shared")
        alone = [held_spans[0][0], held_spans[0][0] + sum(b - a for a, b in held_spans)] \
            if held_spans else None
        # The calibration's exclusive hold (before the candidate loaded) counts as held too.
        calibration = span(verdict, "device_held_calibration")
        calibration_s = calibration[1] - calibration[0] if calibration else 0.0
        if calibration:
            device_spans.append(calibration)
            calibration_held.append(calibration_s)
        seconds = alone[1] - alone[0] + calibration_s if alone else None
        correctness_s = phases.get("correctness_s", 0.0) or 0.0
        timing_s = phases.get("timing_s", 0.0) or 0.0
        timing_details = details.get("timing") or {}
        rerun = timing_details.get("rerun") or {}
        timing_rules(task_key(line), timing_details, verdict.get("flags", []), rules)
        per_task[task_key(line)] = {
            "status": status, "speedup": verdict.get("speedup"),
            "speedup_ci": verdict.get("speedup_ci"), "reward": verdict.get("reward"),
            "sampling_ci": timing_details.get("sampling_ci"),
            "rounds": len(timing_details.get("rounds") or []) or (1 if timing_s_of(details) else 0),
            "round_speedups": [r.get("speedup") for r in timing_details.get("rounds") or []],
            "rerun": rerun or None,
            "candidate_ms": verdict.get("candidate_ms"), "reference_ms": verdict.get("reference_ms"),
            "mode": timing_details.get("mode"),
            "flags": verdict.get("flags", []), "held_s": seconds,
            "correctness_s": phases.get("correctness_s"), "timing_s": phases.get("timing_s"),
            "build_s": phases.get("build_s"), "load_s": phases.get("load_s"),
            "longest_shared_hold_s": max((b - a for a, b in together), default=None)}
        used += bool(alone or together or calibration)
        if together:
            shared.append(sum(b - a for a, b in together))
            device_spans.extend(together)
            correctness.append(correctness_s)
        if seconds is None:
            continue
        device_spans.extend(held_spans)
        held.append(seconds)
        timing.append(timing_s)
        # Older verdicts held the device alone for their trials too.
        inside = timing_s if together else timing_s + correctness_s
        if not together:
            correctness.append(correctness_s)
        other.append(max(0.0, seconds - calibration_s - inside))
        if timing_s:
            for key, value in timing_parts(details).items():
                per_part.setdefault(key, []).append(value)
            for key, value in sample_parts(details).items():
                per_sample.setdefault(key, []).append(value)
            timing_details = details.get("timing") or {}
            if timing_details.get("mode") == "window":
                window_clock.append([task_key(line), timing_details.get("mode_reason", "")])
    occupied = occupancy(device_spans)
    summary = {
        "dir": run_dir,
        "tasks": len(lines),
        "statuses": dict(sorted(statuses.items())),
        "wall_s": wall_s,
        "held_s": quantiles(held),
        "correctness_s": quantiles(correctness),
        "timing_s": quantiles(timing),
        "other_held_s": quantiles(other),
        # Exclusive holds of the calibrations (included in held_s for the timed candidates).
        "calibration_held_s": quantiles(calibration_held),
        "calibration_held_total_s": round(sum(calibration_held), 2),
        # Correctness trials under the shared hold (several evaluations' at once).
        "shared_s": quantiles(shared),
        # The union of every hold, alone or shared, over the candidates that used the device:
        # the device's occupied time per candidate, whatever overlapped.
        "occupied_s": round(occupied, 2),
        "occupied_per_candidate_s": round(occupied / max(1, used), 3),
        "timing_parts": {k: quantiles(v) for k, v in sorted(per_part.items())},
        # Per sample (ms, both sides averaged; pairs per candidate), over the timed candidates.
        "sample_parts": {k: quantiles(v) for k, v in sorted(per_sample.items())},
        "window_clock": window_clock,
        # What the timing's own rules did (timing_rules).
        "rules": rules,
        # Timing rounds per timed candidate (--timing-rounds auto takes more where a rerun's
        # interval is wide).
        "rounds": {str(n): sum(1 for e in per_task.values() if e["rounds"] == n)
                   for n in sorted({e["rounds"] for e in per_task.values() if e["rounds"]})},
        "noisy": sorted(k for k, e in per_task.items() if "noisy" in e["flags"]),
        # A long shared hold keeps every waiting timing phase behind it.
        "longest_shared_holds": sorted(
            ([k, round(e["longest_shared_hold_s"], 2)] for k, e in per_task.items()
             if e["longest_shared_hold_s"]), key=lambda pair: -pair[1])[:5],
    }
    return summary, per_task


def timing_s_of(details):
    return (details.get("phases") or {}).get("timing_s")


def coverage(tasks_a, tasks_b):
    """How often one run's interval holds the other run's speedup, both ways, over the tasks ok
    in both (issue 29's calibration of the intervals)."""
    checks, misses = 0, []
    for key in sorted(set(tasks_a) & set(tasks_b)):
        a, b = tasks_a[key], tasks_b[key]
        if a["status"] != "ok" or b["status"] != "ok":
            continue
        for mine, other, which in ((a, b, "a"), (b, a, "b")):
            ci = mine.get("speedup_ci")
            if not ci or ci[0] is None or ci[1] is None or not other.get("speedup"):
                continue
            checks += 1
            if not ci[0] <= other["speedup"] <= ci[1]:
                misses.append({"task": key, "interval_of": which, "ci": ci,
                               "other_speedup": other["speedup"]})
    widths = [(t["speedup_ci"][1] - t["speedup_ci"][0]) / (2 * t["speedup"])
              for tasks in (tasks_a, tasks_b) for t in tasks.values()
              if t["status"] == "ok" and t.get("speedup_ci") and t["speedup_ci"][0] is not None
              and t.get("speedup")]
    return {"checks": checks, "held": checks - len(misses),
            "pct": round(100.0 * (checks - len(misses)) / checks, 1) if checks else None,
            "misses": misses,
            "half_width_pct": {"median": round(100 * statistics.median(widths), 2),
                               "max": round(100 * max(widths), 2)} if widths else None}


def spread(tasks_a, tasks_b):
    rows = []
    changed = []
    for key in sorted(set(tasks_a) & set(tasks_b)):
        a, b = tasks_a[key], tasks_b[key]
        if a["status"] != b["status"]:
            changed.append({"task": key, "a": a["status"], "b": b["status"]})
        if a["status"] == "ok" and b["status"] == "ok" and a["speedup"] and b["speedup"]:
            rows.append({"task": key, "a": a["speedup"], "b": b["speedup"],
                         "spread": abs(a["speedup"] / b["speedup"] - 1)})
    values = [r["spread"] for r in rows]
    return {
        "ok_in_both": len(rows),
        "median_pct": round(100 * statistics.median(values), 3) if values else None,
        "max_pct": round(100 * max(values), 3) if values else None,
        "worst": sorted(rows, key=lambda r: -r["spread"])[:5],
        "status_changes": changed,
        "coverage": coverage(tasks_a, tasks_b),
    }


def fmt(q, key="mean"):
    return "-" if not q else "%.2f" % q[key]


def write_report(out, record):
    with open(os.path.join(out, "reward-cost.json"), "w") as handle:
        json.dump(record, handle, indent=1)
    rows = ["# GPU-seconds per reward (%s)" % record.get("label", ""), "",
            "Device: %s. Date: %s. Command: `%s`." % (record.get("device", "?"),
                                                     record.get("date"), record.get("command", "")),
            "",
            "Held: the exclusive hold (`phases.device_held`: timing, and before the change the "
            "correctness trials too). Shared: the trials' shared hold (`phases.device_shared`), "
            "which several evaluations take at once. Occupied: the union of all holds over the "
            "run, per candidate that used the device.",
            "",
            "| run | wall s | held: n | mean | median | max | correctness mean | timing mean | "
            "other held mean | shared: n | mean | occupied per candidate | statuses |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, run in enumerate(record["runs"]):
        held = run["held_s"]
        shared = run.get("shared_s")
        rows.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            i + 1, run["wall_s"] if run["wall_s"] is not None else "-",
            held["n"] if held else 0, fmt(held), fmt(held, "median"), fmt(held, "max"),
            fmt(run["correctness_s"]), fmt(run["timing_s"]), fmt(run["other_held_s"]),
            shared["n"] if shared else 0, fmt(shared), run.get("occupied_per_candidate_s", "-"),
            ", ".join("%s %d" % kv for kv in run["statuses"].items())))
    rows += ["", "Timing phase by part (mean seconds over the timed candidates):", "",
             "| run | " + " | ".join(sorted(record["runs"][0]["timing_parts"])) + " |",
             "|---|" + "---|" * len(record["runs"][0]["timing_parts"])]
    for i, run in enumerate(record["runs"]):
        rows.append("| %d | %s |" % (i + 1, " | ".join(
            fmt(run["timing_parts"][k]) for k in sorted(run["timing_parts"]))))
    sample_keys = sorted(record["runs"][0].get("sample_parts") or {})
    if sample_keys:
        rows += ["", "Per sample, both sides averaged (median over the timed candidates; ms, "
                 "pairs per candidate):", "",
                 "| run | " + " | ".join(sample_keys) + " |", "|---|" + "---|" * len(sample_keys)]
        for i, run in enumerate(record["runs"]):
            parts = run.get("sample_parts") or {}
            rows.append("| %d | %s |" % (i + 1, " | ".join(
                fmt(parts.get(k), "median") for k in sample_keys)))
    if any(run.get("window_clock") for run in record["runs"]):
        rows.append("")
    for i, run in enumerate(record["runs"]):
        for task, reason in run.get("window_clock") or []:
            rows.append("Run %d: %s timed on the window clock (%s)" %
                        (i + 1, task, reason))
    for i, run in enumerate(record["runs"]):
        done = ["%s: %s" % (rule.replace("_", " "), ", ".join(
            str(x) if not isinstance(x, list) else "%s (%s)" % (x[0], x[1]) for x in tasks))
                for rule, tasks in (run.get("rules") or {}).items() if tasks]
        rows += ["", "Run %d, the timing's rules: %s" % (i + 1, "; ".join(done) or "none fired")]
    for pair in record.get("spread", []):
        rows += ["", "Spread, run %d vs run %d: %d tasks ok in both, median %s %%, max %s %%; "
                 "status changes: %s" % (pair["runs"][0], pair["runs"][1], pair["ok_in_both"],
                                          pair["median_pct"], pair["max_pct"],
                                          pair["status_changes"] or "none")]
        cover = pair.get("coverage") or {}
        if cover.get("checks"):
            rows += ["", "Intervals, run %d vs run %d: one run's `speedup_ci` holds the other's "
                     "speedup in %d of %d cases (%s %%); relative half-width median %s %%, max "
                     "%s %%; misses: %s" % (
                         pair["runs"][0], pair["runs"][1], cover["held"], cover["checks"],
                         cover["pct"], (cover.get("half_width_pct") or {}).get("median"),
                         (cover.get("half_width_pct") or {}).get("max"),
                         ", ".join("%s (%s's [%.3f, %.3f] vs %.3f)" % (
                             m["task"], m["interval_of"], m["ci"][0], m["ci"][1],
                             m["other_speedup"]) for m in cover["misses"]) or "none")]
    with open(os.path.join(out, "reward-cost.md"), "w") as handle:
        handle.write("\n".join(rows) + "\n")


def finish(out, record, per_task_runs):
    """Spreads of every run against the first, and the report so far."""
    record["spread"] = [dict(spread(per_task_runs[0], per_task_runs[k]), runs=[1, k + 1])
                        for k in range(1, len(per_task_runs))]
    record["tasks"] = per_task_runs
    write_report(out, record)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cudal1", default="build-gpu/cudal1")
    parser.add_argument("--suite")
    parser.add_argument("--solutions")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", required=True)
    parser.add_argument("--label", default="sample40")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--bench-arg", action="append", default=[],
                        help="more options for cudal1 bench (repeat; e.g. --bench-arg=--time-budget "
                             "--bench-arg=3)")
    parser.add_argument("--analyze", nargs="+", help="result directories (or their results.jsonl "
                        "files) of earlier runs: only summarize them")
    parser.add_argument("--wall-s", nargs="+", type=float, default=[],
                        help="with --analyze: each run's wall time, as the run printed it")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    record = {"label": args.label, "date": datetime.date.today().isoformat(), "runs": [],
              "device": os.environ.get("CUDAL1_DEVICE_NAME", "?")}
    per_task_runs = []
    if args.analyze:
        walls = args.wall_s + [None] * len(args.analyze)
        for run_dir, wall in zip(args.analyze, walls):
            summary, tasks = summarize_run(run_dir, wall)
            record["runs"].append(summary)
            per_task_runs.append(tasks)
    else:
        if not (args.suite and args.solutions):
            parser.error("--suite and --solutions are needed unless --analyze is given")
        for run in range(args.runs):
            run_dir = os.path.join(args.out, "%s-run%d" % (args.label, run + 1))
            cache = os.path.join(args.out, "%s-cache%d" % (args.label, run + 1))
            for path in (run_dir, cache):
                shutil.rmtree(path, ignore_errors=True)
            command = [args.cudal1, "bench", "--suite", args.suite, "--solutions", args.solutions,
                       "--out", run_dir, "--device", args.device, "--cache-dir", cache, "-q"]
            command += args.bench_arg
            record["command"] = " ".join(command)
            print("run %d: %s" % (run + 1, " ".join(command)), flush=True)
            start = time.monotonic()
            with open(os.path.join(args.out, "%s-run%d.log" % (args.label, run + 1)), "w") as log:
                code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
            wall = round(time.monotonic() - start, 1)
            summary, tasks = summarize_run(run_dir, wall)
            summary["exit_code"] = code
            record["runs"].append(summary)
            per_task_runs.append(tasks)
            print("run %d: %.1f s, held %s, statuses %s" % (run + 1, wall, summary["held_s"],
                                                            summary["statuses"]), flush=True)
            finish(args.out, record, per_task_runs)  # a run cut short leaves the ones before
            shutil.rmtree(cache, ignore_errors=True)
    if args.analyze:
        finish(args.out, record, per_task_runs)
    print(open(os.path.join(args.out, "reward-cost.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
