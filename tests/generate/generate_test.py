#!/usr/bin/env python3
"""End-to-end tests of `cudal1 generate` and `cudal1 data` on the CPU, against the scriptable
test LLM server (its routes answer each task's prompts from that task's own replies).

    generate_test.py SCENARIO --cudal1 BIN --server BIN --root REPO

Scenarios: suite, batch, kill_resume, review_later, cli_errors. Each prints what it checks and exits non-zero
on the first failure. Standard library only; the server and helpers are optimize_test.py's.
"""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "optimize"))
from optimize_test import Failure, Server, batch_output_line, check, main, query  # noqa: E402

SUITE = "tests/fixtures/suite"
TASKS = ["level1/1_ScaleRelu", "level1/2_LinearTanh"]
EVAL_ARGS = ["--device", "cpu", "--time-budget", "1", "--trials", "2", "-q"]
# A verified speedup over twice the reference's is reviewed before it counts (docs/review.md); the
# scripted reviewer finds every one legitimate, so what a test checks does not depend on how fast
# the CPU ran a candidate.
REVIEW_MARK = "Review of a suspicious benchmark result"
REVIEWER = {"match": REVIEW_MARK, "default": {"content": 'One fused pass.\n{"verdict": "legitimate", '
                                                        '"class": "", "reasoning": "One fused pass instead of four."}'}}


def reply_file(root, name):
    for folder in ("tests/generate/replies", "tests/fixtures/replies"):
        path = os.path.join(root, folder, name)
        if os.path.exists(path):
            return path
    raise Failure("no reply file " + name)


def step(root, name, **extra):
    spec = {"content_file": reply_file(root, name)}
    spec.update(extra)
    return spec


def generation_requests(server):
    """The server's requests for replies (not for reviews)."""
    return [r for r in server.requests()
            if REVIEW_MARK not in [m["content"] for m in r["body"]["messages"] if m["role"] == "user"][-1]]


def run(options, command, *args, timeout=900):
    full = [options.cudal1, command] + list(args)
    print("$ " + " ".join(full), flush=True)
    result = subprocess.run(full, capture_output=True, text=True, timeout=timeout, cwd=options.root)
    sys.stdout.write(result.stderr[-3000:])
    return result


def lines_of(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def generate_runs(db):
    return {json.loads(options)["suite_key"]: (run_id, json.loads(options))
            for run_id, options in query(db, "SELECT id, options FROM runs")}


def statuses(db, key):
    """(prompt state, candidate kind, verdict status, duplicate_of) of every prompt of a task."""
    return sorted(query(db, """
        SELECT p.state, coalesce(c.kind, ''), coalesce(v.status, ''), v.duplicate_of IS NOT NULL
        FROM prompts p JOIN runs r ON r.id = p.run_id
        LEFT JOIN candidates c ON c.prompt_id = p.id LEFT JOIN verdicts v ON v.candidate_id = c.id
        WHERE json_extract(r.options, '$.suite_key') = ?""", key))


def data_sft(options, db, out, *extra):
    result = run(options, "data", "sft", "--db", db, "--out", out, *extra)
    check(result.returncode == 0, "data sft %s exits 0" % " ".join(extra))
    return lines_of(out)


def scenario_suite(options, tmp):
    """Two tasks, three replies each: verified, duplicate (two blocks), no code block, wrong
    class name, empty; then the datasets of the store."""
    root = options.root
    server = Server(options.server, tmp, {"routes": [
        REVIEWER,
        {"match": "1_ScaleRelu", "replies": [step(root, "fast_reply.md"), step(root, "two_blocks.md"),
                                             step(root, "prose_reply.md")]},
        {"match": "2_LinearTanh", "replies": [step(root, "linear_tanh.md"), step(root, "wrong_class.md"),
                                              {"content": ""}],
         "default": step(root, "linear_tanh.md")}]})
    db, out = os.path.join(tmp, "gen.db"), os.path.join(tmp, "out")
    args = ["--suite", SUITE, "--levels", "1", "--llm", server.url, "--model", "strong-llm", "--samples", "3",
            "--db", db, "--out", out, *EVAL_ARGS]
    result = run(options, "generate", *args)
    check(result.returncode == 0, "generate exits 0 (got %d)" % result.returncode)
    summary = json.loads(result.stdout)
    check(summary["tasks"] == 2 and summary["finished"] == 2 and summary["round"] == 0,
          "the summary counts 2 finished tasks of round 0")
    check(summary["tasks_verified"] == 2, "both tasks have a verified reply")
    check(not any("# Earlier implementations" in r["body"]["messages"][-1]["content"]
                  for r in generation_requests(server)), "round 0 prompts show the task alone")
    check(len(generation_requests(server)) == 6, "6 requests: 3 samples for each of 2 tasks")
    runs = generate_runs(db)
    check(sorted(runs) == TASKS, "one run per task, named by its suite key")
    for key, (run_id, run_options) in runs.items():
        check(run_options["stage"] == "generate" and run_options["round"] == 0
              and run_options["prompt_template"] == "generate.md" and run_options["exemplars"] == 0,
              "%s: run options carry stage, round and the one-shot template" % key)
        check(os.path.exists(os.path.join(out, "round0", key, "summary.json"))
              and os.path.exists(os.path.join(out, "round0", key, "candidates.jsonl")),
              "%s: its run directory is OUT/round0/%s" % (key, key))
    check(os.path.exists(os.path.join(out, "round0", "summary.json")), "OUT/round0/summary.json written")
    for request in generation_requests(server):
        text = [m["content"] for m in request["body"]["messages"] if m["role"] == "user"][-1]
        check("Reference implementation" in text and "Previous implementations" not in text
              and "def get_inputs" in text, "the one-shot prompt shows the reference and no exemplars")
    check(statuses(db, "level1/1_ScaleRelu") == [("answered", "generated", "ok", 0),
                                                  ("answered", "generated", "ok", 1),
                                                  ("answered", "unparseable", "unparseable", 0)],
          "ScaleRelu: verified, two blocks (the last block: same code, not evaluated again), no code block")
    check(statuses(db, "level1/2_LinearTanh") == [("answered", "generated", "ok", 0),
                                                   ("answered", "unparseable", "unparseable", 0),
                                                   ("failed", "", "", 0)],
          "LinearTanh: verified, wrong class name unparseable, the empty reply a failed prompt")
    failed = [e for (e,) in query(db, "SELECT error FROM prompts WHERE state = 'failed'")]
    check(len(failed) == 1 and "no text" in failed[0], "the empty reply's error is kept: %r" % failed)
    reasons = [e for (e,) in query(db, "SELECT json_extract(v.verdict, '$.error') FROM verdicts v "
                                       "JOIN candidates c ON c.id = v.candidate_id WHERE c.kind = 'unparseable'")]
    check(sorted(reasons) == ["no complete code block defines class ModelNew", "the reply has no code block"],
          "unparseable replies say why: %r" % reasons)

    # The same command again: the failed prompt is asked again, nothing else.
    result = run(options, "generate", *args)
    server.stop()
    check(result.returncode == 0 and len(generation_requests(server)) == 7,
          "a second run asks only the failed prompt again")
    check(statuses(db, "level1/2_LinearTanh") == [("answered", "generated", "ok", 0),
                                                   ("answered", "generated", "ok", 1),
                                                   ("answered", "unparseable", "unparseable", 0)],
          "the re-asked prompt's reply is stored and verified (same code: not evaluated twice)")

    sft = data_sft(options, db, os.path.join(tmp, "sft.jsonl"))
    check(sorted(r["task"] for r in sft) == TASKS, "one record per task: replies with the same code are one")
    for record in sft:
        prompt_id, candidate_id = record["prompt_id"], record["candidate_id"]
        request, content = query(db, "SELECT p.request, s.content FROM prompts p JOIN responses s "
                                      "ON s.prompt_id = p.id WHERE p.id = ?", prompt_id)[0]
        check(record["messages"][:-1] == json.loads(request)["messages"],
              "%s: the user turn is the stored prompt" % record["task"])
        check(record["messages"][-1] == {"role": "assistant", "content": content},
              "%s: the assistant turn is the raw reply" % record["task"])
        check(record["stage"] == "generate" and record["round"] == 0 and record["verdict"]["status"] == "ok"
              and query(db, "SELECT c.prompt_id FROM candidates c WHERE c.id = ?", candidate_id)[0][0] == prompt_id,
              "%s: candidate, prompt, stage, round and verdict name where it came from" % record["task"])
    check(data_sft(options, db, os.path.join(tmp, "none.jsonl"), "--min-speedup", "1000") == [],
          "--min-speedup 1000 keeps nothing")
    check(data_sft(options, db, os.path.join(tmp, "opt.jsonl"), "--stage", "optimize") == [],
          "--stage optimize: no optimize run in this store")

    result = run(options, "data", "rl", "--suite", SUITE, "--db", db, "--out", os.path.join(tmp, "rl.jsonl"),
                 "--n", "2", "--device", "cpu")
    check(result.returncode == 0, "data rl exits 0")
    rl = lines_of(os.path.join(tmp, "rl.jsonl"))
    check(len(rl) == 8, "2 prompts for each of the suite's 4 tasks")
    for record in rl:
        check(record["label"] == record["task"] == record["reward_model"]["ground_truth"]
              and record["prompt"][0]["role"] == "system" and record["data_source"] == "cudal1",
              "%s: prompt, task, label and verl's fields" % record["task"])
    scale = [r for r in rl if r["task"] == "level1/1_ScaleRelu"][0]
    check(scale["pool"] == 2 and any(e["candidate_id"] for e in scale["exemplars"]),
          "the contrastive prompt shows the verified reply beside the reference")
    check("speedup" in scale["prompt"][1]["content"] and "Previous implementations" in scale["prompt"][1]["content"],
          "the stage-3 prompt is the contrastive one, with measured speedups")


def batch_lines(options, db, path, *extra):
    result = run(options, "prompts", "export", "--db", db, "--out", path, *extra)
    check(result.returncode == 0, "prompts export %s exits 0" % " ".join(extra))
    return lines_of(path)


def scenario_batch(options, tmp):
    """Round 1 of stage 2 through batch files, round 2 live; data sft --round selects a round."""
    root = options.root
    server = Server(options.server, tmp, {"routes": [
        REVIEWER,
        {"match": "1_ScaleRelu", "default": step(root, "two_blocks.md")},
        {"match": "2_LinearTanh", "default": step(root, "wrong_class.md")}]})
    db, out = os.path.join(tmp, "batch.db"), os.path.join(tmp, "out")
    args = ["--suite", SUITE, "--levels", "1", "--model", "my-checkpoint", "--samples", "2", "--db", db,
            "--out", out, *EVAL_ARGS]
    result = run(options, "generate", "--llm", "batch", "--round", "1", *args)
    check(result.returncode == 0 and "waiting for batch replies" in result.stderr
          and "--all" in result.stderr, "batch generation waits for replies and says how to export them")
    latest = batch_lines(options, db, os.path.join(tmp, "latest.jsonl"))
    check(len(latest) == 2, "without --all, the latest run's 2 prompts")
    lines = batch_lines(options, db, os.path.join(tmp, "prompts.jsonl"), "--all")
    check(len(lines) == 4 and len({line["custom_id"] for line in lines}) == 4,
          "--all: the 4 prompts of both tasks' runs")
    check(all("Implementation A: the reference itself" in line["body"]["messages"][-1]["content"]
              for line in lines), "round 1 of a new store shows the reference as its one exemplar")
    replies = {"1_ScaleRelu": open(reply_file(root, "fast_reply.md")).read(),
               "2_LinearTanh": open(reply_file(root, "linear_tanh.md")).read()}
    results = os.path.join(tmp, "results.jsonl")
    with open(results, "w") as handle:
        for line in lines:
            user = line["body"]["messages"][-1]["content"]
            name = [n for n in replies if n in user][0]
            handle.write(json.dumps(batch_output_line(line["custom_id"], replies[name])) + "\n")
    imported = run(options, "responses", "import", "--db", db, results)
    check(imported.returncode == 0 and "4 imported" in imported.stderr
          and "cudal1 generate --db" in imported.stderr, "4 replies imported; it says to resume generate")
    result = run(options, "generate", "--db", db, "--resume", "--review-llm", server.url, "--review-model", "judge",
                 *EVAL_ARGS)
    check(result.returncode == 0, "generate --resume exits 0")
    summary = json.loads(result.stdout)
    check(summary["finished"] == 2 and summary["round"] == 1 and summary["statuses"] == {"ok": 4},
          "both tasks finished: 4 verified replies")
    check(query(db, "SELECT count(*) FROM verdicts WHERE duplicate_of IS NOT NULL")[0][0] == 2,
          "identical replies of a task are evaluated once")

    result = run(options, "generate", "--llm", server.url, "--round", "2", *args)
    server.stop()
    check(result.returncode == 0 and len(generation_requests(server)) == 4, "round 2 runs live: 4 requests")
    # Rounds after the first show what earlier rounds verified, with where its time went.
    for request in generation_requests(server):
        user = [m["content"] for m in request["body"]["messages"] if m["role"] == "user"][-1]
        check("# Earlier implementations and their measured speedups" in user and "Measured: " in user,
              "a round 2 prompt shows verified exemplars")
        if "2_LinearTanh" in user:
            # 64 x 256 x 256 multiply-adds: the reference's arithmetic against the measured roof.
            check("8.4 MFLOP of arithmetic per call" in user,
                  "the linear task's exemplars say the arithmetic they do: %s"
                  % [line for line in user.splitlines() if line.startswith("Measured")])
    check(len(query(db, "SELECT id FROM runs")) == 4, "round 2 made runs of its own")
    round1 = data_sft(options, db, os.path.join(tmp, "r1.jsonl"), "--round", "1")
    check(sorted(r["task"] for r in round1) == TASKS and {r["round"] for r in round1} == {1},
          "--round 1: one record per task, all of round 1")
    round2 = data_sft(options, db, os.path.join(tmp, "r2.jsonl"), "--round", "2")
    check([r["task"] for r in round2] == ["level1/1_ScaleRelu"] and round2[0]["messages"][-1]["content"]
          == open(reply_file(root, "two_blocks.md")).read(), "--round 2: only round 2's verified reply")
    check(data_sft(options, db, os.path.join(tmp, "r0.jsonl"), "--round", "0") == [], "--round 0: nothing")


def scenario_kill_resume(options, tmp):
    """kill -9 while replies arrive; --resume asks only what was never answered."""
    root = options.root
    slow = {"routes": [{"match": "1_ScaleRelu", "default": step(root, "fast_reply.md", delay_s=1.0)},
                       {"match": "2_LinearTanh", "default": step(root, "linear_tanh.md", delay_s=1.0)}]}
    server = Server(options.server, tmp, slow)
    db = os.path.join(tmp, "killed.db")
    command = [options.cudal1, "generate", "--suite", SUITE, "--levels", "1", "--llm", server.url, "--model", "m",
               "--samples", "3", "--concurrency", "1", "--db", db, "--out", os.path.join(tmp, "out"), *EVAL_ARGS,
               "--review-llm", "none"]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
        try:
            if query(db, "SELECT count(*) FROM responses")[0][0] >= 2:
                break
        except Exception:  # the store may not exist yet
            continue
    check(process.poll() is None, "the generation was still going when killed")
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = dict(query(db, "SELECT prompt_id, content FROM responses"))
    total = query(db, "SELECT count(*) FROM prompts")[0][0]
    asked = len(server.requests())
    check(total == 6 and len(before) < 6, "killed with %d of %d replies recorded" % (len(before), total))
    result = run(options, "generate", "--db", db, "--resume", *EVAL_ARGS, "--review-llm", "none")
    server.stop()
    check(result.returncode == 0, "generate --resume exits 0")
    check(len(server.requests()) - asked == total - len(before),
          "the resumed run asked exactly the %d prompts without a reply" % (total - len(before)))
    after = dict(query(db, "SELECT prompt_id, content FROM responses"))
    check(len(after) == 6 and all(after[k] == v for k, v in before.items()),
          "every prompt has one reply; those from before the kill are unchanged")
    twice = query(db, "SELECT c.run_id, c.source_sha256 FROM candidates c JOIN verdicts v ON v.candidate_id = c.id "
                      "WHERE c.kind = 'generated' AND v.duplicate_of IS NULL GROUP BY 1, 2 HAVING count(*) > 1")
    check(twice == [], "no code was evaluated twice in a run")
    check(query(db, "SELECT count(*) FROM candidates c LEFT JOIN verdicts v ON v.candidate_id = c.id "
                    "WHERE v.candidate_id IS NULL")[0][0] == 0, "every candidate has its verdict")
    check(query(db, "SELECT count(*) FROM runs WHERE state = 'finished'")[0][0] == 2, "both runs finished")


def review_requests(server):
    return [r for r in server.requests()
            if REVIEW_MARK in [m["content"] for m in r["body"]["messages"] if m["role"] == "user"][-1]]


def scenario_review_later(options, tmp):
    """A legitimate rewrite of diag(a) @ b, far faster than the reference, generated with no
    reviewer: data sft leaves it out and says why and what changes it; --include-unreviewed keeps
    it, marked; `cudal1 review` with a reviewer that accepts it clears the flag, and data sft then
    keeps it without the option."""
    root = options.root
    suite = os.path.join(root, "tests/generate/diag_suite")
    server = Server(options.server, tmp, {"routes": [
        REVIEWER, {"match": "12_DiagMatmul", "replies": [step(root, "diag_rows.md")]}]})
    db, out = os.path.join(tmp, "gen.db"), os.path.join(tmp, "out")
    result = run(options, "generate", "--suite", suite, "--llm", server.url, "--model", "strong-llm",
                 "--samples", "1", "--review-llm", "none", "--db", db, "--out", out, *EVAL_ARGS)
    check(result.returncode == 0, "generate exits 0 (got %d)" % result.returncode)
    check(review_requests(server) == [], "--review-llm none: nothing is reviewed")
    check("1 verified reply is suspiciously fast and never reviewed" in result.stderr
          and "cudal1 review --db " + db in result.stderr, "generate's closing lines say so and how to review it")
    ((status, speedup, verdict),) = query(db, "SELECT status, speedup, verdict FROM verdicts v JOIN candidates c "
                                              "ON c.id = v.candidate_id WHERE c.kind = 'generated'")
    verdict = json.loads(verdict)
    check(status == "ok" and speedup > 2 and "unreviewed" in verdict["flags"],
          "the rewrite is verified (%.1fx) but flagged unreviewed: %s" % (speedup, verdict["flags"]))

    result = run(options, "data", "sft", "--db", db, "--out", os.path.join(tmp, "sft0.jsonl"))
    check(result.returncode == 0 and lines_of(os.path.join(tmp, "sft0.jsonl")) == [],
          "data sft leaves the unreviewed reply out")
    check("0 records written" in result.stderr and "1 unreviewed" in result.stderr
          and ("cudal1 review --db " + db) in result.stderr and "--include-unreviewed" in result.stderr,
          "and says why, with the two commands that change it")
    kept = data_sft(options, db, os.path.join(tmp, "sft1.jsonl"), "--include-unreviewed")
    check(len(kept) == 1 and kept[0]["unreviewed"] is True and "unreviewed" in kept[0]["verdict"]["flags"],
          "--include-unreviewed keeps it, marked unreviewed in the record")

    result = run(options, "review", "--db", db, "--review-llm", server.url, "--review-model", "reviewer")
    check(result.returncode == 0, "cudal1 review exits 0 (got %d)" % result.returncode)
    summary = json.loads(result.stdout)
    check(summary["unreviewed"] == 1 and summary["reviews"] == 1 and summary["legitimate"] == 1
          and summary["updated"] == 1, "one verdict reviewed, judged legitimate: %s" % summary)
    check(len(review_requests(server)) == 1, "the reviewer was asked once")
    prompt = [m["content"] for m in review_requests(server)[0]["body"]["messages"] if m["role"] == "user"][-1]
    check("unsqueeze" in prompt and "torch.diag" in prompt, "the review shows the candidate and the task")
    ((status, reward, verdict),) = query(db, "SELECT status, reward, verdict FROM verdicts v JOIN candidates c "
                                             "ON c.id = v.candidate_id WHERE c.kind = 'generated'")
    verdict = json.loads(verdict)
    check(status == "ok" and reward > 0 and "unreviewed" not in verdict["flags"]
          and verdict["review"]["state"] == "reviewed" and verdict["review"]["verdict"] == "legitimate"
          and verdict["review"]["earlier"]["state"] == "unreviewed" and verdict["review"]["reviewed_at"],
          "the stored verdict: reviewed, legitimate, the earlier review kept: %s" % verdict["review"])
    kept = data_sft(options, db, os.path.join(tmp, "sft2.jsonl"))
    check(len(kept) == 1 and kept[0]["unreviewed"] is False and kept[0]["speedup"] == speedup,
          "after the review data sft keeps it without --include-unreviewed")
    result = run(options, "review", "--db", db, "--review-llm", server.url, "--review-model", "reviewer")
    check(result.returncode == 0 and json.loads(result.stdout)["unreviewed"] == 0
          and len(review_requests(server)) == 1, "a second review finds nothing left to review")
    result = run(options, "review", "--db", db, "--review-llm", server.url, "--review-model", "reviewer",
                 "--format", "text")
    server.stop()
    check(result.returncode == 0 and result.stdout == "" and "no verdict" in result.stderr,
          "--format text: no JSON on stdout, the closing line on stderr")


def scenario_cli_errors(options, tmp):
    """Unusable input: exit code 2 and a message naming what to fix."""
    db = os.path.join(tmp, "empty.db")
    cases = [
        (["generate", "--llm", "batch", "--model", "m"], "--suite"),
        (["generate", "--suite", os.path.join(tmp, "nowhere"), "--llm", "batch", "--model", "m", "--db", db],
         "nowhere"),
        (["generate", "--suite", SUITE, "--llm", "batch", "--db", db], "--model"),
        (["generate", "--suite", SUITE, "--llm", "batch", "--model", "m", "--round", "-1", "--db", db], "--round"),
        (["generate", "--db", os.path.join(tmp, "missing.db"), "--resume"], "missing.db"),
        (["data", "sft", "--db", os.path.join(tmp, "missing.db"), "--out", os.path.join(tmp, "x.jsonl")],
         "missing.db"),
        (["data", "sft", "--db", db, "--out", os.path.join(tmp, "x.jsonl"), "--stage", "rl"], "--stage"),
        (["data", "rl", "--suite", SUITE, "--out", os.path.join(tmp, "x.jsonl"), "--device", "tpu"], "--device"),
        (["data", "rl", "--suite", os.path.join(tmp, "nowhere"), "--out", os.path.join(tmp, "x.jsonl")],
         "nowhere"),
        (["report", "--db", os.path.join(tmp, "missing.db"), "--html", os.path.join(tmp, "r.html")], "missing.db"),
        (["review", "--db", os.path.join(tmp, "missing.db"), "--review-llm", "cmd:true"], "missing.db"),
    ]
    for args, needle in cases:
        result = run(options, *args, timeout=120)
        check(result.returncode == 2 and needle in result.stderr,
              "cudal1 %s: exit 2 naming %s" % (" ".join(args[:2]), needle))
    check(not os.path.exists(os.path.join(tmp, "missing.db")), "a missing store is not created")
    # A store without generate runs has nothing to resume; without rewards, an empty training view.
    result = run(options, "generate", "--suite", SUITE, "--llm", "batch", "--model", "m", "--limit", "1",
                 "--db", db, "--out", os.path.join(tmp, "out"), *EVAL_ARGS)
    check(result.returncode == 0, "a batch generation of one task records its prompts")
    result = run(options, "generate", "--db", db, "--resume", "--round", "3", timeout=120)
    check(result.returncode == 2 and "round 3" in result.stderr, "--resume --round 3: no run of round 3 (exit 2)")
    for args, needle in [(["review", "--db", db, "--review-llm", "none"], "needs a reviewer"),
                         (["review", "--db", db, "--review-llm", "cmd:true", "--stage", "eval"], "--stage"),
                         (["review", "--db", db, "--review-llm", "cmd:true", "--run", "99"], "--run 99")]:
        result = run(options, *args, timeout=120)
        check(result.returncode == 2 and needle in result.stderr, "cudal1 %s: exit 2 naming %s" % (" ".join(args), needle))
    html = os.path.join(tmp, "training.html")
    result = run(options, "report", "--db", db, "--html", html)
    check(result.returncode == 0 and "holds no rewards yet" in open(html).read(),
          "report --db on a store without rewards says so")


if __name__ == "__main__":
    sys.exit(main(globals(), "cudal1-generate-"))
