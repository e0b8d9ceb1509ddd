#!/usr/bin/env python3
"""End-to-end scenarios of `cudal1 bench` (run by CTest, label bench; gpu_* also gpu).

  end_to_end     a 4-task suite on the CPU: one correct, one wrong, one missing and one null
                 solution; results.jsonl and summary.json; re-runs resume (nothing evaluated
                 again), a new baseline is added without re-evaluating, a lost line and a cut-off
                 line are redone, Ctrl-C keeps what is finished, a changed solution is evaluated
                 again, --levels/--limit select.
  bad_input      every unusable suite/solutions/option: exit code 2 and a message naming it.
  kill_resume    results.jsonl as kill -9 leaves it after a changed solution's line was written,
                 then a run killed mid-task: one line per task, nothing evaluated twice.
  compare        `cudal1 bench compare` on two result sets made here.
  example_suite  examples/suite with its PyTorch-only solutions (levels 1 and 3) on the CPU.
  baseline_task  the generated torch.compile task builds the task's Model with the same weights
                 and inputs (torch.compile replaced by a recorder where PyTorch has none).
  gpu_baselines  on a GPU: the CUDA-graph and torch.compile baselines are timed.

Standard library only.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FAILURES = []
LINE_FIELDS = {
    "level": int, "task_id": int, "task_name": str, "task_file": str,
    "solution_file": (str, type(None)), "status": str, "correct": bool,
    "speedup": (float, int, type(None)), "speedup_ci": (list, type(None)),
    "reward": (float, int), "reference_ms": (float, int, type(None)),
    "candidate_ms": (float, int, type(None)), "flags": list, "task_flags": list, "error": str,
    "baselines": dict, "verdict": (dict, type(None)),
}
STATS_FIELDS = ["tasks", "correct", "success_rate", "fast_0", "fast_1", "fast_1.5", "fast_2", "mean",
                "median", "geomean", "p25", "p75", "max"]


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL: " + message, file=sys.stderr)
    return condition


def run(args, cudal1, timeout=600, expect=0, env=None):
    command = [cudal1] + args
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            env=dict(os.environ, **env) if env else None)
    print("$ %s  -> %d (%.1f s)" % (" ".join(command), result.returncode, time.monotonic() - start))
    if expect is not None and result.returncode != expect:
        check(False, "exit code %d, expected %d\nstdout:\n%s\nstderr:\n%s" % (
            result.returncode, expect, result.stdout[-3000:], result.stderr[-3000:]))
    return result


def read_lines(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def by_key(lines):
    return {"level%d/%s" % (line["level"], line["task_name"]): line for line in lines}


def read_json(path):
    with open(path) as handle:
        return json.load(handle)


def read_text(path):
    with open(path) as handle:
        return handle.read()


def source(root, relative):
    return read_text(os.path.join(root, relative))


def write_solutions(path, entries):
    with open(path, "w") as handle:
        for entry in entries:
            handle.write(json.dumps(entry) + "\n")


def torch_major(summary):
    match = re.match(r"(\d+)", summary.get("torch", ""))
    return int(match.group(1)) if match else 0


def check_line_schema(line):
    for field, kinds in LINE_FIELDS.items():
        if check(field in line, "result line %s lacks %r" % (line.get("task_name"), field)):
            check(isinstance(line[field], kinds), "result field %r has type %s" % (field, type(line[field]).__name__))


def check_stats(stats, where):
    for field in STATS_FIELDS:
        check(field in stats, "%s lacks %r" % (where, field))


# ------------------------------------------------------------------------------------------------
def scenario_end_to_end(args, tmp):
    root = args.root
    suite = os.path.join(root, "tests", "fixtures", "suite")
    solutions = os.path.join(tmp, "solutions.jsonl")
    fast = source(root, "tests/fixtures/candidates/wrong.py")
    linear = source(root, "tests/fixtures/candidates/linear_same.py")
    entries = [
        {"level_id": 1, "task_id": 1, "custom_code": fast, "model": "kept but ignored"},
        {"level_id": 1, "task_id": 2, "custom_code": linear},
        {"level_id": 2, "task_id": 2, "custom_code": None},
        {"level_id": 3, "task_id": 9, "custom_code": linear},  # not in the suite: a warning
    ]
    write_solutions(solutions, entries)
    out = os.path.join(tmp, "out")
    base = ["bench", "--suite", suite, "--solutions", solutions, "--device", "cpu", "--out", out,
            "--time-budget", "2", "-q"]

    first = run(base + ["--baselines", "eager,compile,cuda-graph"], args.cudal1)
    check("level 3 task 9" in first.stderr and "warning" in first.stderr,
          "no warning for the solution of a task outside the suite:\n" + first.stderr)
    check("overall" in first.stdout, "no summary table on stdout:\n" + first.stdout)
    results = os.path.join(out, "results.jsonl")
    lines = read_lines(results)
    check(len(lines) == 4, "results.jsonl has %d lines, expected 4" % len(lines))
    for line in lines:
        check_line_schema(line)
    tasks = by_key(lines)
    summary = read_json(os.path.join(out, "summary.json"))
    old_torch = torch_major(summary) < 2
    check(summary.get("tolerance", {}).get("mode") == "default",
          "summary.json records the tolerance: %r" % summary.get("tolerance"))
    check(read_json(os.path.join(out, "bench.json")).get("tolerance") == summary["tolerance"],
          "bench.json records the same tolerance")

    wrong = tasks.get("level1/1_ScaleRelu", {})
    check(wrong.get("status") == "incorrect", "level1/1 status %r, expected incorrect" % wrong.get("status"))
    check(wrong.get("correct") is False and wrong.get("speedup") is None and wrong.get("reward") == 0,
          "an incorrect solution has correct=false, no speedup and reward 0: %r" % wrong)
    ok = tasks.get("level1/2_LinearTanh", {})
    check(ok.get("status") == "ok", "level1/2 status %r, expected ok (%s)" % (ok.get("status"), ok.get("error")))
    if ok.get("status") == "ok":
        check(ok["speedup"] > 0 and ok["reward"] > 0 and ok["reference_ms"] > 0 and ok["candidate_ms"] > 0,
              "an ok line has positive speedup, reward and times: %r" % {k: ok[k] for k in ("speedup", "reward")})
        check(isinstance(ok["speedup_ci"], list) and len(ok["speedup_ci"]) == 2, "speedup_ci is a pair")
        check(ok["verdict"]["status"] == "ok" and ok["verdict"]["speedup"] == ok["speedup"],
              "the full verdict is kept and agrees with the line")
        eager = ok["baselines"].get("eager", {})
        check(eager.get("status") == "ok" and eager.get("speedup") == ok["speedup"]
              and eager.get("baseline_ms") == ok["reference_ms"], "eager baseline entry: %r" % eager)
    check(ok.get("task_file") == os.path.join(suite, "level1", "2_LinearTanh.py"),
          "task_file is the suite's file: %r" % ok.get("task_file"))
    solution_file = ok.get("solution_file") or ""
    check(solution_file == os.path.join(out, "solutions", "level1", "2_LinearTanh.py"),
          "solution_file is the copy under OUT: %r" % solution_file)
    check(os.path.isfile(solution_file) and read_text(solution_file) == linear,
          "the solution copy holds exactly the evaluated code")
    for line in (ok, wrong):
        graph = line.get("baselines", {}).get("cuda-graph", {})
        check(graph.get("status") == "unavailable" and "CUDA device" in graph.get("reason", ""),
              "cuda-graph on the CPU is unavailable: %r" % graph)
        compile_entry = line.get("baselines", {}).get("compile", {})
        if old_torch:
            check(compile_entry == {"status": "unavailable",
                                    "reason": "torch.compile needs PyTorch >= 2.0 (found %s)" % summary["torch"]},
                  "compile baseline on PyTorch < 2: %r" % compile_entry)
    missing = tasks.get("level2/1_ScaleRelu", {})
    check(missing.get("status") == "missing" and missing.get("solution_file") is None
          and missing.get("verdict") is None and "no solution" in missing.get("error", ""),
          "a task without a solution line is missing: %r" % missing)
    null = tasks.get("level2/2_LinearTanh", {})
    check(null.get("status") == "missing" and "null" in null.get("error", ""),
          "a null solution is missing: %r" % null)
    check(null.get("baselines", {}).get("eager", {}).get("status") == "missing",
          "a missing task's baselines say missing: %r" % null.get("baselines"))

    check(summary["suite"] == suite and summary["solutions"] == solutions, "summary names its inputs")
    check(summary["device"] == "cpu", "summary device: %r" % summary["device"])
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", summary.get("created_at", "")) is not None,
          "created_at is ISO 8601 UTC: %r" % summary.get("created_at"))
    check(summary["tasks"] == 4, "summary tasks %r" % summary["tasks"])
    check_stats(summary["overall"], "overall")
    expected_correct = 1 if ok.get("status") == "ok" else 0
    check(summary["overall"]["correct"] == expected_correct and summary["overall"]["success_rate"] == expected_correct / 4,
          "overall correct/success_rate: %r" % summary["overall"])
    check(summary["overall"]["fast_0"] == expected_correct / 4, "fast_0 counts every task")
    check(sorted(summary["levels"]) == ["1", "2"], "levels: %r" % sorted(summary["levels"]))
    check(summary["levels"]["2"]["tasks"] == 2 and summary["levels"]["2"]["correct"] == 0
          and summary["levels"]["2"]["median"] is None, "level 2 stats: %r" % summary["levels"]["2"])
    check(summary["rejected"] == {"count": 0, "tasks": []} and summary["degenerate"]["count"] == 0,
          "rejected/degenerate: %r %r" % (summary["rejected"], summary["degenerate"]))
    check(summary["baselines"]["eager"]["overall"] == summary["overall"], "eager baseline = overall")
    check("unavailable" in summary["baselines"]["cuda-graph"], "cuda-graph unavailable in summary.json")
    if old_torch:
        check(summary["baselines"]["compile"] == {"unavailable": "torch.compile needs PyTorch >= 2.0 (found %s)" % summary["torch"]},
              "compile unavailable in summary.json: %r" % summary["baselines"]["compile"])
    throughput = summary["throughput"]
    check(throughput["candidates"] == 2 and throughput["wall_s"] > 0 and throughput["candidates_per_hour"] > 0,
          "throughput of the first run: %r" % throughput)
    check(summary["unmatched_solutions"]["tasks"] == ["level3/9"], "unmatched: %r" % summary["unmatched_solutions"])

    # The same command again: everything is in results.jsonl, nothing is evaluated.
    with open(results) as handle:
        text_before = handle.read()
    again = run(base + ["--baselines", "eager,compile,cuda-graph"], args.cudal1)
    summary = read_json(os.path.join(out, "summary.json"))
    check(summary["throughput"]["candidates"] == 0, "a re-run evaluated %r candidates" % summary["throughput"])
    check("0 evaluated, 4 from an earlier run" in again.stderr, "re-run's closing line:\n" + again.stderr)
    with open(results) as handle:
        check(handle.read() == text_before, "a re-run with nothing to do changed results.jsonl")

    # A baseline added later: each task gets an entry, no solution is evaluated again.
    run(base + ["--baselines", "eager,compile,cuda-graph,compile-max-autotune"], args.cudal1)
    summary = read_json(os.path.join(out, "summary.json"))
    lines = read_lines(results)
    check(summary["throughput"]["candidates"] == 0, "adding a baseline re-evaluated solutions")
    check(len(lines) == 4 and all("compile-max-autotune" in line["baselines"] for line in lines),
          "every line has the new baseline, one line per task")
    check(by_key(lines)["level1/2_LinearTanh"]["verdict"] == ok.get("verdict"),
          "the eager verdict is kept when a baseline is added")

    # A crash: one finished line lost, and a line cut off in the middle of its write.
    kept = [line for line in lines if line["task_name"] != "1_ScaleRelu" or line["level"] != 1]
    with open(results, "w") as handle:
        for line in kept:
            handle.write(json.dumps(line) + "\n")
        handle.write('{"level": 1, "task_id": 1, "task_na')
    # Ctrl-C while that task runs (its solution here never returns): what is finished stays, the
    # run ends at once with exit code 130.
    hanging = os.path.join(tmp, "hanging.jsonl")
    write_solutions(hanging, [dict(entries[0], custom_code=source(root, "tests/fixtures/candidates/infinite_loop.py"))]
                    + entries[1:])
    interrupted = [hanging if item == solutions else item for item in base]
    process = subprocess.Popen([args.cudal1] + interrupted, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    time.sleep(4)
    process.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, stderr = process.communicate(timeout=60)
    check(process.returncode == 130 and "interrupted" in stderr and time.monotonic() - start < 10,
          "Ctrl-C: exit %d after %.1f s, stderr:\n%s" % (process.returncode, time.monotonic() - start, stderr))
    check("dropped an unfinished last line" in stderr, "the cut-off line is reported:\n" + stderr)
    check(len(read_lines(results)) == 3, "after Ctrl-C the finished lines are kept, the unfinished one not: %r" % [
        (line["task_name"], line["status"]) for line in read_lines(results)])
    check(os.path.exists(os.path.join(out, "summary.json")), "Ctrl-C writes the summary of what is finished")
    run(base, args.cudal1)
    summary = read_json(os.path.join(out, "summary.json"))
    lines = read_lines(results)
    check(summary["throughput"]["candidates"] == 1, "only the lost task is evaluated again: %r" % summary["throughput"])
    check(len(lines) == 4 and by_key(lines)["level1/1_ScaleRelu"]["status"] == "incorrect",
          "the lost task is back")

    # A changed solution is evaluated again; --levels and --limit select tasks.
    entries[1]["custom_code"] = linear + "# revised\n"
    write_solutions(solutions, entries)
    run(base + ["--levels", "1", "--limit", "2"], args.cudal1)
    summary = read_json(os.path.join(out, "summary.json"))
    check(summary["tasks"] == 2 and list(summary["levels"]) == ["1"], "--levels 1 --limit 2: %r" % summary["levels"])
    check(summary["throughput"]["candidates"] == 1, "a changed solution is evaluated again: %r" % summary["throughput"])
    check(read_text(os.path.join(out, "solutions", "level1", "2_LinearTanh.py")).endswith("# revised\n"),
          "the solution copy is the revised code")


# ------------------------------------------------------------------------------------------------
def scenario_bad_input(args, tmp):
    root = args.root
    suite = os.path.join(root, "tests", "fixtures", "suite")
    good = os.path.join(tmp, "good.jsonl")
    write_solutions(good, [{"level_id": 1, "task_id": 1, "custom_code": "x = 1\n"}])

    def make(relative, content):
        path = os.path.join(tmp, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(content)
        return path

    task = source(root, "tests/fixtures/tasks/scale_relu.py")
    make("nolevels/1_A.py", task)
    make("badname/level1/relu.py", task)
    make("dup/level1/1_A.py", task)
    make("dup/level1/1_B.py", task)
    make("syntax/level1/1_A.py", task)
    make("syntax/level1/2_B.py", "def broken(:\n")
    malformed = make("malformed.jsonl", '{"level_id": 1, "task_id": 1, "custom_code": "x"}\n{"level_id": 1,\n')
    twice = make("twice.jsonl", '{"level_id": 1, "task_id": 1, "custom_code": "x"}\n'
                               '{"level_id": 1, "task_id": 1, "custom_code": "y"}\n')
    no_code = make("nocode.jsonl", '{"level_id": 1, "task_id": 1, "code": "x"}\n')
    a_file = make("outfile", "")
    other = os.path.join(tmp, "other-out")
    os.makedirs(other)
    with open(os.path.join(other, "bench.json"), "w") as handle:
        json.dump({"suite": "/some/other/suite", "devices": ["cpu"]}, handle)
    other_tolerance = os.path.join(tmp, "default-tolerance-out")
    os.makedirs(other_tolerance)
    with open(os.path.join(other_tolerance, "bench.json"), "w") as handle:
        json.dump({"devices": ["cpu"], "tolerance": {"mode": "default"}}, handle)

    def bench(suite_dir, solutions, *extra, device="cpu", out=os.path.join(tmp, "out")):
        return ["bench", "--suite", suite_dir, "--solutions", solutions, "--device", device,
                "--out", out, "-q"] + list(extra)

    cases = [
        (["bench", "--solutions", good], "needs --suite"),
        (bench(os.path.join(tmp, "absent"), good), "does not exist"),
        (bench(os.path.join(tmp, "nolevels"), good), "has no level directories"),
        (bench(os.path.join(tmp, "badname"), good), "badname/level1/relu.py' does not follow the KernelBench layout"),
        (bench(os.path.join(tmp, "dup"), good), "both have task id 1 in level 1"),
        (bench(suite, malformed), "malformed.jsonl:2: not valid JSON"),
        (bench(suite, twice), "twice.jsonl:2: a second solution for level 1 task 1 (the first is on line 1)"),
        (bench(suite, no_code), 'nocode.jsonl:1: no "custom_code"'),
        (bench(suite, os.path.join(tmp, "absent.jsonl")), "absent.jsonl' do not exist"),
        (bench(suite, good, "--levels", "7"), "no task in level7/"),
        (bench(suite, good, "--levels", "x"), "--levels 'x'"),
        (bench(suite, good, "--baselines", "eager,inductor"), "unknown baseline 'inductor'"),
        (bench(suite, good, "--time-budget", "0"), "--time-budget: 0 is not a number of seconds"),
        (bench(os.path.join(tmp, "syntax"), good), "syntax/level1/2_B.py"),
        (bench(suite, good, device="gpu"), "--device 'gpu'"),
        (bench(suite, good, out=a_file), "is a file"),
        (bench(suite, good, out=other), "holds results of the suite '/some/other/suite'"),
        (bench(suite, good, "--tolerance", "kernelbench", out=other_tolerance),
         "holds results compared with --tolerance default, this run uses kernelbench"),
        (bench(suite, good, "--tolerance", "tight"), "--tolerance 'tight' is not understood"),
        (bench(suite, good, "--no-such-option"), ""),
    ]
    for command, expected in cases:
        result = run(command, args.cudal1, expect=2)
        check(expected in result.stderr, "%s: stderr lacks %r:\n%s" % (" ".join(command[:5]), expected, result.stderr))
        check(not os.path.exists(os.path.join(tmp, "out", "results.jsonl")),
              "unusable input must not start a benchmark")
    # Not the input's fault: a worker program that cannot start is an internal error (exit 1).
    broken = run(bench(suite, good), args.cudal1, expect=1, env={"CUDAL1_WORKER": os.path.join(tmp, "no-worker")})
    check("internal error" in broken.stderr and "no-worker" in broken.stderr,
          "a missing worker program:\n" + broken.stderr)


# ------------------------------------------------------------------------------------------------
def fake_run(directory, device, lines, overall):
    os.makedirs(directory)
    with open(os.path.join(directory, "results.jsonl"), "w") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
    summary = {"suite": "/suite", "device": device, "torch": "2.5.1", "tasks": len(lines), "overall": overall,
               "levels": {"1": overall}}
    with open(os.path.join(directory, "summary.json"), "w") as handle:
        json.dump(summary, handle)


def result(level, task_id, status, speedup, candidate_ms):
    return {"level": level, "task_id": task_id, "task_name": "%d_Task" % task_id, "status": status,
            "speedup": speedup, "candidate_ms": candidate_ms,
            "reference_ms": candidate_ms * speedup if speedup else None}


def scenario_compare(args, tmp):
    a = os.path.join(tmp, "h100")
    b = os.path.join(tmp, "h200")
    fake_run(a, {"name": "NVIDIA H100"}, [result(1, 1, "ok", 2.0, 1.0), result(1, 2, "ok", 3.0, 2.0),
                                          result(1, 3, "ok", 1.5, 1.0)],
             {"tasks": 3, "correct": 3, "geomean": 2.0})
    fake_run(b, {"name": "NVIDIA H200"}, [result(1, 1, "ok", 2.5, 0.8), result(1, 2, "incorrect", None, None),
                                          result(2, 1, "ok", 1.1, 1.0)],
             {"tasks": 3, "correct": 2, "geomean": 1.6})
    output = os.path.join(tmp, "comparison.json")
    shown = run(["bench", "compare", os.path.join(a, "summary.json"), b, "--json", output], args.cudal1)
    for text in ("NVIDIA H100", "NVIDIA H200", "level1/1_Task", "only in A: level1/3_Task",
                 "only in B: level2/1_Task", "status changed: level1/2_Task ok -> incorrect"):
        check(text in shown.stdout, "compare table lacks %r:\n%s" % (text, shown.stdout))
    comparison = read_json(output)
    rows = {row["task"]: row for row in comparison["tasks"]}
    check(abs(rows["level1/1_Task"]["speedup_ratio"] - 1.25) < 1e-12, "speedup ratio B/A")
    check(abs(rows["level1/1_Task"]["candidate_ms_ratio"] - 0.8) < 1e-12, "candidate time ratio B/A")
    check(rows["level1/2_Task"]["speedup_ratio"] is None, "no ratio for a failed side")
    check(comparison["aggregate"]["ok_in_both"] == 1, "ok in both: %r" % comparison["aggregate"])
    check(abs(comparison["aggregate"]["overall"]["geomean"]["ratio"] - 0.8) < 1e-12, "overall geomean ratio")
    check(comparison["only_in_a"] == ["level1/3_Task"] and comparison["only_in_b"] == ["level2/1_Task"],
          "tasks on one side only")
    missing = run(["bench", "compare", a, os.path.join(tmp, "nowhere")], args.cudal1, expect=2)
    check("does not exist" in missing.stderr, "compare with a missing side:\n" + missing.stderr)


# ------------------------------------------------------------------------------------------------
CHECK_GENERATED = r'''
import importlib.util, sys, torch
generated_path, original_path = sys.argv[1], sys.argv[2]
calls = []
if not hasattr(torch, "compile"):
    # PyTorch < 2: a recorder stands in for torch.compile, so the wrapper itself is checked.
    def fake_compile(model, mode=None):
        calls.append(mode)
        return model
    torch.compile = fake_compile
else:
    real = torch.compile
    def recording_compile(model, mode=None):
        calls.append(mode)
        return real(model, mode=mode)
    torch.compile = recording_compile

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

generated = load(generated_path, "cudal1_task")
original = load(original_path, "original_task")
torch.set_grad_enabled(False)
torch.manual_seed(11); wrapped = generated.Model(*generated.get_init_inputs())
torch.manual_seed(11); plain = original.Model(*original.get_init_inputs())
for (name, a), (_, b) in zip(sorted(wrapped.eager.state_dict().items()), sorted(plain.state_dict().items())):
    assert torch.equal(a, b), "weights differ: " + name
torch.manual_seed(5); x = generated.get_inputs()
torch.manual_seed(5); y = original.get_inputs()
assert all(torch.equal(a, b) for a, b in zip(x, y)), "inputs differ"
first = wrapped(*x)
assert torch.allclose(first, plain(*y), atol=1e-5), "outputs differ"
wrapped(*x)
assert calls == ["default"], "torch.compile called %r" % calls
print("generated baseline task ok")
'''


def scenario_baseline_task(args, tmp):
    task = os.path.join(args.root, "tests", "fixtures", "tasks", "linear_tanh.py")
    generated = os.path.join(tmp, "compile_task.py")
    run(["bench", "baseline-task", "--baseline", "compile", "--task", task, "--out", generated], args.cudal1)
    checker = os.path.join(tmp, "check_generated.py")
    with open(checker, "w") as handle:
        handle.write(CHECK_GENERATED)
    result = subprocess.run([args.python, checker, generated, task], capture_output=True, text=True)
    check(result.returncode == 0, "the generated compile task misbehaves:\n" + result.stdout + result.stderr)
    graph = run(["bench", "baseline-task", "--baseline", "cuda-graph", "--task", task], args.cudal1)
    try:
        compile(graph.stdout, "cuda_graph_task.py", "exec")
    except SyntaxError as error:
        check(False, "the cuda-graph task is not valid Python: %s" % error)
    check("graph.replay()" in graph.stdout, "the cuda-graph task replays a graph")
    bad = run(["bench", "baseline-task", "--baseline", "eager", "--task", task], args.cudal1, expect=2)
    check("name one baseline other than eager" in bad.stderr, bad.stderr)
    absent = run(["bench", "baseline-task", "--baseline", "compile", "--task", os.path.join(tmp, "x.py")],
                 args.cudal1, expect=2)
    check("x.py" in absent.stderr, absent.stderr)


# ------------------------------------------------------------------------------------------------
def scenario_kill_resume(args, tmp):
    root = args.root
    solutions = os.path.join(tmp, "solutions.jsonl")
    out = os.path.join(tmp, "out")
    results = os.path.join(out, "results.jsonl")
    base = ["bench", "--suite", os.path.join(root, "tests", "fixtures", "suite"), "--solutions", solutions,
            "--device", "cpu", "--out", out, "--levels", "1", "--time-budget", "2", "-q"]
    wrong, fast, linear, hanging = (source(root, "tests/fixtures/candidates/%s.py" % name)
                                    for name in ("wrong", "fast", "linear_same", "infinite_loop"))

    def use(first, second):
        write_solutions(solutions, [{"level_id": 1, "task_id": 1, "custom_code": first},
                                    {"level_id": 1, "task_id": 2, "custom_code": second}])

    use(fast, linear)
    run(base, args.cudal1)
    fast_line = read_text(results).splitlines()[0]
    shutil.rmtree(out)
    use(wrong, linear)
    run(base, args.cudal1)
    # What a run killed right after task 1's changed solution was evaluated leaves: its new line
    # after the old one, not yet compacted. (A real kill cannot be timed there on the CPU: a
    # solution that hangs holds the device, so task 1 would wait for it.)
    with open(results, "a") as handle:
        handle.write(fast_line + "\n")
    # The next run is killed while task 2's new solution hangs, after it opened results.jsonl
    # (it copies the solutions then).
    use(fast, hanging)
    copy = os.path.join(out, "solutions", "level1", "2_LinearTanh.py")
    process = subprocess.Popen([args.cudal1] + base, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while process.poll() is None and read_text(copy) != hanging and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = process.poll() is None
    process.kill()
    _, stderr = process.communicate()
    if not check(alive, "the run ended before it could be killed:\n" + stderr):
        return
    lines = by_key(read_lines(results))
    check(len(read_lines(results)) == 2, "one line per task after kill -9: %r" % [
        (line["task_name"], line["solution_sha256"][:12]) for line in read_lines(results)])
    check(lines["level1/1_ScaleRelu"].get("solution_sha256") == hashlib.sha256(fast.encode()).hexdigest(),
          "task 1's line is its new solution's: %r" % lines["level1/1_ScaleRelu"])
    check(lines["level1/2_LinearTanh"].get("solution_sha256") == hashlib.sha256(linear.encode()).hexdigest(),
          "task 2, cut off, keeps its earlier line: %r" % lines["level1/2_LinearTanh"])
    # The resume evaluates nothing: both tasks have a line for the code asked for.
    use(fast, linear)
    again = run(base, args.cudal1)
    summary = read_json(os.path.join(out, "summary.json"))
    check(summary["throughput"]["candidates"] == 0 and "0 evaluated, 2 from an earlier run" in again.stderr,
          "the resume evaluated again: %r\n%s" % (summary["throughput"], again.stderr))
    check(len(read_lines(results)) == 2, "one line per task after the resume")


# ------------------------------------------------------------------------------------------------
def scenario_example_suite(args, tmp):
    """The shipped example suite and its PyTorch-only solutions, levels 1 and 3."""
    suite = os.path.join(args.root, "examples", "suite")
    out = os.path.join(tmp, "out")
    run(["bench", "--suite", suite, "--solutions", os.path.join(suite, "solutions_torch.jsonl"),
         "--device", "cpu", "--levels", "1,3", "--time-budget", "2", "--out", out, "-q"], args.cudal1)
    lines = by_key(read_lines(os.path.join(out, "results.jsonl")))
    check(sorted(lines) == ["level1/1_GeluTanh", "level1/2_RmsNorm", "level3/1_GruSequence",
                            "level3/2_AttentionDecoder"], "example suite tasks: %r" % sorted(lines))
    for key in ("level1/1_GeluTanh", "level1/2_RmsNorm"):
        check(lines.get(key, {}).get("status") == "ok", "%s: %r" % (key, lines.get(key, {}).get("error")))
    check(lines.get("level3/1_GruSequence", {}).get("error", "").startswith("the solution is null"),
          "the null example solution: %r" % lines.get("level3/1_GruSequence"))
    check(lines.get("level3/2_AttentionDecoder", {}).get("error", "").startswith("no solution"),
          "the left-out example task: %r" % lines.get("level3/2_AttentionDecoder"))


# ------------------------------------------------------------------------------------------------
def scenario_gpu_baselines(args, tmp):
    root = args.root
    suite = os.path.join(root, "tests", "fixtures", "suite")
    solutions = os.path.join(tmp, "solutions.jsonl")
    write_solutions(solutions, [
        {"level_id": 1, "task_id": 1, "custom_code": source(root, "tests/fixtures/candidates/fast.py")},
        {"level_id": 1, "task_id": 2, "custom_code": source(root, "tests/fixtures/candidates/linear_same.py")},
    ])
    out = os.path.join(tmp, "out")
    run(["bench", "--suite", suite, "--solutions", solutions, "--device", "cuda", "--out", out,
         "--levels", "1", "--baselines", "eager,compile,cuda-graph", "--time-budget", "3", "-q"], args.cudal1)
    summary = read_json(os.path.join(out, "summary.json"))
    check(isinstance(summary["device"], dict) and "name" in summary["device"], "GPU device: %r" % summary["device"])
    for line in read_lines(os.path.join(out, "results.jsonl")):
        key = "level%d/%s" % (line["level"], line["task_name"])
        check(line["status"] == "ok", "%s: %s %s" % (key, line["status"], line["error"]))
        graph = line["baselines"]["cuda-graph"]
        check(graph.get("status") == "ok" and graph.get("speedup", 0) > 0 and graph.get("baseline_ms", 0) > 0,
              "%s cuda-graph baseline: %r" % (key, graph))
        compiled = line["baselines"]["compile"]
        if torch_major(summary) >= 2:
            check(compiled.get("status") == "ok" and compiled.get("speedup", 0) > 0,
                  "%s compile baseline: %r" % (key, compiled))
        else:
            check(compiled.get("status") == "unavailable", "%s compile baseline: %r" % (key, compiled))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario")
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--python", default=sys.executable, help="the Python with PyTorch")
    args = parser.parse_args()
    args.root = os.path.abspath(args.root)
    scenario = globals().get("scenario_" + args.scenario)
    if scenario is None:
        parser.error("unknown scenario %r" % args.scenario)
    tmp = tempfile.mkdtemp(prefix="cudal1-bench-%s-" % args.scenario)
    try:
        scenario(args, tmp)
    finally:
        if not FAILURES:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept %s" % tmp, file=sys.stderr)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES), file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
