"""bench/rl_load.py's account of the device's exclusive time (device_time) on made-up verdicts:
the holds, their waits, the rounds and what the holds spent outside the timing runs.

Usage: rl_load_test.py REPO_ROOT
"""
import os
import sys


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
    for what in failures:
        print("FAIL:", what, report)
    print("ok" if not failures else "%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
