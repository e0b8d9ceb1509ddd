#!/usr/bin/env python3
"""What the verdicts of a reward server's store say about where time goes (issue 31), and one
contrastive prompt with that profile shown in full.

Reads the store `cudal1 serve` wrote (--store; or --tasks, this script's own OUT.json), the prompts `cudal1 data rl --prompt-profile full`
rendered from it (--prompts), and optionally an earlier run's per-task flags (--before: a
bench/results sample40 JSON) to count how many `no_custom_kernel` flags changed. Writes OUT.json
(per task: status, speedup, flags, the candidate's profile) and OUT.md (the counts, a table of
diagnoses and one prompt in full). Standard library only.
"""
import argparse
import json
import sqlite3
import sys


def verdicts(store):
    db = sqlite3.connect(store)
    rows = db.execute("SELECT t.path, v.status, v.speedup, v.verdict FROM verdicts v "
                      "JOIN candidates c ON c.id = v.candidate_id JOIN runs r ON r.id = c.run_id "
                      "JOIN tasks t ON t.id = r.task_id WHERE c.kind = 'generated' ORDER BY v.id")
    out = {}
    for path, status, speedup, text in rows:
        parts = path.rstrip("/").split("/")
        key = "%s/%s" % (parts[-2], parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1])
        verdict = json.loads(text)
        profile = (verdict.get("profile") or {}).get("candidate")
        out.setdefault(key, {"status": status, "speedup": speedup, "flags": verdict.get("flags", []),
                             "profile": profile,
                             "reference_profile": (verdict.get("profile") or {}).get("reference")})
    return out


def task_id(key):
    """level1/15_Name -> "1/15" (the sample40 results' keys)."""
    level, name = key.split("/", 1)
    return "%s/%s" % (level.replace("level", ""), name.split("_", 1)[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", help="the store cudal1 serve wrote")
    source.add_argument("--tasks", help="instead of --store: the OUT.json an earlier run of this script wrote")
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--before", help="an earlier sample40 result (tasks: [{\"1/15\": {flags}}])")
    parser.add_argument("--device", default="")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.store:
        tasks = verdicts(args.store)
    else:
        with open(args.tasks) as f:
            tasks = json.load(f)["tasks"]
    lines = ["# Profiles of the CUDA-L1 sample's verdicts and a prompt that shows them", ""]
    if args.device:
        lines += ["- device: %s" % args.device]
    ok = {k: v for k, v in tasks.items() if v["status"] == "ok"}
    with_profile = {k: v for k, v in ok.items() if v["profile"]}
    lines += ["- tasks evaluated: %d, ok: %d, ok with a profile: %d" % (len(tasks), len(ok), len(with_profile))]
    flagged = sorted(k for k, v in tasks.items() if "no_custom_kernel" in v["flags"])
    lines += ["- `no_custom_kernel` now: %d of %d" % (len(flagged), len(tasks))]
    report = {"tasks": tasks, "no_custom_kernel": flagged}
    if args.before:
        with open(args.before) as f:
            before_runs = json.load(f)["tasks"]
        before = before_runs[0] if isinstance(before_runs, list) else before_runs
        changed = []
        for key, v in sorted(tasks.items()):
            old = before.get(task_id(key))
            if old is None:
                continue
            was, now = "no_custom_kernel" in (old.get("flags") or []), "no_custom_kernel" in v["flags"]
            if was != now:
                changed.append({"task": key, "before": was, "now": now, "status": v["status"]})
        compared = sum(1 for key in tasks if task_id(key) in before)
        was_flagged = sum(1 for key in tasks if "no_custom_kernel" in (before.get(task_id(key), {}).get("flags") or []))
        lines += ["- `no_custom_kernel` in %s on the same %d tasks: %d; changed: %d" %
                  (args.before, compared, was_flagged, len(changed))]
        for c in changed:
            lines += ["  - %s (%s): %s -> %s" % (c["task"], c["status"], "flagged" if c["before"] else "not flagged",
                                                "flagged" if c["now"] else "not flagged")]
        report["changed"] = changed
    with_flops = [key for key, v in with_profile.items() if v["profile"].get("compute_roof") is not None]
    lines += ["- ok with the reference's arithmetic held to the measured matmul roof: %d" % len(with_flops)]
    report["with_compute_roof"] = sorted(with_flops)
    lines += ["", "| task | speedup | of memory roof | of compute roof (TFLOP/s) | diagnosis | "
              "longest kernel (share, own) |", "|---|---|---|---|---|---|"]
    for key, v in sorted(with_profile.items()):
        p = v["profile"]
        top = p.get("kernels") or []
        kernel = ("`%s` (%.0f %%%s)" % (top[0]["name"][:60], 100 * top[0]["share"], ", own" if top[0]["own"] else "")
                  if top else "")
        roof = "%.0f %%" % (100 * p["roof"]) if p.get("roof") is not None else ""
        compute = ("%.0f %% (%.1f)" % (100 * p["compute_roof"], p.get("achieved_tflops", 0))
                   if p.get("compute_roof") is not None else "")
        lines += ["| %s | %.2fx | %s | %s | %s | %s |" % (key, v["speedup"] or 0, roof, compute,
                                                         p.get("diagnosis", ""), kernel)]
    chosen = None
    with open(args.prompts) as f:
        prompts = [json.loads(line) for line in f if line.strip()]
    # A prompt whose candidate exemplar has both roofs, else any with a candidate's profile.
    for wanted in ("compute_roof", "summary"):
        for record in prompts:
            shown = [e for e in record.get("exemplars", [])
                     if e.get("profile") and not e.get("reference") and e["profile"].get(wanted) is not None]
            if shown:
                chosen = record
                break
        if chosen:
            break
    if chosen:
        user = [m for m in chosen["prompt"] if m["role"] == "user"][0]["content"]
        lines += ["", "## One prompt in full (`%s`, `--prompt-profile full`)" % chosen.get("task", ""), "",
                  "````markdown", user.rstrip(), "````"]
    else:
        lines += ["", "No prompt showed a candidate's profile."]
    with open(args.out + ".json", "w") as f:
        json.dump(report, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))
    return 0 if chosen else 1


if __name__ == "__main__":
    sys.exit(main())
