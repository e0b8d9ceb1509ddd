#!/usr/bin/env python3
"""Throughput of `cudal1 bench --queue` with one `cudal1 worker`, then with one worker per GPU,
on the same suite (docs/scale-out.md, "Measured scaling"; bench/queue_scaling.sh runs it on the
GPU machine).

Each worker stands for a GPU host of its own: one GPU, --jobs cores/GPUs builds, an empty build
cache of its own (every candidate is compiled afresh in every run, as on a new host), and, unless
--no-pin, cores/GPUs cores of its own (worker i on cores i*n .. i*n+n-1, in both runs; its builds,
zygote and workers inherit them). Unpinned, the workers of the second run share the cores the one
worker of the first run had alone, and a CPU-bound run cannot go faster (2026-11-27: 0.89x). The
bench runs from the same machine. Each run has a deadline: a run cut short still counts what
finished (the bench is interrupted and writes its summary).

Two rates per run: tasks finished per minute of wall time (from the start of the bench to its
end), and the steady rate between the first and the last task finished (leaves out the pipeline's
fill, the first builds, which a run cut short would weigh more). The ratio of the two-worker run
to the one-worker run is reported for both; the wall-time ratio is the one to quote when both
runs finished every task.

Writes OUT/queue_scaling.json and OUT/queue_scaling.md after each run, the bench summaries, and
the logs as OUT/queue_scaling-logs.tgz. Standard library only.

  python3 bench/queue_scaling.py --cudal1 build-gpu/cudal1 --queue redis://127.0.0.1:6390 \\
      --suite shared/data/cudal1-h100-sample40/suite \\
      --solutions shared/data/cudal1-h100-sample40/solutions.jsonl --gpus 2 --deadline 400
"""

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_load import pinned_to  # noqa: E402

# What the issue asks of two workers against one.
TARGET_RATIO = 1.8
# Seconds a worker may take to join (a toolchain probe imports PyTorch in a fresh cache).
JOIN_TIMEOUT_S = 120


def log(text):
    print("%s queue_scaling: %s" % (datetime.datetime.utcnow().strftime("%H:%M:%S"), text), flush=True)


def queue_status(args, url):
    result = subprocess.run([args.cudal1, "queue", "status", "--queue", url, "--json"],
                            capture_output=True, text=True, timeout=60)
    return json.loads(result.stdout) if result.returncode == 0 else None


def evaluated_lines(path):
    """Result lines of tasks that were evaluated (lines for tasks without a solution are written
    at the start and say nothing about throughput)."""
    lines = []
    if os.path.exists(path):
        with open(path) as handle:
            for text in handle:
                try:
                    line = json.loads(text)
                except ValueError:
                    continue  # a line being written
                if line.get("verdict") is not None:
                    lines.append(line)
    return lines


def start_workers(args, url, label, work):
    workers = []
    for gpu in range(args.workers_for[label]):
        name = "%s-gpu%d" % (label, gpu)
        log_file = open(os.path.join(work, name + ".log"), "w")
        device = "cuda:%d" % gpu if args.device == "cuda" else "cpu"
        command = [args.cudal1, "worker", "--queue", url, "--device", device, "--name", name,
                   "--jobs", str(args.jobs), "--cache-dir", os.path.join(work, name + "-cache")]
        cores = None
        if args.pin:
            share = max(1, (os.cpu_count() or 2) // args.gpus)
            cores = set(range(gpu * share, (gpu + 1) * share))
        workers.append(subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT,
            preexec_fn=pinned_to(cores)))
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while time.monotonic() < deadline:
        status = queue_status(args, url)
        if status and len(status["workers"]) >= len(workers):
            return workers
        if any(worker.poll() is not None for worker in workers):
            break
        time.sleep(1)
    raise RuntimeError("the workers of %s did not join (see %s/*.log)" % (label, work))


def stop(processes, at_once):
    """SIGTERM lets a worker finish what it holds; after a run cut short that would keep its GPU
    busy into the next run, so it is killed (its jobs are of no interest any more)."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL if at_once else signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run(args, label, url, deadline_s):
    """One bench over the suite on `label`'s workers; its numbers."""
    work = os.path.join(args.work, label)
    os.makedirs(work, exist_ok=True)
    workers = start_workers(args, url, label, work)
    out = os.path.join(work, "bench-out")
    command = [args.cudal1, "bench", "--queue", url, "--suite", args.suite, "--solutions", args.solutions,
               "--device", args.device, "--out", out, "--time-budget", str(args.time_budget), "-q"]
    if args.limit:
        command += ["--limit", str(args.limit)]
    command += args.bench_arg
    log("%s: %d worker(s), deadline %.0f s: %s" % (label, len(workers), deadline_s, " ".join(command)))
    stderr = open(os.path.join(work, "bench.log"), "w")
    start = time.monotonic()
    bench = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    finish_times = []  # seconds since start at which the n-th evaluated task was written
    cut = False
    while bench.poll() is None:
        if time.monotonic() - start > deadline_s:
            bench.send_signal(signal.SIGINT)  # writes summary.json for what is finished
            cut = True
            bench.wait()
            break
        count = len(evaluated_lines(os.path.join(out, "results.jsonl")))
        finish_times += [time.monotonic() - start] * (count - len(finish_times))
        time.sleep(0.5)
    wall = time.monotonic() - start
    lines = evaluated_lines(os.path.join(out, "results.jsonl"))
    finish_times += [wall] * (len(lines) - len(finish_times))
    time.sleep(6)  # a heartbeat (every 5 s at most) brings the workers' counts up to date
    status = queue_status(args, url) or {"workers": []}
    stop(workers, at_once=cut)
    statuses = {}
    for line in lines:
        statuses[line["status"]] = statuses.get(line["status"], 0) + 1
    steady = None
    if len(finish_times) >= 3 and finish_times[-1] > finish_times[0]:
        steady = (len(finish_times) - 1) / (finish_times[-1] - finish_times[0]) * 60
    result = {
        "label": label, "workers": len(workers), "jobs_per_worker": args.jobs, "exit_code": bench.returncode,
        "cores_per_worker": max(1, (os.cpu_count() or 2) // args.gpus) if args.pin else os.cpu_count(),
        "completed": not cut and bench.returncode == 0, "cut_at_deadline": cut, "wall_s": round(wall, 1),
        "tasks_finished": len(lines), "tasks_per_minute": round(len(lines) / wall * 60, 3),
        "steady_tasks_per_minute": round(steady, 3) if steady else None,
        "first_finished_s": round(finish_times[0], 1) if finish_times else None,
        "statuses": statuses,
        "finished_by_worker": {w["name"]: w["finished"] for w in status["workers"]},
    }
    summary = os.path.join(out, "summary.json")
    if os.path.exists(summary):
        with open(summary) as handle, open(os.path.join(args.out, "summary-%s.json" % label), "w") as copy:
            copy.write(handle.read())
    log("%s: %r" % (label, result))
    return result


def ratio(runs, key):
    one, many = runs.get("one"), runs.get("two")
    if not one or not many or not one.get(key) or not many.get(key):
        return None
    return round(many[key] / one[key], 3)


def write_report(args, runs, gpu_text):
    wall_ratio, steady_ratio = ratio(runs, "tasks_per_minute"), ratio(runs, "steady_tasks_per_minute")
    both_complete = all(run.get("completed") for run in runs.values()) and len(runs) == 2
    quoted = wall_ratio if both_complete else steady_ratio
    report = {"date": datetime.date.today().isoformat(), "gpus": gpu_text.strip().splitlines(),
              "suite": args.suite, "solutions": args.solutions, "time_budget_s": args.time_budget,
              "jobs_per_worker": args.jobs, "bench_args": args.bench_arg, "runs": runs,
              "ratio_wall": wall_ratio, "ratio_steady": steady_ratio,
              "ratio_quoted": quoted, "ratio_quoted_is": "wall" if both_complete else "steady",
              "target": TARGET_RATIO, "target_met": quoted is not None and quoted >= TARGET_RATIO}
    with open(os.path.join(args.out, "queue_scaling.json"), "w") as handle:
        json.dump(report, handle, indent=2)
    rows = ["| Workers | Tasks finished | Wall (s) | Tasks / min (wall) | Tasks / min (steady) | Completed | Statuses |",
            "|---|---|---|---|---|---|---|"]
    for run in runs.values():
        rows.append("| %d | %d | %.1f | %.2f | %s | %s | %s |" % (
            run["workers"], run["tasks_finished"], run["wall_s"], run["tasks_per_minute"],
            "%.2f" % run["steady_tasks_per_minute"] if run["steady_tasks_per_minute"] else "-",
            "yes" if run["completed"] else "no (deadline)", json.dumps(run["statuses"], sort_keys=True)))
    text = ["# `cudal1 bench --queue`: one worker against one worker per GPU", "",
            "GPUs: %s" % "; ".join(report["gpus"]), "Date: %s. Suite: `%s`, `--time-budget %s`, `--jobs %d` and an "
            "empty build cache per worker, %s." % (report["date"], args.suite, args.time_budget, args.jobs,
                "%d cores of its own per worker" % max(1, (os.cpu_count() or 2) // args.gpus) if args.pin
                else "every worker on every core"), ""]
    text += rows
    text += ["", "Ratio (two workers / one): wall %s, steady %s; quoted: %s (%s), target %.1fx: %s." % (
        wall_ratio, steady_ratio, quoted, report["ratio_quoted_is"], TARGET_RATIO,
        "met" if report["target_met"] else "not met")]
    with open(os.path.join(args.out, "queue_scaling.md"), "w") as handle:
        handle.write("\n".join(text) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--queue", required=True, help="redis://HOST:PORT (runs use databases 1 and 2)")
    parser.add_argument("--suite", required=True)
    parser.add_argument("--solutions", required=True)
    parser.add_argument("--gpus", type=int, default=2, help="workers of the second run, one per GPU")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: every worker on the CPU, to check this script where there is no GPU")
    parser.add_argument("--jobs", type=int, default=0, help="builds per worker (default: cores / GPUs)")
    parser.add_argument("--time-budget", type=float, default=2.0)
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    parser.add_argument("--bench-arg", action="append", default=[],
                        help="one more argument for both benches (e.g. --bench-arg=--rerun-target --bench-arg=0.06)")
    parser.add_argument("--deadline", type=float, default=400, help="seconds for both runs together")
    parser.add_argument("--gpu-info", default="", help="a file with nvidia-smi's description of the GPUs")
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="/tmp/cudal1-queue-scaling")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="leave every worker on every core (see the top of this file)")
    args = parser.parse_args()
    args.jobs = args.jobs or max(1, (os.cpu_count() or 2) // args.gpus)
    args.workers_for = {"one": 1, "two": args.gpus}
    os.makedirs(args.out, exist_ok=True)
    gpu_text = open(args.gpu_info).read() if args.gpu_info and os.path.exists(args.gpu_info) else ""
    base = args.queue.rstrip("/")
    base = base[:base.rfind("/")] if base.count("/") > 2 else base
    start = time.monotonic()
    runs = {}
    try:
        # The one-worker run is expected to take about twice as long as the other.
        runs["one"] = run(args, "one", base + "/1", args.deadline * 2 / 3 - JOIN_TIMEOUT_S / 4)
        write_report(args, runs, gpu_text)
        left = args.deadline - (time.monotonic() - start)
        runs["two"] = run(args, "two", base + "/2", left - JOIN_TIMEOUT_S / 4)
        write_report(args, runs, gpu_text)
    finally:
        with tarfile.open(os.path.join(args.out, "queue_scaling-logs.tgz"), "w:gz") as archive:
            for label in ("one", "two"):
                directory = os.path.join(args.work, label)
                for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
                    if name.endswith(".log"):
                        archive.add(os.path.join(directory, name), arcname="%s/%s" % (label, name))
    print(open(os.path.join(args.out, "queue_scaling.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
