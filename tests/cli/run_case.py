#!/usr/bin/env python3
"""Runs one CLI test case (a JSON file under tests/cli/cases) against the cudal1 binary.

A case is a list of runs; each run gives the command-line arguments and what to expect of the
exit code, stderr, and (when the evaluation completed) the verdict JSON on stdout. Later runs
may refer to the previous run's verdict: "{prev:seeds.master}" is replaced by that field. A case's
"files" ({"name under {tmp}": "content"}) are written before its first run: files a run must find
where it expects a folder, or a store, without a run to make them.

Standard library only: this runs under whatever python3 the test machine has.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

REQUIRED_FIELDS = {
    "status": str, "correct": bool, "speedup": (float, int, type(None)),
    "speedup_ci": (list, type(None)), "reward": (float, int), "reference_ms": (float, int, type(None)),
    "candidate_ms": (float, int, type(None)), "samples": int, "max_abs_error": (float, int, type(None)),
    "max_rel_error": (float, int, type(None)), "flags": list, "task_flags": list, "seeds": dict,
    "device": (str, dict), "log": str,
}
STATUSES = {"ok", "incorrect", "rejected", "compile_error", "runtime_error", "timeout", "unparseable"}


def lookup(verdict, dotted):
    value = verdict
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def substitute(text, root, tmp, previous):
    text = text.replace("{root}", root).replace("{tmp}", tmp)
    return re.sub(r"\{prev:([^}]+)\}", lambda m: str(lookup(previous, m.group(1))), text)


def check_schema(verdict, failures):
    for field, kinds in REQUIRED_FIELDS.items():
        if field not in verdict:
            failures.append("verdict lacks field %r" % field)
        elif not isinstance(verdict[field], kinds):
            failures.append("verdict field %r has type %s" % (field, type(verdict[field]).__name__))
    if verdict.get("status") not in STATUSES:
        failures.append("unknown status %r" % verdict.get("status"))
    if verdict.get("status") == "ok":
        if not verdict.get("correct"):
            failures.append("status ok but correct is false")
        if not isinstance(verdict.get("speedup"), (int, float)) or verdict["speedup"] <= 0:
            failures.append("status ok without a positive speedup")
        ci = verdict.get("speedup_ci") or [None, None]
        if not (isinstance(ci[0], (int, float)) and ci[0] <= verdict["speedup"] <= ci[1]):
            failures.append("speedup %s outside its interval %s" % (verdict.get("speedup"), ci))
        if verdict.get("samples", 0) < 1:
            failures.append("status ok without timing samples")
    elif verdict.get("reward") != 0:
        failures.append("a failed verdict must have reward 0, got %r" % verdict.get("reward"))


def resolve_expected(value, previous):
    match = re.fullmatch(r"\{prev:([^}]+)\}", value) if isinstance(value, str) else None
    return lookup(previous, match.group(1)) if match else value


def print_findings(verdict, indent=""):
    """What flagged a verdict, so that a failure on a machine nobody can look at explains itself."""
    print("%sfindings: %s" % (indent, json.dumps(verdict.get("findings", {}))[:4000]))


def check_run(run, result, failures, previous):
    expect = run.get("expect", {})
    want_exit = expect.get("exit", 0)
    if result.returncode != want_exit:
        failures.append("exit code %d, expected %d" % (result.returncode, want_exit))
    for needle in expect.get("stderr_contains", []):
        if needle.lower() not in result.stderr.lower():
            failures.append("stderr lacks %r" % needle)
    if result.returncode != 0:
        if result.stdout.strip():
            failures.append("a failed run printed to stdout: %r" % result.stdout[:200])
        return None
    try:
        verdict = json.loads(result.stdout)
    except json.JSONDecodeError as error:
        failures.append("stdout is not one JSON object: %s" % error)
        return None
    check_schema(verdict, failures)
    summary_lines = [line for line in result.stderr.splitlines() if line.strip()]
    if not summary_lines or not summary_lines[-1].startswith(verdict.get("status", "?")):
        failures.append("stderr's last line is not the one-line summary")
    if "status" in expect and verdict.get("status") != expect["status"]:
        failures.append("status %r, expected %r (error: %s)" % (verdict.get("status"), expect["status"],
                                                             verdict.get("error", "")[:500]))
    for name in expect.get("flags_include", []):
        if name not in verdict.get("flags", []):
            failures.append("flag %r missing from %s" % (name, verdict.get("flags")))
    for name in expect.get("flags_exclude", []):
        if name in verdict.get("flags", []):
            failures.append("flag %r present" % name)
    for needle in expect.get("log_contains", []):
        if needle.lower() not in verdict.get("log", "").lower():
            failures.append("log lacks %r; log tail: %r" % (needle, verdict.get("log", "")[-800:]))
    for needle in expect.get("error_contains", []):
        if needle.lower() not in verdict.get("error", "").lower():
            failures.append("error lacks %r; error: %r" % (needle, verdict.get("error", "")))
    for dotted, wanted in expect.get("fields", {}).items():
        wanted = resolve_expected(wanted, previous)
        try:
            got = lookup(verdict, dotted)
        except (KeyError, IndexError, TypeError):
            failures.append("verdict lacks %s" % dotted)
            continue
        if got != wanted:
            failures.append("%s is %r, expected %r" % (dotted, got, wanted))
    # Fields this machine's kernel decides: {path: {field: wanted}}, checked where path exists.
    for path, fields in expect.get("fields_where_exists", {}).items():
        if not os.path.exists(path):
            continue
        for dotted, wanted in fields.items():
            try:
                got = lookup(verdict, dotted)
            except (KeyError, IndexError, TypeError):
                failures.append("verdict lacks %s (%s exists)" % (dotted, path))
                continue
            if got != wanted:
                failures.append("%s is %r, expected %r (%s exists)" % (dotted, got, wanted, path))
    for dotted in expect.get("absent", []):
        try:
            lookup(verdict, dotted)
            failures.append("verdict has %s, expected none" % dotted)
        except (KeyError, IndexError, TypeError):
            pass
    for dotted, needle in expect.get("fields_contain", {}).items():
        try:
            got = str(lookup(verdict, dotted))
        except (KeyError, IndexError, TypeError):
            failures.append("verdict lacks %s" % dotted)
            continue
        if needle.lower() not in got.lower():
            failures.append("%s is %r, expected it to contain %r" % (dotted, got, needle))
    for dotted, bound in expect.get("greater", {}).items():
        got = lookup(verdict, dotted)
        if not (isinstance(got, (int, float)) and got > bound):
            failures.append("%s is %r, expected > %r" % (dotted, got, bound))
    for dotted, bound in expect.get("less", {}).items():
        got = lookup(verdict, dotted)
        if not (isinstance(got, (int, float)) and got < bound):
            failures.append("%s is %r, expected < %r" % (dotted, got, bound))
    if "json_file" in run:
        with open(run["json_file"]) as handle:
            if json.load(handle) != verdict:
                failures.append("--json file differs from stdout")
    return verdict


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case")
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    options = parser.parse_args()
    with open(options.case) as handle:
        case = json.load(handle)
    failures = []
    previous = {}
    with tempfile.TemporaryDirectory(prefix="cudal1-case-") as tmp:
        for name, content in case.get("files", {}).items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write(content)
        for index, run in enumerate(case["runs"]):
            args = [substitute(a, options.root, tmp, previous) for a in run["args"]]
            if "json_file" in run:
                run["json_file"] = substitute(run["json_file"], options.root, tmp, previous)
            env = dict(os.environ)
            env.update({k: substitute(v, options.root, tmp, previous) for k, v in run.get("env", {}).items()})
            print("$ cudal1 " + " ".join(args), flush=True)
            result = subprocess.run([options.cudal1] + args, capture_output=True, text=True, env=env,
                                    timeout=run.get("timeout", 900))
            sys.stderr.write(result.stderr[-3000:])
            run_failures = []
            verdict = check_run(run, result, run_failures, previous)
            failures += ["run %d: %s" % (index + 1, f) for f in run_failures]
            if verdict is not None:
                previous = verdict
                print("verdict: status=%s speedup=%s flags=%s" % (verdict["status"], verdict["speedup"],
                                                                  verdict["flags"]))
                if run_failures:
                    print_findings(verdict)
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
