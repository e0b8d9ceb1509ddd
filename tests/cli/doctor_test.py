#!/usr/bin/env python3
"""`cudal1 doctor`: every check says ok or what to do, the build check really builds and
evaluates, and a missing part fails with its remedy and exit code 1.

    doctor_test.py --cudal1 BIN

Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)
    print("ok: " + what, flush=True)


def doctor(binary, *args, env=None):
    command = [binary, "doctor", *args]
    print("$ " + " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200, env=env)
    sys.stdout.write(result.stderr[-2000:])
    return result


def by_name(report):
    return {c["name"]: c for c in report["checks"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cudal1", required=True)
    options = parser.parse_args()
    try:
        result = doctor(options.cudal1, "--device", "cpu", "--format", "json")
        report = json.loads(result.stdout)
        checks = by_name(report)
        print(json.dumps(report, indent=1))
        check(result.returncode == 0 and report["failed"] == 0, "this machine can evaluate on the CPU (exit 0)")
        for name in ("worker", "cache", "cores", "python", "compiler", "torch headers", "build"):
            check(checks.get(name, {}).get("state") == "ok", "%s: ok" % name)
        check(set(checks) >= {"sandbox", "cgroup"}, "the sandbox and its limits are checked")
        check("built with load_inline, verified and timed on cpu" in checks["build"]["detail"],
              "the build check evaluated a load_inline candidate: %s" % checks["build"]["detail"])
        for c in report["checks"]:
            check(c["state"] in ("ok", "warn", "fail", "skip"), "%s: a known state" % c["name"])
            if c["state"] in ("warn", "fail"):
                check(c["remedy"], "%s (%s) says what to do" % (c["name"], c["state"]))
        check(report["ok"] == sum(1 for c in report["checks"] if c["state"] == "ok"), "the counts add up")

        text = doctor(options.cudal1, "--device", "cpu", "--no-build", "--format", "text")
        lines = text.stdout.splitlines()
        check(text.returncode == 0 and lines[0] == "cudal1 doctor: what an evaluation on cpu needs"
              and any(l.split()[:2] == ["ok", "worker"] for l in lines) and lines[-1].startswith("cudal1 doctor: ")
              and "skipped" in lines[-1], "--format text: one line per check and a count")

        env = dict(os.environ, CUDAL1_WORKER=os.path.join(tempfile.gettempdir(), "no-such-cudal1-worker"))
        broken = doctor(options.cudal1, "--device", "cpu", "--format", "json", env=env)
        report = json.loads(broken.stdout)
        checks = by_name(report)
        check(broken.returncode == 1 and checks["worker"]["state"] == "fail"
              and "CUDAL1_WORKER" in checks["worker"]["remedy"], "a missing worker fails (exit 1) with its remedy")
        check(checks["build"]["state"] == "skip", "and the build is not tried")

        if not os.path.exists("/proc/driver/nvidia/version"):
            gpu = doctor(options.cudal1, "--device", "cuda", "--no-build", "--format", "json")
            report = json.loads(gpu.stdout)
            checks = by_name(report)
            check(gpu.returncode == 1 and checks["driver"]["state"] == "fail" and checks["driver"]["remedy"]
                  and checks["gpu"]["state"] == "fail", "--device cuda without a GPU: the driver and GPU checks fail, saying what to do")

        bad = doctor(options.cudal1, "--device", "tpu")
        check(bad.returncode == 2 and "--device" in bad.stderr, "--device tpu: exit 2 naming the option")
    except Failure as failure:
        print("FAILED: %s" % failure, flush=True)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
