#!/usr/bin/env python3
"""Evaluates every candidate of one example task (examples/<dir>) and checks the verdicts against
examples/manifest.json: the expected status on the device, and faster/slower than the reference.

On the CPU, CUDA candidates are expected to be compile errors (PyTorch without CUDA cannot build
them) as the manifest's expect_cpu says; on a GPU every correct candidate must be "ok".
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_case  # noqa: E402


def expected_status(candidate, device):
    if device == "cpu":
        return candidate["expect_cpu"]
    return "incorrect" if candidate["kind"] == "wrong" else "ok"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("example")
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--time-budget", default="5")
    options = parser.parse_args()
    with open(os.path.join(options.root, "examples", "manifest.json")) as handle:
        manifest = json.load(handle)
    task = next(t for t in manifest["tasks"] if t["dir"] == options.example)
    task_file = os.path.join(options.root, "examples", task["dir"], "task.py")
    failures = []
    device_kind = "cpu" if options.device == "cpu" else "cuda"
    for candidate in task["candidates"]:
        if device_kind not in candidate.get("devices", ["cpu", "cuda"]):
            continue
        want = expected_status(candidate, options.device)
        args = ["eval", "--task", task_file, "--candidate",
                os.path.join(options.root, "examples", task["dir"], candidate["file"]),
                "--device", options.device, "--time-budget", options.time_budget, "-q"]
        expect = {"status": want}
        if want == "ok" and candidate.get("expect_faster") is True:
            expect["greater"] = {"speedup": 1.0}
        if want == "ok" and candidate.get("expect_faster") is False:
            expect["less"] = {"speedup": 1.0}
        print("$ cudal1 " + " ".join(args), flush=True)
        result = subprocess.run([options.cudal1] + args, capture_output=True, text=True, timeout=1800)
        sys.stderr.write(result.stderr[-2000:])
        run_failures = []
        verdict = run_case.check_run({"expect": expect}, result, run_failures, {})
        if verdict:
            print("  %s: status=%s speedup=%s flags=%s" % (candidate["file"], verdict["status"], verdict["speedup"],
                                                         verdict["flags"]))
        failures += ["%s: %s" % (candidate["file"], f) for f in run_failures]
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
