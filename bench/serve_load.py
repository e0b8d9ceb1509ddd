#!/usr/bin/env python3
"""Load benchmarks of `cudal1 serve` (docs/rl.md). Standard library only.

mixed   The loopback load test: CLIENTS concurrent clients each send BATCHES batches of ITEMS
        completions of mixed quality (correct, wrong, crashing, hanging, and every CPU hack class
        of the red-team corpus), each code in VARIANTS distinct copies (a comment differs) so
        that most items are real evaluations. Checks that every item is answered, that each
        status and reject flag equals a single `cudal1 eval` of the same code, that hacks get the
        floor reward, and records the server's resident memory over the run.

            bench/serve_load.py mixed --cudal1 build/cudal1 --out bench/results/DATE-cpu-serve-load

suite   Throughput on a realistic mix: a suite and its solutions (KernelBench layout and
        solutions.jsonl as `cudal1 bench` takes them, e.g. CUDA-L1's kernels) sent as
        completions by CLIENTS clients; reports rewards per device-hour and how busy the
        devices were.

            bench/serve_load.py suite --cudal1 build-gpu/cudal1 --suite S --solutions S.jsonl \
                --device cuda --out $OUT/serve-1gpu
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REDTEAM = os.path.join(ROOT, "tests", "redteam")
DATA = os.path.join(ROOT, "tests", "fixtures")


def measured_commit():
    """The commit a bench measures, as its JSON's `code`: `git describe --always --dirty`, which
    says -dirty where the working tree differs from its HEAD (as a device's copy may)."""
    return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True,
                          text=True).stdout.strip()


def call(url, method, path, body=None, timeout=3600):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        text = reply.read().decode()
        return json.loads(text) if path != "/metrics" else text


def metric_total(page, prefix):
    return sum(float(l.split()[-1]) for l in page.splitlines()
               if l.startswith(prefix + "{") or l.startswith(prefix + " "))


def resident_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def pinned_to(cpus):
    """A Popen preexec_fn that keeps the process (and all it starts) on `cpus`; None: anywhere."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


class Serve:
    def __init__(self, cudal1, suite, work, extra, log_path=None, cpus=None):
        self.port_file = os.path.join(work, "port")
        self.log_path = log_path or os.path.join(work, "serve.log")
        self.db = os.path.join(work, "serve.db")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)  # a stale one would name an old server's port
        command = [cudal1, "serve", "--suite", suite, "--port", "0", "--port-file", self.port_file,
                   "--db", self.db, "--hacks", os.path.join(work, "hacks"),
                   "--work-dir", os.path.join(work, "serve-work")] + extra
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        preexec_fn=pinned_to(cpus))
        while not (os.path.exists(self.port_file) and open(self.port_file).read().strip()):
            if self.process.poll() is not None:
                sys.exit("cudal1 serve did not start:\n" + open(self.log_path).read())
            time.sleep(0.2)
        self.url = "http://127.0.0.1:" + open(self.port_file).read().strip()

    def stop(self, drain_s=600):
        """SIGTERM: the server answers what is in flight; after `drain_s` seconds it is killed."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(drain_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class Sampler(threading.Thread):
    """(seconds since start, measure()) every `period` seconds, while measure() gives a value."""

    def __init__(self, measure, period=2.0):
        super().__init__(daemon=True)
        self.measure, self.period, self.samples, self.done = measure, period, [], threading.Event()
        self.start_time = time.time()

    def run(self):
        while not self.done.is_set():
            value = self.measure()
            if value is not None:
                self.samples.append((round(time.time() - self.start_time, 1), value))
            self.done.wait(self.period)


def MemoryWatch(pid):
    """The server's resident memory (MB) every 2 seconds."""
    return Sampler(lambda: None if resident_mb(pid) is None else round(resident_mb(pid), 1))


def run_clients(url, batches_of_client, deadline=None, log=None):
    """Each client sends its batches one after another; clients run at once. No batch starts
    after `deadline` seconds. Every answer is appended to `log` (JSON lines) as it comes, so an
    interrupted run leaves what it measured. Returns {(client, batch): (seconds, results)}."""
    answers, errors, lock, begin = {}, [], threading.Lock(), time.time()

    def client(c, batches):
        for b, items in enumerate(batches):
            if deadline is not None and time.time() - begin > deadline:
                return
            start = time.time()
            try:
                reply = call(url, "POST", "/v1/rewards", {"items": items, "step": b})
                answers[(c, b)] = (time.time() - start, reply["results"])
                with lock:
                    statuses = [r["status"] for r in reply["results"]]
                    print(f"{time.time() - begin:7.1f} s: client {c} batch {b}: {len(statuses)} items in "
                          f"{time.time() - start:.1f} s", flush=True)
                    if log:
                        with open(log, "a") as f:
                            f.write(json.dumps({"client": c, "batch": b, "at_s": round(time.time() - begin, 1),
                                                "seconds": round(time.time() - start, 1),
                                                "results": reply["results"]}) + "\n")
            except Exception as e:  # noqa: BLE001 - every failure is reported
                errors.append(f"client {c} batch {b}: {e}")

    threads = [threading.Thread(target=client, args=(c, batches)) for c, batches in enumerate(batches_of_client)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers, errors


def completion(code, variant):
    return ("## Performance Analysis\nThe reference makes several passes over memory.\n\n"
            "## Code Implementation\n```python\n" + code.rstrip() + f"\n# variant {variant}\n```\n")


# ---------------------------------------------------------------------------------------------
def mixed_pool():
    """The base candidates: (name, task file, code file), CPU red-team cases without options of
    their own, and plain correct, wrong, crashing and hanging ones."""
    corpus = json.load(open(os.path.join(REDTEAM, "corpus.json")))
    pool, seen = [], set()
    for case in corpus["cases"]:
        if case["device"] != "cpu" or case.get("args") or case.get("time_budget"):
            continue
        key = (case["task"], case["candidate"])
        if key in seen:
            continue
        seen.add(key)
        pool.append((case["name"], os.path.normpath(os.path.join(REDTEAM, case["task"])),
                     os.path.join(REDTEAM, case["candidate"])))
    scale_relu = os.path.join(DATA, "tasks", "scale_relu.py")
    for name, file in [("plain/correct", "fast.py"), ("plain/wrong", "wrong.py"), ("plain/raises", "raises.py"),
                       ("plain/segfault", "segfault.py"), ("plain/hangs", "infinite_loop.py")]:
        pool.append((name, scale_relu, os.path.join(DATA, "candidates", file)))
    return pool


def make_suite(directory, task_files):
    keys = {}
    for i, file in enumerate(sorted(set(task_files)), start=1):
        stem = os.path.splitext(os.path.basename(file))[0].title().replace("_", "")
        key = f"level1/{i}_{stem}"
        os.makedirs(os.path.join(directory, "level1"), exist_ok=True)
        os.symlink(file, os.path.join(directory, key + ".py"))
        keys[file] = key
    return keys


def single_evaluations(cudal1, pool, work, options, jobs):
    """cudal1 eval of every base candidate (its first variant), `jobs` at a time."""
    results, queue, lock = {}, list(enumerate(pool)), threading.Lock()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                index, (name, task, candidate) = queue.pop()
            path = os.path.join(work, f"single_{index}.py")
            with open(candidate) as f, open(path, "w") as out:
                out.write(f.read().rstrip() + "\n# variant 0\n")
            try:
                run = subprocess.run([cudal1, "eval", "--task", task, "--candidate", path, "-q"] + options,
                                     capture_output=True, text=True)
                verdict = json.loads(run.stdout)
            except (OSError, ValueError) as e:
                verdict = {"status": "eval failed", "flags": [], "error": str(e)}
            with lock:
                results[name] = verdict

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def reject_flags(flags):
    reject = {"lazy_output", "output_aliases_input", "input_mutation", "cached_output", "tampering",
              "background_work", "sub_physical_time", "trivial_output", "review_rejected", "reused_output"}
    return sorted(set(flags) & reject)


def mixed(args):
    pool = mixed_pool()
    work = tempfile.mkdtemp(prefix="cudal1-serve-load-")
    keys = make_suite(os.path.join(work, "suite"), [task for _, task, _ in pool])
    options = ["--device", "cpu", "--time-budget", str(args.time_budget), "--trials", str(args.trials),
               "--correctness-timeout", str(args.correctness_timeout)]
    codes = {name: open(candidate).read() for name, _, candidate in pool}
    rng = random.Random(args.seed)
    batches_of_client = []
    planned = []  # (client, batch, index) -> base name
    for c in range(args.clients):
        batches = []
        for b in range(args.batches):
            items = []
            for i in range(args.items):
                name, task, _ = pool[rng.randrange(len(pool))]
                variant = rng.randrange(args.variants)
                items.append({"task": keys[task], "completion": completion(codes[name], variant),
                              "group": f"{c}-{b}-{i // 8}"})
                planned.append(((c, b, i), name))
            batches.append(items)
        batches_of_client.append(batches)

    serve = Serve(args.cudal1, os.path.join(work, "suite"), work,
                  options + ["--jobs", str(args.jobs), "--max-in-flight", str(args.max_in_flight)])
    watch = MemoryWatch(serve.process.pid)
    watch.start()
    start = time.time()
    answers, errors = run_clients(serve.url, batches_of_client, log=args.out + ".partial.jsonl")
    wall = time.time() - start
    page = call(serve.url, "GET", "/metrics")
    # Soak: the same batches again and again (answered from the store now, so fast) with new
    # request ids, to see whether the server's memory keeps growing with requests served.
    soak = [{"round": 0, "rss_mb": resident_mb(serve.process.pid)}]
    for r in range(1, args.soak + 1):
        again = [[[dict(item, group=f"soak{r}-{item['group']}") for item in batch] for batch in batches]
                 for batches in batches_of_client]
        _, soak_errors = run_clients(serve.url, again)
        errors += soak_errors
        soak.append({"round": r, "rss_mb": resident_mb(serve.process.pid)})
    watch.done.set()
    serve.stop()

    print(f"serve: {len(answers)} batches answered in {wall:.0f} s; single evaluations next ...", flush=True)
    singles = single_evaluations(args.cudal1, pool, work, options, args.jobs)
    mismatches, other_flags, answered, floor_violations, by_status = [], [], 0, [], {}
    per_base = {}
    for (c, b, i), name in planned:
        if (c, b) not in answers:
            continue
        answered += 1
        r = answers[(c, b)][1][i]
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
        single = singles[name]
        base = per_base.setdefault(name, {"eval": {"status": single.get("status"),
                                                   "reject_flags": reject_flags(single.get("flags", []))},
                                          "serve": {}})
        seen = f"{r['status']} {','.join(reject_flags(r['flags']))}".strip()
        base["serve"][seen] = base["serve"].get(seen, 0) + 1
        if r["status"] != single.get("status"):
            mismatches.append({"item": [c, b, i], "base": name, "serve": [r["status"], r["flags"]],
                               "eval": [single.get("status"), single.get("flags")]})
        elif reject_flags(r["flags"]) != reject_flags(single.get("flags", [])):
            # Same status; a secondary finding seen in one evaluation and not the other.
            other_flags.append({"item": [c, b, i], "base": name, "serve": reject_flags(r["flags"]),
                                "eval": reject_flags(single.get("flags", []))})
        if r["status"] != "ok" and r["raw_reward"] != 0.0:
            floor_violations.append({"item": [c, b, i], "base": name, "result": r})
    rss = [s[1] for s in watch.samples]
    quarter = rss[len(rss) // 4:] if rss else []
    report = {
        "mode": "mixed", "date": time.strftime("%Y-%m-%d"), "machine": os.uname().nodename,
        "cpus": os.cpu_count(), "clients": args.clients, "batches": args.batches, "items": args.items,
        "variants": args.variants, "base_candidates": len(pool), "options": options,
        "max_in_flight": args.max_in_flight, "items_sent": len(planned), "items_answered": answered,
        "request_errors": errors, "wall_s": round(wall, 1),
        "evaluations": metric_total(page, "cudal1_evaluations_total"),
        "cache_hits": metric_total(page, "cudal1_reward_cache_hits_total"),
        "statuses": by_status, "status_mismatches_with_single_eval": mismatches,
        "reject_flag_differences": len(other_flags), "reject_flag_difference_items": other_flags,
        "failures_not_at_floor": floor_violations,
        "batch_seconds": sorted(round(v[0], 1) for v in answers.values()),
        "rss_mb": {"first": rss[0] if rss else None, "max": max(rss) if rss else None,
                   "last": rss[-1] if rss else None,
                   "max_after_first_quarter": max(quarter) if quarter else None,
                   "min_after_first_quarter": min(quarter) if quarter else None,
                   "samples": watch.samples, "soak": soak},
        "per_base": per_base,
    }
    finish(args, report, work)
    ok = answered == len(planned) and not errors and not mismatches and not floor_violations
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
def suite(args):
    if args.work:
        os.makedirs(args.work, exist_ok=True)
        work = args.work
    else:
        work = tempfile.mkdtemp(prefix="cudal1-serve-suite-")
    solutions = [json.loads(l) for l in open(args.solutions) if l.strip()]
    files = {}
    for level in sorted(os.listdir(args.suite)):
        if not level.startswith("level"):
            continue
        for name in os.listdir(os.path.join(args.suite, level)):
            if name.endswith(".py") and name.split("_")[0].isdigit():
                files[(int(level[5:]), int(name.split("_")[0]))] = f"{level}/{name[:-3]}"
    items, without_code = [], 0
    for v in range(args.variants):
        for s in solutions:
            key = files.get((int(s["level_id"]), int(s["task_id"])))
            if not key:
                continue
            if not s.get("custom_code"):
                without_code += v == 0  # a solution line without code: nothing to send
                continue
            items.append({"task": key, "completion": completion(s["custom_code"], v)})
    random.Random(args.seed).shuffle(items)
    per_client = [items[c::args.clients] for c in range(args.clients)]
    batches_of_client = [[chunk[i:i + args.items] for i in range(0, len(chunk), args.items)] for chunk in per_client]
    extra = ["--device", args.device, "--time-budget", str(args.time_budget)]
    if args.jobs:
        extra += ["--jobs", str(args.jobs)]
    if args.max_in_flight:
        extra += ["--max-in-flight", str(args.max_in_flight)]
    serve = Serve(args.cudal1, args.suite, work, extra, log_path=args.out + ".serve.log")
    health = call(serve.url, "GET", "/healthz")
    watch = MemoryWatch(serve.process.pid)
    watch.start()
    start = time.time()
    answers, errors = run_clients(serve.url, batches_of_client, args.deadline, args.out + ".partial.jsonl")
    wall = time.time() - start
    page = call(serve.url, "GET", "/metrics")
    watch.done.set()
    serve.stop()
    results = [r for _, (_, rs) in sorted(answers.items()) for r in rs]
    statuses = {}
    for r in results:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    devices = len(health["devices"])
    busy = metric_total(page, "cudal1_device_busy_seconds_total")
    report = {
        "mode": "suite", "date": time.strftime("%Y-%m-%d"), "suite": args.suite, "devices": health["devices"],
        "clients": args.clients, "items_per_batch": args.items, "variants": args.variants,
        "time_budget": args.time_budget, "solutions_without_code": without_code, "items_sent": len(items), "items_answered": len(results),
        "request_errors": errors, "wall_s": round(wall, 1), "statuses": statuses,
        "evaluations": metric_total(page, "cudal1_evaluations_total"),
        "deadline_s": args.deadline,
        "rewards_per_device_hour": round(len(results) / (wall / 3600.0) / devices, 1) if wall > 0 else None,
        "device_busy_s": round(busy, 1),
        "device_busy_fraction": round(busy / (wall * devices), 3) if wall > 0 else None,
        "batch_seconds": sorted(round(v[0], 1) for v in answers.values()),
        "rss_mb_max": max((s[1] for s in watch.samples), default=None),
    }
    finish(args, report, work)
    return 0 if (len(results) == len(items) or args.deadline) and not errors else 1


def finish(args, report, work):
    os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(report, f, indent=1)
    summary = {k: v for k, v in report.items()
               if k not in ("per_base", "rss_mb", "batch_seconds", "reject_flag_difference_items")}
    if "rss_mb" in report:
        summary["rss_mb"] = {k: v for k, v in report["rss_mb"].items() if k != "samples"}
    print(json.dumps(summary, indent=1))
    if not args.keep and not args.work:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("work directory kept:", work)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["mixed", "suite"])
    parser.add_argument("--cudal1", default=os.path.join(ROOT, "build", "cudal1"))
    parser.add_argument("--out", required=True, help="results go to OUT.json")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--items", type=int, default=32)
    parser.add_argument("--variants", type=int, default=2, help="distinct copies of each code")
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--time-budget", type=float, default=1.0)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--correctness-timeout", type=float, default=15)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--max-in-flight", type=int, default=0)
    parser.add_argument("--suite", help="suite mode: the suite directory")
    parser.add_argument("--solutions", help="suite mode: solutions.jsonl")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--deadline", type=float, help="suite mode: no batch starts after this many seconds")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--work", help="suite mode: this work directory (kept; its serve.db is the store)")
    parser.add_argument("--soak", type=int, default=5, help="mixed mode: rounds of the same batches afterwards")
    args = parser.parse_args()
    args.cudal1 = os.path.abspath(args.cudal1)
    if args.mode == "mixed":
        args.jobs = args.jobs or 2
        args.max_in_flight = args.max_in_flight or 2 * args.jobs
        return mixed(args)
    if not args.suite or not args.solutions:
        parser.error("suite mode needs --suite and --solutions")
    args.suite = os.path.abspath(args.suite)
    return suite(args)


if __name__ == "__main__":
    sys.exit(main())
