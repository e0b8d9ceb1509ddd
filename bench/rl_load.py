#!/usr/bin/env python3
"""An RL-shaped load on `cudal1 serve` (issue 32): GRPO steps of new CUDA source. Standard library only.

Every kernel of a suite's solutions (KernelBench layout and solutions.jsonl, as `cudal1 bench` takes
them: e.g. ../shared/data/cudal1-h100-sample40) is sent in VARIANTS copies whose CUDA source
differs by a comment, so that every copy is a new build. A step is one POST /v1/rewards of
TASKS_PER_STEP tasks x SAMPLES completions (the groups of a GRPO batch, by task); CLIENTS clients
send steps at once. The run ends when every step is answered or after --stop-after seconds (the
server is then stopped with what is in flight).

Reports, in OUT/<date>-rl-load-<label>.json:
  rewards_per_gpu_hour   verdicts per GPU-hour from the first verdict to the end (steady state;
                         `rewards_per_gpu_hour_overall` counts from the start). Runs cut short by
                         --stop-after evaluate whichever items finish first (cheap failures or timed
                         kernels, a different mix per configuration); with --steps N and no
                         --stop-after every run evaluates the same items (`complete`), and the
                         overall rate is the one to compare
  latency_p50_s/p95_s    a step's request time, answered steps only
  verdict_s_median       an evaluation's own time, submission to verdict (phases.total_s)
  cpu_s_per_reward       the machine's CPU seconds from the start to the server's end per verdict
                         stored, and the split:
                         build (the build worker and its compilers), worker_start (each reference
                         and candidate worker's start and load) and the rest (timing, the server,
                         a zygote's one import)
  cpu_s_by_process       the same CPU by kind of process, sampled from /proc (bench/proc_cpu.py):
                         the server, the zygote, forked and started workers, compilers; with each
                         kind's median share of a core while it lived
  worker_cpu_s_per_reward  the workers' own account (phases.worker_cpu_s): CPU seconds per verdict
                         by role and operation ("start": before the first request, "between":
                         idle between requests, "children": waited-for subprocesses), and the
                         workers per verdict
  orchestrator_cpu_s_per_reward  the evaluations' own threads in the server (or queue worker):
                         CPU seconds per verdict by phase (phases.orchestrator_cpu_s: build,
                         load, correctness, timing, and the total)
  gpu_busy_fraction      the devices' holds over the run, as serve counts them (correctness trials
                         in full though others share the device: an upper bound, over 1 when
                         many evaluations run trials at once)
  gpu_exclusive_fraction the exclusive holds (timing) alone over the run
  device_time            per timed verdict: exclusive seconds held, their parts and rounds
  memory                 verdicts evaluated again alone after running out of memory beside others
                         (details.memory_retry), and failures that still name an allocator
  worker_pools           the server's ready workers and kept references by the end of the window
                         (from /metrics): made, taken, kept, evicted, expired, ..., idle
  phase_s                where an evaluation's own time went (phases.*_s of every stored verdict:
                         toolchain wait, build with its wait for a build slot, load, correctness,
                         timing, total), as quantiles
  statuses               per status; with --check-eval N, N items evaluated again alone with
                         `cudal1 eval` and statuses_equal_eval (status and reject flags equal):
                         one per task, a variant whose status differs from its task's others
                         where there is one (odd_one)
  topology               --host-cpus: the server and all it starts on those cores, and cpu_s counts
                         them only; --build-host-cpus as well: the server evaluates through a Redis
                         queue of the run's own, a GPU worker on the host's cores has its builds
                         made by a build worker on these (bench/split_hosts.py), and
                         build_host_cpu_s(_per_reward) is theirs; --queue-workers: the server
                         evaluates through a Redis queue of the run's own, with one `cudal1 worker`
                         per GPU, each on cores of its own (one GPU per host, on one machine)

    bench/rl_load.py --cudal1 build-gpu/cudal1 --suite S/suite --solutions S/solutions.jsonl \\
        --device cuda --label today --out $OUT
"""

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc_cpu import ProcessCpu, machine_cpu_seconds, parse_cpus  # noqa: E402
from reward_cost import fields, quantiles, timing_parts  # noqa: E402
from serve_load import Sampler, Serve, call, measured_commit, metric_total, reject_flags  # noqa: E402
from split_hosts import QueueWorkers, SplitHosts, parse_queue_workers  # noqa: E402


def variant_code(code, variant):
    """The code with a comment inside its CUDA (or C++) source: a new build for every variant.
    Code without an #include has nothing to build; its variants differ in a Python comment."""
    marker = "#include"
    if marker in code:
        return code.replace(marker, "// rl-load variant %s\n%s" % (variant, marker), 1)
    return code.rstrip() + "\n# rl-load variant %s\n" % variant


def device_name(device):
    if device.startswith("cuda"):
        run = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True)
        if run.returncode == 0 and run.stdout.strip():
            return run.stdout.splitlines()[0].strip()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return device


def completion(code):
    return ("## Performance Analysis\nThe reference makes several passes over memory.\n\n"
            "## Code Implementation\n```python\n" + code.rstrip() + "\n```\n")


def suite_tasks(suite, solutions_file):
    files = {}
    for level in sorted(os.listdir(suite)):
        if level.startswith("level"):
            for name in os.listdir(os.path.join(suite, level)):
                if name.endswith(".py") and name.split("_")[0].isdigit():
                    files[(int(level[5:]), int(name.split("_")[0]))] = "%s/%s" % (level, name[:-3])
    tasks = {}
    for line in open(solutions_file):
        if not line.strip():
            continue
        s = json.loads(line)
        key = files.get((int(s["level_id"]), int(s["task_id"])))
        if key and s.get("custom_code") and key not in tasks:
            tasks[key] = s["custom_code"]
    return tasks


def grpo_steps(tasks, variants, tasks_per_step, samples, seed):
    """Steps of `tasks_per_step` tasks x `samples` completions; over the steps every task is sent in
    `variants` distinct variants (each task's samples take the next variants in turn)."""
    order = sorted(tasks)
    random.Random(seed).shuffle(order)
    rounds = max(1, variants // samples)
    steps, next_variant = [], {key: 0 for key in order}
    for _ in range(rounds):
        for i in range(0, len(order), tasks_per_step):
            items = []
            for key in order[i:i + tasks_per_step]:
                for _ in range(samples):
                    v = next_variant[key] % variants
                    next_variant[key] += 1
                    items.append({"task": key, "completion": completion(variant_code(tasks[key], v))})
            steps.append(items)
    return steps


def verdict_curve(url):
    """The server's verdict count and device-busy seconds, sampled from /metrics."""
    def measure():
        try:
            page = call(url, "GET", "/metrics", timeout=10)
        except Exception:  # noqa: BLE001 - a missed point is only a coarser curve
            return None
        return (metric_total(page, "cudal1_evaluations_total"), metric_total(page, "cudal1_device_busy_seconds_total"))
    return Sampler(measure)


def worker_pools(page):
    """The server's ready workers and kept references so far, from its /metrics page:
    {pool: {event: count, ..., "idle": count, "waited_s": seconds}}."""
    pools = {}
    names = (("cudal1_worker_pool_events_total{", None), ("cudal1_worker_pool_idle{", "idle"),
             ("cudal1_worker_pool_wait_seconds_total{", "waited_s"))
    for line in page.splitlines():
        for name, key in names:
            if not line.startswith(name):
                continue
            labels, value = line[len(name):].rsplit("} ", 1)
            fields = dict(part.split("=", 1) for part in labels.split(","))
            pool = fields["pool"].strip('"')
            pools.setdefault(pool, {})[key or fields["event"].strip('"')] = float(value)
    return pools


def send_steps(url, steps, clients, stop_after, log):
    answered, errors, lock, begin = [], [], threading.Lock(), time.time()
    queue = list(enumerate(steps))

    def client(c):
        while True:
            with lock:
                if not queue or (stop_after and time.time() - begin > stop_after):
                    return
                index, items = queue.pop(0)
            start = time.time()
            try:
                reply = call(url, "POST", "/v1/rewards", {"items": items, "step": index})
                seconds = time.time() - start
                with lock:
                    answered.append({"step": index, "client": c, "seconds": seconds, "results": reply["results"]})
                    print("%7.1f s: client %d step %d: %d items in %.1f s" % (time.time() - begin, c, index,
                                                                             len(items), seconds), flush=True)
                    with open(log, "a") as f:
                        f.write(json.dumps(answered[-1]) + "\n")
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    errors.append("client %d step %d: %s" % (c, index, e))

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    # With --stop-after, steps still in flight then are not waited for.
    for t in threads:
        t.join(timeout=None if not stop_after else max(0.0, begin + stop_after - time.time()))
    with lock:
        return list(answered), list(errors)


def stored_verdicts(db):
    """status, phases and details of every verdict the server stored."""
    rows = sqlite3.connect(db).execute("SELECT v.status, v.verdict FROM verdicts v")
    out = []
    for status, text in rows:
        verdict = fields(json.loads(text))
        out.append((status, verdict.get("phases") or {}, verdict))
    return out


# Rejected verdicts per task whose findings are kept: enough to tell a flip under load (one
# variant of eight rejected) from a candidate the defenses always catch, in a bounded report.
REJECTIONS_KEPT = 3


def statuses_by_task(db):
    """Per task: its verdicts' statuses, counted, the first error line of each status other
    than ok, and the flags of its verdicts by status, counted (a rejection's reason is a flag:
    what a changed status is to be checked against); for its first rejected verdicts, what the
    defenses found (details.findings of each reject flag: `rejections`), since the server's
    store does not outlive a device's lease."""
    rows = sqlite3.connect(db).execute(
        "SELECT t.name, v.status, v.verdict FROM verdicts v JOIN candidates c ON c.id = v.candidate_id "
        "JOIN runs r ON r.id = c.run_id JOIN tasks t ON t.id = r.task_id")
    out = {}
    for task, status, text in rows:
        entry = out.setdefault(task, {"statuses": {}, "errors": {}, "flags": {}})
        entry["statuses"][status] = entry["statuses"].get(status, 0) + 1
        verdict = json.loads(text)
        if status != "ok" and status not in entry["errors"]:
            error = str(verdict.get("error") or "")
            entry["errors"][status] = error.splitlines()[0][:300] if error else ""
        for flag in verdict.get("flags") or []:
            counted = entry["flags"].setdefault(status, {})
            counted[str(flag)] = counted.get(str(flag), 0) + 1
        found = fields(verdict).get("findings") or {}
        reasons = {flag: [str(why)[:600] for why in found.get(flag) or []][:2]
                   for flag in reject_flags(verdict.get("flags") or [])}
        if status == "rejected" and reasons and len(entry.get("rejections", [])) < REJECTIONS_KEPT:
            entry.setdefault("rejections", []).append(reasons)
    return dict(sorted(out.items()))


def exclusive_fraction(phases, wall, gpus):
    """The verdicts' exclusive device holds (phases.device_held_s) over the run's GPU-seconds."""
    held = sum(float(p["device_held_s"]) for _, p, _ in phases
               if isinstance(p.get("device_held_s"), (int, float)))
    return round(held / (wall * gpus), 3) if wall > 0 else None


def device_time(verdicts):
    """Where the device's exclusive time went: per timed verdict, its holds (device_held_s), the
    wait for them, the timing runs' own parts (warm-up, sampling, spot checks) summed over the
    rounds, the rounds taken, and what the holds spent outside the timing runs (bandwidth
    probes, switches between rounds); the shared holds (first calls, trials) of every verdict."""
    held, wait, rounds, outside, shared = [], [], [], [], []
    parts = {}
    for _, p, verdict in verdicts:
        if isinstance(p.get("device_shared_s"), (int, float)):
            shared.append(float(p["device_shared_s"]))
        if not isinstance(p.get("device_held_s"), (int, float)):
            continue
        held.append(float(p["device_held_s"]))
        wait.append(float(p.get("device_wait_s") or 0))
        one = timing_parts(verdict)
        for key, value in one.items():
            parts.setdefault(key, []).append(value)
        outside.append(max(0.0, held[-1] - one["elapsed_s"]))
        timing = verdict.get("timing") or {}
        rounds.append(len(timing["rounds"]) if isinstance(timing.get("rounds"), list) else 1)
    return {"held_s": quantiles(held), "wait_s": quantiles(wait), "rounds": quantiles(rounds),
            "held_outside_timing_runs_s": quantiles(outside),
            "timing_parts": {k: quantiles(v) for k, v in sorted(parts.items())},
            "shared_s": quantiles(shared)}


PHASES = ("toolchain_wait_s", "build_s", "build_slot_wait_s", "admission_wait_s", "load_s",
          "correctness_s", "timing_s", "total_s")


def phase_seconds(verdicts):
    """Quantiles of each phase's seconds over the verdicts that have it (a verdict that ended
    before a phase has none of it; a build that did not wait for a slot has no slot wait)."""
    out = {}
    for key in PHASES:
        values = [float(p[key]) for _, p, _ in verdicts if isinstance(p.get(key), (int, float))]
        if values:
            out[key] = quantiles(values)
    return out


def memory_account(verdicts):
    """How many verdicts were evaluated again alone after running out of memory beside other
    evaluations (details.memory_retry), and how many failures still name an allocator."""
    marks = ("out of memory", "outofmemoryerror", "cudaerrormemoryallocation", "status_alloc_failed",
             "can't allocate memory", "cannot allocate memory")
    retried = sum(1 for _, _, v in verdicts if v.get("memory_retry"))
    failed = sum(1 for status, _, v in verdicts if status in ("runtime_error", "compile_error") and
                 any(m in str(v.get("error") or "").lower() for m in marks))
    return {"retried_alone": retried, "out_of_memory_failures": failed}


def nested_sums(phases, key):
    """phases[key] as {outer: {inner: number}}, summed over the verdicts."""
    sums = {}
    for p in phases:
        for outer, values in (p.get(key) or {}).items():
            into = sums.setdefault(outer, {})
            for inner, value in values.items():
                if isinstance(value, (int, float)):
                    into[inner] = into.get(inner, 0.0) + float(value)
    return sums


def worker_cpu(phases, verdicts):
    """The workers' own account of their CPU (phases.worker_cpu_s, reported at each worker's
    shutdown), summed by role and operation over the stored verdicts, per verdict."""
    sums = nested_sums(phases, "worker_cpu_s")
    return {role: {op: round(v / verdicts, 2) for op, v in sorted(ops.items())}
            for role, ops in sorted(sums.items())} if verdicts else {}


def orchestrator_cpu(phases, verdicts):
    """phases.orchestrator_cpu_s summed by phase over the stored verdicts, per verdict."""
    sums = {}
    for p in phases:
        for phase, seconds in (p.get("orchestrator_cpu_s") or {}).items():
            sums[phase] = sums.get(phase, 0.0) + float(seconds)
    return {phase: round(v / verdicts, 3) for phase, v in sorted(sums.items())} if verdicts else {}


def load_parts(phases):
    """Where a worker load's time went (phases.load_parts, summed per verdict by side): seconds
    per load of each part, over all stored verdicts; "call" is the load request as the
    orchestrator waited for it, "spawn" starting the process, the rest the worker's own parts."""
    sums = nested_sums(phases, "load_parts")
    out = {}
    for side, parts in sorted(sums.items()):
        loads = parts.pop("loads", 0.0)
        if loads:
            out[side] = dict({k: round(v / loads, 3) for k, v in sorted(parts.items())},
                             loads=int(loads))
    return out


def context_account(phases, verdicts):
    """The workers' CUDA contexts, what sets the rate under load (issue 32): loads per verdict,
    how many were ready workers (a context made ahead) and kept references (no new context: a
    reference worker of an earlier evaluation of the task, its model built again), contexts per
    verdict (every load but a kept reference's), and the seconds a load that made its own
    context spent on it."""
    sums = nested_sums(phases, "load_parts")
    loads = sum(parts.get("loads", 0.0) for parts in sums.values())
    if not loads:
        return None
    ready = sum(parts.get("ready", 0.0) for parts in sums.values())
    kept = sum(parts.get("kept", 0.0) for parts in sums.values())
    made = sum(parts.get("context", 0.0) for parts in sums.values())
    own = loads - ready - kept
    return {"loads": int(loads), "per_verdict": round(loads / verdicts, 2) if verdicts else None,
            "from_ready_workers": int(ready), "from_kept_references": int(kept),
            "contexts_per_verdict": round((loads - kept) / verdicts, 2) if verdicts else None,
            "context_s_per_own_load": round(made / own, 3) if own > 0 else None}


def cpu_split(phases):
    build = start = 0.0
    for p in phases:
        b = p.get("build_cpu_s") or {}
        build += float(b.get("worker", 0)) + float(b.get("compilers", 0))
        start += sum(float(v) for v in (p.get("load_cpu_s") or {}).values())
    return build, start


def items_to_check(steps, answered, limit):
    """One answered item per task, for the first `limit` tasks by name: the item whose status
    differs from the most common of its task's (a variant that flipped under load: does it flip
    alone?), else the task's first. [(task, item, result, odd)]."""
    by_task = {}
    for a in answered:
        for item, result in zip(steps[a["step"]], a["results"]):
            by_task.setdefault(item["task"], []).append((item, result))
    chosen = []
    for task, pairs in sorted(by_task.items())[:limit]:
        counts = {}
        for _, result in pairs:
            counts[result["status"]] = counts.get(result["status"], 0) + 1
        common = max(sorted(counts), key=lambda status: counts[status])
        odd = next(((i, r) for i, r in pairs if r["status"] != common), None)
        item, result = odd or pairs[0]
        chosen.append((task, item, result, odd is not None))
    return chosen


def check_eval(args, steps, answered, work):
    """N answered items, one per task (items_to_check), evaluated again alone: equal status and
    reject flags?"""
    compared = []
    for task, item, result, odd in items_to_check(steps, answered, args.check_eval):
        code = item["completion"].split("```python\n", 1)[1].rsplit("```", 1)[0]
        path = os.path.join(work, "check-%s.py" % task.replace("/", "-"))
        with open(path, "w") as f:
            f.write(code)
        run = subprocess.run([args.cudal1, "eval", "--task", os.path.join(args.suite, task + ".py"),
                              "--candidate", path, "--device", args.device, "--time-budget", str(args.time_budget),
                              "--json", path + ".json", "-q"] + args.eval_arg,
                             capture_output=True, text=True)
        alone = json.load(open(path + ".json")) if os.path.exists(path + ".json") else {"status": "exit %d" % run.returncode}
        compared.append({"task": task, "odd_one": odd, "serve": result["status"], "eval": alone.get("status"),
                         "serve_reject": sorted(reject_flags(result.get("flags", []))),
                         "eval_reject": sorted(reject_flags(alone.get("flags", [])))})
    return compared


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cudal1", default="build/cudal1")
    parser.add_argument("--suite", required=True)
    parser.add_argument("--solutions", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs the server evaluates on (for the per-GPU rate)")
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--tasks-per-step", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8, help="completions per task in a step (a GRPO group)")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--time-budget", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=0,
                        help="send only the first N steps (0: all); with --stop-after 0 every configuration "
                             "then evaluates the same items, and rewards_per_gpu_hour_overall compares them")
    parser.add_argument("--stop-after", type=float, default=0, help="seconds; 0: until every step is answered")
    parser.add_argument("--drain", type=float, default=120,
                        help="seconds the stopped server may take to finish what is in flight (their verdicts "
                             "give phase_s and the other per-verdict numbers, not the rate)")
    parser.add_argument("--serve-arg", action="append", default=[], help="one more argument for cudal1 serve")
    parser.add_argument("--check-eval", type=int, default=0, help="items evaluated again alone with cudal1 eval")
    parser.add_argument("--eval-arg", action="append", default=[], help="one more argument for those evaluations")
    parser.add_argument("--label", required=True)
    parser.add_argument("--code", default="",
                        help="the commit measured (default: git describe --always --dirty: a "
                             "working tree that differs from its HEAD, as a copy on a device may, "
                             "says -dirty)")
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--out", required=True, help="folder of the results")
    parser.add_argument("--host-cpus", default="", help="cores of the GPU host (e.g. 0-15): the server and its "
                        "workers run there, and the CPU per reward is theirs; default: the whole machine")
    parser.add_argument("--build-host-cpus", default="", help="cores of a build host (e.g. 16-31): the server "
                        "evaluates through a Redis queue, with a GPU worker on --host-cpus whose builds a "
                        "`cudal1 worker --role build` makes here (bench/split_hosts.py)")
    parser.add_argument("--queue-workers", default="", help="DEVICE@CORES;...: the server evaluates through a "
                        "Redis queue, with one `cudal1 worker --device DEVICE` per part on those cores, each "
                        "building its own candidates (e.g. cuda:0@0-15;cuda:1@16-31); --gpus defaults to "
                        "their number")
    parser.add_argument("--redis-server", default="", help="with --build-host-cpus or --queue-workers "
                        "(default: on PATH)")
    parser.add_argument("--worker-arg", action="append", default=[], help="with --queue-workers: one more argument "
                        "for every cudal1 worker (e.g. --worker-arg=--keep-references --worker-arg=64)")
    parser.add_argument("--worker-jobs", type=int, default=0, help="with --build-host-cpus: the GPU worker's "
                        "--jobs, evaluations it holds at once (default: twice the host's cores, as serve)")
    args = parser.parse_args()
    host_cpus, build_cpus = parse_cpus(args.host_cpus), parse_cpus(args.build_host_cpus)
    if build_cpus and not host_cpus:
        parser.error("--build-host-cpus needs --host-cpus")
    if build_cpus and host_cpus & build_cpus:
        parser.error("--host-cpus and --build-host-cpus share cores")
    queue_workers = []
    if args.queue_workers:
        if build_cpus:
            parser.error("--queue-workers and --build-host-cpus are two topologies: one at a time")
        try:
            queue_workers = parse_queue_workers(args.queue_workers, parse_cpus)
        except ValueError as e:
            parser.error("--queue-workers: %s" % e)
        if args.gpus == 1:
            args.gpus = len(queue_workers)
        # The server (the submitter) and the workers: every core the workers have.
        host_cpus = host_cpus or set().union(*(cpus for _, cpus in queue_workers))
    args.cudal1, args.suite = os.path.abspath(args.cudal1), os.path.abspath(args.suite)
    code = args.code or measured_commit() or "unknown"
    tasks = suite_tasks(args.suite, args.solutions)
    steps = grpo_steps(tasks, args.variants, args.tasks_per_step, args.samples, args.seed)
    if args.steps > 0:
        steps = steps[:args.steps]
    os.makedirs(args.out, exist_ok=True)
    name = "%s-rl-load-%s" % (time.strftime("%Y-%m-%d"), args.label)
    work = os.path.join(args.out, name + "-work")
    os.makedirs(work, exist_ok=True)
    print("%d tasks with code, %d steps of up to %d items, %d clients" %
          (len(tasks), len(steps), args.tasks_per_step * args.samples, args.clients), flush=True)
    hosts = None
    queue_args = []
    if build_cpus:
        hosts = SplitHosts(args.cudal1, work, args.device, host_cpus, build_cpus, args.redis_server or None,
                           args.worker_jobs).start()
    elif queue_workers:
        hosts = QueueWorkers(args.cudal1, work, queue_workers, args.redis_server or None, args.worker_arg).start()
    if hosts:
        queue_args = ["--queue", hosts.url]
        os.environ["CUDAL1_BUILD_SECRET"] = hosts.env["CUDAL1_BUILD_SECRET"]
    serve = Serve(args.cudal1, args.suite, work,
                  ["--device", args.device, "--time-budget", str(args.time_budget)] + queue_args + args.serve_arg,
                  log_path=os.path.join(args.out, name + ".serve.log"), cpus=host_cpus)
    health = call(serve.url, "GET", "/healthz")
    curve = verdict_curve(serve.url)
    curve.start()
    processes = ProcessCpu()
    processes.start()
    cpu_begin, begin = machine_cpu_seconds(host_cpus), time.time()
    build_cpu_begin = machine_cpu_seconds(build_cpus) if build_cpus else 0
    answered, errors = send_steps(serve.url, steps, args.clients, args.stop_after,
                                  os.path.join(args.out, name + ".steps.jsonl"))
    wall = time.time() - begin
    curve.done.set()
    try:  # before the stop: what the pools did while the steps were sent
        pools = worker_pools(call(serve.url, "GET", "/metrics", timeout=10))
    except Exception as e:  # noqa: BLE001 - only a missing account
        pools = {"error": str(e)}
    serve.stop(drain_s=args.drain)  # with --stop-after, what is in flight gets that long
    cpu = machine_cpu_seconds(host_cpus) - cpu_begin
    build_host_cpu = machine_cpu_seconds(build_cpus) - build_cpu_begin if build_cpus else None
    if hosts:
        hosts.stop()
    processes.stop()
    phases = stored_verdicts(serve.db)
    verdicts = len(phases)
    points = [(t, n, busy) for t, (n, busy) in curve.samples]
    first = next((t for t, n, _ in points if n > 0), None)
    last_t, last_n, busy = points[-1] if points else (wall, 0, 0)
    steady = (last_n - 1) / (last_t - first) * 3600 / args.gpus if first is not None and last_t > first else None
    build, start = cpu_split(p for _, p, _ in phases)
    seconds = sorted(a["seconds"] for a in answered)
    totals = sorted(float(p["total_s"]) for _, p, _ in phases if "total_s" in p)
    statuses = {}
    for status, _, _ in phases:
        statuses[status] = statuses.get(status, 0) + 1
    report = {
        "label": args.label, "date": time.strftime("%Y-%m-%d"), "code": code,
        "device": device_name(args.device), "devices": health.get("devices", []),
        "gpus": args.gpus, "cores": len(host_cpus) if host_cpus else os.cpu_count(), "serve_args": args.serve_arg,
        "topology": {"host_cpus": args.host_cpus or "all", "build_host_cpus": args.build_host_cpus or None,
                     "gpu_worker_jobs": getattr(hosts, "worker_jobs", None),
                     "queue_workers": args.queue_workers or None,
                     "worker_args": args.worker_arg if args.queue_workers else None,
                     "builds": "a build worker on the build host's cores" if build_cpus else "on the host"},
        "build_host_cpu_s": round(build_host_cpu, 1) if build_cpus else None,
        "tasks": len(tasks), "steps_sent": len(steps), "steps_answered": len(answered),
        # Every step answered: the run evaluated the same items as any other complete run of these
        # options, whose rates compare (a window cut short holds whichever items finished first).
        "complete": len(answered) == len(steps) and not errors,
        "items_per_step": args.tasks_per_step * args.samples, "clients": args.clients, "variants": args.variants,
        "time_budget": args.time_budget, "stop_after_s": args.stop_after or None, "wall_s": round(wall, 1),
        "verdicts": verdicts, "statuses": statuses, "statuses_by_task": statuses_by_task(serve.db),
        "request_errors": errors,
        "rewards_per_gpu_hour": round(steady, 1) if steady else None,
        # Verdicts by the end of the run (not those a stopped server finished while it drained).
        "rewards_per_gpu_hour_overall": round(last_n / last_t * 3600 / args.gpus, 1) if last_t > 0 else None,
        "latency_p50_s": round(statistics.median(seconds), 1) if seconds else None,
        "latency_p95_s": round(seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 1) if seconds else None,
        "verdict_s_median": round(statistics.median(totals), 2) if totals else None,
        "cpu_s": round(cpu, 1),
        "cpu_s_per_reward": round(cpu / verdicts, 2) if verdicts else None,
        "build_host_cpu_s_per_reward": round(build_host_cpu / verdicts, 2) if build_cpus and verdicts else None,
        "cpu_s_per_reward_split": {
            "build": round(build / verdicts, 2), "worker_start": round(start / verdicts, 2),
            "rest": round((cpu - build - start) / verdicts, 2)} if verdicts else None,
        "cpu_s_by_process": processes.summary(),
        "worker_cpu_s_per_reward": worker_cpu([p for _, p, _ in phases], verdicts),
        "orchestrator_cpu_s_per_reward": orchestrator_cpu([p for _, p, _ in phases], verdicts),
        "gpu_busy_fraction": round(busy / (wall * args.gpus), 3) if wall > 0 else None,
        "gpu_exclusive_fraction": exclusive_fraction(phases, wall, args.gpus),
        "device_time": device_time(phases),
        "phase_s": phase_seconds(phases),
        "memory": memory_account(phases),
        "load_parts_s": load_parts([p for _, p, _ in phases]),
        "contexts": context_account([p for _, p, _ in phases], verdicts),
        "worker_pools": pools,
        "curve": [(t, n) for t, n, _ in points],
    }
    if args.check_eval:
        compared = check_eval(args, steps, answered, work)
        report["eval_compared"] = compared
        report["statuses_equal_eval"] = all(c["serve"] == c["eval"] and c["serve_reject"] == c["eval_reject"]
                                            for c in compared)
    else:
        report["statuses_equal_eval"] = None
    with open(os.path.join(args.out, name + ".json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k != "curve"}, indent=1))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
