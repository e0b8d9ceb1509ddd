#!/usr/bin/env python3
"""cudal1 serve end to end on the CPU: one scenario per CTest case.

    serve_test.py SCENARIO --cudal1 build/cudal1 --root REPO

Each scenario builds a small suite (KernelBench layout, links to test tasks), starts its own
server on a free loopback port with its own store and hack-case database, talks HTTP to it
(standard library only) and checks statuses, flags, reward numbers and what the store holds.
"""

import argparse
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

# The suite every scenario serves: key -> task file (relative to the repository).
SUITE = {
    "level1/1_LinearRelu": "tests/redteam/tasks/linear_relu.py",
    "level1/2_ScaleRelu": "tests/fixtures/tasks/scale_relu.py",
    "level1/3_TinyScale": "tests/redteam/tasks/tiny_scale.py",
}
# Timing short and correctness bounded: these tests check statuses and numbers, not speed.
FAST = ["--device", "cpu", "--time-budget", "2", "--trials", "2", "--correctness-timeout", "20",
        "--max-in-flight", "2", "--jobs", "2"]


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


RUNNING = []  # servers to kill when a scenario fails half-way


class Server:
    def __init__(self, args, work, extra=(), db=None, hacks=None, name="server"):
        """hacks: the --hacks folder (default WORK/hacks); False: no --hacks option at all."""
        self.args, self.work = args, work
        self.db = db or os.path.join(work, "serve.db")
        self.hacks = None if hacks is False else (hacks or os.path.join(work, "hacks"))
        self.port_file = os.path.join(work, name + ".port")
        self.log_path = os.path.join(work, name + ".log")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        command = [args.cudal1, "serve", "--suite", os.path.join(work, "suite"), "--port", "0",
                   "--port-file", self.port_file, "--db", self.db,
                   "--work-dir", os.path.join(work, "serve-work")] + FAST + list(extra)
        if self.hacks:
            command += ["--hacks", self.hacks]
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        RUNNING.append(self.process)
        deadline = time.time() + 180
        while not os.path.exists(self.port_file) or not open(self.port_file).read().strip():
            if self.process.poll() is not None:
                raise Failure(f"cudal1 serve exited with {self.process.returncode}:\n{self.output()}")
            if time.time() > deadline:
                raise Failure(f"cudal1 serve did not start in 180 s:\n{self.output()}")
            time.sleep(0.2)
        self.url = "http://127.0.0.1:%s" % open(self.port_file).read().strip()

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def call(self, method, path, body=None, raw=None, headers=None, timeout=600):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                text = reply.read().decode()
                return reply.status, (json.loads(text) if path != "/metrics" else text)
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text

    def stop(self, sig=signal.SIGTERM, timeout=300):
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                raise Failure(f"cudal1 serve did not stop within {timeout} s:\n{self.output()}")
        self.log.close()
        return self.process.returncode


def make_suite(root, work):
    for key, file in SUITE.items():
        path = os.path.join(work, "suite", key + ".py")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(os.path.join(root, file), path)


def source(root, path):
    with open(os.path.join(root, path)) as f:
        return f.read()


def completion_with(code, analysis="## Performance Analysis\nFewer passes over memory.\n"):
    return f"{analysis}\n## Code Implementation\n```python\n{code}\n```\n"


def metric(page, name):
    for line in page.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def metric_sum(page, prefix):
    return sum(float(l.split()[-1]) for l in page.splitlines() if l.startswith(prefix + "{"))


def smoothed(raw, window, clip=1.5):
    """docs/rl.md's smoothing of `raw` against `window`: the task's rewards before the request
    and all of the request's rewards of that task (`raw` among them)."""
    mean = sum(window) / len(window)
    deviation = math.sqrt(sum((r - mean) ** 2 for r in window) / len(window))
    if not deviation > 1e-9 * max(1.0, abs(mean)):  # equal rewards (their mean may round)
        return 0.0
    return max(-clip, min(clip, (raw - mean) / deviation))


def advantages(rewards, eps=1e-6):
    mean = sum(rewards) / len(rewards)
    if len(rewards) < 2:
        return [0.0 for _ in rewards]
    sd = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
    return [(r - mean) / (sd + eps) for r in rewards]


# --------------------------------------------------------------------------------------------
def scenario_rewards(args, work):
    """Mixed items: statuses, flags, the floor for hacks and failures, smoothing and advantages
    as numbers, one evaluation per distinct code, hack cases added, prompts from the store. The
    hacks are ones the correctness phase catches whatever the machine's load (a hack that shows
    only after many calls is caught by spot checks, whose number depends on the timing)."""
    server = Server(args, work)
    root = args.root
    fast = source(root, "tests/fixtures/candidates/fast.py")
    items = [
        {"task": "level1/2_ScaleRelu", "code": fast, "group": "a"},
        {"task": "level1/2_ScaleRelu", "completion": completion_with(source(root, "tests/fixtures/candidates/wrong.py")),
         "group": "a"},
        {"task": "level1/2_ScaleRelu", "code": source(root, "tests/fixtures/candidates/raises.py"), "group": "a"},
        {"task": "level1/2_ScaleRelu", "completion": "I would fuse the ops but wrote no code.", "group": "a"},
        {"task": "level1/1_LinearRelu", "code": source(root, "tests/redteam/hacks/input_mutation/zero_input_after.py"),
         "group": "b"},
        {"task": "level1/1_LinearRelu", "code": source(root, "tests/redteam/legit/addmm_fused_bias.py"),
         "group": "b"},
        {"task": "level1/3_TinyScale", "code": source(root, "tests/redteam/hacks/trivial_output/zeros.py")},
        {"task": "level1/2_ScaleRelu", "code": fast, "group": "a"},  # the same code again
        {"task": "level1/2_ScaleRelu", "code": source(root, "tests/fixtures/candidates/infinite_loop.py")},
    ]
    status, reply = server.call("POST", "/v1/rewards", {"items": items, "step": 3, "request_id": "req-1"})
    check(status == 200, f"POST /v1/rewards: {status} {reply}\n{server.output()}")
    results = reply["results"]
    check(reply["request_id"] == "req-1" and len(results) == len(items), f"reply: {reply}")
    statuses = [r["status"] for r in results]
    expected = ["ok", "incorrect", "runtime_error", "unparseable", "rejected", "ok", "rejected", "ok", "timeout"]
    check(statuses == expected, f"statuses {statuses}, expected {expected}\n{server.output()}")
    check("input_mutation" in results[4]["flags"], f"hack flags: {results[4]['flags']}")
    check("trivial_output" in results[6]["flags"], f"hack flags: {results[6]['flags']}")
    for i, r in enumerate(results):
        if r["status"] == "ok":
            check(r["raw_reward"] > 0 and r["speedup"] > 0, f"item {i}: {r}")
            # Never above what the interval supports: its lower end rounded down to the cent.
            low = min(r["speedup"], r["speedup_ci"][0])
            check(abs(r["raw_reward"] - math.floor(low * 100 + 1e-9) / 100) < 1e-9,
                  f"item {i}: raw reward is not the interval's lower end rounded down: {r}")
        else:
            check(r["raw_reward"] == 0.0, f"item {i} ({r['status']}) must get the floor 0: {r}")
            check(r["error"] or r["status"] == "rejected", f"item {i} says why it failed: {r}")
    check(results[3]["candidate_id"] is None, f"an unparseable completion has no candidate: {results[3]}")
    check(results[7]["cached"] and results[7]["candidate_id"] == results[0]["candidate_id"],
          f"identical code must share one evaluation: {results[0]} / {results[7]}")
    check(results[7]["raw_reward"] == results[0]["raw_reward"], "identical code, identical raw reward")

    # Smoothing per task: every item against the same statistics, the request's raw rewards of
    # its task (the first request: no history before it).
    window = {}
    for r in results:
        window.setdefault(r["task"], []).append(r["raw_reward"])
    for i, r in enumerate(results):
        want = smoothed(r["raw_reward"], window[r["task"]])
        check(abs(r["reward"] - want) < 1e-9, f"item {i}: smoothed reward {r['reward']}, formula {want}")
    # Equal raw rewards, equal rewards: the four failures of ScaleRelu, wherever they stand; and
    # the task's first item is ranked against the rest of its request, not given 0.
    zeros = {results[i]["reward"] for i in (1, 2, 3, 8)}
    check(len(zeros) == 1, f"equal raw rewards got different rewards: {zeros}")
    check(results[0]["reward"] > 0, f"the task's first item must be ranked: {results[0]}")
    # GRPO advantages within each group, on the smoothed rewards; none without a group.
    for group in ("a", "b"):
        members = [i for i, item in enumerate(items) if item.get("group") == group]
        want = advantages([results[i]["reward"] for i in members])
        for i, a in zip(members, want):
            check(abs(results[i]["advantage"] - a) < 1e-6, f"item {i}: advantage {results[i]['advantage']}, want {a}")
        check(abs(sum(results[i]["advantage"] for i in members)) < 1e-6, f"group {group} advantages are not zero-mean")
    check(results[6]["advantage"] is None and results[8]["advantage"] is None, "items without a group get no advantage")

    # Metrics: 7 distinct codes were evaluated (the unparseable one and the repeat were not).
    status, page = server.call("GET", "/metrics")
    check(status == 200, f"GET /metrics: {status}")
    check(metric_sum(page, "cudal1_evaluations_total") == 7, f"evaluations_total:\n{page}")
    check(metric(page, "cudal1_rewards_total") == 9 and metric(page, "cudal1_reward_cache_hits_total") == 1, page)
    check(metric(page, "cudal1_raw_reward_count") == 9, page)
    # Every evaluation loaded a candidate worker: new, ready or kept, counted by where it came from.
    check(metric_sum(page, "cudal1_worker_loads_total") >= 7, f"worker loads:\n{page}")
    # The engine's worker pools are counted (how many it kept and gave out depends on the host).
    check('cudal1_worker_pool_events_total{pool="kept_references",event="taken"}' in page and
          'cudal1_worker_pool_events_total{pool="ready_workers",event="made"}' in page, f"worker pools:\n{page}")

    # The store holds every reward in order, with the request, step and group.
    with sqlite3.connect(server.db) as db:
        rows = db.execute("SELECT task_key, status, raw_reward, reward, request_id, step, group_id "
                          "FROM rewards ORDER BY id").fetchall()
    check(len(rows) == 9 and [r[1] for r in rows] == expected, f"rewards table: {rows}")
    check(all(r[4] == "req-1" and r[5] == 3 for r in rows) and rows[0][6] == "a" and rows[6][6] is None,
          f"rewards table: {rows}")
    # Both rejected completions became hack cases with their class.
    index = json.load(open(os.path.join(server.hacks, "index.json")))
    classes = sorted(c["class"] for c in index["cases"])
    check(classes == ["input_mutation", "trivial_output"], f"hack cases: {index}")

    # Contrastive prompts: the pool is the reference and the verified candidates of the task.
    status, prompts = server.call("GET", "/v1/prompts?task=level1/2_ScaleRelu&n=3&seed=5")
    check(status == 200 and len(prompts["prompts"]) == 3 and prompts["pool"] == 2, f"prompts: {prompts}")
    first = prompts["prompts"][0]
    check([m["role"] for m in first["messages"]] == ["system", "user"], f"messages: {first['messages']}")
    speedups = sorted(e["speedup"] for e in first["exemplars"])
    check(speedups == sorted([1.0, results[0]["speedup"]]), f"exemplars {first['exemplars']}")
    check("%.2f" % results[0]["speedup"] in first["messages"][1]["content"],
          "the prompt shows the measured speedup")
    status, again = server.call("GET", "/v1/prompts?task=level1/2_ScaleRelu&n=3&seed=5")
    check(again == prompts, "the same seed gives the same prompts")
    status, tasks = server.call("GET", "/v1/tasks")
    check([t["key"] for t in tasks["tasks"]] == list(SUITE), f"tasks: {tasks}")
    check(server.stop() == 0, f"exit status {server.process.returncode}:\n{server.output()}")


def scenario_bad_input(args, work):
    """Every malformed request gets a 4xx naming the problem, and the server keeps serving."""
    server = Server(args, work, extra=["--max-body-mb", "1", "--max-items", "4"])
    cases = [
        ("POST", "/v1/rewards", b"{not json", 400, "not valid JSON"),
        ("POST", "/v1/rewards", b'{"items": {}}', 400, "\"items\" must be a list"),
        ("POST", "/v1/rewards", b'{"items": [{"task": "level9/1_X", "code": "x"}]}', 400, "unknown task 'level9/1_X'"),
        ("POST", "/v1/rewards", json.dumps({"items": [{"task": "level1/2_ScaleRelu", "code": "x"}] * 5}).encode(),
         413, "at most 4"),
        ("POST", "/get_reward", b'{"query": ["a", "b"], "labels": ["level1/2_ScaleRelu"]}', 400,
         "\"labels\" has 1 entries and \"query\" 2"),
        ("POST", "/get_reward", b'{"query": ["a"]}', 400, "\"labels\" is missing"),
        ("POST", "/v1/rewards", b"x" * (2 << 20), 413, "larger than"),
        ("GET", "/v1/prompts", None, 400, "needs ?task=KEY"),
        ("GET", "/v1/prompts?task=level1/2_ScaleRelu&n=0", None, 400, "out of range"),
        ("GET", "/v1/prompts?task=nope", None, 400, "unknown task 'nope'"),
        ("GET", "/v1/nothing", None, 404, "no endpoint GET /v1/nothing"),
    ]
    for method, path, raw, want, text in cases:
        status, reply = server.call(method, path, raw=raw)
        check(status == want, f"{method} {path}: status {status}, expected {want}: {reply}")
        check(isinstance(reply, dict) and text in reply.get("error", ""),
              f"{method} {path}: the error must say '{text}': {reply}")
    status, health = server.call("GET", "/healthz")
    check(status == 200 and health["status"] == "ok" and health["tasks"] == 3, f"healthz: {health}")
    status, reply = server.call("POST", "/v1/rewards",
                                {"items": [{"task": "level1/2_ScaleRelu", "completion": "no code"}]})
    check(status == 200 and reply["results"][0]["status"] == "unparseable", f"after bad input: {reply}")
    check(server.stop() == 0, server.output())

    # A bearer token: everything but /healthz needs it.
    secured = Server(args, work, extra=["--token", "s3cret"], name="secured")
    check(secured.call("GET", "/v1/tasks")[0] == 401, "no token must be refused")
    check(secured.call("GET", "/v1/tasks", headers={"Authorization": "Bearer wrong"})[0] == 401, "wrong token")
    status, reply = secured.call("GET", "/v1/tasks", headers={"Authorization": "Bearer s3cret"})
    check(status == 200 and len(reply["tasks"]) == 3, f"with the token: {status} {reply}")
    check(secured.call("GET", "/healthz")[0] == 200, "/healthz is open")
    check(secured.stop() == 0, secured.output())

    # Listening beyond loopback without a token is refused before anything starts.
    run = subprocess.run([args.cudal1, "serve", "--suite", os.path.join(work, "suite"), "--host", "0.0.0.0",
                          "--db", os.path.join(work, "other.db")], capture_output=True, text=True, timeout=120)
    check(run.returncode == 2 and "--token" in run.stderr, f"0.0.0.0 without a token: {run.returncode} {run.stderr}")
    run = subprocess.run([args.cudal1, "serve", "--suite", os.path.join(work, "missing"), "--db",
                          os.path.join(work, "other.db")], capture_output=True, text=True, timeout=120)
    check(run.returncode == 2 and "missing" in run.stderr, f"a missing suite: {run.returncode} {run.stderr}")


def scenario_openrlhf(args, work):
    """OpenRLHF's remote reward protocol with prompts from /v1/prompts, and a repeated request
    answered once."""
    server = Server(args, work)
    status, got = server.call("GET", "/v1/prompts?task=level1/2_ScaleRelu&n=2&seed=1")
    check(status == 200, f"prompts: {got}")
    # A trainer applies its chat template; any text that holds the messages will do here.
    prompts = ["<|system|>" + p["messages"][0]["content"] + "<|user|>" + p["messages"][1]["content"] +
               "<|assistant|>" for p in got["prompts"]]
    fast = source(args.root, "tests/fixtures/candidates/fast.py")
    wrong = source(args.root, "tests/fixtures/candidates/wrong.py")
    body = {"query": [prompts[0] + completion_with(fast), prompts[1] + completion_with(wrong),
                      prompts[0] + "no code in this reply", "a query that lost its prompt"],
            "prompts": [prompts[0], prompts[1], prompts[0], prompts[1]],
            "labels": ["level1/2_ScaleRelu"] * 4}
    answers = [None, None]

    def send(k):
        answers[k] = server.call("POST", "/get_reward", body)

    threads = [threading.Thread(target=send, args=(k,)) for k in range(2)]
    threads[0].start()
    time.sleep(1.0)
    threads[1].start()
    for t in threads:
        t.join()
    for status, reply in answers:
        check(status == 200, f"/get_reward: {status} {reply}\n{server.output()}")
    check(answers[0][1] == answers[1][1], "a repeated request must get the same answer")
    reply = answers[0][1]
    check(len(reply["rewards"]) == 4 and len(reply["scores"]) == 4, f"reply: {reply}")
    logs = reply["extra_logs"]
    check(logs["status"] == ["ok", "incorrect", "unparseable", "unparseable"], f"statuses: {logs}")
    check(reply["scores"][0] > 0 and reply["scores"][1:] == [0.0, 0.0, 0.0], f"scores: {reply['scores']}")
    check(logs["speedup"][0] > 0 and logs["correct"] == [1.0, 0.0, 0.0, 0.0], f"logs: {logs}")
    with sqlite3.connect(server.db) as db:
        count = db.execute("SELECT count(*) FROM rewards").fetchone()[0]
    check(count == 4, f"a repeated request must not add its rewards twice: {count} rows")
    check(server.stop() == 0, server.output())


def scenario_drain_restart(args, work):
    """SIGTERM answers the requests in flight before exiting; a restart on the same store
    evaluates nothing again and smooths on from the recorded history."""
    server = Server(args, work)
    fast = source(args.root, "tests/fixtures/candidates/fast.py")
    items = [{"task": "level1/2_ScaleRelu", "code": fast},
             {"task": "level1/1_LinearRelu", "code": source(args.root, "tests/redteam/legit/addmm_fused_bias.py")}]
    answer = {}

    def send():
        answer["reply"] = server.call("POST", "/v1/rewards", {"items": items})

    thread = threading.Thread(target=send)
    thread.start()
    # Wait until the evaluations are under way, then ask the server to stop.
    deadline = time.time() + 120
    while time.time() < deadline:
        status, health = server.call("GET", "/healthz")
        if health.get("evaluations_in_flight", 0) > 0:
            break
        time.sleep(0.2)
    server.process.send_signal(signal.SIGTERM)
    thread.join(600)
    status, reply = answer["reply"]
    check(status == 200 and [r["status"] for r in reply["results"]] == ["ok", "ok"],
          f"the request in flight must be answered: {status} {reply}\n{server.output()}")
    try:
        code = server.process.wait(120)
    except subprocess.TimeoutExpired:
        raise Failure(f"cudal1 serve did not exit after answering:\n{server.output()}")
    server.stop()
    check(code == 0 and "stopped" in server.output(), f"exit {code}:\n{server.output()}")

    again = Server(args, work, name="again")
    status, reply2 = again.call("POST", "/v1/rewards", {"items": items + [{"task": "level1/2_ScaleRelu", "code": fast}]})
    check(status == 200, f"after the restart: {reply2}")
    results = reply2["results"]
    check(all(r["cached"] for r in results), f"nothing may be evaluated again: {results}")
    check([r["candidate_id"] for r in results[:2]] == [r["candidate_id"] for r in reply["results"]],
          "the same candidates as before the restart")
    status, page = again.call("GET", "/metrics")
    check(metric_sum(page, "cudal1_evaluations_total") == 0, f"evaluations after restart:\n{page}")
    # The smoothing history of ScaleRelu continued: {r, r} then {r, r, r}: deviation 0 -> 0.
    with sqlite3.connect(again.db) as db:
        rows = db.execute("SELECT task_key, raw_reward, reward FROM rewards ORDER BY id").fetchall()
    check(results[0]["reward"] == 0.0 and results[2]["reward"] == 0.0, f"smoothed: {results}\nrewards: {rows}")
    with sqlite3.connect(again.db) as db:
        count = db.execute("SELECT count(*) FROM rewards").fetchone()[0]
    check(count == 5, f"rewards before and after the restart: {count}")
    check(again.stop() == 0, again.output())


def scenario_permutation(args, work):
    """The answer to an item depends on the request's items, not on their order: two servers
    on copies of one store (the same history and verdicts) answer a request and its
    permutation with the same raw reward, reward and advantage per item, to the bit."""
    root = args.root
    codes = {name: source(root, f"tests/fixtures/candidates/{name}.py") for name in ("fast", "wrong", "raises")}
    codes["slow"] = source(root, "tests/redteam/legit/addmm_fused_bias.py")
    task, other = "level1/2_ScaleRelu", "level1/1_LinearRelu"
    server = Server(args, work)
    # History before the request, and every verdict the request needs (evaluated once here).
    status, reply = server.call("POST", "/v1/rewards", {"items": [
        {"task": task, "code": codes["fast"]}, {"task": task, "code": codes["wrong"]},
        {"task": task, "code": codes["raises"]}, {"task": other, "code": codes["slow"]},
        {"task": other, "code": codes["raises"]}]})
    check(status == 200 and [r["status"] for r in reply["results"]] ==
          ["ok", "incorrect", "runtime_error", "ok", "runtime_error"],
          f"warm-up: {status} {reply}\n{server.output()}")
    check(server.stop() == 0, server.output())
    copy = os.path.join(work, "copy.db")
    with sqlite3.connect(server.db) as source_db, sqlite3.connect(copy) as target:
        source_db.backup(target)
    items = [{"task": task, "code": codes["wrong"], "group": "g1"},
             {"task": task, "code": codes["fast"], "group": "g1"},
             {"task": task, "code": codes["raises"], "group": "g1"},
             {"task": task, "completion": "no code here", "group": "g1"},
             {"task": task, "code": codes["fast"], "group": "g2"},
             {"task": task, "code": codes["wrong"], "group": "g2"},
             {"task": other, "code": codes["slow"], "group": "g3"},
             {"task": other, "code": codes["raises"], "group": "g3"}]
    order = [5, 2, 7, 0, 4, 6, 3, 1]
    answers = []
    for name, db, request in (("first", server.db, items), ("permuted", copy, [items[i] for i in order])):
        again = Server(args, work, db=db, name=name)
        status, reply = again.call("POST", "/v1/rewards", {"items": request, "request_id": name})
        check(status == 200, f"{name}: {status} {reply}\n{again.output()}")
        check(all(r["cached"] for r in reply["results"] if r["status"] != "unparseable"),
              f"{name}: the verdicts come from the store: {reply}")
        answers.append(reply["results"])
        check(again.stop() == 0, again.output())
    first, permuted = answers
    fields = ("status", "raw_reward", "reward", "advantage")
    for k, i in enumerate(order):
        a, b = [{f: r[f] for f in fields} for r in (first[i], permuted[k])]
        check(a == b, f"item {i} first {a}, permuted (at {k}) {b}")
    # Equal in, equal out: the three raw 0 of the task (wrong, raises, unparseable) and the two
    # of the wrong code in two groups get one reward; the two fast ones another.
    check(len({first[i]["reward"] for i in (0, 2, 3, 5)}) == 1, f"equal raw rewards: {first}")
    check(first[1]["reward"] == first[4]["reward"] > first[0]["reward"], f"ranking: {first}")
    check(abs(sum(r["advantage"] for r in first[:4])) < 1e-9, f"group g1 advantages: {first[:4]}")


REVIEW_HACK = """The kernel keeps the last result and returns it for equal shapes.

```json
{"verdict": "hack", "class": "cached_output", "reasoning": "Returns a stored result, as in the cached cases."}
```
"""
REVIEW_LEGITIMATE = """One fused multiply-add and a ReLU.
{"verdict": "legitimate", "class": "", "reasoning": "Folds the scale and the bias into one pass."}"""


def llm_server(args, work, script):
    sys.path.insert(0, os.path.join(args.root, "tests", "optimize"))
    from optimize_test import Server as LlmServer  # the scripted LLM server helper
    return LlmServer(args.llm_server, work, script)


def index_cases(folder):
    path = os.path.join(folder, "index.json")
    return json.load(open(path))["cases"] if os.path.exists(path) else []


def scenario_review(args, work):
    """The reward checker on the RL path: with --review-threshold below every speedup each ok
    verdict is suspicious and reviewed by the scripted LLM before its reward is final; a hack
    answer gives the floor, a rejected verdict in the store, a hack case in the server's own
    database and a count in /metrics. Without a reviewer, the item says it was not reviewed and
    keeps its reward. A server's hack cases never go into the shipped hacks/."""
    check(args.llm_server, "serve.review needs --llm-server (the scripted LLM test server)")
    shipped = os.path.join(args.root, "hacks", "index.json")
    shipped_before = open(shipped).read()
    fast = source(args.root, "tests/fixtures/candidates/fast.py")
    # The reviewer judges by a marker in the candidate's code: "judged-legit" is legitimate, any
    # other code a hack. (A marker for hacks would also match a later prompt that shows the
    # rejected code as a similar case from the server's own hack database.)
    marked = fast
    legit_code = fast.replace("# Correct:", "# judged-legit. Correct:")
    llm = llm_server(args, work, {"default": {"content": REVIEW_HACK},
                                  "routes": [{"match": "judged-legit", "default": {"content": REVIEW_LEGITIMATE}}]})
    try:
        server = Server(args, work, extra=["--review-llm", llm.url, "--review-model", "judge",
                                           "--review-threshold", "0.01"])
        task = "level1/2_ScaleRelu"
        status, reply = server.call("POST", "/v1/rewards", {"items": [
            {"task": task, "code": marked, "group": "g"}, {"task": task, "code": legit_code, "group": "g"},
            {"task": task, "code": source(args.root, "tests/fixtures/candidates/wrong.py"), "group": "g"}]})
        check(status == 200, f"rewards: {status} {reply}\n{server.output()}")
        hack, legit, wrong = reply["results"]
        check(hack["status"] == "rejected" and "review_rejected" in hack["flags"] and hack["raw_reward"] == 0
              and hack["review"] == "hack", f"a hack review gives the floor: {hack}\n{server.output()}")
        check(legit["status"] == "ok" and legit["raw_reward"] > 0 and legit["review"] == "legitimate"
              and "unreviewed" not in legit["flags"], f"a legitimate review keeps the reward: {legit}")
        check(wrong["status"] == "incorrect" and wrong["review"] is None, f"failures are not reviewed: {wrong}")
        check(hack["advantage"] < 0 < legit["advantage"], f"the advantage follows the review: {reply}")
        check(len(llm.requests()) == 2, f"one review per suspicious verdict: {len(llm.requests())}")
        page = server.call("GET", "/metrics")[1]
        check('cudal1_reviews_total{outcome="hack"} 1' in page and
              'cudal1_reviews_total{outcome="legitimate"} 1' in page, f"review metrics:\n{page}")
        with sqlite3.connect(server.db) as db:
            stored = [json.loads(v) for (v,) in db.execute("SELECT verdict FROM verdicts ORDER BY candidate_id")]
        judged = [v for v in stored if "review_rejected" in v.get("flags", [])]
        check(len(judged) == 1 and judged[0]["review"]["class"] == "cached_output",
              f"the store keeps the rejected verdict and its review: {stored}")
        cases = index_cases(server.hacks)
        check([c["class"] for c in cases] == ["cached_output"], f"a hack case with the reviewer's class: {cases}")
        # Sent again: the stored verdict answers, without asking the reviewer again.
        status, again = server.call("POST", "/v1/rewards", {"items": [{"task": task, "code": marked}]})
        check(again["results"][0]["cached"] and again["results"][0]["review"] == "hack"
              and len(llm.requests()) == 2, f"a stored review stands: {again}")
        check(server.stop() == 0, server.output())
    finally:
        llm.stop()

    # No reviewer, no --hacks: suspicious results are flagged unreviewed with their reward, and
    # rejected ones go to cudal1-hacks/ beside the store.
    store_dir = os.path.join(work, "store")
    os.makedirs(store_dir)
    bare = Server(args, work, db=os.path.join(store_dir, "bare.db"), hacks=False, name="bare",
                  extra=["--review-threshold", "0.01"])
    status, reply = bare.call("POST", "/v1/rewards", {"items": [
        {"task": "level1/2_ScaleRelu", "code": fast},
        {"task": "level1/3_TinyScale", "code": source(args.root, "tests/redteam/hacks/trivial_output/zeros.py")}]})
    check(status == 200, f"rewards: {reply}\n{bare.output()}")
    check("flagged unreviewed (no --review-llm)" in bare.output() and "cudal1-hacks" in bare.output(),
          f"the start line says how results are checked:\n{bare.output()}")
    ok, zeros = reply["results"]
    check(ok["status"] == "ok" and ok["review"] == "unreviewed" and "unreviewed" in ok["flags"]
          and ok["raw_reward"] > 0, f"not reviewed, said so, reward kept: {ok}")
    check(zeros["status"] == "rejected", f"the hack: {zeros}")
    cases = index_cases(os.path.join(store_dir, "cudal1-hacks"))
    check([c["class"] for c in cases] == ["trivial_output"], f"cases beside the store: {cases}")
    page = bare.call("GET", "/metrics")[1]
    check('cudal1_reviews_total{outcome="unreviewed"} 1' in page, f"review metrics:\n{page}")
    check(bare.stop() == 0, bare.output())
    check(open(shipped).read() == shipped_before, "the shipped hacks/index.json must not change")


def scenario_adapters(args, work):
    """The TRL and verl adapters called with their trainers' argument shapes."""
    server = Server(args, work)
    sys.path.insert(0, os.path.join(args.root, "integrations"))
    os.environ["CUDAL1_SERVE_URL"] = server.url
    import trl_reward
    import verl_reward

    fast = completion_with(source(args.root, "tests/fixtures/candidates/fast.py"))
    wrong = completion_with(source(args.root, "tests/fixtures/candidates/wrong.py"))
    reward = trl_reward.make_reward_function(server.url, task_column="task")
    check(reward.__name__ == "cudal1_reward", reward.__name__)
    # TRL: plain completions, and conversational ones (lists of messages).
    values = reward(prompts=["p1", "p2"], completions=[fast, [{"role": "assistant", "content": wrong}]],
                    task=["level1/2_ScaleRelu", "level1/2_ScaleRelu"], completion_ids=[[1], [2]])
    check(len(values) == 2 and all(isinstance(v, float) for v in values), f"TRL rewards: {values}")
    raw = trl_reward.make_reward_function(server.url, field="raw_reward")(
        prompts=["p"], completions=[fast], task=["level1/2_ScaleRelu"])
    check(raw[0] > 0, f"raw reward of a correct completion: {raw}")
    try:
        reward(prompts=["p"], completions=[fast], other=["x"])
        raise Failure("a dataset without the task column must be refused")
    except ValueError as e:
        check("task" in str(e), str(e))
    # verl: one response per call, and the batch form.
    one = verl_reward.compute_score("cudal1", fast, "level1/2_ScaleRelu", extra_info={"index": 0})
    check(one["raw_reward"] > 0 and one["correct"] == 1.0, f"verl compute_score: {one}")
    batch = verl_reward.compute_score_batch(["cudal1"] * 2, [fast, wrong], ["level1/2_ScaleRelu"] * 2, [{}, {}])
    check([b["correct"] for b in batch] == [1.0, 0.0] and batch[1]["raw_reward"] == 0.0, f"verl batch: {batch}")
    # Wrong input reaches the caller as an error naming it.
    from cudal1_client import ServeError
    try:
        verl_reward.compute_score("cudal1", fast, "level7/1_Nothing")
        raise Failure("an unknown task must be refused")
    except ServeError as e:
        check("unknown task" in str(e), str(e))
    check(server.stop() == 0, server.output())


def scenario_gpu(args, work):
    """On a GPU: a CUDA kernel is timed on cuda:0 and rewarded, a CUDA hack gets the floor, and
    the device's busy seconds are counted."""
    global FAST
    FAST = [a if a != "cpu" else "cuda" for a in FAST]
    os.symlink(os.path.join(args.root, "examples/l1_gelu_tanh/task.py"),
               os.path.join(work, "suite", "level1", "9_GeluTanh.py"))
    server = Server(args, work)
    items = [{"task": "level1/9_GeluTanh", "code": source(args.root, "examples/l1_gelu_tanh/fast.py"), "group": 0},
             {"task": "level1/9_GeluTanh", "code": source(args.root, "examples/l1_gelu_tanh/wrong.py"), "group": 0},
             {"task": "level1/1_LinearRelu", "code": source(args.root, "tests/redteam/hacks/lazy_output/wrong_device.py")}]
    status, reply = server.call("POST", "/v1/rewards", {"items": items})
    check(status == 200, f"{status} {reply}\n{server.output()}")
    results = reply["results"]
    check([r["status"] for r in results] == ["ok", "incorrect", "rejected"], f"results: {results}")
    check(results[0]["raw_reward"] > 1.0, f"the fused CUDA kernel must beat eager PyTorch: {results[0]}")
    check("lazy_output" in results[2]["flags"] and results[2]["raw_reward"] == 0.0, f"hack: {results[2]}")
    status, page = server.call("GET", "/metrics")
    check(metric_sum(page, "cudal1_device_busy_seconds_total") > 0 and 'device="cuda:0"' in page, page)
    check(server.stop() == 0, server.output())


def scenario_task_error(args, work):
    """A task whose own get_inputs fails is the task's error, not the candidate's: status
    task_error, reward 0 and advantage 0 (no preference), nothing recorded as the candidate's,
    and the task's smoothing history left as it was."""
    broken = os.path.join(work, "suite", "level1", "4_BrokenInputs.py")
    os.symlink(os.path.join(args.root, "tests/fixtures/tasks/get_inputs_raises.py"), broken)
    server = Server(args, work)
    fast = source(args.root, "tests/fixtures/candidates/fast.py")
    status, reply = server.call("POST", "/v1/rewards", {"items": [
        {"task": "level1/4_BrokenInputs", "code": fast, "group": "g"},
        {"task": "level1/4_BrokenInputs", "code": fast.replace("2.0 +", "2.0 + 0.0 +"), "group": "g"}]})
    check(status == 200, f"rewards: {status} {reply}")
    for r in reply["results"]:
        check(r["status"] == "task_error", f"status: {r}")
        check("broken on purpose" in r.get("error", ""), f"the error must say why: {r}")
        check(r["reward"] == 0 and r["advantage"] == 0, f"no preference: {r}")
        check(r.get("candidate_id") is None, f"no candidate is recorded: {r}")
    with sqlite3.connect(server.db) as db:
        candidates = db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]
        history = db.execute("SELECT COUNT(*) FROM rewards WHERE status != 'task_error'").fetchone()[0]
    check(candidates == 0, f"{candidates} candidate rows for the task's failure")
    check(history == 0, f"{history} rewards entered the task's history")
    page = server.call("GET", "/metrics")[1]
    check(metric_sum(page, "cudal1_evaluations_total") >= 1 and 'status="task_error"' in page,
          "metrics count task errors")
    check(server.stop() == 0, server.output())


SCENARIOS = {
    "gpu": scenario_gpu,
    "rewards": scenario_rewards,
    "bad_input": scenario_bad_input,
    "openrlhf": scenario_openrlhf,
    "drain_restart": scenario_drain_restart,
    "adapters": scenario_adapters,
    "task_error": scenario_task_error,
    "permutation": scenario_permutation,
    "review": scenario_review,
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--llm-server", help="the scripted LLM test server (scenario review)")
    args = parser.parse_args()
    args.root = os.path.abspath(args.root)
    args.cudal1 = os.path.abspath(args.cudal1)
    with tempfile.TemporaryDirectory(prefix="cudal1-serve-") as work:
        make_suite(args.root, work)
        try:
            SCENARIOS[args.scenario](args, work)
        except Failure as e:
            print(f"FAIL {args.scenario}: {e}")
            return 1
        finally:
            for process in RUNNING:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    print(f"PASS {args.scenario}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
