#!/usr/bin/env python3
"""Benchmarks of the evaluation engine (issue: evaluation engine), run on a GPU machine.

  (a) repeatability: every CUDA example candidate evaluated N times, each in a fresh cudal1
      process; spread = (max - min) / median of the speedup.
  (b) agreement: the candidate's median time (the verdict's clock: queued device span, or CUDA
      events around the call) against the median sum of its kernel durations in the same samples
      (CUPTI activity records).
  (c) overhead: wall time of one `cudal1 eval` (build cached) against the device time it measured.

Writes a JSON file with every verdict and a Markdown summary. Standard library only.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time


def load_manifest(root):
    with open(os.path.join(root, "examples", "manifest.json")) as handle:
        return json.load(handle)


def cuda_candidates(root, manifest):
    for task in manifest["tasks"]:
        for candidate in task["candidates"]:
            if candidate.get("uses_cuda") and candidate.get("kind") == "fast":
                yield (task["dir"], os.path.join(root, "examples", task["dir"], "task.py"),
                       os.path.join(root, "examples", task["dir"], candidate["file"]), candidate["file"])


def evaluate(cudal1, task, candidate, device, budget, extra):
    command = [cudal1, "eval", "--task", task, "--candidate", candidate, "--device", device,
               "--time-budget", str(budget), "-q"] + extra
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - start
    if result.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(command), result.returncode, result.stderr[-2000:]))
    verdict = json.loads(result.stdout)
    verdict["_wall_s"] = wall
    return verdict


def spread(values):
    return (max(values) - min(values)) / statistics.median(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cudal1", default="build/cudal1")
    parser.add_argument("--root", default=".")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--time-budget", type=float, default=30)
    parser.add_argument("--out", required=True, help="directory for the JSON and Markdown results")
    parser.add_argument("--only", action="append", default=[], help="example directory to include (repeatable)")
    parser.add_argument("--label", default="eval_bench", help="base name of the result files")
    parser.add_argument("--eval-arg", action="append", default=[], help="extra argument for cudal1 eval")
    options = parser.parse_args()

    manifest = load_manifest(options.root)
    # Level 3 first: its kernels run over a millisecond, which the agreement check (b) needs.
    candidates = sorted(cuda_candidates(options.root, manifest), reverse=True)
    if options.only:
        candidates = [c for c in candidates if c[0] in options.only]
    if not candidates:
        sys.exit("no CUDA example candidates in examples/manifest.json")
    # One evaluation each first, all at once (builds run in parallel on the CPU cores), so every
    # build is cached before anything is measured.
    print("warming the build cache for %d candidates" % len(candidates), flush=True)
    warming = [subprocess.Popen([options.cudal1, "eval", "--task", task, "--candidate", candidate, "--device",
                                 options.device, "--time-budget", "1", "-q"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
               for _, task, candidate, _ in candidates]
    for (name, _, _, _), process in zip(candidates, warming):
        _, err = process.communicate()
        print("  %s: %s" % (name, (err.strip().splitlines() or ["?"])[-1][:200]), flush=True)

    rows, runs = [], {}
    for name, task, candidate, file in candidates:
        verdicts = []
        for repeat in range(options.repeats):
            verdict = evaluate(options.cudal1, task, candidate, options.device, options.time_budget,
                               options.eval_arg)
            rounds = verdict.get("timing", {}).get("rounds", [])
            print("%s/%s run %d: %s %.4fx clock %s noise %s flags %s wall %.1fs%s" % (
                name, file, repeat + 1, verdict["status"], verdict["speedup"] or 0,
                verdict.get("timing", {}).get("mode"),
                verdict.get("timing", {}).get("relative_noise"), verdict["flags"], verdict["_wall_s"],
                " rounds %s" % " ".join("%.4f" % r["speedup"] for r in rounds) if rounds else ""), flush=True)
            verdicts.append(verdict)
        runs["%s/%s" % (name, file)] = verdicts
        ok = [v for v in verdicts if v["status"] == "ok"]
        speedups = [v["speedup"] for v in ok]
        kernel_speedups = [v["timing"]["kernel_time_speedup"] for v in ok if "kernel_time_speedup" in v.get("timing", {})]
        row = {"example": "%s/%s" % (name, file), "ok_runs": len(ok), "speedups": speedups,
               "kernel_time_speedups": kernel_speedups,
               "kernel_time_spread": spread(kernel_speedups) if len(kernel_speedups) > 1 else None,
               "noisy_runs": sum(1 for v in ok if "noisy" in v["flags"]),
               "clocks": sorted({v.get("timing", {}).get("mode", "?") for v in ok}),
               "clock_reasons": sorted({v["timing"]["mode_reason"] for v in ok if "mode_reason" in v.get("timing", {})}),
               "median_speedup": statistics.median(speedups) if speedups else None,
               "spread": spread(speedups) if len(speedups) > 1 else None}
        # With --timing-rounds: each round ran in its own fresh processes, so the first rounds of
        # the runs are single-process measurements (with a share of the budget) to compare with.
        first_rounds = [v["timing"]["rounds"][0]["speedup"] for v in ok if v.get("timing", {}).get("rounds")]
        if len(first_rounds) > 1:
            row["first_round_spread"] = spread(first_rounds)
            row["round_spread_median"] = statistics.median(v["timing"]["round_spread"] for v in ok
                                                           if "round_spread" in v.get("timing", {}))
            row["restart_s_median"] = statistics.median(v["phases"].get("timing_restart_s", 0) for v in ok)
        agreement = []
        for v in ok:
            activity = v.get("timing", {}).get("activity", {}).get("candidate")
            if activity and activity.get("busy_ms_median"):
                agreement.append((v["candidate_ms"], activity["busy_ms_median"]))
        if agreement:
            event_ms = statistics.median(a for a, _ in agreement)
            kernel_ms = statistics.median(b for _, b in agreement)
            row.update({"candidate_ms": event_ms, "kernel_sum_ms": kernel_ms,
                        "agreement": (event_ms - kernel_ms) / kernel_ms})
        overheads = []
        for v in ok:
            device_s = v["samples"] * (v["reference_ms"] + v["candidate_ms"]) / 1e3
            overheads.append({"wall_s": v["_wall_s"], "timed_device_s": device_s,
                              "timing_phase_s": v["phases"].get("timing_s"), "total_s": v["phases"].get("total_s")})
        if overheads:
            row["wall_s_median"] = statistics.median(o["wall_s"] for o in overheads)
            row["timed_device_s_median"] = statistics.median(o["timed_device_s"] for o in overheads)
        rows.append(row)
        write_results(options, rows, runs)


def write_results(options, rows, runs):
    device = next((v["device"] for vs in runs.values() for v in vs if isinstance(v["device"], dict)), options.device)
    spreads = [r["spread"] for r in rows if r["spread"] is not None]
    summary = {
        "date": datetime.date.today().isoformat(),
        "device": device,
        "repeats": options.repeats,
        "time_budget_s": options.time_budget,
        "eval_args": options.eval_arg,
        "repeatability": {"median_spread": statistics.median(spreads) if spreads else None,
                          "max_spread": max(spreads) if spreads else None,
                          "target": "median <= 0.01, max <= 0.03"},
        "rows": rows,
    }
    os.makedirs(options.out, exist_ok=True)
    with open(os.path.join(options.out, options.label + ".json"), "w") as handle:
        json.dump({"summary": summary, "verdicts": runs}, handle, indent=1)
    lines = ["# Evaluation engine benchmark", "",
             "Device: %s, date %s, %d fresh-process evaluations per example, time budget %s s." % (
                 device.get("name", device) if isinstance(device, dict) else device, summary["date"],
                 options.repeats, options.time_budget), "",
             "| example | clock | ok runs (noisy) | median speedup | spread (max-min)/median | kernel-time speedup spread | cand ms (verdict) | kernel sum ms (CUPTI) | verdict vs kernels | wall s / eval | timed device s / eval |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def fmt(key, pattern):
            value = r.get(key)
            return pattern % value if isinstance(value, (int, float)) else "-"
        lines.append("| %s | %s | %d (%d) | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["example"], "/".join(r.get("clocks", [])), r["ok_runs"], r["noisy_runs"], fmt("median_speedup", "%.4f"), fmt("spread", "%.4f"),
            fmt("kernel_time_spread", "%.4f"),
            fmt("candidate_ms", "%.4f"), fmt("kernel_sum_ms", "%.4f"), fmt("agreement", "%+.4f"),
            fmt("wall_s_median", "%.1f"), fmt("timed_device_s_median", "%.2f")))
    if any("first_round_spread" in r for r in rows):
        lines += ["", "Timing rounds: spread of the joined speedup vs of the first rounds alone (one process "
                  "pair each), the median spread between the rounds of one evaluation, and the seconds "
                  "spent restarting workers.", "",
                  "| example | spread (joined) | spread (first rounds) | rounds within an evaluation | restart s |",
                  "|---|---|---|---|---|"]
        for r in rows:
            if "first_round_spread" in r:
                lines.append("| %s | %.4f | %.4f | %.4f | %.1f |" % (
                    r["example"], r["spread"] or 0, r["first_round_spread"], r["round_spread_median"],
                    r["restart_s_median"]))
    rep = summary["repeatability"]
    lines += ["", "Repeatability: median spread %s, max spread %s (target: median <= 1 %%, max <= 3 %%)." % (
        rep["median_spread"], rep["max_spread"])]
    with open(os.path.join(options.out, options.label + ".md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
