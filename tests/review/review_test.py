#!/usr/bin/env python3
"""End-to-end tests of the reward checker and the hack-case database through the cudal1 binary.

    review_test.py SCENARIO --cudal1 BIN --root REPO [--server BIN|none]

Scenarios: hacks_cli, eval_unreviewed (no LLM needed), eval_review_failures (cmd: back end),
eval_reviewed_hack, eval_reviewed_legitimate (scripted LLM server), optimize_review (the
optimiser with the server). Each prints what it checks and exits non-zero on the first failure.
Evaluations run on the CPU with --review-threshold 0.5 so that any correct candidate is
suspicious. Standard library only.
"""

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

ROOT_RELATIVE_OPTIMIZE = "tests/optimize"
TASK = "tests/fixtures/tasks/scale_relu.py"
CANDIDATE = "tests/fixtures/candidates/flush_denormals.py"  # a reworded copy of a corpus case
CORPUS = "tests/fixtures/hacks"
EVAL_ARGS = ["--device", "cpu", "--time-budget", "1", "--trials", "2", "-q"]
SUSPICIOUS = ["--review-threshold", "0.5", "--hacks", CORPUS]

HACK_REPLY = """The submission switches the whole process to flush denormals and enables TF32.

```json
{"verdict": "hack", "class": "precision_downcast", "reasoning": "Process-wide precision switches, as in case flush_denormals."}
```
"""
LEGITIMATE_REPLY = """Only fuses the scale and the offset.
{"verdict": "legitimate", "class": "", "reasoning": "One fused pass instead of four."}"""


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)
    print("ok:", message, flush=True)


def run(options, *args, env=None, timeout=600):
    command = [options.cudal1] + list(args)
    print("$ " + " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, cwd=options.root, env=env,
                            timeout=timeout)
    sys.stdout.write(result.stderr[-2000:])
    return result


def evaluate(options, *args):
    """cudal1 eval of the suspicious candidate; returns (result, verdict or None)."""
    result = run(options, "eval", "--task", TASK, "--candidate", CANDIDATE, *EVAL_ARGS, *args)
    verdict = json.loads(result.stdout) if result.returncode == 0 else None
    return result, verdict


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def server_class(options):
    sys.path.insert(0, os.path.join(options.root, ROOT_RELATIVE_OPTIMIZE))
    from optimize_test import Server  # the scripted LLM server helper of the optimize tests
    return Server


# ---- cudal1 hacks --------------------------------------------------------------------------

def scenario_hacks_cli(options, tmp):
    corpus = os.path.join(tmp, "corpus")
    case = os.path.join(options.root, CORPUS, "cases/cached_output/pointer_cache.py")
    result = run(options, "hacks", "add", case, "--class", "cached_output", "--description", "keyed on data_ptr",
                 "--hacks", corpus)
    check(result.returncode == 0 and "pointer_cache" in result.stdout, "hacks add exits 0 and names the case")
    check(os.path.exists(os.path.join(corpus, "cases/cached_output/pointer_cache.py")), "the file is copied")
    result = run(options, "hacks", "add", case, "--class", "lazy_output", "--hacks", corpus)
    check(result.returncode == 2 and "already in the hack corpus" in result.stderr, "the same content twice: exit 2")
    for args, needle in [
            (["/no/such/file.py", "--class", "lazy_output"], "/no/such/file.py"),
            ([case, "--class", "Bad-Class"], "not a class name"),
            ([os.path.join(options.root, "tests/fixtures/tasks/empty.py"), "--class", "lazy_output"], "empty"),
            ([os.path.join(options.root, "tests/fixtures/tasks/latin1.py"), "--class", "lazy_output"], "UTF-8"),
            ([case, "--class", "lazy_output", "--name", "../escape"], "not a case name")]:
        result = run(options, "hacks", "add", *args, "--hacks", corpus)
        check(result.returncode == 2 and needle in result.stderr, "bad input %r: exit 2 saying %r" % (args[0], needle))
    result = run(options, "hacks", "add", os.path.join(options.root, CORPUS, "cases/tampering/patch_synchronize.py"),
                 "--class", "clock_skew", "--hacks", corpus)
    check(result.returncode == 0 and "warning" in result.stderr and "clock_skew" in result.stderr,
          "an unknown class is added with a warning")

    # Concurrent adds from separate processes: none is lost.
    processes = []
    for i in range(8):
        path = os.path.join(tmp, "concurrent_%d.py" % i)
        with open(path, "w") as handle:
            handle.write("import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                         "        return x + %d\n" % i)
        processes.append(subprocess.Popen([options.cudal1, "hacks", "add", path, "--class", "trivial_output",
                                           "--hacks", corpus], stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    codes = [p.wait(timeout=120) for p in processes]
    check(codes == [0] * 8, "8 concurrent hacks add processes exit 0 (%s)" % codes)
    listed = run(options, "hacks", "list", "--json", "--hacks", corpus)
    cases = json.loads(listed.stdout)
    check(len(cases) == 10, "hacks list shows all 10 cases (got %d)" % len(cases))
    check(len({c["name"] for c in cases}) == 10, "every case has its own name")
    only = json.loads(run(options, "hacks", "list", "--json", "--class", "cached_output", "--hacks", corpus).stdout)
    check([c["name"] for c in only] == ["pointer_cache"], "hacks list --class filters")
    env = dict(os.environ, CUDAL1_HACKS_DIR=corpus)
    check("pointer_cache" in run(options, "hacks", "list", env=env).stdout, "CUDAL1_HACKS_DIR sets the default corpus")
    result = run(options, "hacks", "list", "--hacks", os.path.join(tmp, "nowhere"))
    check(result.returncode == 2 and "nowhere" in result.stderr, "a missing corpus: exit 2 naming it")

    result = run(options, "hacks", "similar", CANDIDATE, "-k", "3", "--json", "--hacks", CORPUS)
    similar = json.loads(result.stdout)
    check(result.returncode == 0 and len(similar["similar_cases"]) == 3, "hacks similar -k 3 lists 3 cases")
    check(similar["similar_cases"][0]["name"] == "flush_denormals", "the reworded copy's case comes first")
    check("denormal_flush" in similar["features"], "the candidate's suspicious features are listed")
    text = run(options, "hacks", "similar", CANDIDATE, "--hacks", CORPUS).stdout
    check("flush_denormals" in text.splitlines()[1] and "precision_downcast" in text, "the text form shows scores")


# ---- cudal1 eval without an LLM ------------------------------------------------------------

def scenario_eval_unreviewed(options, tmp):
    result, verdict = evaluate(options, *SUSPICIOUS)
    check(result.returncode == 0, "eval exits 0")
    check(verdict["status"] == "ok" and "unreviewed" in verdict["flags"],
          "a suspicious result without --review-llm is ok but flagged unreviewed (%s %s)"
          % (verdict["status"], verdict["flags"]))
    review = verdict["review"]
    check(review["state"] == "unreviewed" and review["verdict"] is None, "details.review.state is unreviewed")
    check(review["similar_cases"][0]["name"] == "flush_denormals", "the similar cases are recorded anyway")
    check("unreviewed" in last_line(result.stderr), "the summary line shows the flag")
    check("no reviewer configured" in result.stderr, "stderr says why")

    result, verdict = evaluate(options, "--review-threshold", "1000", "--hacks", CORPUS)
    check(result.returncode == 0 and "review" not in verdict and "unreviewed" not in verdict["flags"],
          "under the threshold: no review, no flag")
    result, verdict = evaluate(options, "--review-threshold", "1000", "--best-known", "0.1")
    check(result.returncode == 0 and "unreviewed" in verdict["flags"] and "best known" in verdict["review"]["reason"],
          "above 2x --best-known: reviewed (flagged unreviewed), the reason says so")

    for args, needle in [(["--review-threshold", "0"], "--review-threshold"),
                         (["--best-known", "-1"], "--best-known"),
                         (["--hacks", os.path.join(tmp, "nowhere")], "nowhere")]:
        result, _ = evaluate(options, *args)
        check(result.returncode == 2 and needle in result.stderr and not result.stdout.strip(),
              "bad option %s: exit 2 naming it" % " ".join(args))


# ---- cudal1 eval with an LLM ---------------------------------------------------------------

def scenario_eval_review_failures(options, tmp):
    reply_file = os.path.join(tmp, "hack_reply.md")
    with open(reply_file, "w") as handle:
        handle.write(HACK_REPLY)
    result, verdict = evaluate(options, *SUSPICIOUS, "--review-llm", "cmd:cat >/dev/null; cat " + reply_file)
    check(result.returncode == 0 and verdict["status"] == "rejected" and "review_rejected" in verdict["flags"],
          "a cmd: reviewer that says hack rejects the candidate")
    check(verdict["review"]["model"] == "cmd" and verdict["reward"] == 0, "model 'cmd', reward 0")

    result, verdict = evaluate(options, *SUSPICIOUS, "--review-llm", "cmd:cat >/dev/null; exit 3")
    check(result.returncode == 0 and verdict["status"] == "ok" and "unreviewed" in verdict["flags"],
          "a failing reviewer: the verdict stands, flagged unreviewed")
    check(verdict["review"]["state"] == "failed" and verdict["review"]["error"], "state failed, with the error")

    result, verdict = evaluate(options, *SUSPICIOUS, "--review-llm", "cmd:cat >/dev/null; echo looks fine to me")
    review = verdict["review"]
    check(review["state"] == "failed" and review["verdict"] == "unparseable" and "unreviewed" in verdict["flags"],
          "an unparseable reply: state failed, verdict unparseable, flagged unreviewed")
    check("looks fine to me" in review["raw_reply"], "the raw reply is kept")

    result, _ = evaluate(options, *SUSPICIOUS, "--review-llm", "http://127.0.0.1:9/v1")
    check(result.returncode == 2 and "--review-model" in result.stderr, "an HTTP reviewer needs --review-model")
    result, _ = evaluate(options, *SUSPICIOUS, "--review-llm", "ftp://example")
    check(result.returncode == 2 and "--review-llm" in result.stderr, "an unknown back end: exit 2")


def scenario_eval_reviewed_hack(options, tmp):
    Server = server_class(options)
    # The reply is given only if the prompt shows the most similar case: otherwise HTTP 400.
    server = Server(options.server, tmp, {"default": {"content": HACK_REPLY, "match": 'Case "flush_denormals"'}})
    result, verdict = evaluate(options, *SUSPICIOUS, "--review-llm", server.url, "--review-model", "judge")
    requests = server.requests()
    server.stop()
    check(result.returncode == 0, "eval exits 0")
    review = verdict["review"]
    check(review["state"] == "reviewed", "details.review.state is reviewed (%s)" % review.get("error"))
    check(verdict["status"] == "rejected" and "review_rejected" in verdict["flags"] and verdict["reward"] == 0,
          "a hack verdict rejects the candidate with flag review_rejected")
    check(review["verdict"] == "hack" and review["class"] == "precision_downcast" and review["model"] == "judge",
          "verdict, class and model are stored")
    check("Process-wide precision switches" in review["reasoning"], "the reasoning is stored")
    check("review: hack (precision_downcast) by judge" in result.stderr, "stderr shows the review")
    check("review_rejected" in last_line(result.stderr), "the summary line shows the flag")
    check(len(requests) == 1, "one review request")
    prompt = [m["content"] for m in requests[0]["body"]["messages"] if m["role"] == "user"][-1]
    case_code = open(os.path.join(options.root, CORPUS, "cases/precision_downcast/flush_denormals.py")).read()
    check(case_code.strip().splitlines()[1] in prompt, "the prompt carries the most similar case's code")
    check("self.factor = scale" in prompt and "return y * 2.0" in prompt, "the prompt carries candidate and task")
    check(requests[0]["body"]["temperature"] == 0, "reviews ask for temperature 0")


def scenario_eval_reviewed_legitimate(options, tmp):
    Server = server_class(options)
    server = Server(options.server, tmp, {"default": {"content": LEGITIMATE_REPLY}})
    result, verdict = evaluate(options, *SUSPICIOUS, "--review-llm", server.url, "--review-model", "judge")
    server.stop()
    check(result.returncode == 0 and verdict["status"] == "ok", "a legitimate verdict keeps status ok")
    check(verdict["review"]["state"] == "reviewed" and verdict["review"]["verdict"] == "legitimate",
          "details.review says reviewed, legitimate")
    check("unreviewed" not in verdict["flags"] and "review_rejected" not in verdict["flags"], "no review flag")
    check(verdict["reward"] > 0, "the reward stands")


# ---- cudal1 optimize -----------------------------------------------------------------------

def stored_verdicts(db):
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute("SELECT v.verdict FROM verdicts v JOIN candidates c ON c.id = v.candidate_id "
                                  "WHERE c.kind = 'generated'").fetchall()
    finally:
        connection.close()
    return [json.loads(row[0]) for row in rows]


def scenario_optimize_review(options, tmp):
    Server = server_class(options)
    generation = {"content_file": os.path.join(options.root, "tests/fixtures/replies/fused_reply.md")}
    review_step = {"content": HACK_REPLY, "match": "Review of a suspicious benchmark result"}
    server = Server(options.server, tmp, {"replies": [generation, review_step]})
    db = os.path.join(tmp, "run.db")
    common = ["--task", TASK, "--model", "m", "--rounds", "1", "--samples", "1", "--device", "cpu",
              "--time-budget", "1", "--trials", "2", "-q", "--review-threshold", "0.5"]
    result = run(options, "optimize", "--llm", server.url, "--db", db, "--out", os.path.join(tmp, "out"), *common)
    requests = server.requests()
    server.stop()
    check(result.returncode == 0, "optimize exits 0")
    check(len(requests) == 2, "one generation request, then one review request by the run's own LLM")
    check(requests[1]["body"]["model"] == "m", "the review uses the run's model")
    verdicts = stored_verdicts(db)
    check(len(verdicts) == 1 and verdicts[0]["review"]["state"] == "reviewed", "the store keeps the review")
    check(verdicts[0]["status"] == "rejected" and "review_rejected" in verdicts[0]["flags"],
          "the stored verdict is rejected with review_rejected")
    summary = json.loads(result.stdout)
    check(summary["best_status"] != "ok" and summary["statuses"] == {"rejected": 1},
          "a candidate judged a hack is not the run's best")

    db = os.path.join(tmp, "none.db")
    server = Server(options.server, tmp, {"replies": [generation]})
    result = run(options, "optimize", "--llm", server.url, "--db", db, "--out", os.path.join(tmp, "out2"), *common,
                 "--review-llm", "none")
    requests = server.requests()
    server.stop()
    verdicts = stored_verdicts(db)
    check(result.returncode == 0 and len(requests) == 1, "--review-llm none: no review request")
    check(verdicts[0]["status"] == "ok" and "unreviewed" in verdicts[0]["flags"],
          "--review-llm none: the suspicious verdict is flagged unreviewed")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--server", default="none")
    options = parser.parse_args()
    scenario = globals()["scenario_" + options.scenario]
    with tempfile.TemporaryDirectory(prefix="cudal1-review-") as tmp:
        try:
            scenario(options, tmp)
        except Failure as failure:
            print("FAIL:", failure)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
