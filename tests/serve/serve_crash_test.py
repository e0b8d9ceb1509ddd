#!/usr/bin/env python3
"""cudal1 serve killed with SIGKILL, mid-request and after answering, then restarted on the same
store: a request sent again gets the recorded answer byte for byte, adds no reward rows and
evaluates nothing; the store holds no candidate without its verdict and no reward outside an
answer; the smoothing history counts every request once.

    serve_crash_test.py --cudal1 build/cudal1 --root REPO

Reuses serve_test.py's suite, server wrapper and formulas.
"""

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test  # noqa: E402
from serve_test import Failure, Server, check, completion_with, metric, metric_sum, smoothed, source  # noqa: E402


def post(server, path, data, timeout=600):
    """The raw bytes of the answer: a replay must be the same bytes, not just the same JSON."""
    request = urllib.request.Request(server.url + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def rows(db, sql):
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as connection:
        return connection.execute(sql).fetchall()


def count(db, sql):
    return rows(db, sql)[0][0]


ORPHAN_CANDIDATES = ("SELECT count(*) FROM candidates c WHERE c.kind <> 'reference' AND NOT EXISTS "
                     "(SELECT 1 FROM verdicts v WHERE v.candidate_id = c.id)")


def check_store(db, answers, reward_rows, when):
    check(count(db, ORPHAN_CANDIDATES) == 0,
          f"{when}: candidates without a verdict: {rows(db, 'SELECT id, run_id FROM candidates')}")
    got = count(db, "SELECT count(*) FROM rewards")
    check(got == reward_rows, f"{when}: {got} reward rows, expected {reward_rows}")
    check(count(db, "SELECT count(*) FROM reward_answers") == answers, f"{when}: answers recorded")
    check(count(db, "SELECT count(*) FROM rewards WHERE answer_id IS NULL") == 0,
          f"{when}: a reward row outside an answer")


def options_with(**values):
    """serve_test's options with other values, e.g. correctness_timeout=20."""
    options = list(serve_test.FAST)
    for name, value in values.items():
        at = options.index("--" + name.replace("_", "-"))
        options[at + 1] = str(value)
    return options


def kill_mid_request(args, work, body):
    """Sends `body`, whose second item never finishes, and kills the server once the first
    item's verdict is recorded: evaluations done stay, nothing else of the request is kept. One
    evaluation at a time, so the first item is evaluated first (on the CPU, the second would
    hold the device until its time-out)."""
    serve_test.FAST = options_with(correctness_timeout=120, max_in_flight=1)
    server = Server(args, work, name="first")
    outcome = {}

    def send():
        try:
            outcome["reply"] = post(server, "/v1/rewards", body)
        except (OSError, urllib.error.URLError) as e:  # the server dies under it
            outcome["error"] = e

    thread = threading.Thread(target=send)
    thread.start()
    deadline = time.time() + 300
    while count(server.db, "SELECT count(*) FROM verdicts") == 0:
        check(time.time() < deadline and thread.is_alive(),
              f"the first item was not evaluated in time: {outcome}\n{server.output()}")
        time.sleep(0.2)
    # The slot takes the second item as soon as the first is done.
    while server.call("GET", "/healthz")[1].get("evaluations_in_flight", 0) == 0:
        check(time.time() < deadline and thread.is_alive(), f"the second item did not start: {outcome}")
        time.sleep(0.05)
    server.stop(signal.SIGKILL)
    thread.join(60)
    check("reply" not in outcome, f"the request was answered before the kill: {outcome}")
    check_store(server.db, answers=0, reward_rows=0, when="killed mid-request")
    check(count(server.db, "SELECT count(*) FROM verdicts") == 1, "the finished evaluation is kept")


def scenario(args, work):
    root = args.root
    fast = source(root, "tests/fixtures/candidates/fast.py")
    hanging = {"items": [{"task": "level1/2_ScaleRelu", "code": fast},
                         {"task": "level1/2_ScaleRelu", "code": source(root, "tests/fixtures/candidates/infinite_loop.py")}]}
    hanging_body = json.dumps(hanging).encode()
    kill_mid_request(args, work, hanging_body)

    # The restarted server answers the cut-off request in full, reusing the verdict it kept.
    serve_test.FAST = options_with(correctness_timeout=20)
    server = Server(args, work, name="second")
    status, text = post(server, "/v1/rewards", hanging_body)
    check(status == 200, f"after the restart: {status} {text}\n{server.output()}")
    answers = {"hanging": text}
    results = json.loads(text)["results"]
    check([r["status"] for r in results] == ["ok", "timeout"] and results[0]["cached"],
          f"the kept verdict is reused, the other item evaluated: {results}")
    wrong = completion_with(source(root, "tests/fixtures/candidates/wrong.py"))
    native = {"items": [
        {"task": "level1/2_ScaleRelu", "code": fast, "group": "a"},
        {"task": "level1/2_ScaleRelu", "completion": wrong, "group": "a"},
        {"task": "level1/2_ScaleRelu", "completion": "no code here", "group": "a"},
        {"task": "level1/1_LinearRelu", "code": source(root, "tests/redteam/legit/addmm_fused_bias.py")}],
        "step": 4}
    # The same completion as an item above: evaluated once (its code is parsed out of it).
    openrlhf = {"query": ["PROMPT" + wrong], "prompts": ["PROMPT"], "labels": ["level1/2_ScaleRelu"]}
    bodies = {"native": ("/v1/rewards", json.dumps(native).encode()),
              "openrlhf": ("/get_reward", json.dumps(openrlhf).encode())}
    for name, (path, data) in bodies.items():
        status, answers[name] = post(server, path, data)
        check(status == 200, f"{name}: {status} {answers[name]}\n{server.output()}")
    status, page = server.call("GET", "/metrics")
    check(metric_sum(page, "cudal1_evaluations_total") == 3, f"evaluations of the second server:\n{page}")
    check_store(server.db, answers=3, reward_rows=7, when="after three answers")
    # Killed right after answering: the answers were recorded before they were sent.
    server.stop(signal.SIGKILL)

    third = Server(args, work, name="third")
    bodies["hanging"] = ("/v1/rewards", hanging_body)
    # The same JSON spaced and ordered otherwise is the same request.
    bodies["native, re-spaced"] = ("/v1/rewards", json.dumps(native, indent=1, sort_keys=True).encode())
    for name, (path, data) in bodies.items():
        status, text = post(third, path, data)
        check(status == 200 and text == answers[name.split(",")[0]],
              f"{name} sent again after kill -9: {status}\n{text}\nfirst answer:\n{answers[name.split(',')[0]]}")
    status, page = third.call("GET", "/metrics")
    check(metric_sum(page, "cudal1_evaluations_total") == 0 and metric(page, "cudal1_rewards_total") == 0,
          f"a replay evaluates and rewards nothing:\n{page}")
    check_store(third.db, answers=3, reward_rows=7, when="after the replays")

    # A new request smooths on a history that holds each earlier request once.
    history = {}
    for name in ("hanging", "native"):
        for r in json.loads(answers[name])["results"]:
            history.setdefault(r["task"], []).append(r["raw_reward"])
    history["level1/2_ScaleRelu"] += json.loads(answers["openrlhf"])["scores"]
    status, reply = third.call("POST", "/v1/rewards", dict(native, request_id="new"))
    check(status == 200, f"a new request: {reply}")
    # Every item of the new request against its task's history and all of the request's items.
    for r in reply["results"]:
        history[r["task"]].append(r["raw_reward"])
    for i, r in enumerate(reply["results"]):
        want = smoothed(r["raw_reward"], history[r["task"]])
        check(abs(r["reward"] - want) < 1e-9, f"item {i}: smoothed {r['reward']}, formula {want} over {history}")
    check_store(third.db, answers=4, reward_rows=11, when="after a new request")
    check(third.stop() == 0, third.output())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    args.root = os.path.abspath(args.root)
    args.cudal1 = os.path.abspath(args.cudal1)
    with tempfile.TemporaryDirectory(prefix="cudal1-serve-crash-") as work:
        serve_test.make_suite(args.root, work)
        try:
            scenario(args, work)
        except Failure as e:
            print(f"FAIL crash_replay: {e}")
            return 1
        finally:
            for process in serve_test.RUNNING:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    print("PASS crash_replay")
    return 0


if __name__ == "__main__":
    sys.exit(main())
