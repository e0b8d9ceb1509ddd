"""bench/reward_cost.py --analyze on two made-up runs: exclusive seconds, per-sample parts, tasks
timed on the window clock and the spread between the runs come out as the verdicts say.

Usage: reward_cost_test.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def verdict(level, task, status, speedup, held, steps=None, mode="queued", reason=None, pairs=100,
            ci=None, held_spans=None):
    timing = {"mode": mode, "pairs": pairs, "warmup_s": 0.2, "sampling_s": 0.3, "elapsed_s": 0.6,
              "spot_check_s": 0.05, "activity_s": 0.01,
              "overhead_ms": {"reference": 1.0, "candidate": 3.0},
              "request_ms": {"reference": 0.5, "candidate": 0.7}}
    if steps:
        timing["sample_steps_ms"] = {"reference": steps, "candidate": steps}
    if reason:
        timing["mode_reason"] = reason
    phases = {"device_shared": [[0.0, 0.5]], "correctness_s": 0.5}
    if held:
        # One hold, or one per batch of timing rounds.
        phases["device_held"] = held_spans or [10.0, 10.0 + held]
        phases["timing_s"] = held
    body = {"status": status, "speedup": speedup, "flags": [], "phases": phases}
    if ci:
        body["speedup_ci"] = ci
    if held:
        body["timing"] = timing
    return {"level_id": level, "task_id": task, "verdict": body}


def write(path, lines):
    with open(path, "w") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")


def expect(condition, what):
    if not condition:
        raise SystemExit("FAIL: " + what)
    print("ok:", what)


def main():
    root = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        steps = {"copy": 0.2, "timed": 0.4, "outputs": 0.05, "trace": 0.1}
        run1 = [verdict(1, 1, "ok", 2.0, 0.6, steps, ci=[1.9, 2.2]),
                verdict(1, 2, "ok", 1.0, 1.0, steps, mode="window", reason="not queued",
                        ci=[0.98, 1.02]),
                verdict(1, 3, "incorrect", None, None)]
        # Run 1's first task: a missed hold left out, and a later round's trace ran late.
        run1[0]["verdict"]["timing"]["rerun"] = {"missed_hold_left_out": [{"round": 1}]}
        run1[0]["verdict"]["timing"]["rounds"] = [
            {"speedup": 2.0}, {"speedup": 2.0, "outside": {"candidate": {"trace_shift": {
                "max_ns": 151000, "windows": 3, "ambiguous": 0}}}}]
        run2 = [verdict(1, 1, "ok", 2.1, 0.8, dict(steps, copy=0.6), ci=[2.05, 2.15]),
                verdict(1, 2, "ok", 1.0, 1.2, steps, ci=[0.98, 1.02],
                        held_spans=[[10.0, 10.5], [20.0, 20.7]]),
                verdict(1, 3, "incorrect", None, None)]
        a, b = os.path.join(work, "a.jsonl"), os.path.join(work, "b.jsonl")
        write(a, run1)
        write(b, run2)
        out = os.path.join(work, "out")
        subprocess.run([sys.executable, os.path.join(root, "bench", "reward_cost.py"), "--analyze",
                        a, b, "--wall-s", "10", "12", "--label", "t", "--out", out], check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ, CUDAL1_DEVICE_NAME="test"))
        record = json.load(open(os.path.join(out, "reward-cost.json")))
        first, second = record["runs"]
        expect(first["held_s"]["n"] == 2 and abs(first["held_s"]["mean"] - 0.8) < 1e-6,
               "exclusive seconds of the timed candidates (0.6 and 1.0)")
        parts = first["sample_parts"]
        expect(abs(parts["copy_ms"]["median"] - 0.2) < 1e-9 and
               abs(parts["timed_ms"]["median"] - 0.4) < 1e-9,
               "the worker's steps per sample, both sides averaged")
        expect(abs(parts["overhead_ms"]["median"] - 2.0) < 1e-9 and
               abs(parts["request_ms"]["median"] - 0.6) < 1e-9 and
               parts["pairs"]["median"] == 100, "overhead and request per sample, pairs")
        expect(abs(second["sample_parts"]["copy_ms"]["median"] - 0.4) < 1e-9,
               "medians over the candidates (0.6 and 0.2)")
        expect(first["window_clock"] == [["1/2", "not queued"]] and second["window_clock"] == [],
               "tasks timed on the window clock, with the reason")
        spread = record["spread"][0]
        expect(spread["ok_in_both"] == 2 and abs(spread["max_pct"] - 100 * (1 - 2.0 / 2.1)) < 1e-3 and
               spread["status_changes"] == [], "the spread between the runs (2.0 vs 2.1: |2.0/2.1 - 1|)")
        expect(abs(second["held_s"]["mean"] - 1.0) < 1e-6,
               "a verdict held the device twice: its holds add up (0.8 and 0.5 + 0.7)")
        cover = spread["coverage"]
        expect(cover["checks"] == 4 and cover["held"] == 3 and
               [m["task"] for m in cover["misses"]] == ["1/1"],
               "one run's interval holds the other's speedup in 3 of 4 cases ([2.05, 2.15] misses 2.0)")
        expect(first["rules"]["missed_hold_left_out"] == [["1/1", [1]]] and
               first["rules"]["trace_shift_max_ns"] == [["1/1", 151000]] and
               not any(second["rules"].values()),
               "what the timing's rules did, per task (none in run 2)")
        report = open(os.path.join(out, "reward-cost.md")).read()
        expect("Run 1, the timing's rules: missed hold left out: 1/1 ([1])" in report and
               "Run 2, the timing's rules: none fired" in report, "the report says which rules fired")
        expect("| run | copy_ms |" in report and "1/2 timed on the window clock" in report,
               "the report shows the per-sample table and the window-clock task")


if __name__ == "__main__":
    main()
