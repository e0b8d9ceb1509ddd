#!/usr/bin/env python3
"""Evaluates every candidate of one example task (examples/<dir>) and checks the verdicts against
examples/manifest.json: the expected status on the device, and what the engine promises of a
timed verdict (the speedup inside its interval, the flag noisy exactly when sampling stopped
before the noise target was met).

On the CPU, CUDA candidates are expected to be compile errors that say the candidate needs a GPU,
as the manifest's expect_cpu says; on a GPU every correct candidate must be "ok".

Whether a candidate is faster or slower than the reference (the manifest's expect_faster) is
printed, not asserted: machine load can flip the order of two timings, so a test that asserts it
fails on a busy CI machine without anything being wrong. --expect-speed asserts it, for use as a
benchmark on a quiet machine.
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


def check_noise_promise(verdict, failures):
    """A timed verdict is flagged noisy exactly when sampling stopped before its noise target."""
    stop = verdict.get("timing", {}).get("stop")
    noisy = "noisy" in verdict.get("flags", [])
    if noisy != (stop != "converged"):
        failures.append("flag noisy is %s but timing.stop is %r" % (noisy, stop))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("example")
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--time-budget", default="2",
                        help="per candidate; more for --expect-speed on a quiet machine")
    parser.add_argument("--eval-arg", action="append", default=[],
                        help="one more argument of every cudal1 eval (repeat it for several)")
    parser.add_argument("--expect-speed", action="store_true",
                        help="also fail when a candidate is not faster (slower) as the manifest expects")
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
                "--device", options.device, "--time-budget", options.time_budget, "-q"] + options.eval_arg
        expect = {"status": want}
        if want == "compile_error" and device_kind == "cpu" and candidate.get("uses_cuda"):
            expect["error_contains"] = ["builds CUDA code", "--device cuda"]
        faster = candidate.get("expect_faster")
        if options.expect_speed and want == "ok" and faster is not None:
            expect["greater" if faster else "less"] = {"speedup": 1.0}
        print("$ cudal1 " + " ".join(args), flush=True)
        result = subprocess.run([options.cudal1] + args, capture_output=True, text=True, timeout=1800)
        sys.stderr.write(result.stderr[-2000:])
        run_failures = []
        verdict = run_case.check_run({"expect": expect}, result, run_failures, {})
        if verdict:
            print("  %s: status=%s speedup=%s flags=%s" % (candidate["file"], verdict["status"], verdict["speedup"],
                                                         verdict["flags"]))
            if verdict["status"] != want:
                run_case.print_findings(verdict, "  ")
            if verdict["status"] == "ok":
                check_noise_promise(verdict, run_failures)
                # The build made just before is what the candidate's worker loads, wherever that
                # worker was started (a ready worker gets it copied into its folder later).
                rebuilt = verdict.get("build", {}).get("rebuilt_on_load", [])
                if rebuilt:
                    run_failures.append("its worker built %s again on load" % rebuilt)
                if faster is not None and (verdict["speedup"] > 1.0) != faster:
                    print("  note: expected %s than the reference (not asserted without --expect-speed)"
                          % ("faster" if faster else "slower"))
        failures += ["%s: %s" % (candidate["file"], f) for f in run_failures]
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
