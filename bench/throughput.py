#!/usr/bin/env python3
"""Throughput of `cudal1 bench` (one Evaluator: builds in parallel on every CPU core, one timing
phase per GPU at a time) against a serial loop of `cudal1 eval` (build, then evaluate, one
candidate at a time), on candidates whose builds are not cached.

Candidates are variants of the examples' compiled candidates (load_inline; CUDA kernels on a GPU,
the C++ extension l1_rms_norm/fast_cpp.py on the CPU), each made unique by a comment inside its
C++/CUDA source, so every one is compiled afresh; each mode also gets an empty build cache.
Candidates per hour are a rate, so the two modes may use different counts.

Writes OUT/throughput.json and OUT/throughput.md, updated after each phase (a run cut short still
leaves what it measured). Standard library only.

  python3 bench/throughput.py --cudal1 build-gpu/cudal1 --device cuda --out OUT
  python3 bench/throughput.py --cudal1 build/cudal1 --device cpu --pipeline 4 --serial 2 --out OUT
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

# The examples whose fast candidate is compiled with load_inline, per device. The level-3 GRU is
# left out on the GPU: its reference takes ~200 ms per call, which would make the timing phase,
# not the build, the subject of the measurement.
GPU_BASES = [("l1_gelu_tanh", "fast.py"), ("l1_rms_norm", "fast.py"),
             ("l2_conv_affine_hardswish", "fast.py"), ("l2_linear_groupsum_silu", "fast.py")]
CPU_BASES = [("l1_rms_norm", "fast_cpp.py")]


def variant_source(text, tag):
    """The candidate with a comment at the top of its first C++/CUDA source string: a new build
    cache key for cudal1 and new sources for PyTorch's extension builder."""
    marker = text.find("#include")
    if marker < 0:
        raise ValueError("the candidate has no #include to put the variant comment before")
    comment = "// cudal1 throughput variant %s\n" % tag
    return "# cudal1 throughput variant %s\n%s%s%s" % (tag, text[:marker], comment, text[marker:])


def make_candidates(root, device, count, work, label, run_tag):
    """(task file, candidate file, name) for `count` unique variants, cycling over the bases."""
    bases = GPU_BASES if device != "cpu" else CPU_BASES
    directory = os.path.join(work, label, "candidates")
    os.makedirs(directory, exist_ok=True)
    candidates = []
    for index in range(count):
        example, file_name = bases[index % len(bases)]
        with open(os.path.join(root, "examples", example, file_name)) as handle:
            text = variant_source(handle.read(), "%s-%s-%d" % (run_tag, label, index))
        path = os.path.join(directory, "%d_%s_%s" % (index + 1, example, file_name))
        with open(path, "w") as handle:
            handle.write(text)
        task = os.path.join(root, "examples", example, "task.py")
        candidates.append((task, path, "%d_%s" % (index + 1, example)))
    return candidates


def environment(cache_dir):
    env = dict(os.environ)
    env["CUDAL1_CACHE_DIR"] = cache_dir
    return env


def run_pipeline(args, candidates, work):
    """Every candidate as one task of a suite, evaluated by one `cudal1 bench`."""
    suite = os.path.join(work, "pipeline", "suite")
    os.makedirs(os.path.join(suite, "level1"), exist_ok=True)
    solutions = os.path.join(work, "pipeline", "solutions.jsonl")
    with open(solutions, "w") as lines:
        for index, (task, candidate, name) in enumerate(candidates):
            os.symlink(task, os.path.join(suite, "level1", name + ".py"))
            with open(candidate) as handle:
                lines.write(json.dumps({"level_id": 1, "task_id": index + 1, "custom_code": handle.read()}) + "\n")
    out = os.path.join(work, "pipeline", "out")
    command = [args.cudal1, "bench", "--suite", suite, "--solutions", solutions, "--device", args.device,
               "--out", out, "--time-budget", str(args.time_budget)]
    if args.jobs:
        command += ["--jobs", str(args.jobs)]
    print("$ " + " ".join(command), flush=True)
    start = time.monotonic()
    # Its progress line and warnings go straight to this script's stderr.
    result = subprocess.run(command, env=environment(os.path.join(work, "pipeline", "cache")),
                            stdout=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    if result.returncode != 0:
        raise RuntimeError("cudal1 bench failed with exit code %d (its messages are above)" % result.returncode)
    print(result.stdout, flush=True)
    for name in ("results.jsonl", "summary.json"):
        shutil.copy(os.path.join(out, name), os.path.join(args.out, "pipeline-" + name))
    verdicts = []
    with open(os.path.join(out, "results.jsonl")) as handle:
        for line in handle:
            entry = json.loads(line)
            verdicts.append(entry.get("verdict") or {"status": entry["status"]})
    with open(os.path.join(out, "summary.json")) as handle:
        summary = json.load(handle)
    return {"candidates": len(candidates), "wall_s": wall, "command": " ".join(command),
            "engine_throughput": summary.get("throughput"), "verdicts": verdicts}


def run_serial(args, candidates, work, deadline):
    """One `cudal1 eval` at a time; stops early (the rate stays valid) rather than overrun."""
    cache = os.path.join(work, "serial", "cache")
    verdicts = []
    walls = []
    for task, candidate, name in candidates:
        # The next candidate is expected to take as long as the ones before; before the first,
        # at least a minute (a build alone takes 40-60 s with nvcc).
        expected = sum(walls) / len(walls) if walls else 60
        if time.monotonic() + expected > deadline:
            print("serial: stopping after %d candidates to stay within --deadline" % len(walls), flush=True)
            break
        command = [args.cudal1, "eval", "--task", task, "--candidate", candidate, "--device", args.device,
                   "--time-budget", str(args.time_budget), "-q"]
        print("$ " + " ".join(command), flush=True)
        start = time.monotonic()
        result = subprocess.run(command, env=environment(cache), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        walls.append(time.monotonic() - start)
        if result.returncode != 0:
            raise RuntimeError("cudal1 eval failed (%d):\n%s" % (result.returncode, result.stderr[-4000:]))
        verdicts.append(json.loads(result.stdout))
        print("  %s: %s in %.1f s" % (name, verdicts[-1]["status"], walls[-1]), flush=True)
    if not walls:
        return None
    return {"candidates": len(walls), "wall_s": sum(walls), "per_candidate_s": walls,
            "command": "cudal1 eval --task T --candidate C --device %s --time-budget %s (one at a time)" % (
                args.device, args.time_budget), "verdicts": verdicts}


def describe(phase):
    """Rates and what the verdicts say (a benchmark of failing builds would measure nothing)."""
    if phase is None:
        return None
    statuses = {}
    builds = []
    device = None
    for verdict in phase["verdicts"]:
        statuses[verdict.get("status")] = statuses.get(verdict.get("status"), 0) + 1
        build = verdict.get("build") or {}
        if build.get("cached") is False and build.get("seconds"):
            builds.append(build["seconds"])
        if isinstance(verdict.get("device"), dict) and verdict["device"].get("name"):
            device = verdict["device"]["name"]
    summary = {key: phase[key] for key in phase if key != "verdicts"}
    summary["statuses"] = statuses
    summary["uncached_builds"] = len(builds)
    summary["median_build_s"] = sorted(builds)[len(builds) // 2] if builds else None
    summary["candidates_per_hour"] = phase["candidates"] / phase["wall_s"] * 3600 if phase["wall_s"] > 0 else None
    summary["device"] = device
    return summary


def write_results(out, report):
    with open(os.path.join(out, "throughput.json"), "w") as handle:
        json.dump(report, handle, indent=2)
    pipeline, serial = report.get("pipeline"), report.get("serial")
    lines = ["# cudal1 bench throughput: pipeline vs serial", "",
             "- date: %s" % report["date"], "- device: %s (%s)" % (report["device_option"], report["device"]),
             "- CPU cores: %d" % report["cpu_cores"], "- time budget per evaluation: %s s" % report["time_budget"],
             "- candidates: uncached load_inline builds (%s), each a unique variant" % report["bases"], "",
             "| mode | candidates | wall (s) | candidates/hour | statuses | uncached builds | median build (s) |",
             "|---|---|---|---|---|---|---|"]
    for name, phase in (("pipeline (`cudal1 bench`)", pipeline), ("serial (`cudal1 eval` loop)", serial)):
        if phase is None:
            lines.append("| %s | not run | | | | | |" % name)
            continue
        lines.append("| %s | %d | %.1f | %.1f | %s | %d | %s |" % (
            name, phase["candidates"], phase["wall_s"], phase["candidates_per_hour"] or 0,
            ", ".join("%s %d" % item for item in sorted(phase["statuses"].items())),
            phase["uncached_builds"], "%.1f" % phase["median_build_s"] if phase["median_build_s"] else "-"))
    if report.get("ratio") is not None:
        lines += ["", "Pipeline / serial throughput: **%.2fx** (target >= %.1fx: %s)." % (
            report["ratio"], report["target_ratio"], "met" if report["ratio"] >= report["target_ratio"] else "NOT met")]
    lines += ["", "Commands:", ""]
    for phase in (pipeline, serial):
        if phase is not None:
            lines.append("- `%s`" % phase["command"])
    with open(os.path.join(out, "throughput.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cudal1", default="build/cudal1")
    parser.add_argument("--root", default=".")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--pipeline", type=int, default=None,
                        help="candidates for cudal1 bench (default 16 on a GPU, 4 on the CPU)")
    parser.add_argument("--serial", type=int, default=None,
                        help="candidates for the serial loop (default 4 on a GPU, 2 on the CPU)")
    parser.add_argument("--time-budget", type=float, default=3, help="seconds of timing per evaluation")
    parser.add_argument("--jobs", type=int, default=0, help="cudal1 bench --jobs (default: every core)")
    parser.add_argument("--deadline", type=float, default=540,
                        help="seconds after which the serial loop starts no new candidate")
    parser.add_argument("--target", type=float, default=3.0, help="the pipeline/serial ratio aimed at")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    started = time.monotonic()
    on_cpu = args.device == "cpu"
    pipeline_count = args.pipeline if args.pipeline is not None else (4 if on_cpu else 16)
    serial_count = args.serial if args.serial is not None else (2 if on_cpu else 4)
    args.root = os.path.abspath(args.root)
    args.cudal1 = os.path.abspath(args.cudal1)
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(os.path.abspath(args.out), "throughput-work")
    shutil.rmtree(work, ignore_errors=True)
    run_tag = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")

    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "device_option": args.device, "device": "cpu" if on_cpu else None, "cpu_cores": os.cpu_count(),
              "time_budget": args.time_budget, "target_ratio": args.target,
              "bases": ", ".join("%s/%s" % base for base in (CPU_BASES if on_cpu else GPU_BASES)),
              "pipeline": None, "serial": None, "ratio": None}
    pipeline = describe(run_pipeline(args, make_candidates(args.root, args.device, pipeline_count, work,
                                                           "pipeline", run_tag), work))
    report["pipeline"] = pipeline
    report["device"] = report["device"] or pipeline["device"]
    write_results(args.out, report)
    serial = describe(run_serial(args, make_candidates(args.root, args.device, serial_count, work, "serial",
                                                       run_tag), work, started + args.deadline))
    report["serial"] = serial
    if serial and serial["candidates_per_hour"] and pipeline["candidates_per_hour"]:
        report["ratio"] = pipeline["candidates_per_hour"] / serial["candidates_per_hour"]
    write_results(args.out, report)
    shutil.rmtree(work, ignore_errors=True)  # builds and caches: large, and measured already
    print("pipeline %.1f candidates/h (%d in %.0f s), serial %s, ratio %s" % (
        pipeline["candidates_per_hour"], pipeline["candidates"], pipeline["wall_s"],
        "%.1f candidates/h (%d in %.0f s)" % (serial["candidates_per_hour"], serial["candidates"], serial["wall_s"])
        if serial else "not run (no time left before --deadline)",
        "%.2fx" % report["ratio"] if report["ratio"] else "-"))
    bad = [s for phase in (pipeline, serial) if phase for s in phase["statuses"] if s != "ok"]
    if bad:
        print("warning: some candidates did not end ok (%s): the rates include failures" % ", ".join(sorted(set(bad))),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
