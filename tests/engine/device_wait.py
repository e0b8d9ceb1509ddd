#!/usr/bin/env python3
"""Waiting for the device does not count against the candidate's time limits.

Another evaluation holds the device (here: this script holds the CPU's device lock alone, as a
timing phase does) while `cudal1 eval` reaches its correctness trials. The eval waits for its
shared hold for longer than its whole --correctness-timeout, then must still finish `ok`: the
wait is not the candidate's time. The verdict records the wait (phases.device_shared_wait_s).

usage: device_wait.py CUDAL1 ROOT  (CUDAL1_LOCK_DIR names the lock directory)
"""
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time

HOLD_AFTER_WAITING_S = 8.0
CORRECTNESS_TIMEOUT_S = 4


def main():
    cudal1, root = sys.argv[1], sys.argv[2]
    lock_dir = os.environ.get("CUDAL1_LOCK_DIR") or tempfile.mkdtemp(prefix="cudal1-wait-")
    os.makedirs(lock_dir, exist_ok=True)
    lock_path = os.path.join(lock_dir, "device-cpu.lock")
    turnstile_path = os.path.join(lock_dir, "device-cpu.turnstile")
    lock = open(lock_path, "a+")
    fcntl.flock(lock, fcntl.LOCK_EX)  # the device held alone, as by a timing phase

    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "verdict.json")
        env = dict(os.environ, CUDAL1_LOCK_DIR=lock_dir)
        proc = subprocess.Popen(
            [cudal1, "eval", "--task", os.path.join(root, "tests/fixtures/tasks/scale_relu.py"),
             "--candidate", os.path.join(root, "tests/fixtures/candidates/fast.py"), "--device", "cpu",
             "--time-budget", "1", "--trials", "2", "--correctness-timeout",
             str(CORRECTNESS_TIMEOUT_S), "-q", "--json", out],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # A shared request keeps the turnstile while it waits for the lock: once the turnstile
        # is taken, the eval is waiting for the device.
        turnstile = open(turnstile_path, "a+")
        deadline = time.time() + 300
        waiting_since = None
        while time.time() < deadline and proc.poll() is None:
            try:
                fcntl.flock(turnstile, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(turnstile, fcntl.LOCK_UN)
            except BlockingIOError:
                waiting_since = time.time()
                break
            time.sleep(0.05)
        if waiting_since is None:
            fcntl.flock(lock, fcntl.LOCK_UN)
            _, err = proc.communicate(timeout=300)
            print("FAIL: the eval never waited for the device (exit %s): %s"
                  % (proc.returncode, err[-800:]))
            return 1
        time.sleep(HOLD_AFTER_WAITING_S)
        fcntl.flock(lock, fcntl.LOCK_UN)
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            print("FAIL: exit %d: %s" % (proc.returncode, err[-800:]))
            return 1
        with open(out) as f:
            verdict = json.load(f)
    problems = []
    if verdict["status"] != "ok":
        problems.append("status %s (%s)" % (verdict["status"], verdict.get("error", "")[:300]))
    waited = verdict.get("phases", {}).get("device_shared_wait_s", 0)
    if waited < HOLD_AFTER_WAITING_S - 1:
        problems.append("phases.device_shared_wait_s %.2f, expected about %.0f or more"
                        % (waited, HOLD_AFTER_WAITING_S))
    print("status %s, waited %.2f s for the device with --correctness-timeout %d"
          % (verdict["status"], waited, CORRECTNESS_TIMEOUT_S))
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
