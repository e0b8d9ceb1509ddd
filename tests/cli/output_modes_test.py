#!/usr/bin/env python3
"""`cudal1 eval`'s two outputs: the readable verdict on a terminal, the JSON exactly as before
for programs (a pipe, --json, --format json). The terminal is a pseudo-terminal the test opens,
so the binary's own terminal detection decides.

    output_modes_test.py --cudal1 BIN --root REPO

Standard library only.
"""

import argparse
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)
    print("ok: " + what, flush=True)


def run(command, terminal):
    """(exit code, stdout, stderr) of `command`, its stdout a pseudo-terminal when `terminal`."""
    print("$ " + " ".join(command) + ("   # stdout a terminal" if terminal else ""), flush=True)
    if not terminal:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        return result.returncode, result.stdout, result.stderr
    primary, secondary = pty.openpty()
    process = subprocess.Popen(command, stdout=secondary, stderr=subprocess.PIPE)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    stderr = process.stderr.read().decode()
    process.wait(timeout=600)
    # A terminal turns "\n" into "\r\n".
    return process.returncode, b"".join(chunks).decode().replace("\r\n", "\n"), stderr


def is_json(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def full_verdict_path(stdout):
    lines = [l for l in stdout.splitlines() if l.startswith("full verdict: ")]
    return lines[-1][len("full verdict: "):] if lines else ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="cudal1-output-")
    data = os.path.join(options.root, "tests", "fixtures")
    cache = os.path.join(tmp, "cache")

    def evaluate(candidate, *extra, terminal):
        return run([options.cudal1, "eval", "--task", os.path.join(data, "tasks", "scale_relu.py"),
                    "--candidate", os.path.join(data, "candidates", candidate), "--device", "cpu",
                    "--time-budget", "0.5", "--trials", "2", "-q", "--cache-dir", cache, *extra], terminal)

    try:
        # A pipe: the JSON on stdout and the summary line on stderr, as before.
        code, out, err = evaluate("fast.py", terminal=False)
        check(code == 0 and is_json(out), "stdout a pipe: the verdict JSON")
        piped = json.loads(out)
        check(piped["status"] == "ok" and err.strip().splitlines()[-1].startswith("ok "),
              "and the summary line last on stderr")

        # A terminal: the readable verdict, the full JSON in a file it names.
        code, out, err = evaluate("fast.py", terminal=True)
        check(code == 0 and not is_json(out) and "{" not in out, "stdout a terminal: no JSON on it")
        lines = out.splitlines()
        # Faster or slower is the busy machine's to decide (0.969x once on 2 loaded cores): only the
        # form is checked.
        check(re.match(r"ok: \d+\.\d{3}x (faster|\(slower\)), 95% interval .* reward ", lines[0]) is not None,
              "the first line: status, speedup, interval, reward: %r" % lines[0])
        check(any(l.startswith("times ") and "reference" in l and "candidate" in l and "ms" in l for l in lines),
              "both times")
        check(any(l.startswith("correct ") and "outputs match on 2 trials" in l for l in lines),
              "correctness on the trials")
        kept = full_verdict_path(out)
        check(kept.startswith(os.path.join(cache, "verdicts")) and os.path.isfile(kept),
              "the full verdict is in a file under the cache's verdicts/: %s" % kept)
        with open(kept) as handle:
            saved = json.load(handle)
        check(saved["status"] == "ok" and set(saved) == set(piped), "that file is the verdict JSON, every field")
        if saved["flags"]:
            flagged = [l for l in lines if saved["flags"][0] in l]
            check(flagged and len(flagged[0].split(saved["flags"][0], 1)[1].strip()) > 10,
                  "each flag with its meaning: %r" % flagged)
        check(not any(l.startswith("ok ") for l in err.splitlines()), "no summary line repeated on stderr")

        # A terminal with --json FILE: the readable verdict, the JSON in FILE.
        target = os.path.join(tmp, "verdict.json")
        code, out, _ = evaluate("fast.py", "--json", target, terminal=True)
        check(code == 0 and out.startswith("ok: ") and full_verdict_path(out) == target, "--json FILE: named as the full verdict")
        with open(target) as handle:
            check(json.load(handle)["status"] == "ok", "and FILE holds the JSON")

        # A terminal with --json alone, or --format json: the JSON on stdout.
        for extra in (["--json"], ["--format", "json"]):
            code, out, _ = evaluate("fast.py", *extra, terminal=True)
            check(code == 0 and is_json(out) and json.loads(out)["status"] == "ok",
                  "%s on a terminal: the JSON on stdout" % " ".join(extra))

        # A pipe with --format text: the readable form anyway.
        code, out, _ = evaluate("wrong.py", "--format", "text", terminal=False)
        lines = out.splitlines()
        check(code == 0 and lines[0].startswith("incorrect: reward 0"), "--format text in a pipe: %r" % lines[:1])
        check(any(l.startswith("correct ") and "outputs differ" in l for l in lines)
              and any(l.startswith("error ") for l in lines), "an incorrect verdict says the outputs differ and why")
        check(full_verdict_path(out) != "", "and where the JSON went")

        code, _, err = evaluate("fast.py", "--format", "yaml", terminal=False)
        check(code == 2 and "--format" in err, "--format yaml: exit 2 naming the option")
    except Failure as failure:
        print("FAILED: %s" % failure, flush=True)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
