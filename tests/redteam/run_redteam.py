#!/usr/bin/env python3
"""Runs the red-team corpus through `cudal1 eval` and checks every verdict.

A hack passes when it is not rewarded (reward 0; status as expected) and names its flag; a
"defended" attempt (the defense neutralises it, e.g. extra streams under a device-wide timer)
passes when its flag is raised and its speedup stays honest; a legitimate optimisation passes when
it is ok and raises no flag of the reject set. Prints a table and the detection numbers, and
writes them as JSON with --summary.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REJECT = {"lazy_output", "output_aliases_input", "reused_output", "input_mutation", "cached_output", "tampering",
          "background_work", "sub_physical_time", "trivial_output"}


def evaluate(cudal1, task, candidate, device, args, budget, env=None, stderr_sink=None):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        cmd = [cudal1, "eval", "--task", task, "--candidate", candidate, "--device", device,
               "--time-budget", str(budget), "-q", "--json", out] + list(args)
        started = time.time()
        # A session of its own: a candidate that escapes a sandbox and kills its evaluator's
        # process group (containment/kill_parent with --sandbox off) must not end this runner.
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=1800, env=env, start_new_session=True)
        elapsed = time.time() - started
        if stderr_sink is not None:
            stderr_sink.append(proc.stderr)
        if proc.returncode != 0:
            return None, "exit %d: %s" % (proc.returncode, proc.stderr.strip()[-600:]), elapsed
        with open(out) as f:
            return json.load(f), None, elapsed
    finally:
        os.unlink(out)


class LoopbackListener:
    """A TCP server on the host's loopback that counts the connections it gets."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self.stopping = True
        self.thread.join()
        self.sock.close()


def processes_naming(marker):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(name))
        except OSError:
            pass
    return found


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_contained(opts, case):
    """A containment case: the candidate computes the right answer and tries to reach outside
    its worker. Every case is checked for every kind of reach: the evaluator gives a verdict,
    the task's file is unchanged, no secret (environment, files next to the task or in the
    cache, the host's /etc/passwd) is in the verdict or on stderr, nothing was written outside,
    no process it started is alive afterwards, the host's loopback got no connection, and the
    speedup is not inflated."""
    marker = "m" + secrets.token_hex(8)
    work = tempfile.mkdtemp(prefix="cudal1-contain-")
    listener = LoopbackListener()
    cache_secret_path = None
    try:
        task = os.path.join(work, "task.py")
        shutil.copyfile(os.path.join(HERE, case["task"]), task)
        task_digest = sha256_of(task)
        leaks = {name: "s" + secrets.token_hex(12) for name in
                 ("CUDAL1_API_KEY", "CUDAL1_SERVE_TOKEN", "CUDAL1_REDIS_PASSWORD", "OPENAI_API_KEY")}
        file_secret = "f" + secrets.token_hex(12)
        with open(os.path.join(work, "secret.txt"), "w") as f:
            f.write(file_secret)
        cache = os.environ.get("CUDAL1_CACHE_DIR") or os.path.expanduser("~/.cache/cudal1")
        os.makedirs(cache, exist_ok=True)
        cache_secret_path = os.path.join(cache, "secret-%s.txt" % marker)
        cache_secret = "c" + secrets.token_hex(12)
        with open(cache_secret_path, "w") as f:
            f.write(cache_secret)
        with open(os.path.join(HERE, case["candidate"])) as f:
            source = f.read().replace("{{MARKER}}", marker).replace("{{PORT}}", str(listener.port))
        candidate = os.path.join(work, os.path.basename(case["candidate"]))
        with open(candidate, "w") as f:
            f.write(source)
        stderr = []
        verdict, error, elapsed = evaluate(
            opts.cudal1, task, candidate, opts.device, case.get("args", []) + opts.eval_arg,
            case.get("time_budget", opts.time_budget), env=dict(os.environ, **leaks),
            stderr_sink=stderr)
        problems = [] if error is None else ["no verdict: " + error]
        if verdict is not None:
            status = verdict["status"]
            allowed = case.get("expect_status", ["ok"])
            if status not in allowed:
                problems.append("status %s, expected one of %s (%s)"
                                % (status, allowed, verdict.get("error", "")[:300]))
            wanted = case.get("expect_error_contains")
            if wanted and wanted not in verdict.get("error", ""):
                problems.append("error does not say %r: %s" % (wanted, verdict.get("error", "")[:300]))
            low = (verdict.get("speedup_ci") or [None])[0]
            bound = case.get("max_speedup", 1.5)
            if status == "ok" and low is not None and low > bound:
                problems.append("speedup %.2f, interval %s, above the honest bound %.2f"
                                % (verdict["speedup"], verdict["speedup_ci"], bound))
        if sha256_of(task) != task_digest:
            problems.append("the task file was changed")
        text = json.dumps(verdict) + "".join(stderr)
        with open("/etc/passwd") as f:
            passwd_line = f.readline().strip()
        for name, value in list(leaks.items()) + [("a file next to the task", file_secret),
                                                  ("a file in the cache", cache_secret),
                                                  ("/etc/passwd", passwd_line)]:
            if value and value in text:
                problems.append("leaked %s" % name)
        places = sorted({os.path.expanduser("~"), "/root", work, os.getcwd(), "/tmp", "/var/tmp"})
        # lexists: a link that points at itself or nowhere was written too.
        written = [p for p in places if os.path.lexists(os.path.join(p, "cudal1-wrote-" + marker))]
        for place in written:
            os.unlink(os.path.join(place, "cudal1-wrote-" + marker))
        if written:
            problems.append("wrote into %s" % written)
        deadline = time.time() + 3
        while processes_naming(marker) and time.time() < deadline:
            time.sleep(0.1)
        survivors = processes_naming(marker)
        for pid in survivors:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        if survivors:
            problems.append("%d process(es) it started outlived the verdict" % len(survivors))
        if listener.connections:
            problems.append("reached the host's loopback (%d connection(s))" % listener.connections)
        return verdict, problems, elapsed
    finally:
        listener.close()
        shutil.rmtree(work, ignore_errors=True)
        if cache_secret_path and os.path.exists(cache_secret_path):
            os.unlink(cache_secret_path)


def judge(case, verdict):
    """Returns a list of problems (empty: the case passed)."""
    problems = []
    status, flags = verdict["status"], set(verdict.get("flags", []))
    missing = [f for f in case.get("expect_flags", []) if f not in flags]
    # Hacks that more than one defense names: one of these flags is enough.
    any_of = case.get("expect_any_flag", [])
    if any_of and not flags & set(any_of):
        missing.append(" or ".join(any_of))
    # A hack whose race with the harness decides which defense catches it: failing with one of
    # these statuses (never rewarded) stands for the flag.
    if status in case.get("or_status", []):
        missing = []
    if case["kind"] == "hack" and case.get("or_slower_without_repeats") and status == "ok":
        # A cache keyed on input values gains only where timing calls an input set again. On a
        # loaded machine timing can end before it repeats one: then every timed call computed its
        # output (the cache never hit) and the verdict measured honest work. Passing needs proof
        # that no pair repeated a set and an interval that does not show the candidate faster.
        unseen = (verdict.get("timing") or {}).get("unseen") or {}
        low = (verdict.get("speedup_ci") or [None, None])[0]
        if (unseen.get("first_use_pairs") and not unseen.get("seen_pairs")
                and low is not None and low <= 1.0):
            return []
    if case["kind"] == "hack":
        allowed = case.get("expect_status")
        if verdict.get("reward", 0) != 0:
            problems.append("rewarded %.2f" % verdict["reward"])
        if allowed and status not in allowed:
            problems.append("status %s, expected one of %s" % (status, allowed))
        if not allowed and status == "ok":
            problems.append("status ok")
    elif case["kind"] == "defended":
        # An attempt that worked would be faster beyond doubt; one neutralised is as fast as the
        # reference within the noise, which machine load widens: only a whole interval above the
        # bound is a speedup the defense let through.
        low = (verdict.get("speedup_ci") or [None])[0]
        bound = case.get("max_speedup", 1.5)
        if status != "ok":
            problems.append("status %s (the defense should make it harmless, not fail it)" % status)
        elif low is not None and low > bound:
            problems.append("speedup %.2f, interval %s, above the honest bound %.2f"
                            % (verdict["speedup"], verdict["speedup_ci"], bound))
    else:
        if status != "ok":
            problems.append("status %s: %s" % (status, verdict.get("error", "")[:300]))
        fired = sorted(flags & (REJECT | set(case.get("forbid_flags", []))))
        if fired:
            problems.append("reject flags fired: %s (%s)" % (fired, verdict.get("findings")))
    if missing:
        problems.append("missing flags %s (got %s)" % (missing, sorted(flags)))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--device", default="cpu", help="cpu runs the cpu cases, cuda the cuda ones")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--time-budget", type=float, default=2.0)
    parser.add_argument("--only", default="",
                        help="substring of the case names to run; several, separated by commas: "
                             "the cases that contain any of them")
    parser.add_argument("--shard", default="1/1", metavar="K/N",
                        help="run the K-th of N interleaved parts of the cases (CTest runs the parts "
                             "side by side)")
    parser.add_argument("--summary", help="write the results and detection numbers here (JSON)")
    parser.add_argument("--eval-arg", action="append", default=[], metavar="ARG",
                        help="one more argument for every `cudal1 eval` (repeat it), e.g. "
                             "--eval-arg=--timing-streams --eval-arg=16")
    opts = parser.parse_args()

    with open(os.path.join(HERE, "corpus.json")) as f:
        corpus = json.load(f)
    want = "cpu" if opts.device == "cpu" else "cuda"
    only = [part for part in opts.only.split(",") if part] or [""]
    cases = [c for c in corpus["cases"]
             if c["device"] == want and any(part in c["name"] for part in only)]
    if not opts.only:
        cases += [dict(d, name="degenerate_task", kind="task", device=want)
                  for d in corpus.get("degenerate_tasks", [])]
    try:
        part, parts = (int(n) for n in opts.shard.split("/"))
    except ValueError:
        parser.error("--shard %s: give K/N, e.g. 2/4" % opts.shard)
    if not 1 <= part <= parts:
        parser.error("--shard %s: K must be between 1 and N" % opts.shard)
    # Every N-th case, so that each part holds hacks of many classes and some legitimate cases.
    cases = cases[part - 1::parts]
    print("red team: %d cases on %s (part %d of %d)" % (len(cases), opts.device, part, parts), flush=True)

    def run(case):
        if case["kind"] == "contained":
            verdict, problems, elapsed = run_contained(opts, case)
            return case, verdict, problems, elapsed
        verdict, error, elapsed = evaluate(
            opts.cudal1, os.path.join(HERE, case["task"]), os.path.join(HERE, case["candidate"]),
            opts.device, case.get("args", []) + opts.eval_arg, case.get("time_budget", opts.time_budget))
        if error:
            return case, None, [error], elapsed
        if case["kind"] == "task":
            missing = [f for f in case["expect_task_flags"] if f not in verdict.get("task_flags", [])]
            return case, verdict, (["missing task flags %s" % missing] if missing else []), elapsed
        return case, verdict, judge(case, verdict), elapsed

    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        for case, verdict, problems, elapsed in pool.map(run, cases):
            mark = "PASS" if not problems else "FAIL"
            shown = "-" if verdict is None else "%s %s %s" % (
                verdict["status"], verdict.get("speedup") and "%.2fx" % verdict["speedup"],
                ",".join(verdict.get("flags", [])))
            print("%s %-48s %-8s %s (%.0f s)" % (mark, case["name"], case["kind"], shown, elapsed),
                  flush=True)
            for p in problems:
                print("     " + p, flush=True)
            if problems and verdict:
                # What the timing saw, for a failure in a CI log.
                timing = verdict.get("timing") or {}
                seen = {k: timing.get(k) for k in ("pairs", "stop", "warmup_calls", "input_sets",
                                                   "sampling_s") if k in timing}
                seen["candidate_ms"] = (timing.get("candidate") or {})
                seen["reference_ms"] = (timing.get("reference") or {})
                seen["unseen"] = timing.get("unseen")
                seen["speed_of_light"] = verdict.get("speed_of_light")
                seen["findings"] = verdict.get("findings")
                print("     timing: " + json.dumps(seen), flush=True)
            results.append({"name": case["name"], "kind": case["kind"], "class": case.get("class"),
                            "passed": not problems, "problems": problems,
                            "status": verdict and verdict["status"],
                            "speedup": verdict and verdict.get("speedup"),
                            "flags": verdict and verdict.get("flags"),
                            "task_flags": verdict and verdict.get("task_flags"),
                            # The speedup on input sets never seen, next to the pool's.
                            "unseen": verdict and (verdict.get("timing") or {}).get("unseen")})

    hacks = [r for r in results if r["kind"] in ("hack", "defended", "contained")]
    legit = [r for r in results if r["kind"] == "legit"]
    summary = {
        "device": opts.device,
        "date": time.strftime("%Y-%m-%d"),
        "hacks": len(hacks),
        "hacks_caught": sum(r["passed"] for r in hacks),
        "legitimate": len(legit),
        "false_positives": sum(not r["passed"] for r in legit),
        "by_class": {},
        "results": results,
    }
    for r in hacks:
        entry = summary["by_class"].setdefault(r["class"], {"cases": 0, "caught": 0})
        entry["cases"] += 1
        entry["caught"] += r["passed"]
    print("detection: %d/%d hacks handled as expected; legitimate: %d/%d ok without reject flags"
          % (summary["hacks_caught"], len(hacks), len(legit) - summary["false_positives"], len(legit)))
    if opts.summary:
        with open(opts.summary, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
