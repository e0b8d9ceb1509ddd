#!/usr/bin/env python3
"""Scenarios of the Redis queue (run by CTest, label queue): `cudal1 bench --queue` against
CPU `cudal1 worker` processes and a redis-server of the test's own on a free loopback port.

  statuses_match_local  3 workers run a 12-task bench; every task's status (and the shape of
                        results.jsonl and summary.json) equals what the local bench gives.
  worker_killed         a worker is killed -9 in the middle of a job: its job is claimed again
                        by another worker and every task has exactly one result.
  redis_restarted       redis-server is killed -9 and started again (same append-only file) in
                        the middle of the run: workers and the bench reconnect and it completes.
  poison_job            a candidate that kills every worker taking it is failed as runtime_error
                        with the reason after --max-deliveries deliveries, not retried for ever.
  remote_builds         a CPU build worker (--role build) makes an evaluating worker's C++
                        build, which loads it without compiling; a worker holding another build
                        secret refuses the build worker's answer (and builds it itself).

Exits 77 (CTest's skip code) when redis-server is not installed. Standard library only.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
FAILURES = []
RUN_OPTIONS = ["--device", "cpu", "--time-budget", "1", "--trials", "2", "-q"]

# The 12-task suite: (level, id, task, candidate or None, expected status). The tasks and
# candidates are the ones tests/fixtures holds for the engine's own tests.
SUITE = [
    (1, 1, "scale_relu", "fast.py", "ok"),
    (1, 2, "linear_tanh", "linear_same.py", "ok"),
    (1, 3, "scale_relu", "wrong.py", "incorrect"),
    (1, 4, "scale_relu", "raises.py", "runtime_error"),
    (1, 5, "scale_relu", "no_modelnew.py", "compile_error"),
    (1, 6, "scale_relu", None, "missing"),
    (2, 1, "scale_relu", "wrong_shape.py", "incorrect"),
    (2, 2, "scale_relu", "segfault.py", "runtime_error"),
    (2, 3, "scale_relu", "import_error.py", "compile_error"),
    (2, 4, "scale_relu", "overrides_task.py", "ok"),
    (2, 5, "scale_relu", "../../redteam/hacks/output_aliases_input/write_into_input.py", "rejected"),
    (2, 6, "scale_relu", "nan_output.py", "incorrect"),
]
EVALUATED = sum(1 for entry in SUITE if entry[3] is not None)


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL: " + message, file=sys.stderr)
    return condition


def task_key(level, task_id, task):
    return "level%d/%d_%s" % (level, task_id, task)


def read_lines(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def statuses(out):
    path = os.path.join(out, "results.jsonl")
    if not os.path.exists(path):
        return {}
    return {"level%d/%s" % (line["level"], line["task_name"]): line["status"] for line in read_lines(path)}


def expected_statuses():
    return {task_key(level, task_id, task): status for level, task_id, task, _, status in SUITE}


def make_suite(root, tmp, entries=SUITE):
    """The suite directory and its solutions file, written under tmp."""
    suite = os.path.join(tmp, "suite")
    solutions = os.path.join(tmp, "solutions.jsonl")
    with open(solutions, "w") as lines:
        for level, task_id, task, candidate, _ in entries:
            directory = os.path.join(suite, "level%d" % level)
            os.makedirs(directory, exist_ok=True)
            shutil.copy(os.path.join(root, "tests", "fixtures", "tasks", task + ".py"),
                        os.path.join(directory, "%d_%s.py" % (task_id, task)))
            code = None
            if candidate is not None:
                with open(os.path.join(root, "tests", "fixtures", "candidates", candidate)) as handle:
                    code = handle.read()
            lines.write(json.dumps({"level_id": level, "task_id": task_id, "custom_code": code}) + "\n")
    return suite, solutions


class Redis:
    """A redis-server of this test's own, and the few commands the checks need (RESP by hand)."""

    def __init__(self, binary, directory):
        self.binary = binary
        self.directory = directory
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = None
        self.url = "redis://127.0.0.1:%d/0" % self.port

    def start(self):
        # An append-only file fsynced on every write: a restart, even after kill -9, keeps the
        # streams, groups and keys, as docs/scale-out.md recommends for production.
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.directory,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--logfile", os.path.join(self.directory, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.command("PING") == "PONG":
                    return
            except OSError:
                time.sleep(0.1)
            except RuntimeError as error:
                # A restarted server answers -LOADING while it reads its append-only file back
                # (longer on a loaded machine): not up yet.
                if not str(error).startswith("LOADING"):
                    raise
                time.sleep(0.1)
        raise RuntimeError("redis-server did not start on port %d" % self.port)

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def command(self, *args):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as connection:
            payload = "*%d\r\n" % len(args)
            for arg in args:
                data = str(arg).encode()
                payload += "$%d\r\n%s\r\n" % (len(data), data.decode())
            connection.sendall(payload.encode())
            return self._read(connection.makefile("rb"))

    def _read(self, stream):
        line = stream.readline().decode().rstrip("\r\n")
        kind, rest = line[0], line[1:]
        if kind == "+":
            return rest
        if kind == "-":
            raise RuntimeError(rest)
        if kind == ":":
            return int(rest)
        if kind == "$":
            if int(rest) < 0:
                return None
            data = stream.read(int(rest) + 2)
            return data[:-2].decode()
        if kind == "*":
            return None if int(rest) < 0 else [self._read(stream) for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line)


class Cluster:
    """Workers (cudal1 worker processes) and their logs."""

    def __init__(self, args, redis, tmp):
        self.args = args
        self.redis = redis
        self.tmp = tmp
        self.workers = {}

    def start_worker(self, name, *extra, env=None):
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        process = subprocess.Popen([self.args.cudal1, "worker", "--queue", self.redis.url, "--device", "cpu",
                                    "--name", name, "--jobs", "1"] + list(extra),
                                   stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))
        self.workers[name] = process

    def start_workers(self, *options, count=3):
        """w1, w2, ... with the same options, once all of them have joined."""
        for index in range(1, count + 1):
            self.start_worker("w%d" % index, *options)
        self.wait_for_workers(count)

    def wait_for_workers(self, count, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.status()["workers"]) >= count:
                return True
            time.sleep(0.5)
        return check(False, "%d workers did not join within %d s:\n%s" % (count, timeout, self.logs()))

    def status(self):
        result = subprocess.run([self.args.cudal1, "queue", "status", "--queue", self.redis.url, "--json"],
                                capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError("queue status failed: " + result.stderr)
        return json.loads(result.stdout)

    def log(self, name):
        with open(os.path.join(self.tmp, name + ".log")) as handle:
            return handle.read()

    def logs(self):
        return "\n".join("--- %s\n%s" % (name, self.log(name)[-3000:]) for name in self.workers)

    def stop(self):
        for process in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers.values():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def bench(args, out, suite, solutions, queue=None, background=False):
    command = [args.cudal1, "bench", "--suite", suite, "--solutions", solutions, "--out", out] + RUN_OPTIONS
    if queue:
        command += ["--queue", queue]
    else:
        command += ["--jobs", "2"]
    print("$ " + " ".join(command))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if background:
        return process
    return finish(process)


def start_bench(args, tmp, redis):
    """The 12-task suite's bench on the queue, in the background: (its --out, the process)."""
    suite, solutions = make_suite(args.root, tmp)
    out = os.path.join(tmp, "out")
    return out, bench(args, out, suite, solutions, queue=redis.url, background=True)


def finish(process, timeout=900):
    stdout, stderr = process.communicate(timeout=timeout)
    check(process.returncode == 0, "bench exit code %d:\n%s\n%s" % (process.returncode, stdout[-2000:], stderr[-3000:]))
    return stderr


def check_complete(out, cluster, what):
    """Every task has exactly one line with the expected status, and the queue is left empty."""
    lines = read_lines(os.path.join(out, "results.jsonl"))
    keys = ["level%d/%s" % (line["level"], line["task_name"]) for line in lines]
    check(sorted(keys) == sorted(expected_statuses()), "%s: results.jsonl has %r" % (what, sorted(keys)))
    got = statuses(out)
    for key, status in expected_statuses().items():
        check(got.get(key) == status, "%s: %s is %r, expected %r" % (what, key, got.get(key), status))
    status = cluster.status()
    published = sum(minute["results"] for minute in status["throughput"]["per_minute"])
    check(published == EVALUATED, "%s: %d results were published for %d jobs (exactly one each)" % (
        what, published, EVALUATED))
    check(status["waiting"] == 0 and status["in_flight"] == 0,
          "%s: jobs left on the queue: %r" % (what, status["jobs"]))
    # A collected result leaves its stream empty, not gone (a stream made again would start its
    # entry ids afresh, below those its submitter read); each publish's EXPIRE ends it.
    results_left = sum(int(cluster.redis.command("XLEN", key)) for key in cluster.redis.command("KEYS", "cudal1:results:*"))
    check(cluster.redis.command("KEYS", "cudal1:job:*") == [] and results_left == 0,
          "%s: the submitter collected every result and its job keys" % what)


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    check(False, "timed out waiting for " + what)
    return None


# ------------------------------------------------------------------------------------------------
def scenario_statuses_match_local(args, tmp, redis, cluster):
    suite, solutions = make_suite(args.root, tmp)
    local_out = os.path.join(tmp, "local")
    bench(args, local_out, suite, solutions)
    cluster.start_workers()
    queue_out = os.path.join(tmp, "queued")
    bench(args, queue_out, suite, solutions, queue=redis.url)

    local, queued = statuses(local_out), statuses(queue_out)
    check(local == queued, "statuses differ:\nlocal  %r\nqueued %r" % (local, queued))
    check(local == expected_statuses(), "local statuses %r" % local)
    check_complete(queue_out, cluster, "queued")
    # Outputs identical in format: the same fields in every result line and in the summary.
    local_lines = {(l["level"], l["task_id"]): l for l in read_lines(os.path.join(local_out, "results.jsonl"))}
    for line in read_lines(os.path.join(queue_out, "results.jsonl")):
        other = local_lines.get((line["level"], line["task_id"]), {})
        check(set(line) == set(other), "result fields differ: %r" % (set(line) ^ set(other)))
        if isinstance(line.get("verdict"), dict) and isinstance(other.get("verdict"), dict):
            check(set(line["verdict"]) - {"queue"} == set(other["verdict"]),
                  "verdict fields differ: %r" % (set(line["verdict"]) ^ set(other["verdict"])))
            # Unusable candidates come back as the engine's InputError (made a verdict here).
            if line["status"] != "compile_error":
                check(line["verdict"].get("queue", {}).get("worker") in ("w1", "w2", "w3"),
                      "the verdict names its worker: %r" % line["verdict"].get("queue"))
    with open(os.path.join(local_out, "summary.json")) as a, open(os.path.join(queue_out, "summary.json")) as b:
        local_summary, queue_summary = json.load(a), json.load(b)
    check(set(local_summary) == set(queue_summary), "summary fields differ")
    check(local_summary["statuses"] == queue_summary["statuses"], "summary statuses differ")
    # Each worker's count comes with its next heartbeat (5 s apart at most).
    def per_worker():
        counts = {worker["name"]: worker["finished"] for worker in cluster.status()["workers"]}
        return counts if sum(counts.values()) == EVALUATED else None

    finished = wait_until(per_worker, 15, "every worker's count of results")
    check(finished is None or (len(finished) == 3 and all(finished.values())),
          "every worker took jobs: %r" % finished)


def scenario_worker_killed(args, tmp, redis, cluster):
    cluster.start_workers("--visibility-timeout", "5")
    out, process = start_bench(args, tmp, redis)

    def held(name):
        """The job stream's entries delivered to `name` and not acknowledged."""
        return redis.command("XPENDING", "cudal1:jobs:cpu", "workers", "-", "+", "10", name) or []

    def busy_worker():
        # Mid-run: some results are in, and a worker holds a job now.
        if sum(worker["finished"] for worker in cluster.status()["workers"]) < 2:
            return None
        return next((name for name in cluster.workers if held(name)), None)

    victim = wait_until(busy_worker, 600, "a worker holding a job")
    jobs = []
    if victim:
        cluster.workers[victim].kill()
        cluster.workers[victim].wait()
        for entry in held(victim):
            fields = redis.command("XRANGE", "cudal1:jobs:cpu", entry[0], entry[0])[0][1]
            jobs.append(fields[fields.index("id") + 1])
        print("killed %s while it held job(s) %r" % (victim, jobs))
        check(jobs, "%s finished its job before it was killed: no job was in the middle" % victim)
    finish(process)
    check_complete(out, cluster, "after kill -9")
    survivors = "".join(cluster.log(name) for name in cluster.workers if name != victim)
    for job in jobs:
        check(any(("job %s" % job[:12]) in line and "(delivery 2)" in line for line in survivors.splitlines()),
              "the killed worker's job %s was not delivered again:\n%s" % (job, cluster.logs()))


def scenario_redis_restarted(args, tmp, redis, cluster):
    cluster.start_workers("--visibility-timeout", "10")
    out, process = start_bench(args, tmp, redis)
    wait_until(lambda: len(statuses(out)) >= 4, 600, "the first results")
    check(len(statuses(out)) < len(SUITE), "the run ended before Redis could be restarted mid-run")
    redis.kill()
    time.sleep(2)
    redis.start()
    stderr = finish(process)
    check("connected to %s again" % redis.url in stderr or "connected to" in cluster.logs(),
          "nobody reconnected:\n%s\n%s" % (stderr[-2000:], cluster.logs()))
    check_complete(out, cluster, "after the restart")


def scenario_poison_job(args, tmp, redis, cluster):
    entries = [SUITE[0], SUITE[2], (1, 7, "scale_relu", "../../queue/kills_its_worker.py", "runtime_error")]
    suite, solutions = make_suite(args.root, tmp, entries)
    # The queue must survive a worker host that dies mid-job. In a sandbox a candidate cannot
    # kill its `cudal1 worker` (containment/kill_parent in the red team), so the workers run
    # without one here to let this candidate stand for a host that goes down, and start their
    # workers themselves (a warm worker's parent is its zygote, not the `cudal1 worker`).
    cluster.start_workers("--visibility-timeout", "3", "--max-deliveries", "2", "--sandbox", "off",
                          "--warm-workers", "off")
    out = os.path.join(tmp, "out")
    bench(args, out, suite, solutions, queue=redis.url)
    lines = {(line["level"], line["task_id"]): line for line in read_lines(os.path.join(out, "results.jsonl"))}
    poison = lines.get((1, 7), {})
    check(poison.get("status") == "runtime_error" and "delivered 2 times" in poison.get("error", ""),
          "the poison job: %r" % {k: poison.get(k) for k in ("status", "error")})
    check(lines.get((1, 1), {}).get("status") == "ok" and lines.get((1, 3), {}).get("status") == "incorrect",
          "the other jobs: %r" % {key: line["status"] for key, line in lines.items()})
    killed = [name for name, process in cluster.workers.items() if process.poll() == -signal.SIGKILL]
    check(len(killed) == 2, "workers killed by the poison job: %r (expected 2: one per delivery)" % killed)
    status = cluster.status()
    check(status["failed"]["count"] == 1 and status["failed"]["recent"][0]["job"],
          "queue status lists the failed job: %r" % status["failed"])


def eval_on_queue(args, redis, task, candidate):
    """`cudal1 eval --queue` of a fixture candidate against a fixture task: its verdict."""
    command = [args.cudal1, "eval", "--queue", redis.url, "--json",
               "--task", os.path.join(args.root, "tests", "fixtures", "tasks", task + ".py"),
               "--candidate", os.path.join(args.root, "tests", "fixtures", "candidates", candidate)] + RUN_OPTIONS
    print("$ " + " ".join(command))
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    check(result.returncode == 0, "eval exit code %d:\n%s" % (result.returncode, result.stderr[-3000:]))
    return json.loads(result.stdout) if result.returncode == 0 else {}


def scenario_remote_builds(args, tmp, redis, cluster):
    secret = {"CUDAL1_BUILD_SECRET": "the fleet's secret"}
    cluster.start_worker("builder", "--role", "build", "--cache-dir", os.path.join(tmp, "builder-cache"), env=secret)
    cluster.start_worker("e1", "--builds", "queue", "--cache-dir", os.path.join(tmp, "e1-cache"), env=secret)
    cluster.wait_for_workers(2)
    status = cluster.status()
    kinds = {worker["name"]: worker["kind"] for worker in status["workers"]}
    check(kinds.get("builder", "").startswith("build-") and kinds.get("e1") == "cpu",
          "queue status lists the build worker under its build toolchain: %r" % kinds)
    check(kinds.get("builder") in status["jobs"], "queue status counts the build jobs: %r" % list(status["jobs"]))

    verdict = eval_on_queue(args, redis, "scale_relu", "cpp_extension_in_constructor.py")
    build = verdict.get("build", {})
    check(verdict.get("status") == "ok", "built by the build worker: %r" % {k: verdict.get(k) for k in ("status", "error")})
    check(build.get("remote", {}).get("worker") == "builder" and build["remote"].get("bytes", 0) > 0,
          "the verdict names the build worker: %r" % build.get("remote"))
    check(build.get("rebuilt_on_load") == [], "the evaluating worker compiled again: %r" % build.get("rebuilt_on_load"))
    check(build.get("replayed_failures") == ["cudal1_test_ctor_broken"],
          "the build worker's failed-build record came with the build: %r" % build.get("replayed_failures"))
    check(build.get("construction", {}).get("built") == ["cudal1_test_ctor_scale_relu.so"],
          "the construction's builds: %r" % build.get("construction"))
    check("build_cpu_s" not in verdict.get("phases", {}), "a build step ran on the evaluating worker")
    check("built (" in cluster.log("builder"), "the build worker's log:\n" + cluster.log("builder"))

    # Another build secret: the build worker's answer (from its cache) is refused, and the
    # candidate is built where it is evaluated (that build, the engine's usual one, is not
    # waited for: the worker is stopped once it said why it builds).
    cluster.workers["e1"].send_signal(signal.SIGTERM)
    cluster.workers["e1"].wait(timeout=120)
    cluster.start_worker("e2", "--builds", "queue", "--cache-dir", os.path.join(tmp, "e2-cache"),
                         env={"CUDAL1_BUILD_SECRET": "a secret of its own"})
    wait_until(lambda: sorted(w["name"] for w in cluster.status()["workers"]) == ["builder", "e2"], 120,
               "e2 to join and e1 to leave")
    command = [args.cudal1, "eval", "--queue", redis.url, "--json",
               "--task", os.path.join(args.root, "tests", "fixtures", "tasks", "scale_relu.py"),
               "--candidate", os.path.join(args.root, "tests", "fixtures", "candidates",
                                           "cpp_extension_in_constructor.py")] + RUN_OPTIONS
    submitter = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        refused = wait_until(lambda: "signature does not match" in cluster.log("e2"), 300,
                             "e2 to refuse the build worker's answer")
        check(refused and "built here" in cluster.log("e2"),
              "e2 says why it builds the candidate itself:\n" + cluster.log("e2"))
        check("cached)" in cluster.log("builder"), "the build worker answered from its cache:\n" + cluster.log("builder"))
    finally:
        submitter.kill()
        submitter.wait()
        # A second signal stops a worker at once, without finishing the build it started.
        for _ in range(2):
            cluster.workers["e2"].send_signal(signal.SIGTERM)
            time.sleep(0.5)
        cluster.workers["e2"].wait(timeout=60)


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario")
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--redis-server", default=shutil.which("redis-server"))
    parser.add_argument("--verbose", action="store_true", help="print the workers' logs")
    args = parser.parse_args()
    args.root = os.path.abspath(args.root)
    args.run = globals().get("scenario_" + args.scenario)
    if args.run is None:
        parser.error("unknown scenario %r" % args.scenario)
    return args


def run_scenario(args, tmp):
    """Runs it between a redis-server and workers that are stopped whatever happens."""
    redis = Redis(args.redis_server, tmp)
    cluster = Cluster(args, redis, tmp)
    try:
        redis.start()
        args.run(args, tmp, redis, cluster)
    except Exception as error:  # reported with the workers' logs, which say what happened
        check(False, "%s: %s" % (type(error).__name__, error))
    finally:
        if FAILURES or args.verbose:
            print(cluster.logs(), file=sys.stderr)
        cluster.stop()
        redis.kill()


def main():
    args = parse_arguments()
    if not args.redis_server or not os.path.exists(args.redis_server):
        print("skipped: redis-server is not installed (Debian: apt-get install redis-server)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="cudal1-queue-%s-" % args.scenario)
    run_scenario(args, tmp)
    if FAILURES:
        print("%d check(s) failed; files kept in %s" % (len(FAILURES), tmp), file=sys.stderr)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
