#!/usr/bin/env python3
"""Writes the example suite's solution files from the examples' fast candidates.

The suite (level1/ level2/ level3/ here) links to the example tasks; each line of a solutions
file gives one task's candidate as `custom_code`, the way CUDA-L1 released its kernels:

  solutions.jsonl        the fast CUDA candidates (fast.py; a GPU benchmark)
  solutions_torch.jsonl  the fast PyTorch-only candidates (fast_torch.py, else fast.py when it
                         uses no CUDA): a benchmark that also runs on the CPU

In both, one task has a null solution and one has no line at all, so a run shows how missing
solutions are counted (as failures, status "missing"). Standard library only:

  python3 examples/suite/make_solutions.py            # rewrites both files
  python3 examples/suite/make_solutions.py --check    # exit 1 when they are out of date
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.dirname(HERE)
# The task whose solution is null, and the one left out; the GRU's reference takes ~200 ms per
# call on a GPU, so leaving it without a solution also keeps a GPU run short.
NULL_TASK = (3, 1)
LEFT_OUT = (3, 2)


def suite_tasks():
    """(level, task_id, example directory) for every linked task of the suite."""
    tasks = []
    for level_dir in sorted(os.listdir(HERE)):
        if not level_dir.startswith("level"):
            continue
        level = int(level_dir[len("level"):])
        for name in sorted(os.listdir(os.path.join(HERE, level_dir))):
            if not name.endswith(".py"):
                continue
            task_id = int(name.split("_", 1)[0])
            target = os.path.realpath(os.path.join(HERE, level_dir, name))
            tasks.append((level, task_id, os.path.basename(os.path.dirname(target))))
    return tasks


def pick_candidate(manifest_task, torch_only):
    fast = [c for c in manifest_task["candidates"] if c["kind"] == "fast"]
    if torch_only:
        # Runs anywhere: no CUDA, and not limited to some devices (fast_cpp.py is CPU-only).
        fast = [c for c in fast if not c["uses_cuda"] and "devices" not in c]
    else:
        fast.sort(key=lambda c: not c["uses_cuda"])  # the CUDA kernel where there is one
    return fast[0]["file"] if fast else None


def solution_lines(torch_only):
    with open(os.path.join(EXAMPLES, "manifest.json")) as handle:
        manifest = {task["dir"]: task for task in json.load(handle)["tasks"]}
    lines = []
    for level, task_id, example in suite_tasks():
        if (level, task_id) == LEFT_OUT:
            continue
        entry = {"level_id": level, "task_id": task_id, "custom_code": None}
        candidate = pick_candidate(manifest[example], torch_only)
        if (level, task_id) != NULL_TASK and candidate is not None:
            with open(os.path.join(EXAMPLES, example, candidate)) as handle:
                entry["custom_code"] = handle.read()
            entry["source"] = "examples/%s/%s" % (example, candidate)
        lines.append(json.dumps(entry) + "\n")
    return "".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the files are up to date")
    args = parser.parse_args()
    stale = []
    for file_name, torch_only in (("solutions.jsonl", False), ("solutions_torch.jsonl", True)):
        path = os.path.join(HERE, file_name)
        text = solution_lines(torch_only)
        current = open(path).read() if os.path.exists(path) else None
        if current == text:
            continue
        if args.check:
            stale.append(file_name)
        else:
            with open(path, "w") as handle:
                handle.write(text)
            print("wrote %s" % path)
    if stale:
        print("out of date: %s (run examples/suite/make_solutions.py)" % ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
