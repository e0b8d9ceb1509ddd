"""bench/rl_load.py's accounts on made-up verdicts: the device's exclusive time (device_time: the
holds, their waits, the rounds and what the holds spent outside the timing runs), the workers'
CPU per verdict by role and operation (worker_cpu), where the evaluations' own time went
(phase_seconds), the out-of-memory retries (memory_account) and the statuses by task, read from a store
laid out as cudal1's (statuses_by_task).

Usage: rl_load_test.py REPO_ROOT
"""
import json
import os
import sqlite3
import sys
import tempfile


def stored(status, held=None, wait=0.0, rounds=None, shared=1.0):
    """One (status, phases, verdict) as rl_load.stored_verdicts gives it."""
    phases = {"device_shared_s": shared}
    verdict = {"status": status, "phases": phases}
    if held is not None:
        phases["device_held_s"] = held
        phases["device_wait_s"] = wait
        one = {"warmup_s": 0.02, "sampling_s": 0.3, "spot_check_s": 0.05, "activity_s": 0.01,
               "elapsed_s": 0.4}
        verdict["timing"] = {"rounds": [dict(one) for _ in range(rounds)]} if rounds else one
    return status, phases, verdict


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
    import rl_load

    report = rl_load.device_time([
        stored("ok", held=1.0, wait=0.5),                   # one round: 0.4 s of timing run
        stored("ok", held=2.0, wait=1.5, rounds=3),         # three rounds: 1.2 s of timing runs
        stored("incorrect", shared=3.0),                    # never timed
    ])
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    check(report["held_s"]["n"] == 2 and abs(report["held_s"]["sum"] - 3.0) < 1e-9, "held seconds")
    check(abs(report["wait_s"]["mean"] - 1.0) < 1e-9, "waits")
    check(report["rounds"]["max"] == 3 and report["rounds"]["sum"] == 4, "rounds")
    check(abs(report["held_outside_timing_runs_s"]["sum"] - (0.6 + 0.8)) < 1e-9,
          "held outside the timing runs")
    check(abs(report["timing_parts"]["warmup_s"]["sum"] - 0.08) < 1e-9, "warm-up summed over rounds")
    check(report["shared_s"]["n"] == 3 and abs(report["shared_s"]["sum"] - 5.0) < 1e-9, "shared holds")
    pools = rl_load.worker_pools(
        "# TYPE cudal1_worker_pool_events_total counter\n"
        'cudal1_worker_pool_events_total{pool="kept_references",event="taken"} 44\n'
        'cudal1_worker_pool_events_total{pool="kept_references",event="expired"} 3\n'
        'cudal1_worker_pool_events_total{pool="ready_workers",event="made"} 8\n'
        'cudal1_worker_pool_idle{pool="kept_references"} 5\n'
        'cudal1_worker_pool_wait_seconds_total{pool="kept_references"} 12.5\n'
        "cudal1_evaluations_total{status=\"ok\"} 2\n")
    check(pools == {"kept_references": {"taken": 44.0, "expired": 3.0, "idle": 5.0, "waited_s": 12.5},
                    "ready_workers": {"made": 8.0}}, "worker pools from /metrics: %s" % pools)
    cpu = rl_load.worker_cpu([
        {"worker_cpu_s": {"candidate": {"workers": 2, "load": 3.0, "trial": 1.0}}},
        {"worker_cpu_s": {"candidate": {"workers": 1, "load": 1.0}, "build": {"workers": 1, "children": 8.0}}},
        {},  # a verdict whose workers reported nothing (a failed load)
    ], 4)
    check(cpu == {"build": {"children": 2.0, "workers": 0.25},
                  "candidate": {"load": 1.0, "trial": 0.25, "workers": 0.75}}, "worker CPU per verdict: %s" % cpu)
    orchestrator = rl_load.orchestrator_cpu([
        {"orchestrator_cpu_s": {"correctness": 0.5, "timing": 1.5, "total": 2.5}},
        {"orchestrator_cpu_s": {"build": 0.25, "total": 0.5}},
        {},  # an older server's verdict
    ], 4)
    check(orchestrator == {"build": 0.062, "correctness": 0.125, "timing": 0.375, "total": 0.75},
          "orchestrator CPU per verdict: %s" % orchestrator)
    phases = rl_load.phase_seconds([
        ("ok", {"build_s": 30.0, "build_slot_wait_s": 20.0, "admission_wait_s": 2.5, "load_s": 5.0,
                "total_s": 50.0}, {}),
        ("ok", {"build_s": 0.0, "load_s": 3.0, "total_s": 10.0}, {}),
        ("compile_error", {"build_s": 12.0, "total_s": 12.0}, {}),
    ])
    check(phases["build_slot_wait_s"]["n"] == 1 and phases["build_s"]["n"] == 3 and
          phases["admission_wait_s"]["sum"] == 2.5 and
          phases["load_s"]["sum"] == 8.0 and phases["total_s"]["median"] == 12.0 and
          "timing_s" not in phases, "phase seconds: %s" % phases)

    parts = rl_load.load_parts([
        {"load_parts": {"candidate": {"loads": 2, "spawn": 0.5, "call": 9.0, "device": 4.0}}},
        {"load_parts": {"candidate": {"loads": 1, "spawn": 0.25, "call": 3.0, "device": 2.0},
                        "reference": {"loads": 1, "call": 2.0}}},
        {},
    ])
    check(parts == {"candidate": {"call": 4.0, "device": 2.0, "loads": 3, "spawn": 0.25},
                    "reference": {"call": 2.0, "loads": 1}}, "load parts per load: %s" % parts)

    contexts = rl_load.context_account([
        {"load_parts": {"candidate": {"loads": 2, "ready": 1, "context": 16.0},
                        "reference": {"loads": 2, "context": 30.0}}},
        {"load_parts": {"candidate": {"loads": 1, "context": 14.0},
                        "reference": {"loads": 1, "kept": 1}}},
        {},
    ], 3)
    # A kept reference's load makes no context: 6 loads, 5 contexts, 3 of them made by the load.
    check(contexts == {"loads": 6, "per_verdict": 2.0, "from_ready_workers": 1,
                       "from_kept_references": 1, "contexts_per_verdict": 1.67,
                       "context_s_per_own_load": 15.0}, "contexts: %s" % contexts)
    check(rl_load.context_account([{}], 1) is None, "no loads, no context account")

    fraction = rl_load.exclusive_fraction([stored("ok", held=3.0), stored("ok", held=1.0),
                                           stored("incorrect")], 10.0, 2)
    check(fraction == 0.2, "exclusive fraction: 4 s held over 10 s of 2 GPUs, got %s" % fraction)

    from proc_cpu import parse_cpus
    from split_hosts import parse_queue_workers
    workers = parse_queue_workers("cuda:0@0-3; cuda:1@4,5", parse_cpus)
    check(workers == [("cuda:0", {0, 1, 2, 3}), ("cuda:1", {4, 5})], "queue workers: %s" % workers)
    for bad in ("cuda:0", "cuda:0@", "@0-3", "cuda:0@0-3;cuda:1@3-5", " ; "):
        try:
            parse_queue_workers(bad, parse_cpus)
            check(False, "queue workers %r refused" % bad)
        except ValueError:
            pass

    memory = rl_load.memory_account([
        ("ok", {}, {"memory_retry": {"first": {"status": "runtime_error"}}}),
        ("runtime_error", {}, {"error": "AcceleratorError: CUDA error: out of memory"}),
        ("runtime_error", {}, {"error": "ZeroDivisionError"}),
    ])
    check(memory == {"retried_alone": 1, "out_of_memory_failures": 1}, "memory account: %s" % memory)

    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "serve.db")
        con = sqlite3.connect(db)
        con.executescript("""
            CREATE TABLE tasks (id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE runs (id INTEGER PRIMARY KEY, task_id INTEGER);
            CREATE TABLE candidates (id INTEGER PRIMARY KEY, run_id INTEGER);
            CREATE TABLE verdicts (id INTEGER PRIMARY KEY, candidate_id INTEGER, status TEXT, verdict TEXT);
            INSERT INTO tasks VALUES (1, 'level1/a'), (2, 'level2/b');
            INSERT INTO runs VALUES (1, 1), (2, 2);
            INSERT INTO candidates VALUES (1, 1), (2, 1), (3, 2), (4, 2);
        """)
        for cid, status, error, flags in [(1, "ok", "", ["noisy"]),
                                          (2, "runtime_error", "RuntimeError: boom\nmore", []),
                                          (3, "ok", "", []), (4, "rejected", "", ["extra_streams", "noisy"]),
                                          (4, "rejected", "", ["background_work", "noisy"])]:
            verdict = {"status": status, "error": error, "flags": flags}
            if "background_work" in flags:
                verdict["details"] = {"findings": {"background_work": ["timing: 2 kernels outside"],
                                                   "noisy": ["not reached"]}}
            con.execute("INSERT INTO verdicts (candidate_id, status, verdict) VALUES (?, ?, ?)",
                        (cid, status, json.dumps(verdict)))
        con.commit()
        con.close()
        by_task = rl_load.statuses_by_task(db)
        check(by_task == {"level1/a": {"statuses": {"ok": 1, "runtime_error": 1},
                                       "errors": {"runtime_error": "RuntimeError: boom"},
                                       "flags": {"ok": {"noisy": 1}}},
                          "level2/b": {"statuses": {"ok": 1, "rejected": 2}, "errors": {"rejected": ""},
                                       "flags": {"rejected": {"extra_streams": 1, "noisy": 2,
                                                              "background_work": 1}},
                                       "rejections": [{"background_work": ["timing: 2 kernels outside"]}]}},
              "statuses by task, with the flags by status and what the defenses found: %s" % by_task)
    # --check-eval's items: per task the variant whose status differs from its task's others.
    steps = [[{"task": "b", "n": 0}, {"task": "b", "n": 1}, {"task": "a", "n": 2}],
             [{"task": "b", "n": 3}, {"task": "c", "n": 4}]]
    answered = [{"step": 0, "results": [{"status": "ok"}, {"status": "rejected"}, {"status": "ok"}]},
                {"step": 1, "results": [{"status": "ok"}, {"status": "incorrect"}]}]
    chosen = [(task, item["n"], odd) for task, item, _, odd in rl_load.items_to_check(steps, answered, 2)]
    check(chosen == [("a", 2, False), ("b", 1, True)], "items to check again alone: %s" % chosen)
    for what in failures:
        print("FAIL:", what, report)
    print("ok" if not failures else "%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
