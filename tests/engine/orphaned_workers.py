#!/usr/bin/env python3
"""A cudal1 process killed outright leaves no worker running.

`cudal1 eval` of a candidate whose forward never returns is killed with SIGKILL (no clean-up of
its own can run) once the candidate's worker spins. Its workers must end soon after: a forked
worker through its parent's death (the zygote kills the forks of a connection that closed, and
a fork's worker, a user of its own, must not outlive the process that forked it), a started one
through its sandbox. Checked with warm workers on and off.

usage: orphaned_workers.py CUDAL1 ROOT
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

START_LIMIT_S = 240  # until the candidate's worker runs its forward
END_LIMIT_S = 20     # until every worker of the killed process has ended


SKIP = 77  # ctest's SKIP_RETURN_CODE for this test
unreadable = set()  # worker processes whose descriptors this user may not read


def workers_of(cache_dir):
    """Processes whose stdout is a worker log under `cache_dir`: {pid: log path}."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            target = os.readlink("/proc/%s/fd/1" % name)
        except PermissionError:
            # A worker is not dumpable: its /proc entries are root's. Not root: not readable.
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    if b"cudal1-worker" in f.read():
                        unreadable.add(int(name))
            except OSError:
                pass
            continue
        except OSError:
            continue
        if target.startswith(cache_dir) and target.replace(" (deleted)", "").endswith(".log"):
            found[int(name)] = target
    return found


def cpu_ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return None


def one_case(cudal1, root, warm):
    cache_dir = tempfile.mkdtemp(prefix="cudal1-orphans-")
    env = dict(os.environ, CUDAL1_CACHE_DIR=cache_dir)
    proc = subprocess.Popen(
        [cudal1, "eval", "--task", os.path.join(root, "tests/fixtures/tasks/scale_relu.py"),
         "--candidate", os.path.join(root, "tests/fixtures/candidates/infinite_loop.py"), "--device", "cpu",
         "--correctness-timeout", "600", "--warm-workers", warm, "-q"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The candidate's worker spinning: a process writing to candidate.log whose CPU time grows.
    deadline, spinning = time.time() + START_LIMIT_S, None
    while time.time() < deadline and spinning is None and proc.poll() is None:
        for pid, log in workers_of(cache_dir).items():
            if log.endswith("candidate.log") or "candidate.log" in log:
                before = cpu_ticks(pid)
                time.sleep(1.0)
                after = cpu_ticks(pid)
                if before is not None and after is not None and after - before >= 50:
                    spinning = pid
                    break
        time.sleep(0.5)
    if spinning is None:
        proc.kill()
        proc.wait()
        if unreadable:
            print("skipped (warm workers %s): the workers' descriptors are not readable by this user "
                  "(they are not dumpable; run as root)" % warm)
            return SKIP
        print("FAIL (warm workers %s): no candidate worker spun within %d s (exit %s)"
              % (warm, START_LIMIT_S, proc.returncode))
        return False
    before = workers_of(cache_dir)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + END_LIMIT_S
    left = before
    while time.time() < deadline and left:
        time.sleep(0.5)
        left = workers_of(cache_dir)
    for pid in left:  # not to leave them spinning on the machine
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if left:
        print("FAIL (warm workers %s): %d worker(s) still running %d s after cudal1 was killed: %s"
              % (warm, len(left), END_LIMIT_S, sorted(left.values())))
        return False
    print("ok (warm workers %s): %d worker(s), the spinning candidate among them, ended after cudal1 was "
          "killed" % (warm, len(before)))
    return True


def main():
    cudal1, root = sys.argv[1], sys.argv[2]
    results = [one_case(cudal1, root, warm) for warm in ("on", "off")]
    if any(r is False for r in results):
        return 1
    return SKIP if all(r == SKIP for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
