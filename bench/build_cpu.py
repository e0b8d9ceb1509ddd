#!/usr/bin/env python3
"""CPU seconds per load_inline build, with and without the precompiled header or the CUDA
sources' lighter torch/extension.h (issue 32).

Every candidate of the suite that builds with load_inline is evaluated once per configuration,
each time as a new build (a comment inside its source differs per configuration and run:
bench/rl_load.py's variants), each configuration with a build cache of its own, empty at the
start. The configurations run interleaved (one of each per candidate, JOBS at once), so that both
see the same machine. Reported per build: the compilers' CPU seconds (phases.build_cpu_s.compilers:
ninja, g++, nvcc and what they ran), the build's wall seconds, the verdict's status; per
configuration the median and the sum; and what making the precompiled header cost (ready.json).

    bench/build_cpu.py --cudal1 build-gpu/cudal1 --suite S/suite --solutions S/solutions.jsonl \\
        --device cuda --out OUT [--jobs 4] [--configs off,on]

A configuration is a CUDAL1_PCH value (off, on, auto) or the variables of cudal1's environment,
NAME=VALUE joined by '+': CUDAL1_PCH=on+CUDAL1_CUDA_HEADERS=full,CUDAL1_PCH=on+CUDAL1_CUDA_HEADERS=light.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rl_load import device_name, suite_tasks, variant_code  # noqa: E402


def config_environment(config):
    """A configuration's variables: CUDAL1_PCH=config, or its NAME=VALUE parts."""
    if "=" not in config:
        return {"CUDAL1_PCH": config}
    return dict(part.split("=", 1) for part in config.split("+"))


def evaluate(cudal1, task, code, config, cache, work, device, budget):
    candidate = os.path.join(work, "candidate.py")
    os.makedirs(work, exist_ok=True)
    with open(candidate, "w", encoding="utf-8") as f:
        f.write(code)
    out = os.path.join(work, "verdict.json")
    env = dict(os.environ, **config_environment(config))
    start = time.monotonic()
    run = subprocess.run([cudal1, "eval", "--task", task, "--candidate", candidate, "--device", device,
                          "--time-budget", str(budget), "-q", "--cache-dir", cache, "--json", out,
                          "--format", "text"], capture_output=True, text=True, env=env, timeout=1800)
    wall = time.monotonic() - start
    try:
        with open(out, encoding="utf-8") as f:
            verdict = json.load(f)
    except (OSError, ValueError):
        return {"status": "no verdict", "exit": run.returncode, "stderr": run.stderr[-600:], "wall_s": wall}
    phases = verdict.get("phases", {})
    return {"status": verdict.get("status"), "compilers_cpu_s": phases.get("build_cpu_s", {}).get("compilers"),
            "rebuilt_on_load": verdict.get("build", {}).get("rebuilt_on_load"),
            "worker_cpu_s": phases.get("build_cpu_s", {}).get("worker"), "build_s": phases.get("build_s"),
            "cached": verdict.get("build", {}).get("cached"), "pch": phases.get("build_pch"),
            "cuda_headers": verdict.get("build", {}).get("cuda_headers"), "wall_s": wall}


# A build step that compiled: the candidate calls load_inline at its import. One that calls it in
# its model's constructor compiles in each worker instead (build.rebuilt_on_load), not here.
COMPILED_CPU_S = 1.0


def summarize(results, configs, caches=None):
    """Per configuration: the medians over the candidates whose build step compiled in every
    configuration, and what making the precompiled header cost; whether statuses agree."""
    compiled = [key for key in results[configs[0]]
                if all((results[c].get(key, {}).get("compilers_cpu_s") or 0) > COMPILED_CPU_S
                       and not results[c][key].get("cached") for c in configs)]
    summary = {}
    for config in configs:
        cpu = [results[config][key]["compilers_cpu_s"] for key in compiled]
        made = None
        ready = glob.glob(os.path.join(caches[config], "pch", "*", "ready.json")) if caches else []
        if ready:
            with open(ready[0], encoding="utf-8") as f:
                made = json.load(f)
            made.pop("flags", None)
        summary[config] = {"compiled_in_build_step": len(cpu),
                           "compilers_cpu_s_median": round(statistics.median(cpu), 2) if cpu else None,
                           "compilers_cpu_s_sum": round(sum(cpu), 1),
                           "built_in_workers": sorted(k for k, r in results[config].items()
                                                      if r.get("rebuilt_on_load")),
                           "pch_made": made}
    base = summary[configs[0]]["compilers_cpu_s_median"]
    for config in configs[1:]:
        m = summary[config]["compilers_cpu_s_median"]
        summary[config]["median_vs_%s" % configs[0]] = round(m / base, 3) if m and base else None
        summary[config]["per_candidate_vs_%s" % configs[0]] = {
            key: round(results[config][key]["compilers_cpu_s"] / results[configs[0]][key]["compilers_cpu_s"], 3)
            for key in compiled}
    statuses_equal = all(results[configs[0]][k]["status"] == results[c][k]["status"]
                         for c in configs[1:] for k in results[configs[0]])
    return summary, statuses_equal


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--suite", required=True)
    parser.add_argument("--solutions", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--configs", default="off,on",
                        help="CUDAL1_PCH values or NAME=VALUE+... assignments, in order, comma-separated")
    parser.add_argument("--time-budget", type=float, default=0.5)
    parser.add_argument("--label", default="pch")
    parser.add_argument("--code", default="")
    parser.add_argument("--resummarize", help="an earlier run's JSON: its summary again, in place")
    args = parser.parse_args()
    if args.resummarize:
        with open(args.resummarize, encoding="utf-8") as f:
            report = json.load(f)
        made = {c: report["summary"][c].get("pch_made") for c in report["configs"]}
        report["summary"], report["statuses_equal"] = summarize(report["builds"], report["configs"])
        for c, m in made.items():
            report["summary"][c]["pch_made"] = m
        with open(args.resummarize, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
        print(json.dumps(report["summary"], indent=1))
        return
    tasks = {k: v for k, v in suite_tasks(args.suite, args.solutions).items() if "load_inline" in v}
    if not tasks:
        sys.exit("no candidate of %s builds with load_inline" % args.solutions)
    configs = args.configs.split(",")
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="cudal1-build-cpu-")
    caches = {c: os.path.join(work, "cache-%d" % i) for i, c in enumerate(configs)}
    stamp = "%d" % time.time()
    jobs = []
    for key in sorted(tasks):
        for config in configs:
            code = variant_code(tasks[key], "%s %s %s" % (stamp, config, key))
            jobs.append((key, config, code))
    print("%d load_inline candidates x %d configurations (%s), %d at once" % (
        len(tasks), len(configs), ", ".join(configs), args.jobs), flush=True)
    results = {c: {} for c in configs}
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(evaluate, args.cudal1, os.path.join(args.suite, key + ".py"), code, config,
                               caches[config], os.path.join(caches[config] + "-work", key.replace("/", "-")),
                               args.device, args.time_budget): (key, config) for key, config, code in jobs}
        for future in concurrent.futures.as_completed(futures):
            key, config = futures[future]
            r = future.result()
            results[config][key] = r
            print("%-4s %-32s %-14s compilers %s CPU-s, build %s s" % (
                config, key, r["status"], r.get("compilers_cpu_s"), r.get("build_s")), flush=True)
    summary, statuses_equal = summarize(results, configs, caches)
    cores = os.cpu_count()
    report = {"label": args.label, "date": time.strftime("%Y-%m-%d"), "code": args.code,
              "device": device_name(args.device), "cores": cores, "jobs": args.jobs,
              "candidates": len(tasks), "configs": configs, "wall_s": round(time.monotonic() - start, 1),
              "summary": summary, "statuses_equal": statuses_equal, "builds": results}
    name = os.path.join(args.out, "%s-build-cpu-%s.json" % (time.strftime("%Y-%m-%d"), args.label))
    with open(name, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(summary, indent=1))
    print("statuses equal across configurations: %s" % statuses_equal)
    print("written: " + name)
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
